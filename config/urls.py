from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from chat import urls as chat_urls
from console import urls as console_urls
from conversations import urls as conversation_urls
from knowledge import urls as knowledge_urls
from supportbot import api, health
from supportbot.login_throttle import throttled_login

api_v1 = [
    path("tenant", api.TenantApi.as_view(), name="tenant"),
    path("audit-events", api.AuditEventListApi.as_view(), name="audit-events"),
    path("audit-events/<int:event_id>", api.AuditEventDetailApi.as_view(), name="audit-event"),
    *knowledge_urls.api_v1,
    *chat_urls.api_urlpatterns,
    *conversation_urls.api_urlpatterns,
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/login/", throttled_login(admin.site.login), name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its init script from `?script=`: no inline script (CSP).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/", include(api_v1)),
    *knowledge_urls.pages,
    *chat_urls.page_urlpatterns,
    *console_urls.console_urlpatterns,
    path("", include("console.urls_actions")),
    path("", include("inference.urls")),
]

# API paths answer errors raised outside DRF views in the JSON error shape (see exceptions.py).
handler400 = "supportbot.exceptions.bad_request"
handler403 = "supportbot.exceptions.permission_denied"
handler404 = "supportbot.exceptions.page_not_found"
handler500 = "supportbot.exceptions.server_error"
