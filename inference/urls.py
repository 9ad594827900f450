from django.urls import path

from inference import views

urlpatterns = [
    path("console/ops/", views.ops_page, name="ops"),
    path("console/ops/data.json", views.ops_data, name="ops-data"),
    path("metrics", views.metrics, name="metrics"),
]
