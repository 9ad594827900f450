import json
from pathlib import Path

import pytest
from django.core.files.base import ContentFile

from demo.pdf import pdf_bytes
from knowledge import services
from knowledge.models import Document
from supportbot.services import Actor

HELPCENTER = Path(__file__).resolve().parents[2] / "demo" / "helpcenter"


def upload(tenant, name: str, data: bytes, **kwargs) -> Document:
    """Upload through the service as the system (indexing is not run)."""
    return services.document_upload(
        tenant=tenant, file=ContentFile(data, name=name), actor=Actor.system("test"), **kwargs
    )


def upload_and_index(tenant, name: str, data: bytes, **kwargs) -> Document:
    document = upload(tenant, name, data, **kwargs)
    return services.document_index(document_id=document.pk, version=document.version)


@pytest.fixture
def warranty_pdf() -> bytes:
    return (HELPCENTER / "warranty.pdf").read_bytes()


@pytest.fixture
def shipping_html() -> bytes:
    return (HELPCENTER / "shipping-and-delivery.html").read_bytes()


@pytest.fixture
def blank_pdf() -> bytes:
    return pdf_bytes([], drawing_only=True)


@pytest.fixture
def demo_helpcenter(tenant):
    """The demo help center uploaded and indexed for `tenant` (as seed_demo + qcluster do)."""
    manifest = json.loads((HELPCENTER / "manifest.json").read_text())
    documents = []
    for entry in manifest["documents"]:
        documents.append(
            upload_and_index(
                tenant,
                entry["file"],
                (HELPCENTER / entry["file"]).read_bytes(),
                title=entry["title"],
                audience=entry["audience"],
                segments=entry.get("segments", []),
            )
        )
    assert all(d.status == Document.Status.READY for d in documents), [
        (d.title, d.error) for d in documents
    ]
    return documents
