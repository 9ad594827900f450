"""The one bot reply to a customer message: reserved, taken over when stale, finalized."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations.models import Conversation, Message
from conversations.services.conversations import conversation_summary_due
from conversations.services.messages import message_announce
from supportbot.queue import task_enqueue_on_commit


def reply_reserve(*, customer_message: Message) -> Message | None:
    """Reserve the one official bot reply row; return None if another worker holds it."""
    try:
        with transaction.atomic():
            return Message.objects.create(
                tenant_id=customer_message.tenant_id,
                conversation_id=customer_message.conversation_id,
                role=Message.Role.BOT,
                kind=Message.Kind.ANSWER,
                text="",
                reply_to=customer_message,
                state=Message.State.STREAMING,
            )
    except IntegrityError:
        return None


def reply_reserve_or_take_over(*, customer_message: Message, stale_after) -> Message | None:
    """Reserve the reply row, or take over one a dead worker left unfinished.

    The takeover is a conditional UPDATE on the row's (state, updated_at) as read: when two
    workers race for the same stale reply, the database lets exactly one of them win.
    Return None when another worker holds a fresh reservation.
    """
    reply = reply_reserve(customer_message=customer_message)
    if reply is not None:
        return reply
    existing = Message.objects.filter(reply_to=customer_message, role=Message.Role.BOT).first()
    now = timezone.now()
    if (
        existing is None
        or existing.state == Message.State.DELIVERED
        or now - existing.updated_at <= stale_after
    ):
        return None
    taken = Message.objects.filter(
        pk=existing.pk, state=existing.state, updated_at=existing.updated_at
    ).update(updated_at=now, meta={**existing.meta, "taken_over_at": now.isoformat()})
    if not taken:
        return None  # another worker took it over first
    existing.refresh_from_db()
    return existing


@transaction.atomic
def reply_finalize(
    *,
    reply: Message,
    text: str,
    kind: str,
    citations: list[dict],
    customer_state: str,
    stats: dict[str, Any] | None = None,
) -> Message:
    """Save the final reply text and stats, mark both messages final, announce on commit."""
    stats = stats or {}
    reply.text = text
    reply.kind = kind
    reply.citations = citations
    reply.state = Message.State.DELIVERED
    for field in (
        "model",
        "worker",
        "prompt_version",
        "prompt_tokens",
        "completion_tokens",
        "ttft_ms",
        "total_ms",
        "tool_outcome_ref",
    ):
        if field in stats and stats[field] is not None:
            setattr(reply, field, stats[field])
    reply.meta = {**reply.meta, **stats.get("meta", {})}
    reply.save()
    Message.objects.filter(pk=reply.reply_to_id).update(
        state=customer_state, updated_at=timezone.now()
    )
    Conversation.objects.filter(pk=reply.conversation_id).update(last_message_at=timezone.now())
    message_announce(reply)
    if conversation_summary_due(conversation_id=reply.conversation_id):
        conversation_id = reply.conversation_id
        task_enqueue_on_commit("conversations.tasks.conversation_summarize_task", conversation_id)
    return reply


@contextlib.contextmanager
def conversation_while_bot_owns(*, conversation_id: int) -> Iterator[bool]:
    """Hold who owns the conversation fixed for the block; yield whether the bot owns it.

    The row is read FOR KEY SHARE: an agent's claim (`conversation_set_owner`, FOR UPDATE)
    waits until the block ends, and its `conversation.owner` event is sent on its commit, so
    whatever the bot sends inside the block reaches every client before the agent's takeover.
    Once an agent owns the conversation, the block yields False: send nothing.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT owner FROM conversations_conversation WHERE id = %s FOR KEY SHARE",
                [conversation_id],
            )
            row = cursor.fetchone()
        yield row is not None and row[0] == Conversation.Owner.BOT


@transaction.atomic
def reply_withdraw(*, reply: Message) -> None:
    """Drop a reply that an agent's takeover interrupted before any of its words were sent.

    The customer message is marked handed off (the agent answers it; the reply sweeper never
    re-drives it, even after the conversation goes back to the bot).
    """
    Message.objects.filter(pk=reply.pk, state=Message.State.STREAMING).delete()
    Message.objects.filter(pk=reply.reply_to_id).update(
        state=Message.State.HANDED_OFF, updated_at=timezone.now()
    )
