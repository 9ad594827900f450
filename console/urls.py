from django.contrib.auth import views as auth_views
from django.urls import path

from console import admin_views, api, api_widget, views, views_keys, views_ops, views_policies
from supportbot.login_throttle import throttled_login

console_urlpatterns = [
    path("console/login/", throttled_login(views.LoginView.as_view()), name="console-login"),
    path(
        "console/logout/",
        auth_views.LogoutView.as_view(next_page="/console/login/"),
        name="console-logout",
    ),
    path("console/", views.console, name="console"),
    path("console/handoffs/<int:handoff_id>/", views.console, name="console-handoff"),
    path("console/gaps/", views.knowledge_gaps, name="console-gaps"),
    path("console/audit/", admin_views.audit_log, name="console-audit"),
    path("console/audit.csv", admin_views.audit_log_csv, name="console-audit-csv"),
    path("console/customers/", admin_views.customers, name="console-customers"),
    path("console/customers/export", admin_views.customer_export, name="console-customer-export"),
    path("console/customers/erase", admin_views.customer_erase, name="console-customer-erase"),
    path("console/widget/", views.widget_settings, name="console-widget"),
    path("console/policies/", views_policies.policies, name="console-policies"),
    path("console/api-keys/", views_keys.api_keys, name="console-api-keys"),
    path("console/api-keys/new", views_keys.api_key_new, name="console-api-key-new"),
    path(
        "console/api-keys/<int:key_id>/revoke/",
        views_keys.api_key_revoke_page,
        name="console-api-key-revoke",
    ),
    path("console/api/queue", api.QueueApi.as_view(), name="console-queue"),
    path(
        "console/api/handoffs/<int:handoff_id>",
        api.HandoffDetailApi.as_view(),
        name="console-handoff-detail",
    ),
    path(
        "console/api/handoffs/<int:handoff_id>/claim", api.ClaimApi.as_view(), name="console-claim"
    ),
    path(
        "console/api/handoffs/<int:handoff_id>/close", api.CloseApi.as_view(), name="console-close"
    ),
    path(
        "console/api/handoffs/<int:handoff_id>/reply", api.ReplyApi.as_view(), name="console-reply"
    ),
    path(
        "console/api/conversations/<int:conversation_id>/notes",
        api.NoteApi.as_view(),
        name="console-notes",
    ),
    path(
        "console/api/conversations/<int:conversation_id>/takeover",
        api.TakeoverApi.as_view(),
        name="console-takeover",
    ),
    path(
        "console/api/widget-secret",
        api_widget.WidgetSecretApi.as_view(),
        name="console-widget-secret",
    ),
    path(
        "console/api/widget-secret/rotate",
        api_widget.WidgetSecretRotateApi.as_view(),
        name="console-widget-secret-rotate",
    ),
    path("console/ops/", views_ops.ops_page, name="ops"),
    path("console/ops/data.json", views_ops.OpsDataApi.as_view(), name="ops-data"),
]
