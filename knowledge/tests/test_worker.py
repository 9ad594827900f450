"""Upload -> ready through a real django-q2 cluster (`manage.py qcluster` subprocess)."""

import time
from pathlib import Path

import psutil
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django_q.models import Task
from rest_framework.test import APIClient

from knowledge import services
from knowledge.models import Chunk, Document
from supportbot.services import api_key_create

from . import poison

ROOT = Path(__file__).resolve().parents[2]


def _upload(client, name: str, data: bytes, content_type: str = "application/octet-stream") -> int:
    r = client.post(
        "/api/v1/knowledge-documents",
        {"file": SimpleUploadedFile(name, data, content_type=content_type)},
    )
    assert r.status_code == 202, r.content
    return r.json()["id"]


def _wait_ready(client, document_id: int, process, timeout: float = 180) -> dict:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        body = client.get(f"/api/v1/knowledge-documents/{document_id}").json()
        seen.append(body["status"])
        if body["status"] in ("ready", "failed"):
            return body
        if process.poll() is not None:
            log = process.log_path.read_text()[-2000:]
            pytest.fail(f"qcluster exited with {process.returncode}:\n{log}")
        time.sleep(0.5)
    log = process.log_path.read_text()[-2000:]
    pytest.fail(f"document {document_id} not ready after {timeout}s ({seen[-3:]}):\n{log}")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_pdf_and_html_uploads_become_ready_through_the_qcluster_worker(
    api_client, tenant, qcluster, warranty_pdf, shipping_html
):
    ids = {}
    for name, data, content_type in [
        ("warranty.pdf", warranty_pdf, "application/pdf"),
        ("shipping.html", shipping_html, "text/html"),
    ]:
        r = api_client.post(
            "/api/v1/knowledge-documents",
            {"file": SimpleUploadedFile(name, data, content_type=content_type)},
        )
        assert r.status_code == 202, r.content
        ids[name] = r.json()["id"]
    for name, document_id in ids.items():
        body = _wait_ready(api_client, document_id, qcluster)
        assert body["status"] == "ready", (name, body["error"])
        assert body["chunks_total"] > 3
    r = api_client.get("/api/v1/search", {"q": "how do I file a warranty claim"})
    top = r.json()["passages"][0]
    assert top["document_id"] == ids["warranty.pdf"]
    assert top["heading_path"][-1] == "How to file a warranty claim"
    assert Chunk.objects.filter(document_id=ids["shipping.html"], is_live=True).exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_poison_uploads_fail_cleanly_and_the_worker_goes_on_indexing(
    api_client, tenant, qcluster, shipping_html
):
    uploads = [
        ("bomb.pdf", poison.decompression_bomb_pdf(), "application/pdf"),
        ("deep.html", poison.nested_divs_html(20_000), "text/html"),
        ("shipping.html", shipping_html, "text/html"),
    ]
    ids = {}
    for name, data, content_type in uploads:
        r = api_client.post(
            "/api/v1/knowledge-documents",
            {"file": SimpleUploadedFile(name, data, content_type=content_type)},
        )
        assert r.status_code == 202, r.content
        ids[name] = r.json()["id"]
    outcomes = {name: _wait_ready(api_client, ids[name], qcluster) for name in ids}
    assert outcomes["bomb.pdf"]["status"] == "failed"
    assert "expands beyond the safe limits" in outcomes["bomb.pdf"]["error"]
    assert outcomes["deep.html"]["status"] == "failed"
    assert "too deeply nested" in outcomes["deep.html"]["error"]
    assert outcomes["shipping.html"]["status"] == "ready", outcomes["shipping.html"]["error"]
    assert qcluster.poll() is None  # the one worker process is still serving


