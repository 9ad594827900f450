"""Knowledge pages: the passages answers cite, with `#chunk-<id>` anchors.

Customers (anonymous) see versions whose own audience is public; the tenant's agents and
admins, and staff, see every version. Anything else is a 404 that reveals nothing.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from knowledge import selectors
from supportbot.errors import NotFound
from supportbot.selectors import membership_list_for_user


def _reader(request: HttpRequest, tenant_slug: str) -> selectors.Audience:
    user = request.user
    if user.is_authenticated and (
        user.is_staff
        or any(m.tenant.slug == tenant_slug for m in membership_list_for_user(user=user))
    ):
        return selectors.Audience.agent()
    return selectors.Audience.customer()


@require_GET
def document_page(
    request: HttpRequest, tenant_slug: str, document_id: int, version: int | None = None
) -> HttpResponse:
    """Render a ready document version the reader may see (the live one by default)."""
    try:
        page = selectors.document_page_get(
            tenant_slug=tenant_slug,
            document_id=document_id,
            version=version,
            audience=_reader(request, tenant_slug),
        )
    except NotFound as exc:
        raise Http404(exc.detail) from exc
    return render(request, "knowledge/document_page.html", {"page": page})
