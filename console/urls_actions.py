from django.urls import path

from console import api_actions as api
from console import views_actions as views

app_name = "actions"

urlpatterns = [
    # The console has one login (/console/login/): the old actions login/logout send there.
    path("console/actions/login/", views.old_login, name="login"),
    path("console/actions/logout/", views.old_logout, name="logout"),
    path("console/actions/", views.action_list, name="list"),
    path("console/actions/<int:action_id>/", views.action_detail, name="detail"),
    path("console/actions/<int:action_id>/decide", views.action_decide, name="decide"),
    path(
        "console/api/conversations/<int:conversation_id>/actions",
        api.ConsoleActionProposeApi.as_view(),
        name="api-propose",
    ),
    path(
        "console/api/actions/<int:action_id>/decide",
        api.ConsoleActionDecideApi.as_view(),
        name="api-decide",
    ),
]
