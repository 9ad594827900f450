"""Document writes: upload, replace, edit, delete, re-index and re-extract; each change
bumps the tenant's knowledge revision and enqueues indexing on commit."""

from __future__ import annotations

import hashlib
import logging
import zlib
from functools import partial
from pathlib import PurePath

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.db import connection, transaction

from knowledge.extraction import (
    GZIP_SUFFIX,
    detect_content_type,
    extractor_version,
)
from knowledge.models import Chunk, Document, DocumentVersion
from knowledge.selectors import vector_plan_forget
from supportbot.errors import ApplicationError, Conflict, NotFound
from supportbot.models import SEGMENT_RE, Tenant
from supportbot.queue import task_enqueue
from supportbot.services import Actor, audit_event_record

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
INDEX_TASK = "knowledge.tasks.document_index_task"


# --------------------------------------------------------------------------- validation


def _file_read(*, file: File, declared_type: str) -> tuple[bytes, str, str]:
    """Read an acceptable upload; return its bytes, content type and file name, or raise
    400/413. A gzip file (NAME.gz) is read as NAME, inflated under the same size limit."""
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    size = file.size if file.size is not None else 0
    if size > limit:
        raise _too_large(f"The file is {size} bytes; the limit is {limit} bytes.")
    file.seek(0)
    data = file.read(limit + 1)
    if len(data) > limit:
        raise _too_large(f"The file is larger than the limit of {limit} bytes.")
    filename = PurePath(file.name or "").name
    if filename.lower().endswith(GZIP_SUFFIX) and len(filename) > len(GZIP_SUFFIX):
        data = _gunzip(data, filename=filename, limit=limit)
        filename = filename[: -len(GZIP_SUFFIX)]
        if not PurePath(filename).suffix:
            filename += ".txt"  # "FAQ.gz", "README.Debian.gz": compressed plain text
            declared_type = ""
        elif declared_type.split(";")[0].strip().lower() in _GZIP_TYPES:
            declared_type = ""
    if not data.strip():
        raise ApplicationError("The file is empty.", code="empty_file", field="file")
    content_type = detect_content_type(filename=filename, declared=declared_type, head=data[:1024])
    if content_type is None:
        raise ApplicationError(
            f"Unsupported file type for {filename!r}: upload PDF, HTML, Markdown or plain text "
            "(.pdf, .html, .htm, .xhtml, .md, .txt, .rst), or one of them gzipped (.gz).",
            code="unsupported_type",
            field="file",
        )
    return data, content_type, filename


_GZIP_TYPES = {"application/gzip", "application/x-gzip", "application/x-gunzip"}


def _too_large(message: str) -> ApplicationError:
    return ApplicationError(message, code="file_too_large", field="file", status=413)


def _gunzip(data: bytes, *, filename: str, limit: int) -> bytes:
    """Every member of a gzip file, inflated; at most `limit` bytes (a small file can inflate
    a thousandfold), else 413; 400 when it is not whole, valid gzip."""
    out = bytearray()
    rest = data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise ApplicationError(
                f"{filename!r} is not a valid gzip file ({exc}).", code="invalid_gzip", field="file"
            ) from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise _too_large(f"{filename!r} inflates past the limit of {limit} bytes.")
        if not inflater.eof:
            raise ApplicationError(
                f"{filename!r} is cut short: its gzip data ends early.",
                code="invalid_gzip",
                field="file",
            )
        rest = inflater.unused_data.lstrip(b"\x00")  # another member, or padding
    return bytes(out)


def _audience_checked(*, audience: str, segments: list[str] | tuple[str, ...]) -> list[str]:
    """Return the normalized segment list for `audience`; raise 400 when they do not fit."""
    if audience not in Document.Audience.values:
        raise ApplicationError(
            f"Unknown audience {audience!r}: use one of {', '.join(Document.Audience.values)}.",
            field="audience",
        )
    cleaned = sorted({s.strip().lower() for s in segments if s and s.strip()})
    if audience != Document.Audience.SEGMENTS:
        if cleaned:
            raise ApplicationError(
                "Segments are only allowed with audience 'segments'.", field="segments"
            )
        return []
    if not cleaned:
        raise ApplicationError("Audience 'segments' needs at least one segment.", field="segments")
    for segment in cleaned:
        if not SEGMENT_RE.match(segment):
            raise ApplicationError(
                f"Invalid segment {segment!r}: use lowercase letters, digits, '-' or '_'.",
                field="segments",
            )
    return cleaned


def document_index_enqueue(document: Document) -> None:
    """Index the document's newest version once the current transaction commits."""
    transaction.on_commit(
        partial(task_enqueue, INDEX_TASK, document.pk, document.version, group="knowledge-index")
    )