def _busiest_descendant(process) -> psutil.Process:
    """The cluster's process burning CPU (the worker indexing), measured over half a second."""
    family = psutil.Process(process.pid).children(recursive=True)
    for child in family:
        child.cpu_percent(None)
    time.sleep(0.5)
    return max(family, key=lambda child: child.cpu_percent(None))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_indexing_leaves_the_document_ready_or_failed_never_stuck(
    api_client, tenant, qcluster, settings
):
    """SIGKILL the worker while it embeds; q2 starts a new one, the stuck-document sweep
    re-enqueues the document (as its schedule does), and it ends ready (or failed), not stuck."""
    body = "\n\n".join(
        f"## Section {n}\n"
        + " ".join(f"Paragraph {n} explains returns rule {m}." for m in range(40))
        for n in range(200)
    )
    r = api_client.post(
        "/api/v1/knowledge-documents",
        {"file": SimpleUploadedFile("long.md", f"# Long guide\n\n{body}".encode())},
    )
    assert r.status_code == 202, r.content
    document_id = r.json()["id"]
    deadline = time.monotonic() + 120
    while Document.objects.get(pk=document_id).status != Document.Status.EMBEDDING:
        assert time.monotonic() < deadline, "indexing never reached the embedding step"
        assert qcluster.poll() is None
        time.sleep(0.2)
    victim = _busiest_descendant(qcluster)
    victim.kill()
    victim.wait(10)
    assert Document.objects.get(pk=document_id).status not in Document.FINAL_STATUSES

    settings.KNOWLEDGE_STUCK_AFTER_SECONDS = 1
    time.sleep(1.5)
    assert services.documents_sweep_stuck() == [document_id]
    final = _wait_ready(api_client, document_id, qcluster, timeout=300)
    assert final["status"] in ("ready", "failed")
    assert final["status"] == "ready", final["error"]
    assert qcluster.poll() is None  # the cluster lived on with a new worker


MIB = 1024 * 1024
# The poison corpus through the upload API: file, and what its document's error says.
POISON_UPLOADS = {
    "font-bomb.pdf": (poison.font_bomb_pdf, "(decompressed data too large)"),
    "content-bomb.pdf": (poison.decompression_bomb_pdf, "(decompressed data too large)"),
    "image-bomb.pdf": (poison.image_bomb_pdf, "100,000 x 100,000 pixels"),
    "deep.html": (lambda: poison.nested_divs_html(20_000), "too deeply nested"),
    "tiny-elements.html": (lambda: poison.tiny_elements_html(4 * MIB), "memory limit"),
    "slow.md": (lambda: poison.slow_markdown(2 * MIB), "it took longer than 5 s"),
    "one-line.txt": (lambda: poison.single_line_text(MIB), "a line longer than"),
}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "qcluster",
    [
        {
            "Q_WORKERS": "2",
            "KNOWLEDGE_EXTRACT_TIMEOUT_SECONDS": "5",
            "KNOWLEDGE_EXTRACT_MEMORY_MB": "160",
            "INDEXING_SLOTS_PER_TENANT": "1",
        }
    ],
    indirect=True,
)
def test_a_tenants_poison_uploads_all_fail_with_reasons_while_another_tenant_indexes(
    api_client, tenant, other_tenant, qcluster, shipping_html
):
    """Tenant A's bombs take one worker at a time (its slot); tenant B's upload, made after
    all of them, is indexed by the other worker while A's still wait, pending: several of A's
    documents end after B's is ready (without slots both workers take A's in upload order and
    B's comes last)."""
    uploads = {name: make() for name, (make, _) in POISON_UPLOADS.items()}
    uploads |= {f"slow-{n}.md": poison.slow_markdown(MIB) for n in range(4)}
    poison_ids = {name: _upload(api_client, name, data) for name, data in uploads.items()}
    # A gzip inside a gzip is refused at upload: .gz is the one archive format accepted.
    r = api_client.post(
        "/api/v1/knowledge-documents",
        {"file": SimpleUploadedFile("bomb.md.gz", poison.gzip_bomb(layers=1))},
    )
    assert r.status_code == 413, r.content
    r = api_client.post(
        "/api/v1/knowledge-documents",
        {"file": SimpleUploadedFile("nested.md.gz.gz", poison.gzip_bomb(layers=2))},
    )
    assert r.status_code == 400, r.content

    _, raw = api_key_create(tenant=other_tenant, name="partner-b")
    other_client = APIClient()
    other_client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    other_id = _upload(other_client, "shipping.html", shipping_html, "text/html")
    other = _wait_ready(other_client, other_id, qcluster)
    assert other["status"] == "ready", other["error"]

    for name, document_id in poison_ids.items():
        body = _wait_ready(api_client, document_id, qcluster)
        assert body["status"] == "failed", (name, body)
        reason = POISON_UPLOADS[name][1] if name in POISON_UPLOADS else "took longer than 5 s"
        assert reason in body["error"], (name, body["error"])
    # q2's own records: B's document was indexed by a task that started before most of A's
    # documents were (their first tasks found the slot taken and returned at once).
    runs = [t for t in Task.objects.filter(func=services.INDEX_TASK) if t.result != "pending"]
    started = {t.args[0]: t.started for t in runs}
    after_b = [n for n, pk in poison_ids.items() if started[pk] > started[other_id]]
    assert len(after_b) >= 2, (
        f"tenant A held both workers until tenant B's upload got one: {started}"
    )
    assert not Chunk.objects.filter(document_id__in=poison_ids.values()).exists()
    assert qcluster.poll() is None  # the workers lived through every bomb
