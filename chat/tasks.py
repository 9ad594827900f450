"""Background jobs of the request path (django-q2). Each takes ids and is safe to run twice."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from chat import orchestrator
from conversations import selectors, services
from supportbot import eventloop

logger = logging.getLogger(__name__)


# What the customer is told when the bot gives up on a message (`answer.completed`, kind
# `failed`): true whatever went wrong, and it says what the customer can do.
GAVE_UP_TEXT = (
    "I'm sorry — something went wrong on our side and I couldn't answer this message, even "
    "after trying again. Please send it again in other words, or ask for a person from our "
    "team."
)


def unanswered_messages_sweep_task(limit: int = 50) -> list[int]:
    """Answer acknowledged customer messages whose reply is missing or stuck `streaming`.

    Still exactly one answer: the reply row is reserved (or a stale one taken over by a
    conditional update), so a sweeper racing a live worker or another sweeper answers once.
    A message is re-driven at most ANSWER_MAX_REDRIVE_ATTEMPTS times (counted before its turn
    runs, so a turn that kills its process counts too); after that it ends `failed` and the
    customer is told so, instead of being retried forever. Return the ids of the messages it
    answered.
    """
    answered = []
    stale_before = timezone.now() - timedelta(seconds=settings.ANSWER_STALE_AFTER_S)
    max_attempts = settings.ANSWER_MAX_REDRIVE_ATTEMPTS
    for message in selectors.customer_messages_unanswered(older_than=stale_before, limit=limit):
        if message.redrive_attempts >= max_attempts:
            _give_up(message.pk, attempts=message.redrive_attempts)
            continue
        attempt = services.message_redrive_count(message=message)
        if attempt is None:
            continue  # another sweeper counted this attempt and runs it
        try:
            outcome = eventloop.run(
                orchestrator.respond(conversation_id=message.conversation_id, message=message)
            )
        except Exception:  # one bad message must not stop the sweep
            logger.exception("re-driving message %s failed (attempt %s)", message.pk, attempt)
            if attempt >= max_attempts:
                _give_up(message.pk, attempts=attempt)
            continue
        if outcome.reply is not None:
            answered.append(message.pk)
    return answered


def _give_up(message_id: int, *, attempts: int) -> None:
    if services.reply_fail(customer_message_id=message_id, text=GAVE_UP_TEXT) is not None:
        logger.error(
            "message %s failed after %s re-drives; the customer was told", message_id, attempts
        )
