"""Re-index on upgrade: the extractor version per document version, outdated documents
indexed again as a new version (the old one serving until it is ready)."""

import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection

from knowledge import services
from knowledge.extraction import HTML, extractor_version
from knowledge.models import Chunk, Document, DocumentVersion
from supportbot.models import AuditEvent

from .conftest import upload, upload_and_index


def _page(title: str, body: str) -> bytes:
    return f"<html><body><main><h1>{title}</h1>{body}</main></body></html>".encode()


A = _page("A", "<p>Return items within 30 days.</p>")
B = _page("B", "<p>Shipping takes 3-7 days.</p>")


def _outdated(document: Document) -> None:
    """Make the live version look extracted by the extractor before versions existed."""
    DocumentVersion.objects.filter(document=document).update(extractor_version=0)


def test_indexing_stores_the_extractor_version(tenant):
    document = upload_and_index(tenant, "a.html", A)
    version = DocumentVersion.objects.get(document=document, version=document.version)
    assert version.extractor_version == extractor_version(HTML) > 0


def test_outdated_documents_are_reindexed_as_a_new_version_with_the_same_audience(tenant):
    document = upload_and_index(
        tenant,
        "club.html",
        _page("Club", "<ul><li>Free expedited shipping</li><li>2 free repairs</li></ul>"),
        audience="segments",
        segments=["summit-club"],
    )
    _outdated(document)
    assert services.documents_reextract_outdated() == [document.pk]
    document.refresh_from_db()
    assert (document.version, document.live_version, document.status) == (2, 1, "pending")
    # The old version stays searchable until the new one is ready.
    assert Chunk.objects.filter(document=document, version=1, is_live=True).exists()
    services.document_index(document_id=document.pk, version=2)
    document.refresh_from_db()
    new = DocumentVersion.objects.get(document=document, version=2)
    assert (document.live_version, new.extractor_version) == (2, extractor_version(HTML))
    assert (new.audience, new.segments) == ("segments", ["summit-club"])
    assert "Free expedited shipping" in new.text
    live = Chunk.objects.get(document=document, is_live=True)
    assert (live.version, live.segments) == (2, ["summit-club"])
    assert AuditEvent.objects.filter(action="knowledge.document.reextracted").count() == 1
    assert services.documents_reextract_outdated() == []  # nothing left: safe to run again


def test_current_or_pending_documents_are_left_alone(tenant):
    current = upload_and_index(tenant, "a.html", A)
    pending = upload(tenant, "b.html", B)
    _outdated(pending)
    assert services.documents_reextract_outdated() == []
    assert Document.objects.get(pk=current.pk).version == 1
    assert Document.objects.get(pk=pending.pk).status == Document.Status.PENDING


def test_a_missing_stored_file_skips_that_document_and_keeps_it_serving(tenant):
    gone = upload_and_index(tenant, "a.html", A)
    kept = upload_and_index(tenant, "b.html", B)
    _outdated(gone)
    _outdated(kept)
    version = DocumentVersion.objects.get(document=gone, version=1)
    version.file.storage.delete(version.file.name)
    assert services.documents_reextract_outdated() == [kept.pk]
    gone.refresh_from_db()
    assert (gone.status, gone.version, gone.live_version) == ("ready", 1, 1)


@pytest.mark.django_db(transaction=True)
def test_two_workers_reextracting_at_once_make_one_new_version(tenant):
    document = upload_and_index(tenant, "a.html", A)
    _outdated(document)
    barrier = threading.Barrier(2)
    results = []

    def run():
        try:
            barrier.wait(30)
            results.append(services.documents_reextract_outdated())
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results, key=len) == [[], [document.pk]]
    assert DocumentVersion.objects.filter(document=document).count() == 2


def test_reextracting_one_tenant_leaves_the_others_documents_alone(tenant, other_tenant):
    mine = upload_and_index(tenant, "a.html", A)
    theirs = upload_and_index(other_tenant, "b.html", B)
    _outdated(mine)
    _outdated(theirs)
    assert services.documents_reextract_outdated(tenant_id=tenant.pk) == [mine.pk]
    assert Document.objects.get(pk=theirs.pk).version == 1


def test_a_change_to_html_extraction_never_reindexes_other_formats(tenant):
    notes = upload_and_index(tenant, "notes.txt", b"Notes\n\nReturn items within 30 days.\n")
    page = upload_and_index(tenant, "page.html", A)
    _outdated(page)  # the HTML extractor changed; the text one did not
    assert services.documents_reextract_outdated() == [page.pk]
    assert Document.objects.get(pk=notes.pk).version == 1


def test_text_files_an_older_text_extractor_made_are_reextracted(tenant):
    notes = upload_and_index(tenant, "notes.rst", b"Notes\n~~~~~\n\nReturn items within 30 days.\n")
    _outdated(notes)  # text extraction 0 read "~~~~~" as text, not as the title's underline
    assert services.documents_reextract_outdated() == [notes.pk]


def test_rows_the_previous_release_inserts_without_the_column_get_version_zero(db):
    """Mid-deploy, old processes insert versions knowing nothing of extractor_version."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_default, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'knowledge_documentversion' AND column_name = 'extractor_version'"
        )
        assert cursor.fetchone() == ("0", "NO")


def test_a_document_an_older_extractor_failed_is_indexed_again_once(tenant):
    document = upload_and_index(tenant, "page.html", A)
    Document.objects.filter(pk=document.pk).update(status=Document.Status.FAILED)
    _outdated(document)  # as if the extractor before this one had failed it
    assert services.documents_reextract_outdated() == [document.pk]
    services.document_index(document_id=document.pk, version=document.version)
    assert Document.objects.get(pk=document.pk).status == Document.Status.READY
    assert services.documents_reextract_outdated() == []


def test_a_document_the_current_extractor_failed_is_not_retried(tenant):
    failed = upload_and_index(tenant, "b.html", b"<html><body><script>x()</script></body></html>")
    assert failed.status == Document.Status.FAILED
    version = DocumentVersion.objects.get(document=failed, version=failed.version)
    assert version.extractor_version == extractor_version(HTML)
    assert services.documents_reextract_outdated() == []


def test_the_command_reindexes_outdated_documents_and_says_how_many(tenant):
    document = upload_and_index(tenant, "a.html", A)
    _outdated(document)
    out = io.StringIO()
    call_command("reindex_outdated", stdout=out)
    assert out.getvalue().startswith("1 documents queued for re-indexing")
    assert Document.objects.get(pk=document.pk).version == 2


def test_reindexing_outdated_documents_is_scheduled_daily(db):
    from django_q.models import Schedule

    schedule = Schedule.objects.get(func="knowledge.tasks.documents_reextract_outdated_task")
    assert (schedule.schedule_type, schedule.repeats) == ("D", -1)
