import random
from datetime import timedelta
from unittest import mock

import pytest
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.utils import timezone

from knowledge import services
from knowledge.models import Chunk, Document, DocumentVersion, Term
from knowledge.selectors import (
    Audience,
    chunk_get_many,
    filter_sql,
    knowledge_version,
    search_passages,
    tenant_vector_index_name,
    tenant_vector_state,
    vector_candidates,
    vector_literal,
)
from knowledge.services import indexing, vector_index
from supportbot.errors import ApplicationError
from supportbot.models import AuditEvent
from supportbot.services import Actor

from . import poison
from .conftest import upload, upload_and_index
from .factories import ChunkFactory, DocumentFactory, near_vector, random_unit_vector

MD = b"# Returns\n\n## Window\n\nReturn items within 30 days of delivery.\n"
MD_V2 = b"# Returns\n\n## Window\n\nReturn items within 45 days of delivery.\n"


def test_indexing_stores_live_chunks_with_heading_path_span_and_vector(tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    assert document.status == Document.Status.READY
    assert (document.live_version, document.chunks_done, document.chunks_total) == (1, 1, 1)
    chunk = Chunk.objects.get(document=document)
    source = DocumentVersion.objects.get(document=document, version=1)
    assert chunk.heading_path == ["Returns", "Window"]
    assert source.text[chunk.span_start : chunk.span_end] == chunk.text
    assert chunk.is_live
    assert chunk.tenant == tenant
    assert len(chunk.embedding) == 384


def test_indexing_twice_is_a_no_op(tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    again = services.document_index(document_id=document.pk, version=1)
    assert again.status == Document.Status.READY
    assert Chunk.objects.filter(document=document).count() == 1


def test_pdf_without_text_fails_the_document_with_a_clear_error(tenant, blank_pdf):
    document = upload_and_index(tenant, "scan.pdf", blank_pdf)
    assert document.status == Document.Status.FAILED
    assert "no extractable text" in document.error
    assert not Chunk.objects.filter(document=document).exists()


def test_replacing_the_file_makes_a_new_version_and_keeps_old_citations(tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    old_chunk = Chunk.objects.get(document=document)
    replaced, created = services.document_replace_file(
        tenant=tenant,
        document_id=document.pk,
        file=ContentFile(MD_V2, name="returns.md"),
        actor=Actor.system(),
    )
    assert created
    assert replaced.version == 2
    assert replaced.status == Document.Status.PENDING
    # Until v2 is ready, v1 is still what customers find.
    found = search_passages(tenant=tenant, query="return window", audience=Audience.customer())
    assert [p.document_version for p in found.passages] == [1]

    services.document_index(document_id=document.pk, version=2)
    found = search_passages(tenant=tenant, query="return window", audience=Audience.customer())
    assert [(p.document_version, "45 days" in p.text) for p in found.passages] == [(2, True)]
    cited = chunk_get_many(tenant=tenant, chunk_ids=[old_chunk.pk])
    assert cited[0].document_version == 1
    assert "30 days" in cited[0].text


def test_uploading_identical_bytes_makes_no_new_version(tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    same, created = services.document_replace_file(
        tenant=tenant,
        document_id=document.pk,
        file=ContentFile(MD, name="returns.md"),
        actor=Actor.system(),
    )
    assert not created
    assert same.version == 1
    assert same.status == Document.Status.READY


def test_stale_version_task_does_not_overwrite_the_newer_version(tenant):
    document = upload(tenant, "returns.md", MD)
    services.document_replace_file(
        tenant=tenant,
        document_id=document.pk,
        file=ContentFile(MD_V2, name="returns.md"),
        actor=Actor.system(),
    )
    services.document_index(document_id=document.pk, version=1)  # late task for v1
    document.refresh_from_db()
    assert document.status == Document.Status.PENDING
    assert not Chunk.objects.filter(document=document).exists()


def test_knowledge_version_changes_on_upload_ready_and_delete(tenant):
    seen = [knowledge_version(tenant=tenant)]
    document = upload(tenant, "returns.md", MD)
    seen.append(knowledge_version(tenant=tenant))
    services.document_index(document_id=document.pk, version=1)
    seen.append(knowledge_version(tenant=tenant))
    services.document_delete(tenant=tenant, document_id=document.pk, actor=Actor.system())
    seen.append(knowledge_version(tenant=tenant))
    assert len(set(seen)) == 4


def test_delete_removes_chunks_versions_and_is_audited(tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    services.document_delete(tenant=tenant, document_id=document.pk, actor=Actor.system("t"))
    assert not Document.objects.filter(pk=document.pk).exists()
    assert not Chunk.objects.filter(document_id=document.pk).exists()
    assert not DocumentVersion.objects.filter(document_id=document.pk).exists()
    event = AuditEvent.objects.get(action="knowledge.document.deleted")
    assert event.target_id == str(document.pk)
    assert event.data["chunks"] == 1


def test_other_tenants_document_cannot_be_deleted(tenant, other_tenant):
    document = upload(other_tenant, "returns.md", MD)
    with pytest.raises(ApplicationError) as exc:
        services.document_delete(tenant=tenant, document_id=document.pk, actor=Actor.system())
    assert exc.value.status == 404
    assert Document.objects.filter(pk=document.pk).exists()


@pytest.mark.parametrize(
    ("audience", "segments", "field"),
    [("segments", [], "segments"), ("public", ["vip"], "segments"), ("everyone", [], "audience")],
)
def test_audience_must_fit_segments(tenant, audience, segments, field):
    with pytest.raises(ApplicationError) as exc:
        upload(tenant, "a.md", MD, audience=audience, segments=segments)
    assert exc.value.field == field


def test_sweeper_reenqueues_stuck_documents_and_fails_them_after_max_attempts(
    tenant, settings, django_capture_on_commit_callbacks
):
    settings.KNOWLEDGE_STUCK_AFTER_SECONDS = 60
    stuck = upload(tenant, "a.md", MD)
    exhausted = upload(tenant, "b.md", MD)
    fresh = upload(tenant, "c.md", MD)
    old = timezone.now() - timedelta(minutes=5)
    Document.objects.filter(pk=stuck.pk).update(status="embedding", attempts=1, updated_at=old)
    Document.objects.filter(pk=exhausted.pk).update(status="extracting", attempts=3, updated_at=old)
    with (
        mock.patch("knowledge.services.documents.task_enqueue") as enqueue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        requeued = services.documents_sweep_stuck()
    assert requeued == [stuck.pk]
    enqueue.assert_called_once_with(services.INDEX_TASK, stuck.pk, 1, group="knowledge-index")
    exhausted.refresh_from_db()
    fresh.refresh_from_db()
    assert exhausted.status == Document.Status.FAILED
    assert "3 attempts" in exhausted.error
    assert fresh.status == Document.Status.PENDING
    # The re-enqueued task finishes the stuck document.
    services.document_index(document_id=stuck.pk, version=1)
    stuck.refresh_from_db()
    assert stuck.status == Document.Status.READY


def test_failed_document_can_be_reindexed(tenant, blank_pdf):
    document = upload_and_index(tenant, "scan.pdf", blank_pdf)
    services.document_reindex(tenant=tenant, document_id=document.pk, actor=Actor.system())
    document.refresh_from_db()
    assert (document.status, document.error, document.attempts) == ("pending", "", 0)


# --------------------------------------------------------------------------- hostile uploads


def _assert_failed_without_chunks(document: Document, error_part: str) -> None:
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED, document.error
    assert error_part in document.error
    assert not Chunk.objects.filter(document=document).exists()


def test_decompression_bomb_pdf_fails_the_document_with_the_reason(tenant):
    document = upload_and_index(tenant, "bomb.pdf", poison.decompression_bomb_pdf())
    _assert_failed_without_chunks(document, "expands beyond the safe limits")


def test_20000_nested_divs_fail_the_document_with_the_reason(tenant):
    document = upload_and_index(tenant, "deep.html", poison.nested_divs_html(20_000))
    _assert_failed_without_chunks(document, "too deeply nested")


def test_pdf_over_the_page_setting_fails_the_document(tenant, settings):
    settings.KNOWLEDGE_PDF_MAX_PAGES = 2
    document = upload_and_index(tenant, "long.pdf", poison.text_pdf(pages=3))
    _assert_failed_without_chunks(document, "the limit per document is 2")


def test_text_over_the_character_setting_fails_the_document(tenant, settings):
    settings.KNOWLEDGE_MAX_TEXT_CHARS = 1_000
    document = upload_and_index(tenant, "long.txt", poison.paragraphs(5_000))
    _assert_failed_without_chunks(document, "more than 1,000 characters")


def test_extraction_past_the_time_setting_fails_the_document(tenant, settings):
    settings.KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS = -1
    document = upload_and_index(tenant, "slow.md", MD)
    _assert_failed_without_chunks(document, "the time limit per document")


def _long_markdown(paragraphs: int) -> bytes:
    body = "\n\n".join(
        f"Paragraph {i}: returns are accepted within {i} days " + "of delivery " * 40
        for i in range(paragraphs)
    )
    return f"# Returns\n\n{body}\n".encode()


@pytest.mark.slow
def test_indexing_past_the_task_deadline_continues_in_a_new_task_until_ready(tenant):
    document = upload(tenant, "long.md", _long_markdown(150))
    runs = 0
    with (
        mock.patch("knowledge.services.indexing._index_deadline", return_value=0.0),
        mock.patch("knowledge.services.indexing.task_enqueue") as enqueue,
    ):
        while document.status != Document.Status.READY and runs < 10:
            document = services.document_index(document_id=document.pk, version=1)
            runs += 1
            if document.status != Document.Status.READY:
                # One batch per run, kept but not searchable until the last run.
                assert document.status == Document.Status.EMBEDDING
                assert document.chunks_done == runs * indexing.BATCH_SIZE
                assert not Chunk.objects.filter(document=document, is_live=True).exists()
                enqueue.assert_called_with(
                    services.INDEX_TASK, document.pk, 1, group="knowledge-index"
                )
    assert document.status == Document.Status.READY, document.error
    assert document.chunks_total > 2 * indexing.BATCH_SIZE
    assert runs == -(-document.chunks_total // indexing.BATCH_SIZE)  # one batch per run
    assert document.attempts <= 1
    live = Chunk.objects.filter(document=document, is_live=True)
    assert sorted(live.values_list("ordinal", flat=True)) == list(range(document.chunks_total))


@pytest.mark.slow
def test_audience_changed_while_embedding_applies_to_every_stored_passage(tenant):
    document = upload(tenant, "long.md", _long_markdown(150), audience="agents")
    real = indexing.embed_texts
    calls = []

    def embed_and_publish(texts):
        calls.append(len(texts))
        if len(calls) == 1:  # an admin publishes the document mid-run
            services.document_update(
                tenant=tenant, document_id=document.pk, audience="public", actor=Actor.system()
            )
        return real(texts)

    with mock.patch("knowledge.services.indexing.embed_texts", side_effect=embed_and_publish):
        document = services.document_index(document_id=document.pk, version=1)
    assert document.status == Document.Status.READY, document.error
    assert len(calls) > 1
    audiences = set(Chunk.objects.filter(document=document).values_list("audience", flat=True))
    assert audiences == {"public"}


def test_failure_after_some_batches_removes_the_stored_passages(tenant):
    document = upload(tenant, "long.md", _long_markdown(90))
    real = indexing.embed_texts
    calls = []

    def flaky(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("embedder went away")
        return real(texts)

    with mock.patch("knowledge.services.indexing.embed_texts", side_effect=flaky):
        services.document_index(document_id=document.pk, version=1)
    _assert_failed_without_chunks(document, "embedder went away")


@pytest.mark.parametrize(
    "step",
    [
        "knowledge.services.indexing.extract_isolated",
        "knowledge.services.indexing.chunk_document",
        "knowledge.services.indexing.embed_texts",
        "knowledge.services.indexing._chunk_batch_store",
        "knowledge.services.indexing._version_go_live",
        "django.core.files.storage.FileSystemStorage.open",
    ],
)
def test_an_exception_in_any_indexing_step_fails_the_document(tenant, step):
    document = upload(tenant, "returns.md", MD)
    with mock.patch(step, side_effect=RuntimeError("boom in step")):
        services.document_index(document_id=document.pk, version=1)
    _assert_failed_without_chunks(document, "Indexing failed (RuntimeError): boom in step")
    assert document.attempts == 1


def test_recursion_error_inside_extraction_fails_the_document(tenant):
    document = upload(tenant, "returns.md", MD)
    with mock.patch(
        "knowledge.services.indexing.extract_isolated", side_effect=RecursionError("too deep")
    ):
        services.document_index(document_id=document.pk, version=1)
    _assert_failed_without_chunks(document, "RecursionError")


def test_nul_bytes_after_the_first_kilobyte_index_without_them(tenant):
    data = b"# Returns\n\n" + b"Return items within 30 days. " * 50 + b"\x00\x00 More text.\n"
    document = upload_and_index(tenant, "returns.md", data)
    assert document.status == Document.Status.READY, document.error
    source = DocumentVersion.objects.get(document=document)
    assert "\x00" not in source.text
    assert "More text." in source.text


@pytest.mark.slow
@pytest.mark.parametrize("html", [False, True], ids=["text", "html"])
def test_ten_mib_file_indexes_to_ready(tenant, settings, html):
    """Extraction, chunking and storage of a maximum-size upload (a stand-in embedder: the
    real model's time for 10 MiB is measured in bench/extraction.py)."""
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
    data = poison.paragraphs(10 * 1024 * 1024, html=html)
    vector = [1.0] + [0.0] * 383
    with mock.patch(
        "knowledge.services.indexing.embed_texts", side_effect=lambda texts: [vector] * len(texts)
    ):
        document = upload_and_index(tenant, "big.html" if html else "big.txt", data)
    assert document.status == Document.Status.READY, document.error
    chunks = Chunk.objects.filter(document=document, is_live=True)
    assert document.chunks_total == chunks.count() > 5_000
    assert (
        chunks.order_by("-ordinal")
        .first()
        .text.endswith(data.rsplit(b"Case ", 1)[1].split(b".")[0].decode() + ".")
    )


def test_passages_left_by_a_run_with_other_chunking_are_replaced(tenant):
    document = upload(tenant, "returns.md", MD)
    ChunkFactory(document=document, version=1, ordinal=0, span_start=999, is_live=False)
    ChunkFactory(document=document, version=1, ordinal=7, span_start=0, is_live=False)
    document = services.document_index(document_id=document.pk, version=1)
    assert document.status == Document.Status.READY, document.error
    source = DocumentVersion.objects.get(document=document, version=1)
    chunks = list(Chunk.objects.filter(document=document))
    assert [(c.ordinal, c.is_live) for c in chunks] == [(0, True)]
    assert source.text[chunks[0].span_start : chunks[0].span_end] == chunks[0].text


# --------------------------------------------------------------------------- vector index


@pytest.fixture
def large_tenants(transactional_db, tenant, other_tenant, settings):
    """`tenant` above a lowered exact-scan threshold (40 chunks > 30), `other_tenant` with
    40 chunks that are nearer to every query than `tenant`'s; their partial indexes are
    dropped afterwards (DDL outlives the test's flush)."""
    settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS = 30
    rng = random.Random(3)
    target = random_unit_vector(rng)
    mine = [
        ChunkFactory(
            document=DocumentFactory(tenant=tenant), embedding=near_vector(target, rng, 0.2)
        )
        for _ in range(40)
    ]
    theirs = DocumentFactory(tenant=other_tenant)
    for _ in range(40):
        ChunkFactory(document=theirs, embedding=near_vector(target, rng, 0.01))
    yield {"target": target, "mine": {c.pk for c in mine}}
    with connection.cursor() as cursor:
        for t in (tenant, other_tenant):
            cursor.execute(f"DROP INDEX IF EXISTS {tenant_vector_index_name(tenant_id=t.pk)}")


def _index_used(tenant, embedding) -> str:
    """The index of the selector's HNSW query when sorting is ruled out (few rows here)."""
    where, params = filter_sql(tenant=tenant, audience=Audience.customer())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(
            f"EXPLAIN SELECT c.id FROM knowledge_chunk c WHERE {where}"  # noqa: S608
            " ORDER BY c.embedding <=> %s::vector LIMIT 5",
            [*params, vector_literal(embedding)],
        )
        return "\n".join(row[0] for row in cursor.fetchall())


def test_large_tenant_gets_its_own_hnsw_index_that_search_uses(tenant, large_tenants):
    assert services.tenant_vector_index_ensure(tenant_id=tenant.pk) == "created"
    assert tenant_vector_state(tenant_id=tenant.pk, cap=100) == (40, "valid")
    assert tenant_vector_index_name(tenant_id=tenant.pk) in _index_used(
        tenant, large_tenants["target"]
    )
    assert services.tenant_vector_index_ensure(tenant_id=tenant.pk) == "kept"


def test_own_index_search_never_returns_another_tenants_rows_and_equals_exact(
    tenant, large_tenants
):
    services.tenant_vector_index_ensure(tenant_id=tenant.pk)
    kwargs = {"tenant": tenant, "embedding": large_tenants["target"], "limit": 20}
    hnsw, plan = vector_candidates(audience=Audience.customer(), **kwargs)
    exact, _ = vector_candidates(audience=Audience.customer(), plan="exact", **kwargs)
    assert plan == "hnsw"
    assert [i for i, _ in hnsw] == [i for i, _ in exact]
    assert {i for i, _ in hnsw} <= large_tenants["mine"]
    result = search_passages(tenant=tenant, query="anything at all", audience=Audience.agent())
    assert {p.chunk_id for p in result.passages} <= large_tenants["mine"]


def test_small_tenant_gets_no_index_and_a_shrunken_one_loses_it(
    tenant, other_tenant, large_tenants
):
    assert services.tenant_vector_index_ensure(tenant_id=other_tenant.pk) == "created"
    Chunk.objects.filter(tenant=other_tenant).update(is_live=False)
    assert services.tenant_vector_index_ensure(tenant_id=other_tenant.pk) == "dropped"
    assert tenant_vector_state(tenant_id=other_tenant.pk, cap=100) == (0, None)
    assert services.tenant_vector_index_ensure(tenant_id=other_tenant.pk) == "none"


def test_vector_index_is_not_built_inside_a_transaction(tenant):
    with pytest.raises(RuntimeError, match="outside a transaction"):
        services.tenant_vector_index_ensure(tenant_id=tenant.pk)


def test_indexing_past_the_threshold_enqueues_the_vector_index_task(
    tenant, settings, django_capture_on_commit_callbacks
):
    settings.KNOWLEDGE_EXACT_SCAN_MAX_ROWS = 1
    ChunkFactory(document=DocumentFactory(tenant=tenant))
    with (
        mock.patch.object(indexing, "task_enqueue") as enqueue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        upload_and_index(tenant, "returns.md", MD)
    calls = [c.args for c in enqueue.call_args_list if c.args[0] == services.VECTOR_INDEX_TASK]
    assert calls == [(services.VECTOR_INDEX_TASK, tenant.pk)]


def test_indexing_records_words_and_whole_codes_in_the_vocabulary(tenant, other_tenant):
    upload_and_index(tenant, "repairs.md", b"# Repairs\n\nPole TR-2210 costs $12 to replace.\n")
    words = set(Term.objects.filter(tenant=tenant).values_list("word", flat=True))
    assert {"repairs", "pole", "tr-2210", "costs", "replace"} <= words
    assert not Term.objects.filter(tenant=other_tenant).exists()


def test_sweep_enqueues_index_builds_only_for_tenants_that_need_one(
    tenant, other_tenant, large_tenants
):
    services.tenant_vector_index_ensure(tenant_id=tenant.pk)
    with mock.patch.object(vector_index, "task_enqueue") as enqueue:
        due = services.tenant_vector_indexes_sweep()
    assert due == [other_tenant.pk]
    enqueue.assert_called_once_with(
        services.VECTOR_INDEX_TASK, other_tenant.pk, group="knowledge-vector-index"
    )
