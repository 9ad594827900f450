import gzip
import tracemalloc
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from knowledge import services
from knowledge.models import Chunk, Document
from supportbot.models import AuditEvent
from supportbot.services import api_key_create

from .conftest import upload, upload_and_index

MD = b"# Returns\n\n## Window\n\nReturn items within 30 days of delivery.\n"


def _file(name: str, data: bytes, content_type: str = "") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type or "application/octet-stream")


def test_upload_returns_202_and_enqueues_indexing_on_commit(
    api_client, tenant, django_capture_on_commit_callbacks
):
    with (
        mock.patch("knowledge.services.documents.task_enqueue") as enqueue,
        django_capture_on_commit_callbacks(execute=True),
    ):
        r = api_client.post(
            "/api/v1/knowledge-documents",
            {"file": _file("returns.md", MD), "title": "Returns", "audience": "public"},
        )
    assert r.status_code == 202, r.content
    body = r.json()
    assert (body["title"], body["status"], body["version"]) == ("Returns", "pending", 1)
    enqueue.assert_called_once_with(services.INDEX_TASK, body["id"], 1, group="knowledge-index")
    assert AuditEvent.objects.filter(
        tenant=tenant, action="knowledge.document.uploaded", target_id=str(body["id"])
    ).exists()


def test_status_shows_progress_until_ready(api_client, tenant):
    document = upload(tenant, "returns.md", MD)
    assert api_client.get(f"/api/v1/knowledge-documents/{document.pk}").json()["status"] == (
        "pending"
    )
    services.document_index(document_id=document.pk, version=1)
    body = api_client.get(f"/api/v1/knowledge-documents/{document.pk}").json()
    assert (body["status"], body["live_version"], body["progress_percent"]) == ("ready", 1, 100)
    assert body["chunks_done"] == body["chunks_total"] == 1


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("report.docx", b"PK\x03\x04 binary", "unsupported_type"),
        ("fake.pdf", b"<html>not a pdf</html>", "unsupported_type"),
        ("empty.md", b"", "empty_file"),
        ("blank.txt", b"  \n\n ", "empty_file"),
    ],
)
def test_bad_files_are_rejected_with_a_named_problem(api_client, name, data, code):
    r = api_client.post("/api/v1/knowledge-documents", {"file": _file(name, data)})
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["field"] == "file"
    assert not Document.objects.exists()


