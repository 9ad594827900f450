"""Abuse limits of the chat: new anonymous sessions, customer messages, handoff requests.

Names and numbers are in settings.RATE_LIMITS (supportbot.ratelimit counts them). A limit over
raises RateLimited: REST answers 429 + Retry-After, the socket sends `rate_limited`.
"""

from __future__ import annotations

from supportbot.ratelimit import rate_limit_enforce


def session_anonymous_enforce(*, tenant_id: int, ip: str) -> None:
    """Count a new anonymous chat (no valid visitor token) of `ip` at the tenant."""
    rate_limit_enforce(
        name="session_anonymous",
        key=(tenant_id, ip),
        detail="Too many new chats from your network; try again later.",
    )


def message_enforce(
    *, tenant_id: int, customer_id: int, conversation_id: int, ip: str | None, verified: bool
) -> None:
    """Count a customer message per customer, per conversation and (anonymous) per IP.

    The per-IP count is what a visitor who drops the visitor token (a new customer each time)
    still runs into.
    """
    detail = "Too many messages; wait a moment before sending more."
    rate_limit_enforce(name="message_customer", key=(customer_id,), detail=detail)
    rate_limit_enforce(name="message_conversation", key=(conversation_id,), detail=detail)
    if ip is not None and not verified:
        rate_limit_enforce(name="message_ip", key=(tenant_id, ip), detail=detail)


def handoff_enforce(*, customer_id: int, conversation_id: int) -> None:
    """Count a handoff request per conversation and per customer."""
    detail = "Too many requests for a person; your earlier request is still in the queue."
    rate_limit_enforce(name="handoff_conversation", key=(conversation_id,), detail=detail)
    rate_limit_enforce(name="handoff_customer", key=(customer_id,), detail=detail)
