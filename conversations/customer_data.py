"""A customer's data as a whole: erasure, retention and export (access requests).

Erasing deletes the customer and, by the database's cascades, their conversations, messages,
feedback, summaries, handoffs (summaries, contact emails), internal notes and action requests
(arguments, results); cached answers that their turns put in the answer cache are dropped
after the commit. The audit trail keeps that it happened, by whom, and the counts — never
content, and the external id only as a keyed hash (so a repeated erasure is recognised).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from conversations.models import Conversation, Customer, Message
from supportbot import encryption
from supportbot.errors import NotFound
from supportbot.idempotency import idempotency_forget
from supportbot.models import AuditEvent, Tenant
from supportbot.services import Actor, audit_event_record

logger = logging.getLogger(__name__)

# Rows erased, by model label → the name the API reports.
ERASED_NAMES = {
    "conversations.Customer": "customers",
    "conversations.Conversation": "conversations",
    "conversations.Message": "messages",
    "conversations.Feedback": "feedback",
    "handoffs.Handoff": "handoffs",
    "handoffs.InternalNote": "notes",
    "actions.ActionRequest": "actions",
    "actions.LimitLock": "limit_locks",
    "analytics.ConversationOutcome": "outcomes",
}
CACHE_INDEX_TTL_S = 24 * 3600 + 60  # a little longer than the answers it lists


def _cache_index_key(customer_id: int) -> str:
    return f"answer-src:{customer_id}"


def answer_cache_remember(*, customer_id: int, key: str) -> None:
    """Note that `key` was cached from a turn of this customer (so erasure can drop it)."""
    index = _cache_index_key(customer_id)
    keys = cache.get(index) or []
    if key not in keys:
        cache.set(index, [*keys, key][-200:], CACHE_INDEX_TTL_S)


def _plausible(external_id: str) -> bool:
    """Could a customer have this id? (A NUL byte or an overlong id cannot be stored.)"""
    return 0 < len(external_id) <= 200 and "\x00" not in external_id


def _external_ref(tenant: Tenant, external_id: str) -> str:
    return encryption.blind_index(tenant_id=tenant.pk, purpose="customer", value=external_id)


def _counts(deleted: dict[str, int]) -> dict[str, int]:
    out = Counter()
    for label, n in deleted.items():
        out[ERASED_NAMES.get(label, label)] += n
    return dict(out)


def _erase(tenant: Tenant, customers: list[int], conversations: list[int]) -> dict[str, int]:
    """Delete the given customers and conversations (locked by the caller); return counts.

    The saved partner responses (Idempotency-Key replays, kept a day) of these conversations
    go too: their bodies hold the conversations' text. They are found by their conversation
    link, so no other customer's response is read."""
    totals: Counter = Counter()
    totals["saved_responses"] = idempotency_forget(
        tenant_id=tenant.pk, conversation_ids=conversations
    )
    if conversations:
        totals.update(_counts(Conversation.objects.filter(pk__in=conversations).delete()[1]))
    if customers:
        totals.update(_counts(Customer.objects.filter(pk__in=customers).delete()[1]))
    return dict(totals)


def _drop_cached_answers_on_commit(customer_id: int) -> int:
    keys = cache.get(_cache_index_key(customer_id)) or []

    def drop() -> None:
        try:
            cache.delete_many([*keys, _cache_index_key(customer_id)])
        except Exception:  # the cache is a rebuildable copy; entries expire within a day
            logger.exception("dropping cached answers of customer %s failed", customer_id)

    transaction.on_commit(drop)
    return len(keys)


@transaction.atomic
def customer_erase(*, tenant: Tenant, external_id: str, actor: Actor) -> dict[str, Any]:
    """Erase everything of the tenant's customer `external_id`; return the counts.

    Idempotent: a customer erased before returns `already_erased` (recognised by the keyed
    hash the audit trail keeps). Raise NotFound for an id this tenant never had. The customer
    and its conversations are locked first, so a message arriving meanwhile waits and then
    finds its conversation gone (a clean 404), never half a customer.
    """
    if not _plausible(external_id):
        raise NotFound("No such customer.")
    ref = _external_ref(tenant, external_id)
    customer = (
        Customer.objects.select_for_update()
        .filter(tenant=tenant, external_id=external_id)
        .only("pk")
        .first()
    )
    if customer is None:
        refs = encryption.blind_index_candidates(
            tenant_id=tenant.pk, purpose="customer", value=external_id
        )
        if AuditEvent.objects.filter(
            tenant=tenant, action="customer.erased", target_type="customer", target_id__in=refs
        ).exists():
            return {"external_id": external_id, "already_erased": True, "erased": {}}
        raise NotFound("No such customer.")
    conversations = list(
        Conversation.objects.select_for_update()
        .filter(tenant=tenant, customer=customer)
        .values_list("pk", flat=True)
    )
    cached = _drop_cached_answers_on_commit(customer.pk)
    counts = _erase(tenant, [customer.pk], conversations)
    counts["cached_answers"] = cached
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="customer.erased",
        target_type="customer",
        target_id=ref,
        data={"counts": counts},
    )
    return {"external_id": external_id, "already_erased": False, "erased": counts}


