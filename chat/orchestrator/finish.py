"""Saving the official answer and telling every connection of the conversation."""

from __future__ import annotations

import logging
import time

from asgiref.sync import async_to_sync

from chat import metrics
from chat.orchestrator.base import Draft, Outcome, Turn, db
from chat.orchestrator.extractive import citations
from conversations import events, services
from conversations.models import Message
from supportbot.observability import tracing

logger = logging.getLogger(__name__)


async def finish(turn: Turn, draft: Draft, *, stream: bool) -> Outcome:
    """Finalize the reserved reply with `draft`; send it whole first when nothing streamed.

    While the bot owns the conversation, the send and the save happen under its owner lock
    (an agent's claim waits for them). If an agent took over first, no new word is sent: a
    reply with nothing sent yet is withdrawn (the agent answers), one whose verified sentences
    already streamed is saved as they were shown.
    """
    total_ms = (time.monotonic() - turn.started) * 1000
    with tracing.span("turn.send", **{"supportbot.kind": draft.kind}):
        if stream:
            draft.stats.setdefault("ttft_ms", total_ms)
        draft.stats["total_ms"] = total_ms
        saved = await db(_send_and_save)(turn, draft, stream)
        if saved is None:
            logger.info("an agent took over before the reply to message %s", turn.message.pk)
            turn.message.state = Message.State.HANDED_OFF
            return Outcome(customer_message=turn.message, reply=None)
        turn.message.state = draft.customer_state
        await turn.events.publish(events.answer_completed(services.message_as_event(saved)))
    meta = draft.stats.get("meta") or {}
    logger.info(
        "answered message %s (%s, %s)",
        turn.message.pk,
        draft.kind,
        meta.get("path", ""),
        extra={"path": meta.get("path"), "total_ms": round(total_ms, 1)},
    )
    first_words_at = turn.events.first_words_at or time.monotonic()
    metrics.first_words_observe(path=meta.get("path"), seconds=first_words_at - turn.started)
    return Outcome(customer_message=turn.message, reply=saved)


def _send_and_save(turn: Turn, draft: Draft, stream: bool) -> Message | None:
    """Send the whole draft (when nothing streamed) and save it, under the owner lock; None
    when an agent owns the conversation and nothing of this reply was sent (withdrawn)."""
    with services.conversation_while_bot_owns(conversation_id=turn.conversation.pk) as bot_owns:
        if not bot_owns and not turn.events.spoken:
            services.reply_withdraw(reply=turn.reply)
            return None
        if bot_owns and stream:
            delta = events.answer_delta(message_id=turn.reply.pk, text=draft.text)
            async_to_sync(turn.events.publish)(delta)
        return services.reply_finalize(
            reply=turn.reply,
            text=draft.text,
            kind=draft.kind,
            citations=citations(draft),
            customer_state=draft.customer_state,
            stats=draft.stats,
        )
