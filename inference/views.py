"""Prometheus `/metrics` (the ops page and its feed are console/views_ops.py)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from inference import selectors, yields
from inference.config import get_config
from inference.telemetry import worker_registry_collector, yield_collector
from supportbot.observability.tasks import task_registry


def _metrics_allowed(request: HttpRequest) -> bool:
    """`Authorization: Bearer <METRICS_TOKEN>` whenever a token is set; without one, only under
    DEBUG. Active staff (the ops page's link) may always read it with their session."""
    user = request.user
    if user.is_authenticated and user.is_active and user.is_staff:
        return True
    token = get_config().metrics_bearer_token
    if not token:
        return settings.DEBUG
    scheme, _, sent = request.headers.get("Authorization", "").partition(" ")
    return scheme == "Bearer" and hmac.compare_digest(sent.strip().encode(), token.encode())


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Gateway counters/histograms of this process, the pool's worker gauges and the shared
    yield gauges per model."""
    if not _metrics_allowed(request):
        detail = (
            "Send Authorization: Bearer <METRICS_TOKEN>."
            if get_config().metrics_bearer_token
            else "Metrics are closed: set METRICS_TOKEN and send it as a Bearer token."
        )
        response = JsonResponse(
            {"error": {"code": "not_authenticated", "detail": detail}}, status=401
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = (
        generate_latest(REGISTRY)
        + generate_latest(worker_registry_collector(selectors.worker_list()))
        + generate_latest(yield_collector(yields.get_book().shared_snapshot()))
        + generate_latest(task_registry())
    )
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
