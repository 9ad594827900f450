"""Customer-facing pages: the chat page and the embeddable widget loader."""

from __future__ import annotations

from django.contrib.staticfiles import finders
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.http import require_GET

from actions.selectors import provider_config_get
from supportbot.errors import NotFound
from supportbot.selectors import tenant_frame_ancestors, tenant_get


@require_GET
@xframe_options_exempt  # X-Frame-Options cannot list origins; CSP frame-ancestors does
def chat_page(request, tenant_slug: str):
    """The chat page; only the tenant's allowed origins (and we) may frame it (the widget)."""
    try:
        tenant = tenant_get(slug=tenant_slug)
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    embedded = request.GET.get("embed") == "1"
    response = render(
        request,
        "conversations/chat.html",
        # the greeting names orders only where the tenant connected an order system
        {
            "tenant": tenant,
            "embedded": embedded,
            "orders": provider_config_get(tenant=tenant) is not None,  # enabled ones only
        },
    )
    response._csp_replace = {"frame-ancestors": tenant_frame_ancestors(tenant=tenant)}
    return response


@require_GET
def widget_js(request):
    """One <script src=".../widget.js" data-tenant="acme"> tag opens the chat in an iframe."""
    origin = request.build_absolute_uri("/").rstrip("/")
    with open(_static_path("chat/widget-loader.js"), encoding="utf-8") as fh:
        body = f"window.SUPPORTBOT_ORIGIN = {origin!r};\n" + fh.read()
    response = HttpResponse(body, content_type="application/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=300"
    response["Access-Control-Allow-Origin"] = "*"
    return response


def _static_path(name: str) -> str:
    path = finders.find(name)
    if not path:
        raise Http404(static(name))
    return path
