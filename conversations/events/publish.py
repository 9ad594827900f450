"""Sending events through the channel layer: now, or once the transaction commits."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from conversations.events.routing import _group_message, conversation_group

logger = logging.getLogger(__name__)


async def publish(
    conversation_id: int, event: dict[str, Any], *, origin: str | None = None
) -> bool:
    """Send `event` to every connection of the conversation now; False if it reached no one
    (no channel layer, or Redis unreachable: the event is in the saved history anyway)."""
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        sent = await layer.group_send(
            conversation_group(conversation_id), _group_message(event, origin, conversation_id)
        )
    except Exception:  # never fail the turn
        logger.exception("publishing %s to conversation %s failed", event["type"], conversation_id)
        return False
    return sent is not False


def publish_on_commit(
    conversation_id: int, event: dict[str, Any], *, origin: str | None = None
) -> None:
    """Send `event` once the current transaction commits (nothing for a rolled-back write)."""
    _group_send_on_commit(
        conversation_group(conversation_id),
        _group_message(event, origin, conversation_id),
        failure=("publishing %s to conversation %s failed", event["type"], conversation_id),
    )


def notify_group_on_commit(group: str, event: dict[str, Any]) -> None:
    """Send a non-conversation group event (the console queue) once the transaction commits."""
    _group_send_on_commit(group, event, failure=("group_send to %s failed", group))


def _group_send_on_commit(group: str, message: dict[str, Any], *, failure: tuple) -> None:
    """group_send `message` after commit; a lost notification must not undo a committed write
    (a failure is logged with the `failure` format and arguments)."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(group, message)
        except Exception:
            logger.exception(*failure)

    transaction.on_commit(send)
