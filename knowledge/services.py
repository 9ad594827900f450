"""Writes of the knowledge app: upload, replace, edit and delete documents; index a version.

Indexing (`document_index`) is the one non-atomic service: its progress has to be visible
while it runs. Every step it takes is a conditional update on (document, version), so a run
for a superseded version or a second run of the same version cannot clobber newer state. The
chunks of a version are stored batch by batch, not searchable, and made live together in one
transaction; a run that nears the task timeout leaves the rest to a continuation task.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from datetime import timedelta
from functools import partial
from pathlib import PurePath

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django_q.tasks import async_task

from knowledge.chunking import ChunkDraft, chunk_document
from knowledge.embeddings import BATCH_SIZE, embed_texts
from knowledge.extraction import (
    EXTRACTOR_VERSIONS,
    ExtractionError,
    Limits,
    detect_content_type,
    extract,
    extractor_version,
)
from knowledge.models import Chunk, Document, DocumentVersion
from knowledge.selectors import tenant_vector_index_name, tenant_vector_state
from supportbot.errors import ApplicationError, Conflict, NotFound
from supportbot.models import Tenant
from supportbot.services import Actor, audit_event_record

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
SEGMENT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")
INDEX_TASK = "knowledge.tasks.document_index_task"
TERMS_ADD_SQL = r"""
    INSERT INTO knowledge_term (tenant_id, word)
    SELECT DISTINCT c.tenant_id, w.word
    FROM knowledge_chunk c, LATERAL (
        SELECT unnest(tsvector_to_array(to_tsvector('simple', c.context || ' ' || c.text)))
        UNION
        SELECT lower(m[1]) FROM regexp_matches(
            c.context || ' ' || c.text, '(\m[A-Za-z]{0,6}-?[0-9][A-Za-z0-9_-]*)', 'g') AS m
    ) AS w(word)
    WHERE c.id = ANY(%s) AND length(w.word) BETWEEN 3 AND 64
    ON CONFLICT DO NOTHING
