"""Saving the official answer and telling every connection of the conversation."""

from __future__ import annotations

import logging
import time

from chat import metrics
from chat.orchestrator.base import Draft, Outcome, Turn, db
from chat.orchestrator.extractive import citations
from conversations import events, services
from supportbot.observability import tracing

logger = logging.getLogger(__name__)


async def finish(turn: Turn, draft: Draft, *, stream: bool) -> Outcome:
    """Finalize the reserved reply with `draft`; send it whole first when nothing streamed."""
    total_ms = (time.monotonic() - turn.started) * 1000
    with tracing.span("turn.send", **{"supportbot.kind": draft.kind}):
        if stream:
            await turn.events.publish(
                events.answer_delta(message_id=turn.reply.pk, text=draft.text)
            )
            draft.stats.setdefault("ttft_ms", total_ms)
        draft.stats["total_ms"] = total_ms
        saved = await db(services.reply_finalize)(
            reply=turn.reply,
            text=draft.text,
            kind=draft.kind,
            citations=citations(draft),
            customer_state=draft.customer_state,
            stats=draft.stats,
        )
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
