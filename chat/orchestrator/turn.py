"""One message, end to end: save → deterministic signals → tools → search → cache →
generation within a budget (or extractive) → finish. Every step is in its own module: where a
turn runs (`slots`), the help-center answer (`knowledge_answer`, weak evidence: `weak`)."""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from actions import intents as action_intents
from chat import intents, metrics
from chat.orchestrator import tools
from chat.orchestrator.base import Emit, Outcome, Turn, TurnEvents, db, noop
from chat.orchestrator.handoff import hand_off
from chat.orchestrator.knowledge_answer import knowledge_answer
from chat.orchestrator.slots import own_thread, receiving
from conversations import events, selectors, services
from conversations.models import Conversation, Message
from handoffs.models import Handoff
from supportbot.observability import tracing


def stale_reply_after() -> timedelta:
    """How long an unfinished reply may sit before another worker takes it over."""
    return timedelta(seconds=settings.ANSWER_STALE_AFTER_S)


SIGNAL_REASONS = {
    "human_request": Handoff.Reason.CUSTOMER_REQUEST,
    "high_risk": Handoff.Reason.HIGH_RISK,
    "negative_sentiment": Handoff.Reason.NEGATIVE_SENTIMENT,
}


async def handle_customer_message(
    *,
    conversation: Conversation,
    client_message_id: str,
    text: str,
    emit: Emit = noop,
    origin: str | None = None,
    subscribed: bool = False,
) -> Outcome:
    """Save the message (idempotent), then answer it unless a reply already exists.

    `emit` receives what only the caller needs (`message.accepted`, `answer.pending`) and,
    unless `subscribed` (the caller's connection is in the conversation's group), every
    conversation event of the turn too. `origin` names the calling connection.
    """
    async with receiving():
        message, created = await db(services.message_receive)(
            conversation=conversation,
            client_message_id=client_message_id,
            text=text,
            origin=origin,
        )
        channel = TurnEvents(conversation.pk, emit, origin=origin, subscribed=subscribed)
        await channel.reply(
            events.message_accepted(
                client_message_id=client_message_id,
                message=services.message_as_event(message),
                duplicate=not created,
            )
        )
        if not created:
            reply = await db(selectors.reply_for)(customer_message=message)
            if reply is not None and reply.state == Message.State.DELIVERED:
                await channel.reply(events.answer_completed(services.message_as_event(reply)))
                return Outcome(customer_message=message, reply=reply, duplicate=True)
            stale = reply is not None and timezone.now() - reply.updated_at > stale_reply_after()
            if reply is not None and not stale:
                await channel.reply(events.answer_pending(reply_to=message.pk, message_id=reply.pk))
                return Outcome(customer_message=message, reply=None, duplicate=True)
            if reply is None and message.state not in (
                Message.State.RECEIVED,
                Message.State.SEARCHING,
                Message.State.ANSWERING,
                Message.State.CALLING_TOOL,
            ):
                return Outcome(customer_message=message, reply=None, duplicate=True)
    # Acknowledged: now wait for a turn slot (the sweeper answers it if this process dies);
    # a customer whose turn must wait is told the place in line and about how long.

    async def queued(position: int, wait_seconds: int) -> None:
        metrics.TURNS_QUEUED.inc()
        await channel.reply(
            events.answer_queued(reply_to=message.pk, position=position, wait_seconds=wait_seconds)
        )

    async with own_thread(conversation.tenant_id, queued):
        outcome = await _respond(conversation.pk, message, channel)
    outcome.duplicate = not created
    return outcome


async def respond(
    *, conversation_id: int, message: Message, emit: Emit = noop, subscribed: bool = False
) -> Outcome:
    """Answer one saved customer message (safe to call again: the reply row is reserved).

    The reply sweeper calls this for acknowledged messages whose reply is missing or stuck.
    """
    async with own_thread(message.tenant_id):
        return await _respond(
            conversation_id, message, TurnEvents(conversation_id, emit, subscribed=subscribed)
        )


async def _respond(conversation_id: int, message: Message, channel: TurnEvents) -> Outcome:
    conversation = await db(selectors.conversation_for_turn)(conversation_id=conversation_id)
    if conversation.owner == Conversation.Owner.HUMAN:
        # The agent sees the message live; the bot stays silent while a person owns the chat.
        return Outcome(customer_message=message, reply=None)
    reply = await db(services.reply_reserve_or_take_over)(
        customer_message=message, stale_after=stale_reply_after()
    )
    if reply is None:
        await channel.reply(events.answer_pending(reply_to=message.pk))
        return Outcome(customer_message=message, reply=None)
    await channel.publish(events.answer_started(reply_to=message.pk, message_id=reply.pk))
    turn = Turn(conversation, message, reply, channel, time.monotonic())

    with tracing.span("turn.route"):
        answered = await tools.answer_pending_proposal(turn)
        signal = intents.detect(message.text) if answered is None else None
        proposal = None
        if answered is None and signal is None:
            proposal = await tools.propose(conversation, message)
    if answered is not None:
        return answered
    if signal is not None:
        return await hand_off(turn, SIGNAL_REASONS[signal.kind], signal.detail)
    if isinstance(proposal, action_intents.Clarify):
        return await tools.clarify(turn, proposal)
    if proposal is not None:
        return await tools.run(turn, proposal)
    return await knowledge_answer(turn)
