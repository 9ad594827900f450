"""A tenant's share of the indexing workers (`services.slots`)."""

import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone

from knowledge import services
from knowledge.models import Document
from knowledge.services import indexing, slots
from supportbot.tests.factories import TenantFactory

from .conftest import upload

MD = b"# Returns\n\nYou can return unopened items within 30 days for a full refund.\n"


def _index_all_at_once(documents: list[Document]) -> None:
    """Run `document_index` for every document on its own thread (own connection), all of
    them reaching the slot claim together (a real barrier, no sleeps)."""
    barrier = threading.Barrier(len(documents))
    real_claim = indexing.indexing_slot_claim
    errors: list[BaseException] = []

    def claim_together(**kwargs):
        barrier.wait(timeout=60)
        return real_claim(**kwargs)

    def run(document: Document) -> None:
        try:
            services.document_index(document_id=document.pk, version=document.version)
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)
        finally:
            connection.close()

    with mock.patch.object(indexing, "indexing_slot_claim", side_effect=claim_together):
        threads = [threading.Thread(target=run, args=(d,)) for d in documents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors


@pytest.mark.django_db(transaction=True)
def test_racing_uploads_of_one_tenant_index_one_at_a_time_while_other_tenants_go_on(settings):
    settings.INDEXING_SLOTS_PER_TENANT = 1
    tenants = [TenantFactory(slug=f"slots-{n}") for n in range(3)]
    documents = [upload(t, f"doc-{i}.md", MD) for t in tenants for i in range(2)]
    with mock.patch("knowledge.services.documents.task_enqueue") as enqueue:
        _index_all_at_once(documents)
    for tenant in tenants:
        statuses = sorted(Document.objects.filter(tenant=tenant).values_list("status", flat=True))
        # One won the tenant's slot and indexed; the other returned at once, still pending.
        assert statuses == ["pending", "ready"], (tenant.slug, statuses)
    waiting = Document.objects.filter(status="pending")
    # The winner handed its slot on: each waiting document was enqueued again, once.
    enqueued = sorted(call.args[1] for call in enqueue.call_args_list)
    assert enqueued == sorted(waiting.values_list("pk", flat=True))
    assert not waiting.filter(attempts__gt=0).exists()  # never started, never counted
    for document in waiting:
        services.document_index(document_id=document.pk, version=document.version)
    assert set(Document.objects.values_list("status", flat=True)) == {"ready"}


def test_a_busy_tenant_leaves_its_document_pending_without_extracting(tenant, settings):
    settings.INDEXING_SLOTS_PER_TENANT = 1
    running = upload(tenant, "a.md", MD)
    Document.objects.filter(pk=running.pk).update(status="embedding")
    waiting = upload(tenant, "b.md", MD)
    with mock.patch.object(indexing, "extract_isolated") as extract:
        result = services.document_index(document_id=waiting.pk, version=1)
    extract.assert_not_called()
    assert (result.status, result.attempts) == ("pending", 0)


def test_a_slot_held_by_a_run_that_died_frees_when_the_run_counts_as_stuck(tenant, settings):
    settings.INDEXING_SLOTS_PER_TENANT = 1
    settings.KNOWLEDGE_STUCK_AFTER_SECONDS = 60
    dead = upload(tenant, "a.md", MD)
    old = timezone.now() - timedelta(minutes=5)
    Document.objects.filter(pk=dead.pk).update(status="extracting", updated_at=old)
    waiting = upload(tenant, "b.md", MD)
    result = services.document_index(document_id=waiting.pk, version=1)
    assert result.status == "ready", result.error


def test_another_tenants_running_documents_take_no_slot_of_this_tenant(tenant, settings):
    settings.INDEXING_SLOTS_PER_TENANT = 1
    other = TenantFactory(slug="slots-other")
    Document.objects.filter(pk=upload(other, "a.md", MD).pk).update(status="embedding")
    result = services.document_index(document_id=upload(tenant, "b.md", MD).pk, version=1)
    assert result.status == "ready", result.error


def test_a_finished_run_enqueues_the_tenants_oldest_waiting_document(
    tenant, settings, django_capture_on_commit_callbacks
):
    settings.INDEXING_SLOTS_PER_TENANT = 1
    first = upload(tenant, "a.md", MD)
    second = upload(tenant, "b.md", MD)
    third = upload(tenant, "c.md", MD)
    with (
        mock.patch("knowledge.services.documents.task_enqueue") as enqueue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.document_index(document_id=first.pk, version=1)
    enqueue.assert_called_once_with(services.INDEX_TASK, second.pk, 1, group="knowledge-index")
    assert slots.indexing_slots_wake(tenant_id=tenant.pk) == [second.pk]  # still waiting
    assert Document.objects.get(pk=third.pk).status == "pending"