def test_file_over_the_limit_is_413(api_client, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 100
    r = api_client.post("/api/v1/knowledge-documents", {"file": _file("big.md", b"x" * 101)})
    assert r.status_code == 413, r.content
    assert r.json()["error"]["code"] == "file_too_large"


def test_missing_file_is_400(api_client):
    r = api_client.post("/api/v1/knowledge-documents", {"title": "No file"})
    assert r.status_code == 400, r.content
    assert r.json()["error"]["field"] == "file"


def test_delete_removes_document_and_chunks(api_client, tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    r = api_client.delete(f"/api/v1/knowledge-documents/{document.pk}")
    assert r.status_code == 204, r.content
    assert not Chunk.objects.filter(document_id=document.pk).exists()
    assert api_client.get(f"/api/v1/knowledge-documents/{document.pk}").status_code == 404
    assert AuditEvent.objects.filter(action="knowledge.document.deleted").count() == 1


def test_other_tenants_document_is_404_for_read_and_delete(api_client, other_tenant):
    theirs = upload(other_tenant, "returns.md", MD)
    assert api_client.get(f"/api/v1/knowledge-documents/{theirs.pk}").status_code == 404
    assert api_client.delete(f"/api/v1/knowledge-documents/{theirs.pk}").status_code == 404
    assert Document.objects.filter(pk=theirs.pk).exists()
    listed = api_client.get("/api/v1/knowledge-documents").json()["results"]
    assert theirs.pk not in {d["id"] for d in listed}


def test_an_agents_browser_session_is_not_a_partner_key(tenant, agent):
    client = APIClient()
    client.force_login(agent)
    r = client.post("/api/v1/knowledge-documents", {"file": _file("a.md", MD)})
    assert r.status_code == 401, r.content
    assert r.json()["error"]["code"] == "not_authenticated"
    assert client.get("/api/v1/knowledge-documents").status_code == 401
    assert not Document.objects.filter(tenant=tenant).exists()


def test_replacing_via_api_creates_a_new_version(api_client, tenant):
    document = upload_and_index(tenant, "returns.md", MD)
    r = api_client.post(
        f"/api/v1/knowledge-documents/{document.pk}/versions",
        {"file": _file("returns.md", MD.replace(b"30", b"45"))},
    )
    assert r.status_code == 202, r.content
    assert (r.json()["version"], r.json()["live_version"], r.json()["status"]) == (2, 1, "pending")


def test_search_api_as_partner_defaults_to_customer_audience(api_client, tenant, agent):
    upload_and_index(tenant, "public.md", b"# Returns\n\nReturn items within 30 days.\n")
    upload_and_index(
        tenant, "internal.md", b"# Playbook\n\nReturn exceptions need a lead.\n", audience="agents"
    )
    r = api_client.get("/api/v1/search", {"q": "return items"})
    assert r.status_code == 200, r.content
    titles = {p["title"] for p in r.json()["passages"]}
    assert titles == {"public"}
    assert r.json()["strength"] in {"strong", "weak", "none"}
    assert r.json()["ambiguous"] is False  # one passage: nothing to be torn between
    refused = api_client.get("/api/v1/search", {"q": "return items", "audience": "agent"})
    assert refused.status_code == 403, refused.content
    assert refused.json()["error"]["field"] == "audience"
    _key, raw = api_key_create(tenant=tenant, name="helpdesk", may_search_agent_documents=True)
    scoped = APIClient()
    scoped.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    as_agent = scoped.get("/api/v1/search", {"q": "return items", "audience": "agent"})
    assert {p["title"] for p in as_agent.json()["passages"]} == {"public", "internal"}


def test_partner_keys_search_only_the_segments_they_were_granted(api_client, tenant):
    upload_and_index(tenant, "public.md", b"# Returns\n\nReturn items within 30 days.\n")
    upload_and_index(
        tenant,
        "vip.md",
        b"# VIP returns\n\nVIP members return items any time.\n",
        audience="segments",
        segments=["vip"],
    )
    refused = api_client.get("/api/v1/search", {"q": "return items", "segments": "vip"})
    assert refused.status_code == 403, refused.content
    assert refused.json()["error"]["field"] == "segments"
    odd = api_client.get("/api/v1/search", {"q": "return items", "segments": "vip,\u00a0,x"})
    assert odd.status_code == 403
    _key, raw = api_key_create(tenant=tenant, name="vip-desk", search_segments=["vip"])
    scoped = APIClient()
    scoped.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    granted = scoped.get("/api/v1/search", {"q": "return items", "segments": "vip"})
    assert {p["title"] for p in granted.json()["passages"]} == {"public", "vip"}
    assert scoped.get("/api/v1/search", {"q": "x", "audience": "agent"}).status_code == 403


def test_search_api_requires_a_query(api_client):
    r = api_client.get("/api/v1/search")
    assert r.status_code == 400, r.content
    assert r.json()["error"]["field"] == "q"


def test_schema_documents_the_knowledge_endpoints(client, db):
    schema = client.get("/api/schema/").content.decode()
    for operation in [
        "knowledge_documents_create",
        "knowledge_documents_retrieve",
        "knowledge_documents_destroy",
        "knowledge_search",
    ]:
        assert operation in schema


# --------------------------------------------------------------------------- gzip uploads

FAQ_RST = (
    b"===\nFAQ\n===\n\nGeneral questions\n~~~~~~~~~~~~~~~~~\n\n"
    b"Refunds reach the original card within 5-10 business days.\n"
)


def test_a_gzipped_text_file_is_indexed_as_the_text_it_holds(api_client, tenant):
    # Debian ships /usr/share/doc/*/FAQ.gz, README.Debian.gz: text files with no extension
    r = api_client.post(
        "/api/v1/knowledge-documents",
        {"file": _file("FAQ.gz", gzip.compress(FAQ_RST), "application/gzip")},
    )
    assert r.status_code == 202, r.content
    document = Document.objects.get(pk=r.json()["id"])
    assert document.title == "FAQ"
    services.document_index(document_id=document.pk, version=1)
    chunks = list(Chunk.objects.filter(document=document))
    assert any("5-10 business days" in c.text for c in chunks)
    assert any(c.heading_path[-1:] == ["General questions"] for c in chunks)


def test_gzipped_html_is_read_as_html_and_every_gzip_member_is_read(api_client, tenant):
    page = b"<html><body><h1>Shipping</h1><p>Orders ship in 2 days.</p>"
    members = gzip.compress(page) + gzip.compress(b"<p>Express ships overnight.</p></body></html>")
    r = api_client.post("/api/v1/knowledge-documents", {"file": _file("shipping.html.gz", members)})
    assert r.status_code == 202, r.content
    document = services.document_index(document_id=r.json()["id"], version=1)
    text = " ".join(Chunk.objects.filter(document=document).values_list("text", flat=True))
    assert "Orders ship in 2 days." in text
    assert "Express ships overnight." in text
    assert "<p>" not in text


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("notes.gz", b"plain text, not gzip", "invalid_gzip"),
        ("notes.txt.gz", gzip.compress(b"Refunds take 5 days. " * 50)[:-20], "invalid_gzip"),
        ("report.docx.gz", gzip.compress(b"PK\x03\x04 binary"), "unsupported_type"),
        ("blank.txt.gz", gzip.compress(b"   \n"), "empty_file"),
        ("nul.gz", gzip.compress(b"text\x00binary"), "unsupported_type"),
    ],
)
def test_bad_gzip_uploads_are_rejected_with_a_named_problem(api_client, name, data, code):
    r = api_client.post("/api/v1/knowledge-documents", {"file": _file(name, data)})
    assert r.status_code == 400, r.content
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["field"] == "file"
    assert not Document.objects.exists()


def test_a_gzip_bomb_is_413_without_inflating_it_whole(api_client, settings):
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 100_000
    bomb = gzip.compress(b"\0" * 50_000_000)  # 49 KB that inflate to 50 MB
    assert len(bomb) < settings.KNOWLEDGE_MAX_UPLOAD_BYTES
    tracemalloc.start()
    try:
        r = api_client.post("/api/v1/knowledge-documents", {"file": _file("bomb.txt.gz", bomb)})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.status_code == 413, r.content
    assert r.json()["error"]["code"] == "file_too_large"
    assert peak < 10_000_000
    assert not Document.objects.exists()
