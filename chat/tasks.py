"""Background jobs of the request path (django-q2). Each takes ids and is safe to run twice."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from chat import orchestrator
from conversations import selectors
from supportbot import eventloop

logger = logging.getLogger(__name__)


def unanswered_messages_sweep_task(limit: int = 50) -> list[int]:
    """Answer acknowledged customer messages whose reply is missing or stuck `streaming`.

    Still exactly one answer: the reply row is reserved (or a stale one taken over by a
    conditional update), so a sweeper racing a live worker or another sweeper answers once.
    Return the ids of the messages it answered.
    """
    answered = []
    stale_before = timezone.now() - timedelta(seconds=settings.ANSWER_STALE_AFTER_S)
    for message in selectors.customer_messages_unanswered(older_than=stale_before, limit=limit):
        try:
            outcome = eventloop.run(
                orchestrator.respond(conversation_id=message.conversation_id, message=message)
            )
        except Exception:  # one bad message must not stop the sweep
            logger.exception("re-driving message %s failed", message.pk)
            continue
        if outcome.reply is not None:
            answered.append(message.pk)
    return answered
