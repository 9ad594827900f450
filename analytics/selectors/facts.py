"""What an outcome is decided from, and which conversations are due for one."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import F, Q
from django.db.models.functions import Coalesce

from actions.models import ActionRequest
from analytics.decide import Facts, Reply, is_confirmation
from conversations.models import Conversation, Feedback, Message
from handoffs.models import Handoff
from supportbot.models import Tenant


def tenants_active() -> list[Tenant]:
    return list(Tenant.objects.filter(is_active=True).order_by("pk"))


def conversations_idle(*, tenant: Tenant, now: datetime, limit: int) -> list[int]:
    """Ids of the tenant's conversations quiet for its idle time that need an outcome: none
    yet, or one decided before the conversation went on (and not final)."""
    cutoff = now - timedelta(minutes=tenant.conversation_idle_minutes)
    last = Coalesce("last_message_at", "created_at")
    return list(
        Conversation.objects.filter(tenant=tenant)
        .annotate(last=last)
        .filter(last__lte=cutoff)
        .filter(Q(outcome__isnull=True) | Q(outcome__final=False, outcome__ended_at__lt=F("last")))
        .order_by("last", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def _replies(conversation: Conversation) -> tuple[list[Reply], int | None]:
    """The bot replies that reached the customer, and the id of the first of them."""
    ratings = dict(
        Feedback.objects.filter(
            tenant_id=conversation.tenant_id, message__conversation=conversation
        ).values_list("message_id", "rating")
    )
    rows = (
        Message.objects.filter(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            role=Message.Role.BOT,
            state=Message.State.DELIVERED,
        )
        .order_by("pk")
        .values_list("pk", "kind", "meta")
    )
    replies = [
        Reply(
            kind=kind,
            strength=str((meta or {}).get("strength") or ""),
            path=str((meta or {}).get("path") or ""),
            rating=ratings.get(pk, ""),
        )
        for pk, kind, meta in rows
    ]
    return replies, (rows[0][0] if rows else None)


def _thanked_after(conversation: Conversation, first_reply_id: int | None) -> bool:
    """Did the customer thank or confirm after the bot's first reply? (Texts are unsealed by
    the message model, read here and dropped.)"""
    if first_reply_id is None:
        return False
    texts = Message.objects.filter(
        tenant_id=conversation.tenant_id,
        conversation=conversation,
        role=Message.Role.CUSTOMER,
        pk__gt=first_reply_id,
    ).only("text")
    return any(is_confirmation(m.text) for m in texts)


def conversation_facts(*, conversation: Conversation) -> Facts:
    """Gather the facts `decide.decide` reads for one conversation."""
    replies, first_reply_id = _replies(conversation)
    handoff_reasons = list(
        Handoff.objects.filter(tenant_id=conversation.tenant_id, conversation=conversation)
        .order_by("created_at", "pk")
        .values_list("reason", flat=True)
    )
    succeeded = ActionRequest.objects.filter(
        tenant_id=conversation.tenant_id,
        conversation=conversation,
        state=ActionRequest.State.SUCCEEDED,
    ).count()
    return Facts(
        replies=replies,
        handoff_reasons=handoff_reasons,
        human_owner=conversation.owner == Conversation.Owner.HUMAN,
        actions_succeeded=succeeded,
        thanked_after_answer=_thanked_after(conversation, first_reply_id),
    )


def first_questions(*, tenant: Tenant, conversation_ids: list[int]) -> dict[int, Message]:
    """Each conversation's first customer message (text unsealed on read, never stored)."""
    rows = (
        Message.objects.filter(
            tenant=tenant, conversation_id__in=conversation_ids, role=Message.Role.CUSTOMER
        )
        .order_by("conversation_id", "pk")
        .distinct("conversation_id")
    )
    return {m.conversation_id: m for m in rows}
