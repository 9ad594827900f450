"""A tenant's share of the indexing workers: at most INDEXING_SLOTS_PER_TENANT of its documents
index at once.

The q2 workers are shared by every tenant and by the sweeps (refund reconciliation, recovery of
unanswered messages); sixty uploads from one partner key used to hold them for an hour. A slot
is not a lock that a dead worker could keep: it is a document of the tenant in `extracting` or
`embedding` that changed within KNOWLEDGE_STUCK_AFTER_SECONDS (a killed run's document stops
counting when the stuck-document sweep would re-enqueue it). A run claims its slot by moving its
document to `extracting` under a per-tenant transaction-level advisory lock, so two runs racing
for the last slot cannot both win (`indexing_slot_claim`).

A run that finds no free slot returns at once, leaving its document `pending`: the worker goes
on to the next task. Whoever frees a slot (a run that ends ready or failed, or a task that
finds nothing to do) enqueues the tenant's oldest pending documents, one per free slot
(`indexing_slots_wake`); a wake lost to a crash is made up by the sweep.
"""

from __future__ import annotations

import enum
import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from knowledge.models import Document
from knowledge.services.documents import document_index_enqueue

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock(namespace, tenant id): the namespace keeps these locks apart from any
# other advisory lock keyed by a tenant id.
LOCK_NAMESPACE = 0x6B6E  # "kn"
ACTIVE_STATUSES = (Document.Status.EXTRACTING, Document.Status.EMBEDDING)


class Claim(enum.Enum):
    CLAIMED = "claimed"  # the document is ours to index (now `extracting`)
    BUSY = "busy"  # the tenant's slots are taken: the document waits, pending
    RUNNING = "running"  # another run is extracting this very document
    GONE = "gone"  # superseded, deleted or finished meanwhile


def _active(tenant_id: int):
    """The tenant's documents that hold a slot: indexing, and changed recently."""
    fresh = timezone.now() - timedelta(seconds=settings.KNOWLEDGE_STUCK_AFTER_SECONDS)
    return Document.objects.filter(
        tenant_id=tenant_id, status__in=ACTIVE_STATUSES, updated_at__gte=fresh
    )


def _tenant_lock(tenant_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, tenant_id])


@transaction.atomic
def indexing_slot_claim(*, document: Document, version: int) -> Claim:
    """Take one of the tenant's slots for `document` at `version` and mark it `extracting`
    (its attempt counted), unless the tenant's slots are all held by other documents (BUSY)
    or another run is extracting it now (RUNNING). A document that already holds a slot (a
    continuation of a long run) keeps it."""
    _tenant_lock(document.tenant_id)
    active = _active(document.tenant_id)
    if active.filter(pk=document.pk, status=Document.Status.EXTRACTING).exists():
        return Claim.RUNNING
    slots = settings.INDEXING_SLOTS_PER_TENANT
    if slots > 0 and active.exclude(pk=document.pk).count() >= slots:
        return Claim.BUSY
    claimed = (
        Document.objects.filter(pk=document.pk, version=version)
        .exclude(status=Document.Status.READY, live_version=version)
        .exclude(status=Document.Status.FAILED)
        .update(
            status=Document.Status.EXTRACTING,
            attempts=document.attempts + 1,
            error="",
            updated_at=timezone.now(),
        )
    )
    return Claim.CLAIMED if claimed else Claim.GONE


@transaction.atomic
def indexing_slots_wake(*, tenant_id: int) -> list[int]:
    """Enqueue (on commit) the tenant's oldest pending documents, one per free slot; return
    their ids. A document enqueued twice is harmless: the second run finds it taken."""
    slots = settings.INDEXING_SLOTS_PER_TENANT
    if slots <= 0:
        return []  # no limit: every pending document has its own task
    _tenant_lock(tenant_id)
    free = slots - _active(tenant_id).count()
    if free <= 0:
        return []
    waiting = list(
        Document.objects.filter(tenant_id=tenant_id, status=Document.Status.PENDING).order_by(
            "updated_at", "pk"
        )[:free]
    )
    for document in waiting:
        document_index_enqueue(document)
    if waiting:
        logger.info(
            "knowledge tenant %s: slots free, enqueued %s", tenant_id, [d.pk for d in waiting]
        )
    return [d.pk for d in waiting]
