"""Reads of knowledge documents: lists, lookups, versions and their public pages."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from knowledge.models import Chunk, Document, DocumentVersion
from knowledge.selectors.filters import Audience
from supportbot.errors import NotFound
from supportbot.models import Tenant

# --------------------------------------------------------------------------- documents


def document_list(*, tenant: Tenant) -> QuerySet[Document]:
    return Document.objects.filter(tenant=tenant).order_by("-created_at", "-id")


def document_get(*, tenant: Tenant, document_id: int) -> Document:
    document = Document.objects.filter(tenant=tenant, pk=document_id).first()
    if document is None:
        raise NotFound("No such knowledge document.")
    return document


def document_find_by_title(*, tenant: Tenant, title: str) -> Document | None:
    return Document.objects.filter(tenant=tenant, title=title).order_by("id").first()


def document_version_get(*, tenant: Tenant, document_id: int, version: int) -> DocumentVersion:
    found = DocumentVersion.objects.filter(
        tenant=tenant, document_id=document_id, version=version
    ).first()
    if found is None:
        raise NotFound("No such document version.")
    return found


@dataclass(frozen=True)
class PublicPage:
    tenant: Tenant
    document: Document
    version: int
    chunks: list[Chunk]


def document_public_page(
    *, tenant_slug: str, document_id: int, version: int | None = None
) -> PublicPage:
    """A ready document version that every customer may read (see `document_page_get`)."""
    return document_page_get(
        tenant_slug=tenant_slug,
        document_id=document_id,
        version=version,
        audience=Audience.customer(),
    )


def version_visible_to(*, audience: Audience, version: DocumentVersion) -> bool:
    """Whether `audience` may read this version (its own audience, not the document's)."""
    if audience.kind == "agent" or version.audience == Document.Audience.PUBLIC:
        return True
    return version.audience == Document.Audience.SEGMENTS and bool(
        set(version.segments) & set(audience.segments)
    )


def document_page_get(
    *, tenant_slug: str, document_id: int, version: int | None = None, audience: Audience
) -> PublicPage:
    """A ready version's chunks (the live one when `version` is None) for a reader allowed
    to see that version; anything else is the same NotFound, so nothing is revealed."""
    not_found = NotFound("No such document.")
    tenant = Tenant.objects.filter(slug=tenant_slug, is_active=True).first()
    document = Document.objects.filter(tenant=tenant, pk=document_id).first() if tenant else None
    if document is None or document.live_version is None:
        raise not_found
    version = document.live_version if version is None else version
    source = DocumentVersion.objects.filter(
        tenant=tenant, document=document, version=version
    ).first()
    if source is None or not version_visible_to(audience=audience, version=source):
        raise not_found
    chunks = list(Chunk.objects.filter(tenant=tenant, document=document, version=version))
    if not chunks:
        raise not_found
    return PublicPage(tenant=tenant, document=document, version=version, chunks=chunks)
