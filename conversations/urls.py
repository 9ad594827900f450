"""URLs of conversation state: the partner API for a customer's data rights."""

from django.urls import path

from conversations import api_customers

api_urlpatterns = [
    path(
        "customers/<str:external_id>",
        api_customers.CustomerEraseApi.as_view(),
        name="customer",
    ),
    path(
        "customers/<str:external_id>/export",
        api_customers.CustomerExportApi.as_view(),
        name="customer-export",
    ),
]