def knowledge_revision_bump(*, tenant: Tenant) -> None:
    """Advance the tenant's knowledge revision (part of answer-cache keys)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_tenantknowledge (tenant_id, revision) VALUES (%s, 1) "
            "ON CONFLICT (tenant_id) DO UPDATE "
            "SET revision = knowledge_tenantknowledge.revision + 1",
            [tenant.pk],
        )
    # Now for this transaction's own searches, and after commit for a search that counted
    # the old chunks meanwhile.
    vector_plan_forget(tenant_id=tenant.pk)
    transaction.on_commit(partial(vector_plan_forget, tenant_id=tenant.pk))


def _version_create(
    *, document: Document, version: int, data: bytes, filename: str, content_type: str, user
) -> DocumentVersion:
    document_version = DocumentVersion(
        tenant=document.tenant,
        document=document,
        version=version,
        filename=filename,
        content_type=content_type,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        audience=document.audience,
        segments=document.segments,
        uploaded_by=user,
    )
    document_version.file.save(PurePath(filename).name, ContentFile(data), save=False)
    document_version.save()
    return document_version


# --------------------------------------------------------------------------- documents


@transaction.atomic
def document_upload(
    *,
    tenant: Tenant,
    file: File,
    declared_type: str = "",
    title: str = "",
    audience: str = Document.Audience.PUBLIC,
    segments: list[str] | tuple[str, ...] = (),
    actor: Actor,
    user=None,
) -> Document:
    """Store a new document (version 1, status pending) and index it after commit."""
    data, content_type, filename = _file_read(file=file, declared_type=declared_type)
    segments = _audience_checked(audience=audience, segments=segments)
    title = (title or "").strip() or PurePath(filename).stem.replace("-", " ").replace("_", " ")
    if len(title) > 300:
        raise ApplicationError("The title is longer than 300 characters.", field="title")
    document = Document.objects.create(
        tenant=tenant, title=title, audience=audience, segments=segments, uploaded_by=user
    )
    _version_create(
        document=document,
        version=1,
        data=data,
        filename=filename,
        content_type=content_type,
        user=user,
    )
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="knowledge.document.uploaded",
        target_type="knowledge_document",
        target_id=document.pk,
        data={"title": title, "filename": filename, "size": len(data), "audience": audience},
    )
    knowledge_revision_bump(tenant=tenant)
    document_index_enqueue(document)
    return document


@transaction.atomic
def document_replace_file(
    *,
    tenant: Tenant,
    document_id: int,
    file: File,
    declared_type: str = "",
    actor: Actor,
    user=None,
) -> tuple[Document, bool]:
    """Upload a new file for a document; return (document, whether a new version was made).

    The same bytes as the newest version make no new version (uploads are idempotent). The
    previous ready version stays searchable until the new one is ready, and its chunks are
    kept so answers that cited it still resolve.
    """
    data, content_type, filename = _file_read(file=file, declared_type=declared_type)
    document = Document.objects.select_for_update().filter(tenant=tenant, pk=document_id).first()
    if document is None:
        raise NotFound("No such knowledge document.")
    newest = document.versions.order_by("-version").first()
    if newest is not None and newest.sha256 == hashlib.sha256(data).hexdigest():
        return document, False
    document.version += 1
    document.status = Document.Status.PENDING
    document.error = ""
    document.chunks_done = document.chunks_total = document.attempts = 0
    document.save()
    _version_create(
        document=document,
        version=document.version,
        data=data,
        filename=filename,
        content_type=content_type,
        user=user,
    )
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="knowledge.document.replaced",
        target_type="knowledge_document",
        target_id=document.pk,
        data={"version": document.version, "filename": filename, "size": len(data)},
    )
    knowledge_revision_bump(tenant=tenant)
    document_index_enqueue(document)
    return document, True


@transaction.atomic
def document_update(
    *,
    tenant: Tenant,
    document_id: int,
    title: str | None = None,
    audience: str | None = None,
    segments: list[str] | tuple[str, ...] | None = None,
    actor: Actor,
) -> Document:
    """Change title or audience; chunks get the new audience in the same transaction."""
    document = Document.objects.select_for_update().filter(tenant=tenant, pk=document_id).first()
    if document is None:
        raise NotFound("No such knowledge document.")
    changes: dict = {}
    if title is not None and title.strip() and title.strip() != document.title:
        document.title = changes["title"] = title.strip()[:300]
    if audience is not None or segments is not None:
        new_audience = audience if audience is not None else document.audience
        new_segments = _audience_checked(
            audience=new_audience,
            segments=segments if segments is not None else document.segments,
        )
        if (new_audience, new_segments) != (document.audience, document.segments):
            document.audience, document.segments = new_audience, new_segments
            changes.update(audience=new_audience, segments=new_segments)
            _versions_audience_set(document=document, audience=new_audience, segments=new_segments)
    if not changes:
        return document
    document.save()
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="knowledge.document.updated",
        target_type="knowledge_document",
        target_id=document.pk,
        data=changes,
    )
    knowledge_revision_bump(tenant=tenant)
    return document


_AUDIENCE_BREADTH = {
    Document.Audience.AGENTS: 0,
    Document.Audience.SEGMENTS: 1,
    Document.Audience.PUBLIC: 2,
}


def audience_narrowest(
    first: tuple[str, list[str]], second: tuple[str, list[str]]
) -> tuple[str, list[str]]:
    """The (audience, segments) that only readers allowed by both may see (agents see all)."""
    (a, a_segments), (b, b_segments) = first, second
    if a == b == Document.Audience.SEGMENTS:
        common = sorted(set(a_segments) & set(b_segments))
        return (Document.Audience.SEGMENTS, common) if common else (Document.Audience.AGENTS, [])
    return min(first, second, key=lambda pair: _AUDIENCE_BREADTH[pair[0]])


def _versions_audience_set(*, document: Document, audience: str, segments: list[str]) -> None:
    """Give the document's current versions (newest and live) the new audience; an older
    version only narrows to what both its own and the new audience allow, never widens."""
    current = {document.version, document.live_version}
    for version in document.versions.select_for_update():
        if version.version in current:
            new = (audience, segments)
        else:
            new = audience_narrowest((version.audience, version.segments), (audience, segments))
        if new == (version.audience, version.segments):
            continue
        version.audience, version.segments = new
        version.save(update_fields=["audience", "segments"])
        Chunk.objects.filter(document=document, version=version.version).update(
            audience=new[0], segments=new[1]
        )


@transaction.atomic
def document_delete(*, tenant: Tenant, document_id: int, actor: Actor) -> None:
    """Delete a document, all its versions, files and chunks (audited)."""
    document = Document.objects.select_for_update().filter(tenant=tenant, pk=document_id).first()
    if document is None:
        raise NotFound("No such knowledge document.")
    files = [v.file.name for v in document.versions.all() if v.file]
    chunk_count = Chunk.objects.filter(document=document).count()
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="knowledge.document.deleted",
        target_type="knowledge_document",
        target_id=document.pk,
        data={"title": document.title, "versions": document.version, "chunks": chunk_count},
    )
    document.delete()
    knowledge_revision_bump(tenant=tenant)
    storage = DocumentVersion._meta.get_field("file").storage
    transaction.on_commit(lambda: [storage.delete(name) for name in files])


@transaction.atomic
def document_reindex(*, tenant: Tenant, document_id: int, actor: Actor) -> Document:
    """Index a failed document's newest version again (e.g. after the embedder was down)."""
    document = Document.objects.select_for_update().filter(tenant=tenant, pk=document_id).first()
    if document is None:
        raise NotFound("No such knowledge document.")
    if document.status != Document.Status.FAILED:
        raise Conflict(
            f"Only failed documents can be re-indexed; this one is {document.status}.",
            field="status",
        )
    document.status = Document.Status.PENDING
    document.error = ""
    document.chunks_done = document.chunks_total = document.attempts = 0
    document.save()
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="knowledge.document.reindexed",
        target_type="knowledge_document",
        target_id=document.pk,
        data={"version": document.version},
    )
    knowledge_revision_bump(tenant=tenant)
    document_index_enqueue(document)
    return document


