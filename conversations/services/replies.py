"""The one bot reply to a customer message: reserved, taken over when stale, finalized."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from conversations import events
from conversations.models import Conversation, Message
from conversations.services.conversations import conversation_summary_due
from conversations.services.messages import message_announce, message_as_event
from supportbot.errors import NotFound
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
    """Save the final reply text and stats, mark both messages final, announce on commit.

    Raise NotFound when the conversation was erased while the reply was being composed: the
    reply row is locked first, so an erasure either waits for this commit or has already
    deleted the row (a plain `save()` would then re-insert the reply of an erased customer).
    """
    if not Message.objects.select_for_update().filter(pk=reply.pk).exists():
        raise NotFound("No such conversation.")
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
    Once an agent owns the conversation, the block yields False: send nothing. Raise NotFound
    when the conversation is gone (its customer was erased while the turn ran): the turn ends
    with `not_found` rather than reporting a reply nobody can read.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT owner FROM conversations_conversation WHERE id = %s FOR KEY SHARE",
                [conversation_id],
            )
            row = cursor.fetchone()
        if row is None:
            raise NotFound("No such conversation.")
        yield row[0] == Conversation.Owner.BOT


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


# A customer message still waiting for its answer.
PENDING_STATES = (
    Message.State.RECEIVED,
    Message.State.SEARCHING,
    Message.State.ANSWERING,
    Message.State.CALLING_TOOL,
)


def message_redrive_count(*, message: Message) -> int | None:
    """Count one more re-drive of `message` (as read, with its `redrive_attempts`); return the
    new count, or None when another sweeper counted it first or it is answered meanwhile.

    A conditional UPDATE on the count read: of two sweepers holding the same row, one wins.
    The count is written before the turn runs, so a turn that kills its process counts too.
    """
    counted = Message.objects.filter(
        pk=message.pk,
        role=Message.Role.CUSTOMER,
        state__in=PENDING_STATES,
        redrive_attempts=message.redrive_attempts,
    ).update(redrive_attempts=F("redrive_attempts") + 1, updated_at=timezone.now())
    return message.redrive_attempts + 1 if counted else None


@transaction.atomic
def reply_fail(*, customer_message_id: int, text: str) -> Message | None:
    """End a customer message the bot cannot answer: the message `failed`, its one reply
    (the reserved row, or a new one) delivered as kind `failed` with `text`, announced as
    `answer.completed` on commit. None when it was answered or failed meanwhile (one winner:
    a conditional UPDATE of the message's state).
    """
    message = Message.objects.filter(pk=customer_message_id, role=Message.Role.CUSTOMER).first()
    if message is None:
        return None
    failed = Message.objects.filter(pk=message.pk, state__in=PENDING_STATES).update(
        state=Message.State.FAILED, updated_at=timezone.now()
    )
    if not failed:
        return None
    reply = (
        Message.objects.select_for_update().filter(reply_to=message, role=Message.Role.BOT).first()
    )
    if reply is None:
        reply = Message(
            tenant_id=message.tenant_id,
            conversation_id=message.conversation_id,
            role=Message.Role.BOT,
            reply_to=message,
        )
    reply.text = text
    reply.kind = Message.Kind.FAILED
    reply.citations = []
    reply.state = Message.State.DELIVERED
    reply.meta = {**(reply.meta or {}), "redrive_attempts": message.redrive_attempts}
    reply.save()
    Conversation.objects.filter(pk=message.conversation_id).update(last_message_at=timezone.now())
    events.publish_on_commit(
        message.conversation_id, events.answer_completed(message_as_event(reply))
    )
    return reply
