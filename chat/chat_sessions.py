"""Chat sessions: who is chatting, in which conversation, and what they missed.

Called by the chat consumer (`session.start`) through `database_sync_to_async`; keeps the ORM
out of the consumer. The page's Origin must be allowed for the tenant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actions import selectors as action_selectors
from chat import limits
from chat.identity import (
    IdentityError,
    VerifiedIdentity,
    identity_session_make,
    identity_session_verify,
    identity_token_redeem,
    visitor_token_make,
    visitor_token_verify,
)
from conversations import events, selectors, services
from conversations.models import Conversation, Customer, Message
from handoffs import selectors as handoff_selectors
from supportbot import selectors as tenancy
from supportbot.errors import ApplicationError

if TYPE_CHECKING:
    from supportbot.models import Tenant

HISTORY_LIMIT = 200


class OriginNotAllowed(ApplicationError):
    status = 403
    code = "origin_not_allowed"


def chat_session_start(
    payload: dict[str, Any], *, origin: str | None, ip: str = "unknown"
) -> dict[str, Any]:
    """Resolve tenant, customer and conversation for a `session.start` event.

    The page's Origin must be one of the tenant's allowed origins or this product's own host,
    so another site cannot drive a customer's chat from the customer's browser.
    """
    tenant = _tenant_for(payload, origin=origin)
    verified = _identity_verified(payload, tenant=tenant)
    if verified is not None:
        customer = services.customer_get_or_create_verified(
            tenant=tenant, external_id=verified.external_id
        )
        visitor_token = None
    else:
        customer, visitor_token = _visitor(payload, tenant=tenant, ip=ip)
    conversation = _conversation_for(payload, tenant=tenant, customer=customer)
    history = _history(payload, tenant=tenant, conversation=conversation)
    feedback = selectors.feedback_ratings(conversation=conversation)
    handoff_info = _handoff_info(conversation_id=conversation.pk)
    return {
        "tenant": tenant,
        "customer": customer,
        "conversation": conversation,
        "identity_expires_at": verified.expires_at if verified else None,
        "ready": events.session_ready(
            actions=action_selectors.action_cards_for_conversation(conversation_id=conversation.pk),
            tenant={"slug": tenant.slug, "name": tenant.name},
            conversation_id=conversation.pk,
            visitor_token=visitor_token,
            identity_session=identity_session_make(tenant=tenant, identity=verified)
            if verified
            else None,
            identity_expires_at=verified.expires_at if verified else None,
            customer={"verified": customer.verified, "name": customer.name},
            owner=conversation.owner,
            handoff=handoff_info,
            history=[
                {**services.message_as_event(m), "feedback": feedback.get(m.pk)} for m in history
            ],
        ),
    }


def chat_origin_may_connect(*, origin: str | None) -> bool:
    """May a page at `origin` open the chat socket? Checked before the handshake is accepted:
    a page of this product or one some tenant allows (`session.start` checks its tenant)."""
    return tenancy.origin_allowed_by_any_tenant(origin=origin)


def _tenant_for(payload: dict[str, Any], *, origin: str | None) -> Tenant:
    """The tenant named by `payload`; raise unless the page's origin may open its chat."""
    slug = payload.get("tenant")
    if not isinstance(slug, str) or not slug:
        raise ApplicationError("tenant is required.", field="tenant")
    tenant = tenancy.tenant_get(slug=slug)
    if not tenancy.tenant_origin_allowed(tenant=tenant, origin=origin):
        raise OriginNotAllowed(
            f"Origin {origin or '(none)'} may not open a chat of {tenant.slug}: "
            "add it to the tenant's allowed origins."
        )
    return tenant


def _identity_verified(payload: dict[str, Any], *, tenant: Tenant) -> VerifiedIdentity | None:
    """The identity proven by the payload's identity token (redeemed) or, without one, its
    identity session; None when it has neither. Raise on a malformed or invalid one."""
    identity = payload.get("identity_token")
    identity_session = payload.get("identity_session")
    if identity is not None and not isinstance(identity, str):
        raise IdentityError("identity_token must be a string.", field="identity_token")
    if identity_session is not None and not isinstance(identity_session, str):
        raise IdentityError("identity_session must be a string.", field="identity_session")
    if identity:
        return identity_token_redeem(tenant=tenant, token=identity)
    if identity_session:
        return identity_session_verify(tenant=tenant, token=identity_session)
    return None


def _visitor(payload: dict[str, Any], *, tenant: Tenant, ip: str) -> tuple[Customer, str]:
    """The anonymous visitor of the payload's visitor token (a new one, within the anonymous
    session limit, when it has none or it is invalid), and its (renewed) token."""
    token = payload.get("visitor_token")
    if token is not None and not isinstance(token, str):
        raise IdentityError("visitor_token must be a string.", field="visitor_token")
    visitor_id = visitor_token_verify(tenant=tenant, token=token) if token else None
    if visitor_id is None:
        limits.session_anonymous_enforce(tenant_id=tenant.pk, ip=ip)
    visitor_id, visitor_token = visitor_token_make(tenant=tenant, visitor_id=visitor_id)
    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id=visitor_id)
    return customer, visitor_token


def _conversation_for(
    payload: dict[str, Any], *, tenant: Tenant, customer: Customer
) -> Conversation:
    """The open conversation asked for, else the customer's latest open one, else a new one
    (on the payload's channel: web or widget)."""
    conversation = None
    wanted = payload.get("conversation_id")
    if isinstance(wanted, int):
        conversation = selectors.conversation_open_of(
            tenant=tenant, customer=customer, conversation_id=wanted
        )
    if conversation is None:
        conversation = selectors.conversation_latest_open(tenant=tenant, customer=customer)
    if conversation is None:
        channel = payload.get("channel") if payload.get("channel") in ("web", "widget") else "web"
        conversation = services.conversation_start(
            tenant=tenant, customer=customer, channel=channel
        )
    return conversation


def _history(
    payload: dict[str, Any], *, tenant: Tenant, conversation: Conversation
) -> list[Message]:
    """The conversation's messages after the payload's `last_message_id` (all without one),
    streaming replies left out, at most HISTORY_LIMIT."""
    after = payload.get("last_message_id")
    after = after if isinstance(after, int) and after > 0 else None
    return list(
        selectors.message_list(
            tenant=tenant, conversation_id=conversation.pk, after_id=after
        ).exclude(state=Message.State.STREAMING)[:HISTORY_LIMIT]
    )


def _handoff_info(*, conversation_id: int) -> dict[str, Any] | None:
    """The conversation's open handoff and its place in the queue; None without one."""
    handoff = handoff_selectors.handoff_open_for(conversation_id=conversation_id)
    if handoff is None:
        return None
    position = handoff_selectors.handoff_queue_position(handoff=handoff)
    return {
        "handoff_id": handoff.pk,
        "state": handoff.state,
        "position": position.position,
        "estimated_wait_minutes": position.estimated_wait_minutes,
        "agents_online": position.agents_online,
        "ask_for_email": position.ask_for_email and not handoff.customer_email,
    }