def conversations_erase_expired(
    *, now: datetime | None = None, batch_size: int = 200
) -> dict[str, dict[str, int]]:
    """Erase conversations idle longer than their tenant's `retention_days`; return counts by
    tenant slug. Each batch commits on its own (a crash keeps what was erased, loses nothing
    else); the audit trail gets one event per tenant and run."""
    now = now or timezone.now()
    report: dict[str, dict[str, int]] = {}
    for tenant in Tenant.objects.filter(retention_days__isnull=False):
        cutoff = now - timedelta(days=tenant.retention_days)
        totals: Counter = Counter()
        while True:
            with transaction.atomic():
                ids = list(
                    Conversation.objects.select_for_update(skip_locked=True)
                    .filter(tenant=tenant)
                    .annotate(active_at=Coalesce(F("last_message_at"), F("created_at")))
                    .filter(active_at__lt=cutoff)
                    .values_list("pk", flat=True)[:batch_size]
                )
                if not ids:
                    break
                totals.update(_erase(tenant, [], ids))
        if totals:
            report[tenant.slug] = dict(totals)
            audit_event_record(
                tenant=tenant,
                actor=Actor.system("retention"),
                action="retention.erased",
                target_type="tenant",
                target_id=tenant.pk,
                data={"retention_days": tenant.retention_days, "counts": dict(totals)},
            )
    return report


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@transaction.atomic
def customer_export(*, tenant: Tenant, external_id: str, actor: Actor) -> dict[str, Any]:
    """Everything stored about the tenant's customer `external_id`, decrypted, as JSON-ready
    data (an access request); the export is audited (counts only). NotFound if unknown."""
    customer = (
        Customer.objects.filter(tenant=tenant, external_id=external_id).first()
        if _plausible(external_id)
        else None
    )
    if customer is None:
        raise NotFound("No such customer.")
    conversations = []
    counts: Counter = Counter()
    for conversation in Conversation.objects.filter(tenant=tenant, customer=customer).order_by(
        "created_at", "pk"
    ):
        exported = _conversation_export(conversation)
        counts.update(exported.counts)
        conversations.append(exported.data)
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="customer.exported",
        target_type="customer",
        target_id=_external_ref(tenant, external_id),
        data={"counts": dict(counts)},
    )
    return {
        "customer": _customer_view(customer),
        "conversations": conversations,
        "exported_at": timezone.now().isoformat(),
    }


@dataclass(frozen=True)
class _ConversationExport:
    data: dict[str, Any]  # the conversation as the export shows it
    counts: dict[str, int]  # its rows by kind (what the audit records)


def _conversation_export(conversation: Conversation) -> _ConversationExport:
    """One conversation with its messages, feedback, handoffs, notes and actions."""
    messages = list(conversation.messages.select_related("feedback").order_by("pk"))
    feedback = [m.feedback for m in messages if hasattr(m, "feedback")]
    handoffs = list(conversation.handoffs.order_by("pk"))
    notes = list(conversation.notes.order_by("pk"))
    actions = list(conversation.action_requests.order_by("pk"))
    counts = {
        "conversations": 1,
        "messages": len(messages),
        "feedback": len(feedback),
        "handoffs": len(handoffs),
        "notes": len(notes),
        "actions": len(actions),
    }
    data = {
        "id": conversation.pk,
        "channel": conversation.channel,
        "state": conversation.state,
        "created_at": _iso(conversation.created_at),
        "summary": conversation.summary,
        "messages": [_message_view(m) for m in messages],
        "feedback": [
            {"message_id": f.message_id, "rating": f.rating, "comment": f.comment} for f in feedback
        ],
        "handoffs": [_handoff_view(h) for h in handoffs],
        "notes": [{"text": n.text, "created_at": _iso(n.created_at)} for n in notes],
        "actions": [_action_view(a) for a in actions],
    }
    return _ConversationExport(data=data, counts=counts)


def _customer_view(customer: Customer) -> dict[str, Any]:
    return {
        "external_id": customer.external_id,
        "name": customer.name,
        "email": customer.email,
        "verified": customer.verified,
        "segments": customer.segments,
        "created_at": _iso(customer.created_at),
    }


def _message_view(m: Message) -> dict[str, Any]:
    return {
        "id": m.pk,
        "role": m.role,
        "kind": m.kind,
        "text": m.text,
        "created_at": _iso(m.created_at),
    }


def _handoff_view(h: Any) -> dict[str, Any]:
    return {
        "id": h.pk,
        "state": h.state,
        "reason": h.reason,
        "summary": h.summary,
        "contact_email": h.customer_email,
        "created_at": _iso(h.created_at),
    }


def _action_view(a: Any) -> dict[str, Any]:
    return {
        "id": a.pk,
        "tool": a.tool,
        "state": a.state,
        "arguments": a.arguments,
        "result": a.result,
        "created_at": _iso(a.created_at),
    }
