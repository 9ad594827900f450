"""The one schema of server -> client events.

`SCHEMA` names each event of `docs/chat-protocol.md` with its documented fields (always sent),
its documented optional fields (sent when they have a value) and the few fields we send beyond
the document (additive; clients ignore them), its route (`group`: through the conversation's
group; `direct`: a reply to one connection) and its builder (`builders.py`). `_event` refuses a
payload that does not match its entry, so a builder cannot drift from the schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal


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
    EventSpec("answer.queued", "direct", fields=("reply_to", "position", "wait_seconds")),
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
