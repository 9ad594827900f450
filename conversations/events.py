"""Every conversation event goes through the conversation's channel-layer group.

One route: the customer's tabs and the agents watching a conversation are members of
`conversation_group(id)` and receive each event once, as a group message
`{"type": "conversation.event", "event": <the protocol event>, "origin": <channel or None>,
"conversation_id": <id>}`.
`origin` names the connection that caused the event, so that connection can skip an echo of
its own message (it already got `message.accepted`); `conversation_id` lets a connection that
watches one conversation at a time (the agents' console) drop what is still in flight from the
one it left. Group names and the builders of every
event of `docs/chat-protocol.md` live here.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

GROUP_MESSAGE_TYPE = "conversation.event"


def conversation_group(conversation_id: int) -> str:
    return f"conv_{conversation_id}"


def console_queue_group(tenant_id: int) -> str:
    """The agents' live queue of one tenant (handoffs console)."""
    return f"handoffs_{tenant_id}"


# --------------------------------------------------------------------------- builders


def message_created(message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message.created", "message": message}


def answer_started(*, reply_to: int, message_id: int) -> dict[str, Any]:
    return {"type": "answer.started", "reply_to": reply_to, "message_id": message_id}


def answer_delta(*, message_id: int, text: str) -> dict[str, Any]:
    return {"type": "answer.delta", "message_id": message_id, "text": text}


def answer_revised(*, message_id: int, text: str, citations: list[dict]) -> dict[str, Any]:
    return {
        "type": "answer.revised",
        "message_id": message_id,
        "text": text,
        "citations": citations,
    }


def answer_completed(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "answer.completed",
        "message_id": message["id"],
        "reply_to": message["reply_to"],
        "kind": message["kind"],
        "text": message["text"],
        "citations": message["citations"],
        "message": message,
    }


def answer_pending(*, reply_to: int, message_id: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "answer.pending", "reply_to": reply_to}
    if message_id is not None:
        event["message_id"] = message_id
    return event


def handoff_started(*, handoff, position) -> dict[str, Any]:
    return {
        "type": "handoff.started",
        "handoff_id": handoff.pk,
        "reason": handoff.reason,
        "position": position.position,
        "estimated_wait_minutes": position.estimated_wait_minutes,
        "agents_online": position.agents_online,
        "ask_for_email": position.ask_for_email,
    }


def action_proposed(card: dict[str, Any]) -> dict[str, Any]:
    return {"type": "action.proposed", "action": card}


def action_updated(card: dict[str, Any]) -> dict[str, Any]:
    return {"type": "action.updated", "action": card}


def owner_changed(*, owner: str, version: int) -> dict[str, Any]:
    return {"type": "conversation.owner", "owner": owner, "version": version}


# --------------------------------------------------------------------------- delivery


def _group_message(
    event: dict[str, Any], origin: str | None, conversation_id: int
) -> dict[str, Any]:
    return {
        "type": GROUP_MESSAGE_TYPE,
        "event": event,
        "origin": origin,
        "conversation_id": conversation_id,
    }


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

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(
                conversation_group(conversation_id), _group_message(event, origin, conversation_id)
            )
        except Exception:  # a lost notification must not undo a committed write
            logger.exception(
                "publishing %s to conversation %s failed", event["type"], conversation_id
            )

    transaction.on_commit(send)


def notify_group_on_commit(group: str, event: dict[str, Any]) -> None:
    """Send a non-conversation group event (the console queue) once the transaction commits."""

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        try:
            async_to_sync(layer.group_send)(group, event)
        except Exception:
            logger.exception("group_send to %s failed", group)

    transaction.on_commit(send)
