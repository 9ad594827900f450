"""Console queue events: the console twin of `conversations/events/`.

The agents' consoles of a tenant are members of `queue_group(tenant_id)`. Whatever may change
the queue (a handoff's transition, its summary or routing, a note, who is online or viewing)
sends one group message `{"type": "handoff.changed", "event": <kind>, "handoff_id": <id or
None>}`; the console consumer passes it on as the client event `queue.changed` with the same
`event` and `handoff_id` (`queue_changed`), and the page refetches the queue. The events carry
no state: PostgreSQL holds the queue, a lost event only delays a refetch.

Services send on commit (`publish_on_commit`), so no console hears of a write that rolled back;
the consumer sends presence and viewer changes through its own channel layer at once.
"""

from __future__ import annotations

from typing import Any

from conversations.events import console_queue_group, notify_group_on_commit

GROUP_MESSAGE_TYPE = "handoff.changed"  # handled by ConsoleConsumer.handoff_changed
CLIENT_EVENT_TYPE = "queue.changed"


def queue_group(tenant_id: int) -> str:
    return console_queue_group(tenant_id)


# --------------------------------------------------------------------------- builders


def _changed(event: str, handoff_id: int | None, **extra: Any) -> dict[str, Any]:
    return {"type": GROUP_MESSAGE_TYPE, "event": event, "handoff_id": handoff_id, **extra}


def handoff_queued(*, handoff_id: int) -> dict[str, Any]:
    return _changed("queued", handoff_id)


def handoff_assigned(*, handoff_id: int) -> dict[str, Any]:
    return _changed("assigned", handoff_id)


def handoff_closed(*, handoff_id: int, outcome: str) -> dict[str, Any]:
    """`outcome` is the closed state: `resolved` or `returned_to_bot`."""
    return _changed(outcome, handoff_id)


def handoff_routed(*, handoff_id: int) -> dict[str, Any]:
    return _changed("routed", handoff_id)


def handoff_escalated(*, handoff_id: int) -> dict[str, Any]:
    return _changed("escalated", handoff_id)


def handoff_summarized(*, handoff_id: int) -> dict[str, Any]:
    return _changed("summary", handoff_id)


def handoff_contact_left(*, handoff_id: int) -> dict[str, Any]:
    return _changed("contact", handoff_id)


def note_added(*, conversation_id: int) -> dict[str, Any]:
    return _changed("note", None, conversation_id=conversation_id)


def agents_presence_changed() -> dict[str, Any]:
    return _changed("presence", None)


def viewers_changed(*, handoff_id: int) -> dict[str, Any]:
    return _changed("viewers", handoff_id)


def queue_changed(group_message: dict[str, Any]) -> dict[str, Any]:
    """The event a console receives for a `handoff.changed` group message."""
    return {
        "type": CLIENT_EVENT_TYPE,
        "event": group_message.get("event"),
        "handoff_id": group_message.get("handoff_id"),
    }


# --------------------------------------------------------------------------- delivery


def publish_on_commit(tenant_id: int, group_message: dict[str, Any]) -> None:
    """Tell the tenant's consoles once the current transaction commits."""
    notify_group_on_commit(queue_group(tenant_id), group_message)
