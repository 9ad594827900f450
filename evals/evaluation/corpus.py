"""Load an eval set's knowledge as a tenant of its own, through the normal upload path."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.core.files.base import ContentFile
from django.db import transaction

from knowledge import selectors as knowledge_selectors
from knowledge import services as knowledge_services
from knowledge.models import Document
from supportbot.errors import ApplicationError
from supportbot.models import Tenant
from supportbot.services import Actor, tenant_create

ACTOR = Actor.system("eval_answers")


@dataclass
class CorpusLoad:
    tenant: Tenant
    created: int
    changed: int
    failed: list[str]


@transaction.atomic
def _documents_upload(*, tenant: Tenant, manifest: dict, root: Path) -> tuple[int, int]:
    created = changed = 0
    for entry in manifest["documents"]:
        path = root / entry["file"]
        upload = ContentFile(path.read_bytes(), name=path.name)
        existing = knowledge_selectors.document_find_by_title(tenant=tenant, title=entry["title"])
        if existing is None:
            knowledge_services.document_upload(
                tenant=tenant,
                file=upload,
                title=entry["title"],
                audience=entry.get("audience", Document.Audience.PUBLIC),
                segments=entry.get("segments", []),
                actor=ACTOR,
            )
            created += 1
        else:
            _, new_version = knowledge_services.document_replace_file(
                tenant=tenant, document_id=existing.pk, file=upload, actor=ACTOR
            )
            changed += new_version
    return created, changed


def corpus_tenant_load(*, slug: str, manifest_path: Path | None) -> CorpusLoad:
    """Make the tenant hold exactly the manifest's documents, indexed; idempotent.

    The tenant is created when missing. Documents are matched by title; the same bytes make no
    new version unless an older extractor made the live one. Every document that is not
    ready is indexed here, synchronously, through the same `document_index` the background
    workers run (whichever runs second does nothing).
    """
    tenant = Tenant.objects.filter(slug=slug).first()
    if manifest_path is None:
        if tenant is None:
            raise ApplicationError(f"No tenant {slug!r}; run `manage.py seed_demo` first.")
        created = changed = 0
    else:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if tenant is None:
            tenant = tenant_create(slug=slug, name=manifest.get("tenant_name", slug), actor=ACTOR)
        created, changed = _documents_upload(
            tenant=tenant, manifest=manifest, root=manifest_path.parent
        )
    # Documents an older extractor made are indexed again, as an upgrade does it.
    knowledge_services.documents_reextract_outdated(tenant_id=tenant.pk)
    for document in Document.objects.filter(tenant=tenant).exclude(status=Document.Status.READY):
        knowledge_services.document_index(document_id=document.pk, version=document.version)
    failed = [
        f"{d.title}: {d.error}"
        for d in Document.objects.filter(tenant=tenant).exclude(status=Document.Status.READY)
    ]
    return CorpusLoad(tenant=tenant, created=created, changed=changed, failed=failed)
