from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from supportbot import api, health

api_v1 = [
    path("tenant", api.TenantApi.as_view(), name="tenant"),
    path("audit-events", api.AuditEventListApi.as_view(), name="audit-events"),
    path("audit-events/<int:event_id>", api.AuditEventDetailApi.as_view(), name="audit-event"),
]

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    *[path(f"api/v1/{p.pattern}", p.callback, name=p.name) for p in api_v1],
    path("", include("inference.urls")),
]
