"""Every event a client receives is built here, from one schema; every conversation event goes
through the conversation's channel-layer group.

One schema: `SCHEMA` names each server -> client event of `docs/chat-protocol.md` with its
documented fields (always sent), its documented optional fields (sent when they have a value)
and the few fields we send beyond the document (additive; clients ignore them), its route
(`group`: through the conversation's group; `direct`: a reply to one connection) and its
builder. `_event` refuses a payload that does not match its entry, so a builder cannot drift
from the schema, and no other module writes an event dict (`conversations/tests/test_events.py`
checks both, and the schema against the document).

One route: the customer's tabs and the agents watching a conversation are members of
`conversation_group(id)` and receive each event once, as a group message
`{"type": "conversation.event", "event": <the protocol event>, "origin": <channel or None>,
"conversation_id": <id>}`.
`origin` names the connection that caused the event, so that connection can skip an echo of
its own message (it already got `message.accepted`: `for_customer`); `conversation_id` lets a
connection that watches one conversation at a time (the agents' console: `for_console`) drop
what is still in flight from the one it left.

One wire name per saved message, for customers and agents alike (`message_saved` decides it):
a bot answer is `answer.completed`, an agent's message `agent.message`, any other message
`message.created`. The console gets the same events under the same names as the customer,
each stamped with its `conversation_id` (`docs/console-events.md`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

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


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class EventSpec:
    """One server -> client event: its wire name and payload fields (`type` aside)."""

    name: str
    route: Literal["group", "direct"]
    fields: tuple[str, ...]
    optional: tuple[str, ...] = ()  # documented with `?`: left out when None
    extra: tuple[str, ...] = ()  # sent, not in docs/chat-protocol.md: left out when None
    builder: Callable[..., dict[str, Any]] | None = None

    @property
    def allowed(self) -> frozenset[str]:
        return frozenset(self.fields + self.optional + self.extra)


_SPECS = (
    EventSpec(
        "session.ready",
        "direct",
        fields=(
            "conversation_id",
            "visitor_token",
            "identity_session",
            "identity_expires_at",
            "customer",
            "owner",
            "handoff",
            "history",
            "actions",
        ),
        extra=("tenant",),  # {slug, name}: the page's title
    ),
    EventSpec("message.accepted", "direct", fields=("client_message_id", "message", "duplicate")),
    EventSpec("answer.started", "group", fields=("reply_to", "message_id")),
    EventSpec("answer.delta", "group", fields=("message_id", "text")),
    EventSpec("answer.revised", "group", fields=("message_id", "text", "citations")),
    EventSpec(
        "answer.completed",
        "group",
        fields=("message_id", "reply_to", "kind", "text", "citations", "message"),
    ),
    # `message_id`: the reply being written elsewhere, when it is reserved already.
    EventSpec("answer.pending", "direct", fields=("reply_to",), extra=("message_id",)),
    EventSpec(
        "handoff.started",
        "group",
        fields=(
            "handoff_id",
            "reason",
            "position",
            "estimated_wait_minutes",
            "agents_online",
            "ask_for_email",
        ),
    ),
    EventSpec("handoff.contact_saved", "direct", fields=("email",)),
    EventSpec("action.proposed", "group", fields=("action",)),
    EventSpec("action.updated", "group", fields=("action",)),
    EventSpec("agent.message", "group", fields=("message",)),
    EventSpec("message.created", "group", fields=("message",)),
    # `version`: the conversation's, so a late owner event cannot undo a newer one.
    EventSpec("conversation.owner", "group", fields=("owner",), extra=("version",)),
    EventSpec("feedback.saved", "direct", fields=("message_id", "rating")),
    EventSpec(
        "rate_limited",
        "direct",
        fields=("limit", "retry_after", "detail", "event_type"),
        optional=("client_message_id", "ref"),
    ),
    EventSpec("identity.expired", "direct", fields=("detail",)),
    EventSpec(
        "error",
        "direct",
        fields=("code", "detail"),
        optional=("field", "client_message_id", "action_id", "state", "current_version"),
        extra=("ref",),  # the inbound event's `ref`, echoed when the client sent one
    ),
    EventSpec("pong", "direct", fields=()),
)
SCHEMA: dict[str, EventSpec] = {spec.name: spec for spec in _SPECS}


def _event(name: str, **payload: Any) -> dict[str, Any]:
    """The event `name` with `payload`, checked against its schema entry: every field present,
    nothing unknown; optional and extra fields without a value are left out."""
    spec = SCHEMA[name]
    payload = {
        k: v for k, v in payload.items() if v is not None or k not in spec.optional + spec.extra
    }
    missing = set(spec.fields) - payload.keys()
    unknown = payload.keys() - spec.allowed
    if missing or unknown:
        raise ValueError(f"{name}: missing {sorted(missing)}, unknown {sorted(unknown)}")
    return {"type": name, **payload}


def _builds(name: str):
    """Register the decorated function as the one builder of event `name`."""

    def register(builder: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        if SCHEMA[name].builder is not None:
            raise ValueError(f"{name} has a builder already")
        SCHEMA[name] = replace(SCHEMA[name], builder=builder)
        return builder

    return register


# --------------------------------------------------------------------------- builders
# Replies to one connection.


@_builds("session.ready")
def session_ready(
    *,
    tenant: dict[str, str],
    conversation_id: int,
    visitor_token: str | None,
    identity_session: str | None,
    identity_expires_at: int | None,
    customer: dict[str, Any],
    owner: str,
    handoff: dict[str, Any] | None,
    history: list[dict[str, Any]],
    actions: list[dict[str, Any]],
) -> dict[str, Any]:
    return _event(
        "session.ready",
        tenant=tenant,
        conversation_id=conversation_id,
        visitor_token=visitor_token,
        identity_session=identity_session,
        identity_expires_at=identity_expires_at,
        customer=customer,
        owner=owner,
        handoff=handoff,
        history=history,
        actions=actions,
    )


@_builds("message.accepted")
def message_accepted(
    *, client_message_id: str, message: dict[str, Any], duplicate: bool
) -> dict[str, Any]:
    return _event(
        "message.accepted",
        client_message_id=client_message_id,
        message=message,
        duplicate=duplicate,
    )


@_builds("answer.pending")
def answer_pending(*, reply_to: int, message_id: int | None = None) -> dict[str, Any]:
    return _event("answer.pending", reply_to=reply_to, message_id=message_id)


@_builds("handoff.contact_saved")
def handoff_contact_saved(*, email: str) -> dict[str, Any]:
    return _event("handoff.contact_saved", email=email)


@_builds("feedback.saved")
def feedback_saved(*, message_id: int, rating: Any) -> dict[str, Any]:
    return _event("feedback.saved", message_id=message_id, rating=rating)


@_builds("rate_limited")
def rate_limited(
    *,
    limit: str | None,
    retry_after: int | None,
    detail: str,
    event_type: str,
    client_message_id: str | None = None,
    ref: Any = None,
) -> dict[str, Any]:
    return _event(
        "rate_limited",
        limit=limit,
        retry_after=retry_after,
        detail=detail,
        event_type=event_type,
        client_message_id=client_message_id,
        ref=ref,
    )


@_builds("identity.expired")
def identity_expired() -> dict[str, Any]:
    return _event(
        "identity.expired",
        detail="Your sign-in expired; send session.start with a fresh identity token.",
    )


@_builds("error")
def error(*, code: str, detail: str, **optional: Any) -> dict[str, Any]:
    """`error` with `code` and `detail`; `optional` fields (`field`, `client_message_id`,
    `action_id`, `state`, `current_version`, `ref`) only when they have a value."""
    return _event("error", code=code, detail=detail, **optional)


@_builds("pong")
def pong() -> dict[str, Any]:
    return _event("pong")


# Conversation events (through the group).


@_builds("message.created")
def message_created(message: dict[str, Any]) -> dict[str, Any]:
    return _event("message.created", message=message)


@_builds("agent.message")
def agent_message(message: dict[str, Any]) -> dict[str, Any]:
    return _event("agent.message", message=message)


def message_saved(message: dict[str, Any]) -> dict[str, Any]:
    """The one event announcing a saved customer, agent or system `message` (a bot answer is
    announced by `answer_completed`): `agent.message` for an agent's, else `message.created`."""
    if message["role"] == "bot":
        raise ValueError("a bot answer is announced as answer.completed")
    return agent_message(message) if message["role"] == "agent" else message_created(message)


