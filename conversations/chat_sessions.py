"""Chat sessions: who is chatting, in which conversation, and what they missed.

Called by the chat consumer (`session.start`) through `database_sync_to_async`; keeps the ORM
out of the consumer. The page's Origin must be allowed for the tenant.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from actions import selectors as action_selectors
from conversations import selectors, services
from conversations.identity import (
    identity_token_verify,
    visitor_token_make,
    visitor_token_verify,
)
from conversations.models import Message
from handoffs import selectors as handoff_selectors
from supportbot import selectors as tenancy
from supportbot.errors import ApplicationError

RATE_LIMIT_PER_MINUTE = 20
HISTORY_LIMIT = 200


class OriginNotAllowed(ApplicationError):
    status = 403
    code = "origin_not_allowed"


def chat_session_start(payload: dict[str, Any], *, origin: str | None) -> dict[str, Any]:
    """Resolve tenant, customer and conversation for a `session.start` event.

    The page's Origin must be one of the tenant's allowed origins or this product's own host,
    so another site cannot drive a customer's chat from the customer's browser.
    """
    slug = payload.get("tenant")
    if not isinstance(slug, str) or not slug:
        raise ApplicationError("tenant is required.", field="tenant")
    tenant = tenancy.tenant_get(slug=slug)
    if not tenancy.tenant_origin_allowed(tenant=tenant, origin=origin):
        raise OriginNotAllowed(
            f"Origin {origin or '(none)'} may not open a chat of {tenant.slug}: "
            "add it to the tenant's allowed origins."
        )
    identity = payload.get("identity_token")
    if identity:
        verified = identity_token_verify(tenant=tenant, token=identity)
        customer = services.customer_get_or_create_verified(
            tenant=tenant, external_id=verified.external_id
        )
        visitor_token = None
    else:
        token = payload.get("visitor_token")
        visitor_id = visitor_token_verify(tenant=tenant, token=token) if token else None
        visitor_id, visitor_token = visitor_token_make(tenant=tenant, visitor_id=visitor_id)
        customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id=visitor_id)

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
    after = payload.get("last_message_id")
    after = after if isinstance(after, int) and after > 0 else None
    history = list(
        selectors.message_list(
            tenant=tenant, conversation_id=conversation.pk, after_id=after
        ).exclude(state=Message.State.STREAMING)[:HISTORY_LIMIT]
    )
    feedback = selectors.feedback_ratings(conversation=conversation)
    handoff = handoff_selectors.handoff_open_for(conversation_id=conversation.pk)
    handoff_info = None
    if handoff is not None:
        position = handoff_selectors.handoff_queue_position(handoff=handoff)
        handoff_info = {
            "handoff_id": handoff.pk,
            "state": handoff.state,
            "position": position.position,
            "estimated_wait_minutes": position.estimated_wait_minutes,
            "agents_online": position.agents_online,
            "ask_for_email": position.ask_for_email and not handoff.customer_email,
        }
    return {
        "tenant": tenant,
        "customer": customer,
        "conversation": conversation,
        "ready": {
            "actions": action_selectors.action_cards_for_conversation(
                conversation_id=conversation.pk
            ),
            "type": "session.ready",
            "tenant": {"slug": tenant.slug, "name": tenant.name},
            "conversation_id": conversation.pk,
            "visitor_token": visitor_token,
            "customer": {"verified": customer.verified, "name": customer.name},
            "owner": conversation.owner,
            "handoff": handoff_info,
            "history": [
                {**services.message_as_event(m), "feedback": feedback.get(m.pk)} for m in history
            ],
        },
    }


def chat_rate_limited(customer_id: int) -> bool:
    key = f"rl:chat:{customer_id}"
    added = cache.add(key, 1, timeout=60)
    if added:
        return False
    try:
        count = cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=60)
        return False
    return count > RATE_LIMIT_PER_MINUTE
