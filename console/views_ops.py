"""The operators' ops page (staff only) and its JSON feed: the inference pool, model yields
and usage per tenant. Prometheus `/metrics` stays with inference."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from rest_framework.response import Response

from console.access import ConsoleApiView, console_page
from console.api import console_schema
from inference import selectors, yields
from inference.config import get_config


def _snapshot() -> dict:
    """The ops snapshot (registry, usage) plus the shared yield figures per model."""
    snapshot = selectors.ops_snapshot(stale_after_s=get_config().stale_after_s)
    snapshot["yields"] = yields.get_book().shared_snapshot()
    return snapshot


@require_GET
@console_page(staff_only=True)
def ops_page(request: HttpRequest, access) -> HttpResponse:
    """Server-rendered first view; `static/inference/ops.js` refreshes it from `ops_data`."""
    return render(request, "console/ops.html", {"snapshot": _snapshot()})


class OpsDataApi(ConsoleApiView):
    """The ops snapshot as JSON; 403 in the JSON error shape for anyone but active staff."""

    console_staff_only = True

    @console_schema(
        "console_ops_data", "Inference pool, model yields and usage per tenant (staff only)"
    )
    def get(self, request):
        return Response(_snapshot())