@_builds("answer.started")
def answer_started(*, reply_to: int, message_id: int) -> dict[str, Any]:
    return _event("answer.started", reply_to=reply_to, message_id=message_id)


@_builds("answer.delta")
def answer_delta(*, message_id: int, text: str) -> dict[str, Any]:
    return _event("answer.delta", message_id=message_id, text=text)


@_builds("answer.revised")
def answer_revised(*, message_id: int, text: str, citations: list[dict]) -> dict[str, Any]:
    return _event("answer.revised", message_id=message_id, text=text, citations=citations)


@_builds("answer.completed")
def answer_completed(message: dict[str, Any]) -> dict[str, Any]:
    return _event(
        "answer.completed",
        message_id=message["id"],
        reply_to=message["reply_to"],
        kind=message["kind"],
        text=message["text"],
        citations=message["citations"],
        message=message,
    )


@_builds("handoff.started")
def handoff_started(*, handoff, position) -> dict[str, Any]:
    return _event(
        "handoff.started",
        handoff_id=handoff.pk,
        reason=handoff.reason,
        position=position.position,
        estimated_wait_minutes=position.estimated_wait_minutes,
        agents_online=position.agents_online,
        ask_for_email=position.ask_for_email,
    )


@_builds("action.proposed")
def action_proposed(card: dict[str, Any]) -> dict[str, Any]:
    return _event("action.proposed", action=card)


@_builds("action.updated")
def action_updated(card: dict[str, Any]) -> dict[str, Any]:
    return _event("action.updated", action=card)


@_builds("conversation.owner")
def owner_changed(*, owner: str, version: int) -> dict[str, Any]:
    return _event("conversation.owner", owner=owner, version=version)


# --------------------------------------------------------------------------- delivery


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
