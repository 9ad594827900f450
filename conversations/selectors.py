"""Reads of conversation state, always filtered by tenant."""

from __future__ import annotations

from django.db.models import QuerySet

from conversations.models import Conversation, Customer, Message
from supportbot.errors import NotFound
from supportbot.models import Tenant


def conversation_get(*, tenant: Tenant, conversation_id: int) -> Conversation:
    conversation = (
        Conversation.objects.select_related("customer")
        .filter(tenant=tenant, pk=conversation_id)
        .first()
    )
    if conversation is None:
        raise NotFound("No such conversation.")
    return conversation


def conversation_latest_open(*, tenant: Tenant, customer: Customer) -> Conversation | None:
    return (
        Conversation.objects.filter(tenant=tenant, customer=customer, state=Conversation.State.OPEN)
        .order_by("-created_at")
        .first()
    )


def message_list(
    *, tenant: Tenant, conversation_id: int, after_id: int | None = None
) -> QuerySet[Message]:
    qs = Message.objects.filter(tenant=tenant, conversation_id=conversation_id)
    if after_id:
        qs = qs.filter(pk__gt=after_id)
    return qs.order_by("id")


def message_get(*, tenant: Tenant, message_id: int) -> Message:
    message = Message.objects.filter(tenant=tenant, pk=message_id).first()
    if message is None:
        raise NotFound("No such message.")
    return message


def message_in_conversation(*, conversation: Conversation, message_id: int) -> Message:
    message = Message.objects.filter(
        tenant_id=conversation.tenant_id, conversation=conversation, pk=message_id
    ).first()
    if message is None:
        raise NotFound("No such message.", field="message_id")
    return message


def reply_for(*, customer_message: Message) -> Message | None:
    return Message.objects.filter(reply_to=customer_message, role=Message.Role.BOT).first()


def recent_messages(*, conversation: Conversation, limit: int = 8) -> list[Message]:
    """The last `limit` final messages of the conversation, oldest first."""
    rows = list(
        Message.objects.filter(conversation=conversation)
        .exclude(state=Message.State.STREAMING)
        .order_by("-id")[:limit]
    )
    return rows[::-1]


def customer_of(*, conversation: Conversation) -> Customer:
    """The conversation's customer, read fresh (safe to call from a sync executor)."""
    return Customer.objects.get(pk=conversation.customer_id, tenant_id=conversation.tenant_id)
