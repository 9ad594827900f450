from django.contrib.auth.views import LogoutView
from django.urls import path

from console import api_actions as api
from console import views_actions as views
from supportbot.login_throttle import throttled_login

app_name = "actions"

urlpatterns = [
    path("console/actions/login/", throttled_login(views.ConsoleLoginView.as_view()), name="login"),
    path("console/actions/logout/", LogoutView.as_view(next_page=views.LOGIN_URL), name="logout"),
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