@transaction.atomic
def document_reextract(*, document_id: int, actor: Actor) -> Document | None:
    """Index a ready document again from its stored file as a new version, when the live
    version was extracted by an older extractor; return it, or None when nothing was due.

    The live version stays searchable until the new one is ready (as for a new upload);
    answers that cited the old one keep resolving. Safe to run twice: the second run finds
    the document pending (or the new version current) and does nothing."""
    document = Document.objects.select_for_update().filter(pk=document_id).first()
    if (
        document is None
        or document.status != Document.Status.READY
        or document.live_version != document.version
    ):
        return None
    live = DocumentVersion.objects.get(document=document, version=document.live_version)
    current = extractor_version(live.content_type)
    if live.extractor_version >= current:
        return None
    try:
        with live.file.open("rb") as fh:
            data = fh.read()
    except OSError as exc:  # the stored file is gone: keep serving what was indexed
        logger.warning("knowledge document %s: cannot re-extract: %s", document.pk, exc)
        return None
    document.version += 1
    document.status = Document.Status.PENDING
    document.error = ""
    document.chunks_done = document.chunks_total = document.attempts = 0
    document.save()
    new = _version_create(
        document=document,
        version=document.version,
        data=data,
        filename=live.filename,
        content_type=live.content_type,
        user=None,
    )
    DocumentVersion.objects.filter(pk=new.pk).update(audience=live.audience, segments=live.segments)
    audit_event_record(
        tenant=document.tenant,
        actor=actor,
        action="knowledge.document.reextracted",
        target_type="knowledge_document",
        target_id=document.pk,
        data={
            "version": document.version,
            "from_extractor": live.extractor_version,
            "to_extractor": current,
        },
    )
    knowledge_revision_bump(tenant=document.tenant)
    document_index_enqueue(document)
    return document
