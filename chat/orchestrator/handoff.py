"""Handing a conversation to a person, and what the customer is told about the queue."""

from __future__ import annotations

import time

from chat.orchestrator.base import Draft, Emit, Outcome, Turn, TurnEvents, db, noop
from chat.orchestrator.finish import finish
from conversations import events
from conversations.models import Conversation, Message
from handoffs import selectors as handoff_selectors
from handoffs import services as handoff_services
from handoffs.models import Handoff


async def hand_off(
    turn: Turn, reason: str, detail: str, *, closest: Draft | None = None
) -> Outcome:
    """Answer this message with a handoff (opened or returned) and the queue position, then
    `closest` (quotes of the passages nearest the question, with their citations) if given."""
    handoff, _ = await db(handoff_services.handoff_request)(
        conversation=turn.conversation, reason=reason, detail=detail, trigger_message=turn.message
    )
    position = await db(handoff_selectors.handoff_queue_position)(handoff=handoff)
    text = "I'm connecting you with a person from our team. " + handoff_services.queue_text(
        position
    )
    draft = Draft(text, Message.Kind.HANDOFF, customer_state=Message.State.HANDED_OFF)
    if closest is not None and closest.passages:
        draft.text = f"{text} Meanwhile: {closest.text}"
        draft.passages, draft.quotes = closest.passages, closest.quotes
        draft.stats = closest.stats
    draft.stats["meta"] = {"handoff_id": handoff.pk, "reason": reason}
    turn.started = time.monotonic()
    outcome = await finish(turn, draft, stream=True)
    await turn.events.publish(events.handoff_started(handoff=handoff, position=position))
    outcome.handoff = handoff
    return outcome


async def request_handoff(
    *,
    conversation: Conversation,
    reason: str = Handoff.Reason.CUSTOMER_REQUEST,
    detail: str = "",
    emit: Emit = noop,
    actor=None,
    subscribed: bool = False,
) -> tuple[Handoff, bool]:
    """Open (or return) the conversation's handoff outside a message (button, partner API)."""
    handoff, created, position = await db(handoff_services.handoff_open_with_notice)(
        conversation=conversation, reason=reason, detail=detail, actor=actor
    )
    channel = TurnEvents(conversation.pk, emit, subscribed=subscribed)
    await channel.publish(events.handoff_started(handoff=handoff, position=position))
    return handoff, created
