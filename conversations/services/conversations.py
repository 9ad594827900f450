"""Conversation state: owner, counters (atomic, in the database) and the rebuildable summary."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Subquery
from django.db.models.functions import Coalesce

from conversations import events
from conversations.models import Conversation, Customer, Message
from supportbot import encryption
from supportbot.errors import NotFound
from supportbot.models import Tenant

SUMMARY_KEEP_RECENT = 6
SUMMARY_EVERY = 6


@transaction.atomic
def conversation_start(
    *, tenant: Tenant, customer: Customer, channel: str = Conversation.Channel.WEB
) -> Conversation:
    if customer.tenant_id != tenant.pk:
        raise NotFound("No such customer.")
    return Conversation.objects.create(tenant=tenant, customer=customer, channel=channel)


@transaction.atomic
def conversation_set_owner(*, conversation_id: int, owner: str) -> Conversation:
    """Switch who answers (bot or human) and bump the version; announce it on commit."""
    conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
    if conversation.owner != owner:
        conversation.owner = owner
        conversation.version = F("version") + 1
        conversation.save(update_fields=["owner", "version", "updated_at"])
        conversation.refresh_from_db()
        events.publish_on_commit(
            conversation.pk, events.owner_changed(owner=owner, version=conversation.version)
        )
    return conversation


def conversation_weak_streak_bump(*, conversation_id: int) -> int:
    """Count one more weak-evidence turn (atomically, in the database); return the count."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            weak_evidence_streak=F("weak_evidence_streak") + 1
        )
        return Conversation.objects.values_list("weak_evidence_streak", flat=True).get(
            pk=conversation_id
        )


def conversation_weak_streak_reset(*, conversation_id: int) -> None:
    Conversation.objects.filter(pk=conversation_id, weak_evidence_streak__gt=0).update(
        weak_evidence_streak=0
    )


def conversation_count_model_failure(*, conversation_id: int) -> int:
    """Count one more model failure in the conversation; return the new count."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            model_failures=F("model_failures") + 1
        )
        return Conversation.objects.values_list("model_failures", flat=True).get(pk=conversation_id)


def conversation_set_summary(
    *, conversation_id: int, summary: str, through_message_id: int
) -> None:
    """Store the rebuildable summary of messages up to `through_message_id`."""
    tenant_id = Conversation.objects.values_list("tenant_id", flat=True).get(pk=conversation_id)
    Conversation.objects.filter(pk=conversation_id).update(
        **encryption.seal_fields(
            Conversation,
            tenant_id=tenant_id,
            fields={"summary": summary, "summary_through_message_id": through_message_id},
        )
    )


def conversation_summary_rebuild(*, conversation_id: int) -> str:
    """Summarize every message older than the most recent ones (kept verbatim in prompts).

    Extractive and deterministic: the customer's earlier questions and what the bot or agents
    answered, with the sources titles. Originals are never changed; rebuild at any time.
    """
    messages = list(
        Message.objects.filter(conversation_id=conversation_id)
        .exclude(state=Message.State.STREAMING)
        .exclude(text="")
        .order_by("id")
    )
    older = messages[:-SUMMARY_KEEP_RECENT]
    if not older:
        return ""
    lines = []
    for m in older:
        first = m.text.split("\n", 1)[0][:200]
        if m.role == Message.Role.CUSTOMER:
            lines.append(f"Customer asked: {first}")
        elif m.role == Message.Role.BOT:
            titles = ", ".join(dict.fromkeys(c.get("title", "") for c in m.citations))
            lines.append(f"Bot ({m.kind}){' from ' + titles if titles else ''}: {first}")
        elif m.role == Message.Role.AGENT:
            lines.append(f"Agent {m.author_label}: {first}")
    summary = "\n".join(lines)[-4000:]
    conversation_set_summary(
        conversation_id=conversation_id, summary=summary, through_message_id=older[-1].pk
    )
    return summary


def conversation_summary_due(*, conversation_id: int) -> bool:
    """True when enough messages piled up past the stored summary to rebuild it (one query,
    counting no further than the threshold)."""
    through = Subquery(
        Conversation.objects.filter(pk=conversation_id).values("summary_through_message_id")[:1]
    )
    wanted = SUMMARY_KEEP_RECENT + SUMMARY_EVERY
    newer = Message.objects.filter(conversation_id=conversation_id, pk__gt=Coalesce(through, 0))
    return newer[:wanted].count() >= wanted
