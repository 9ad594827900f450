"""Indexing a document version: extract, chunk, embed and store, then go live.

`document_index` is the one non-atomic service: its progress has to be visible while it runs.
Every step it takes is a conditional update on (document, version), so a run for a superseded
version or a second run of the same version cannot clobber newer state. The chunks of a
version are stored batch by batch, not searchable, and made live together in one
transaction; a run that nears the task timeout leaves the rest to a continuation task.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from knowledge.chunking import ChunkDraft, chunk_document
from knowledge.embeddings import BATCH_SIZE, embed_texts
from knowledge.extraction import (
    EXTRACTOR_VERSIONS,
    ExtractionError,
    Limits,
    extract_isolated,
    extractor_version,
)
from knowledge.models import Chunk, Document, DocumentVersion
from knowledge.sentences import sentence_vectors_embed
from knowledge.services.documents import (
    INDEX_TASK,
    MAX_ATTEMPTS,
    document_index_enqueue,
    document_reextract,
    document_reindex,
    knowledge_revision_bump,
)
from knowledge.services.slots import Claim, indexing_slot_claim, indexing_slots_wake
from knowledge.services.vector_index import VECTOR_INDEX_TASK, tenant_vector_index_due
from supportbot.queue import task_enqueue
from supportbot.services import Actor

logger = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------- indexing


def _status_set(*, document_id: int, version: int, **fields) -> bool:
    """Update the document only if `version` is still its newest; return whether it was."""
    fields["updated_at"] = timezone.now()
    return bool(
        Document.objects.filter(pk=document_id, version=version)
        .exclude(status=Document.Status.READY, live_version=version)
        .update(**fields)
    )


def _fail(*, document: Document, version: int, error: str) -> Document | None:
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
    return Document.objects.filter(pk=document.pk).first()


def document_index(*, document_id: int, version: int) -> Document | None:
    """Extract, chunk, embed and store one document version; safe to run twice.

    Does nothing for a deleted document, a superseded version, a version already ready, or
    one that failed (a new upload or `document_reindex` starts over). Runs only in one of its
    tenant's indexing slots (`slots`): when they are taken the document stays pending and the
    task returns at once; a run that ends hands its slot on. Any error on the way — a poison
    file, a limit, the embedder — ends the version `failed` with a message for the admin;
    only a worker that dies outright leaves it for `documents_sweep_stuck`.
    """
    document = Document.objects.select_related("tenant").filter(pk=document_id).first()
    if document is None:
        return None
    if (
        document.version != version
        or document.status == Document.Status.FAILED
        or (document.status == Document.Status.READY and document.live_version == version)
    ):
        indexing_slots_wake(tenant_id=document.tenant_id)
        return document
    claim = indexing_slot_claim(document=document, version=version)
    if claim is not Claim.CLAIMED:
        logger.info("knowledge document %s v%s not indexed now: %s", document_id, version, claim)
        if claim is Claim.GONE:
            indexing_slots_wake(tenant_id=document.tenant_id)
        return Document.objects.filter(pk=document_id).first()
    try:
        result = _index_steps(document=document, version=version, deadline=_index_deadline())
    except ExtractionError as exc:
        result = _fail(document=document, version=version, error=str(exc))
    except Exception as exc:
        logger.exception("knowledge document %s v%s: indexing crashed", document_id, version)
        error = f"Indexing failed ({type(exc).__name__}): {str(exc)[:500]}".rstrip(": ")
        result = _fail(document=document, version=version, error=error)
    if result is None or result.is_final or result.version != version:
        indexing_slots_wake(tenant_id=document.tenant_id)  # else a continuation keeps the slot
    return result


def _index_deadline() -> float:
    """When a run stops embedding and leaves the rest to a continuation task (a
    `time.monotonic()` value): at three quarters of the django-q2 timeout, which would kill
    the worker without a word, leaving time for the last batch and making the version live."""
    return time.monotonic() + 0.75 * settings.Q_CLUSTER["timeout"]


def _extraction_limits() -> Limits:
    """The per-document limits of the settings, the deadline starting now."""
    return Limits.within(
        seconds=settings.KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS,
        max_chars=settings.KNOWLEDGE_MAX_TEXT_CHARS,
        max_pages=settings.KNOWLEDGE_PDF_MAX_PAGES,
        max_bytes=settings.KNOWLEDGE_MAX_UPLOAD_BYTES,
        max_stream_bytes=settings.KNOWLEDGE_PDF_MAX_STREAM_BYTES,
        max_total_stream_bytes=settings.KNOWLEDGE_PDF_MAX_TOTAL_STREAM_BYTES,
        max_image_pixels=settings.KNOWLEDGE_PDF_MAX_IMAGE_PIXELS,
        max_line_chars=settings.KNOWLEDGE_MAX_LINE_CHARS,
        memory_bytes=settings.KNOWLEDGE_EXTRACT_MEMORY_MB * 1024 * 1024,
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
    extracted = extract_isolated(
        data=data, content_type=source.content_type, limits=_extraction_limits()
    )
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
            task_enqueue(INDEX_TASK, document_id, version, group="knowledge-index")
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
        sentences = sentence_vectors_embed([drafts[i].text for i in ordinals], embed=embed_texts)
        _chunk_batch_store(
            document=document,
            source=source,
            drafts=drafts,
            ordinals=ordinals,
            vectors=vectors,
            sentences=sentences,
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
    sentences: list[bytes],
) -> None:
    """Store passages of a version, not yet searchable (a repeated run skips existing ones),
    with their sentences' vectors."""
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
                sentence_vectors=blob,
                audience=source.audience,
                segments=source.segments,
                is_live=False,
            )
            for i, vector, blob in zip(ordinals, vectors, sentences, strict=True)
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
    if tenant_vector_index_due(tenant_id=document.tenant_id):
        transaction.on_commit(
            partial(
                task_enqueue, VECTOR_INDEX_TASK, document.tenant_id, group="knowledge-vector-index"
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
        document_index_enqueue(document)
        requeued.append(document.pk)
    return requeued
