"""Public knowledge pages: the passages customers' answers cite, with `#chunk-<id>` anchors."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from knowledge import selectors
from supportbot.errors import NotFound


@require_GET
def document_page(
    request: HttpRequest, tenant_slug: str, document_id: int, version: int | None = None
) -> HttpResponse:
    """Render a public, ready document (its live version, or an older version answers cited)."""
    try:
        page = selectors.document_public_page(
            tenant_slug=tenant_slug, document_id=document_id, version=version
        )
    except NotFound as exc:
        raise Http404(exc.detail) from exc
    return render(request, "knowledge/document_page.html", {"page": page})
