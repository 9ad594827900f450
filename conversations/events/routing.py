"""Where a conversation event goes and what each kind of connection makes of it.

The customer's tabs and the agents watching a conversation are members of
`conversation_group(id)` and receive each event once, as a group message
`{"type": "conversation.event", "event": <the protocol event>, "origin": <channel or None>,
"conversation_id": <id>}`. `origin` names the connection that caused the event, so that
connection can skip an echo of its own message (`for_customer`); `conversation_id` lets a
connection that watches one conversation at a time (`for_console`) drop what is still in
flight from the one it left.
"""

from __future__ import annotations

from typing import Any

GROUP_MESSAGE_TYPE = "conversation.event"


def conversation_group(conversation_id: int) -> str:
    return f"conv_{conversation_id}"


def console_queue_group(tenant_id: int) -> str:
    """The agents' live queue of one tenant (handoffs console)."""
    return f"handoffs_{tenant_id}"


def for_customer(group_message: dict[str, Any], channel_name: str) -> dict[str, Any] | None:
    """The event a customer's connection sends for `group_message`, or None: the connection
    that sent a message already has it (`message.accepted`), so its echo is skipped."""
    event = group_message["event"]
    if event["type"] == "message.created" and group_message.get("origin") == channel_name:
        return None
    return event


def for_console(
    group_message: dict[str, Any], *, viewing_conversation_id: int | None
) -> dict[str, Any] | None:
    """The event an agent's console sends for `group_message`: the customer's event, same
    name and payload, stamped with its `conversation_id`; None for a conversation the agent
    is not viewing (events still in flight from the one it left)."""
    conversation_id = group_message.get("conversation_id")
    if viewing_conversation_id is None or conversation_id != viewing_conversation_id:
        return None
    return {**group_message["event"], "conversation_id": conversation_id}


def _group_message(
    event: dict[str, Any], origin: str | None, conversation_id: int
) -> dict[str, Any]:
    return {
        "type": GROUP_MESSAGE_TYPE,
        "event": event,
        "origin": origin,
        "conversation_id": conversation_id,
    }