"""
VECTOR_INDEX_TASK = "knowledge.tasks.tenant_vector_index_task"
VECTOR_INDEX_BUILD_MEMORY = "256MB"
VECTOR_INDEX_LOCK = 7401  # advisory lock class (first key) for per-tenant index builds


# --------------------------------------------------------------------------- validation


def _file_read(*, file: File, declared_type: str) -> tuple[bytes, str]:
    """Read an acceptable upload; return its bytes and content type, or raise 400/413."""
    limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    size = file.size if file.size is not None else 0
    if size > limit:
        raise ApplicationError(
            f"The file is {size} bytes; the limit is {limit} bytes.",
            code="file_too_large",
            field="file",
            status=413,
        )
    file.seek(0)
    data = file.read(limit + 1)
    if len(data) > limit:
        raise ApplicationError(
            f"The file is larger than the limit of {limit} bytes.",
            code="file_too_large",
            field="file",
            status=413,
        )
    if not data.strip():
        raise ApplicationError("The file is empty.", code="empty_file", field="file")
    filename = PurePath(file.name or "").name
    content_type = detect_content_type(filename=filename, declared=declared_type, head=data[:1024])
    if content_type is None:
        raise ApplicationError(
            f"Unsupported file type for {filename!r}: upload PDF, HTML, Markdown or plain text "
            "(.pdf, .html, .htm, .md, .txt).",
            code="unsupported_type",
            field="file",
        )
    return data, content_type


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


def _enqueue_index(document: Document) -> None:
    transaction.on_commit(
        partial(async_task, INDEX_TASK, document.pk, document.version, group="knowledge-index")
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
    data, content_type = _file_read(file=file, declared_type=declared_type)
    filename = PurePath(file.name).name
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
    _enqueue_index(document)
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
    data, content_type = _file_read(file=file, declared_type=declared_type)
    filename = PurePath(file.name).name
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
    _enqueue_index(document)
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


# --------------------------------------------------------------------------- indexing


def _status_set(*, document_id: int, version: int, **fields) -> bool:
    """Update the document only if `version` is still its newest; return whether it was."""
    fields["updated_at"] = timezone.now()
    return bool(
        Document.objects.filter(pk=document_id, version=version)
        .exclude(status=Document.Status.READY, live_version=version)
        .update(**fields)
    )


def _fail(*, document: Document, version: int, error: str) -> None:
    """Mark the version failed with `error` (unless a newer version or a ready state won) and
    drop the passages it had stored but never made searchable."""
    logger.warning("knowledge document %s v%s failed: %s", document.pk, version, error)
    with transaction.atomic():
        # Which extractor failed it: an upgraded one tries again once
        # (`documents_reextract_outdated`), the same one never.
        failed = DocumentVersion.objects.filter(document_id=document.pk, version=version)
        content_type = failed.values_list("content_type", flat=True).first()
        if content_type is not None:
            failed.update(extractor_version=extractor_version(content_type))
        if _status_set(
            document_id=document.pk, version=version, status=Document.Status.FAILED, error=error
        ):
            knowledge_revision_bump(tenant=document.tenant)
        Chunk.objects.filter(document_id=document.pk, version=version, is_live=False).exclude(
            document__live_version=version
        ).delete()


def document_index(*, document_id: int, version: int) -> Document | None:
    """Extract, chunk, embed and store one document version; safe to run twice.

    Does nothing for a deleted document, a superseded version, a version already ready, or
    one that failed (a new upload or `document_reindex` starts over). Any error on the way —
    a poison file, a limit, the embedder — ends the version `failed` with a message for the
    admin; only a worker that dies outright leaves it for `documents_sweep_stuck`.
    """
    document = Document.objects.select_related("tenant").filter(pk=document_id).first()
    if document is None or document.version != version:
        return document
    if document.status == Document.Status.FAILED or (
        document.status == Document.Status.READY and document.live_version == version
    ):
        return document
    if not _status_set(
        document_id=document_id,
        version=version,
        status=Document.Status.EXTRACTING,
        attempts=document.attempts + 1,
        error="",
    ):
        return document
    try:
        return _index_steps(document=document, version=version, deadline=_index_deadline())
    except ExtractionError as exc:
        error = str(exc)
    except Exception as exc:
        logger.exception("knowledge document %s v%s: indexing crashed", document_id, version)
        error = f"Indexing failed ({type(exc).__name__}): {str(exc)[:500]}".rstrip(": ")
    _fail(document=document, version=version, error=error)
    return Document.objects.filter(pk=document_id).first()


def _index_deadline() -> float:
    """When a run stops embedding and leaves the rest to a continuation task (a
    `time.monotonic()` value): at three quarters of the django-q2 timeout, which would kill
    the worker without a word, leaving time for the last batch and making the version live."""
    return time.monotonic() + 0.75 * settings.Q_CLUSTER["timeout"]


def _extraction_limits() -> Limits:
    return Limits.within(
        seconds=settings.KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS,
        max_chars=settings.KNOWLEDGE_MAX_TEXT_CHARS,
        max_pages=settings.KNOWLEDGE_PDF_MAX_PAGES,
    )


def _index_steps(*, document: Document, version: int, deadline: float) -> Document | None:
    """The steps of `document_index`; raise on any failure (the caller fails the document).

    Passages are embedded and stored (not yet searchable) batch by batch, so a long document
    continues where the previous run stopped: past `deadline` the run enqueues a continuation
    and returns instead of being killed by the task timeout. Each run stores at least one
    batch, so the chain always ends."""
    document_id = document.pk
    source = DocumentVersion.objects.get(document_id=document_id, version=version)
    with source.file.open("rb") as fh:
        data = fh.read()
    extracted = extract(data=data, content_type=source.content_type, limits=_extraction_limits())
    drafts = chunk_document(extracted)
    if not drafts:
        raise ExtractionError("The file has headings but no body text to index.")
    DocumentVersion.objects.filter(pk=source.pk).update(
        text=extracted.text, extractor_version=extractor_version(source.content_type)
    )

    stored = _stored_ordinals(document_id=document_id, version=version, drafts=drafts)
    if not _status_set(
        document_id=document_id,
        version=version,
        status=Document.Status.EMBEDDING,
        chunks_total=len(drafts),
        chunks_done=len(stored),
    ):
        return Document.objects.filter(pk=document_id).first()  # superseded meanwhile
    missing = [i for i in range(len(drafts)) if i not in stored]
    for n, start in enumerate(range(0, len(missing), BATCH_SIZE)):
        if n and time.monotonic() > deadline:
            _status_set(document_id=document_id, version=version, attempts=0)
            async_task(INDEX_TASK, document_id, version, group="knowledge-index")
            logger.info(
                "knowledge document %s v%s: %s of %s passages stored, continuing in a new task",
                document_id,
                version,
                len(stored),
                len(drafts),
            )
            return Document.objects.filter(pk=document_id).first()
        ordinals = missing[start : start + BATCH_SIZE]
        vectors = embed_texts([_embedding_input(document.title, drafts[i]) for i in ordinals])
        _chunk_batch_store(
            document=document, source=source, drafts=drafts, ordinals=ordinals, vectors=vectors
        )
        stored.update(ordinals)
        if not _status_set(document_id=document_id, version=version, chunks_done=len(stored)):
            return Document.objects.filter(pk=document_id).first()  # superseded or done
    return _version_go_live(document_id=document_id, version=version, total=len(drafts))


def _stored_ordinals(*, document_id: int, version: int, drafts: list[ChunkDraft]) -> set[int]:
    """Ordinals an earlier run of this version stored; if they do not match `drafts` (the
    chunking changed in between), drop them and start over."""
    rows = Chunk.objects.filter(document_id=document_id, version=version, is_live=False)
    spans = dict(rows.values_list("ordinal", "span_start"))
    if all(i < len(drafts) and drafts[i].start == start for i, start in spans.items()):
        return set(spans)
    rows.delete()
    return set()


def _chunk_batch_store(
    *,
    document: Document,
    source: DocumentVersion,
    drafts: list[ChunkDraft],
    ordinals: list[int],
    vectors: list[list[float]],
) -> None:
    """Store passages of a version, not yet searchable (a repeated run skips existing ones)."""
    Chunk.objects.bulk_create(
        [
            Chunk(
                tenant_id=document.tenant_id,
                document=document,
                version=source.version,
                ordinal=i,
                text=drafts[i].text,
                heading_path=drafts[i].heading_path,
                context=" > ".join([document.title, *drafts[i].heading_path])[:1000],
                span_start=drafts[i].start,
                span_end=drafts[i].end,
                embedding=vector,
                audience=source.audience,
                segments=source.segments,
                is_live=False,
            )
            for i, vector in zip(ordinals, vectors, strict=True)
        ],
        ignore_conflicts=True,
    )


def _embedding_input(title: str, draft: ChunkDraft) -> str:
    """Embed the passage with its place in the document, as a reader would see it."""
    context = " > ".join([title, *[h for h in draft.heading_path if h != title]])
    return f"{context}\n{draft.text}"


@transaction.atomic
def _version_go_live(*, document_id: int, version: int, total: int) -> Document | None:
    """Make a fully stored version the searchable one and mark the document ready.

    Runs under the document's lock, so the chunks take the version's audience as it is now
    (an admin may have changed it while the passages were embedded)."""
    document = Document.objects.select_for_update().filter(pk=document_id).first()
    if document is None or document.version != version:
        return document
    if document.status == Document.Status.READY and document.live_version == version:
        return document
    source = DocumentVersion.objects.get(document=document, version=version)
    chunks = Chunk.objects.filter(document=document, version=version)
    stored = chunks.count()
    if stored != total:
        raise RuntimeError(f"{stored} of {total} passages were stored; index it again")
    Chunk.objects.filter(document=document, is_live=True).exclude(version=version).update(
        is_live=False
    )
    chunks.update(is_live=True, audience=source.audience, segments=source.segments)
    terms_add(chunk_ids=list(chunks.values_list("pk", flat=True)))
    document.live_version = version
    document.status = Document.Status.READY
    document.error = ""
    document.chunks_total = document.chunks_done = total
    document.save()
    knowledge_revision_bump(tenant=document.tenant)
    if _vector_index_needs_change(tenant_id=document.tenant_id):
        transaction.on_commit(
            partial(
                async_task, VECTOR_INDEX_TASK, document.tenant_id, group="knowledge-vector-index"
            )
        )
    return document


def terms_add(*, chunk_ids: list[int]) -> None:
    """Add the words of these chunks to their tenant's vocabulary (typo and code lookup).

    Words are the lower-case tokens of full text's parser plus whole codes ("tr-2210"), which
    the parser splits ("tr", "-2210") so that a query for TR2210 would resemble neither.
    """
    with connection.cursor() as cursor:
        cursor.execute(TERMS_ADD_SQL, [list(chunk_ids)])


# --------------------------------------------------------------------------- vector index


def _vector_index_needs_change(*, tenant_id: int) -> bool:
    cap = settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS
    count, state = tenant_vector_state(tenant_id=tenant_id, cap=cap + 1)
    if count > cap:
        return state != "valid"
    return state is not None and count <= cap // 2


def tenant_vector_index_ensure(*, tenant_id: int) -> str:
    """Give a tenant above the exact-scan threshold its own HNSW index; drop it below half.

    Large tenants are searched through HNSW; a partial index over just their rows keeps other
    tenants' vectors out of the graph (bench, 50,000-chunk tenant, ef_search 400: recall@20
    vs exact 0.98 with its own index, 0.77-0.84 through the shared one). The index is built
    CONCURRENTLY so writes go on, which cannot run inside a transaction: call this from a
    task. Safe to run twice or at once (an advisory lock per tenant); an invalid index left
    by a failed build is dropped and built again. Returns "created", "dropped", "kept",
    "none" or "busy".
    """
    if connection.in_atomic_block:
        raise RuntimeError("tenant_vector_index_ensure must run outside a transaction.")
    tenant_id = int(tenant_id)
    name = tenant_vector_index_name(tenant_id=tenant_id)
    cap = settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [VECTOR_INDEX_LOCK, tenant_id])
        if not cursor.fetchone()[0]:
            return "busy"
        try:
            count, state = tenant_vector_state(tenant_id=tenant_id, cap=cap + 1)
            if count > cap:
                if state == "valid":
                    return "kept"
                if state == "invalid":
                    cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                cursor.execute(
                    "SELECT set_config('maintenance_work_mem', %s, false)",
                    [VECTOR_INDEX_BUILD_MEMORY],
                )
                try:
                    # tenant_id is an int; the literal is what lets the planner match the
                    # index to queries filtering on this tenant.
                    cursor.execute(
                        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON knowledge_chunk"
                        " USING hnsw (embedding vector_cosine_ops)"
                        " WITH (m = 16, ef_construction = 64)"
                        f" WHERE tenant_id = {tenant_id}::bigint AND is_live"
                    )
                finally:
                    cursor.execute("RESET maintenance_work_mem")
                logger.info("knowledge: built %s for tenant %s (%s+ chunks)", name, tenant_id, cap)
                return "created"
            if state is not None and count <= cap // 2:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                return "dropped"
            return "kept" if state is not None else "none"
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [VECTOR_INDEX_LOCK, tenant_id])


def tenant_vector_indexes_sweep() -> list[int]:
    """Enqueue `tenant_vector_index_ensure` for every tenant whose own HNSW index is missing,
    invalid or no longer needed (a lost or failed task is retried here); return their ids."""
    cap = settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tenant_id FROM knowledge_chunk WHERE is_live GROUP BY tenant_id"
            " HAVING count(*) > %s"
            " UNION SELECT substring(indexname from 'knowledge_chunk_hnsw_t([0-9]+)$')::bigint"
            " FROM pg_indexes WHERE tablename = 'knowledge_chunk'"
            " AND indexname ~ '^knowledge_chunk_hnsw_t[0-9]+$'",
            [cap // 2],
        )
        candidates = sorted(row[0] for row in cursor.fetchall())
    due = [t for t in candidates if _vector_index_needs_change(tenant_id=t)]
    for tenant_id in due:
        async_task(VECTOR_INDEX_TASK, tenant_id, group="knowledge-vector-index")
    return due


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
    _enqueue_index(document)
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
    _enqueue_index(document)
    return document


def documents_reextract_outdated(*, limit: int = 200, tenant_id: int | None = None) -> list[int]:
    """Re-index (`document_reextract`) up to `limit` ready documents (of one tenant, or all)
    whose live version an older extractor made, and index again the failed ones an older
    extractor failed; return their ids. Scheduled daily, and
    `manage.py reindex_outdated` runs it at once (after an upgrade)."""
    older = Q()
    for content_type, version in EXTRACTOR_VERSIONS.items():
        if version:
            older |= Q(content_type=content_type, extractor_version__lt=version)
    if not older:
        return []
    outdated = DocumentVersion.objects.filter(
        older,
        document__live_version=F("version"),
        document__version=F("version"),
        document__status=Document.Status.READY,
    )
    if tenant_id is not None:
        outdated = outdated.filter(tenant_id=tenant_id)
    due = list(outdated.order_by("document_id").values_list("document_id", flat=True)[:limit])
    done = []
    for document_id in due:
        if document_reextract(document_id=document_id, actor=Actor.system("reindex")):
            done.append(document_id)
    # Documents an older extractor failed (XHTML it could not read) are indexed again once.
    failed = DocumentVersion.objects.filter(
        older, document__version=F("version"), document__status=Document.Status.FAILED
    )
    if tenant_id is not None:
        failed = failed.filter(tenant_id=tenant_id)
    for version in failed.select_related("document__tenant").order_by("document_id")[:limit]:
        document_reindex(
            tenant=version.document.tenant,
            document_id=version.document_id,
            actor=Actor.system("reindex"),
        )
        done.append(version.document_id)
    return done


@transaction.atomic
def documents_sweep_stuck() -> list[int]:
    """Re-enqueue documents stuck in a non-final state; fail those out of attempts.

    A worker that died mid-document leaves it pending/extracting/embedding with an old
    `updated_at`. Returns the ids that were re-enqueued.
    """
    cutoff = timezone.now() - timedelta(seconds=settings.KNOWLEDGE_STUCK_AFTER_SECONDS)
    stuck = (
        Document.objects.select_for_update(skip_locked=True)
        .select_related("tenant")
        .exclude(status__in=Document.FINAL_STATUSES)
        .filter(updated_at__lt=cutoff)
    )
    requeued = []
    for document in stuck:
        if document.attempts >= MAX_ATTEMPTS:
            document.status = Document.Status.FAILED
            document.error = (
                f"Indexing did not finish after {document.attempts} attempts; "
                "check the worker logs, then re-index."
            )
            document.save()
            knowledge_revision_bump(tenant=document.tenant)
            continue
        document.save(update_fields=["updated_at"])
        _enqueue_index(document)
        requeued.append(document.pk)
    return requeued
