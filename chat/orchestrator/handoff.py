"""Handing a conversation to a person, and what the customer is told about the queue."""

from __future__ import annotations

import time

from chat.orchestrator.base import Draft, Emit, Outcome, Turn, TurnEvents, db, noop
from chat.orchestrator.finish import finish
from conversations import events, services
from conversations.models import Conversation, Message
from handoffs import selectors as handoff_selectors
from handoffs import services as handoff_services
from handoffs.models import Handoff


def queue_text(position) -> str:
    if position.ask_for_email:
        return (
            "Everyone on our team is busy or offline right now, so this may take a while. Your "
            "conversation stays in the queue; leave your email and we'll follow up there."
        )
    return (
        f"You're number {position.position} in the queue; the wait is about "
        f"{max(1, round(position.estimated_wait_minutes))} minute(s). "
        "You can keep writing here and they will see everything."
    )


async def hand_off(
    turn: Turn, reason: str, detail: str, *, closest: Draft | None = None
) -> Outcome:
    """Answer this message with a handoff (opened or returned) and the queue position, then
    `closest` (quotes of the passages nearest the question, with their citations) if given."""
    handoff, _ = await db(handoff_services.handoff_request)(
        conversation=turn.conversation, reason=reason, detail=detail, trigger_message=turn.message
    )
    position = await db(handoff_selectors.handoff_queue_position)(handoff=handoff)
    text = "I'm connecting you with a person from our team. " + queue_text(position)
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
    handoff, created = await db(handoff_services.handoff_request)(
        conversation=conversation, reason=reason, detail=detail, actor=actor
    )
    position = await db(handoff_selectors.handoff_queue_position)(handoff=handoff)
    if created:
        await db(services.message_post)(
            conversation=conversation,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.NOTICE,
            text="A person from our team will join shortly. " + queue_text(position),
            meta={"handoff_id": handoff.pk},
        )
    channel = TurnEvents(conversation.pk, emit, subscribed=subscribed)
    await channel.publish(events.handoff_started(handoff=handoff, position=position))
    return handoff, created
