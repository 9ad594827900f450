"""One builder per server -> client event, each registered against its schema entry."""

from __future__ import annotations

from typing import Any

from conversations.events.schema import _builds, _event

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


@_builds("answer.queued")
def answer_queued(*, reply_to: int, position: int, wait_seconds: int) -> dict[str, Any]:
    return _event("answer.queued", reply_to=reply_to, position=position, wait_seconds=wait_seconds)


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
