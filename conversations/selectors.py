"""Reads of conversation state, always filtered by tenant."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import QuerySet

from conversations.models import Conversation, Customer, Message
from supportbot import replicas
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


@replicas.stale_tolerant(primary_on=(NotFound,))
def message_history_page(
    *, tenant: Tenant, conversation_id: int, paginate: Callable[[QuerySet[Message]], list]
) -> list[Message]:
    """One page of a conversation's saved history (answers still streaming left out).

    Served by the read replica when one is configured: it may lag the primary by a moment.
    A conversation not found there (created a moment ago) is looked up on the primary.
    """
    conversation = conversation_get(tenant=tenant, conversation_id=conversation_id)
    messages = message_list(tenant=tenant, conversation_id=conversation.pk).exclude(
        state=Message.State.STREAMING
    )
    return list(paginate(messages))


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


def conversation_open_of(
    *, tenant: Tenant, customer: Customer, conversation_id: int
) -> Conversation | None:
    """The customer's open conversation with this id (None for anyone else's, or closed)."""
    return Conversation.objects.filter(
        tenant=tenant, customer=customer, pk=conversation_id, state=Conversation.State.OPEN
    ).first()


def feedback_ratings(*, conversation: Conversation) -> dict[int, str]:
    """{bot message id: rating} of the conversation's rated answers."""
    return dict(
        Message.objects.filter(
            conversation=conversation, role=Message.Role.BOT, feedback__isnull=False
        ).values_list("pk", "feedback__rating")
    )


def conversation_for_turn(*, conversation_id: int) -> Conversation:
    """The conversation with its tenant and customer loaded (one query for a turn)."""
    return Conversation.objects.select_related("tenant", "customer").get(pk=conversation_id)


def previous_customer_text(*, conversation: Conversation, before_id: int) -> str | None:
    """The customer's message before `before_id` in this conversation (a follow-up's context)."""
    return (
        Message.objects.filter(
            conversation=conversation, role=Message.Role.CUSTOMER, pk__lt=before_id
        )
        .order_by("-pk")
        .values_list("text", flat=True)
        .first()
    )


def customer_messages_unanswered(*, older_than, limit: int = 50) -> list[Message]:
    """Acknowledged customer messages whose reply is missing or stuck `streaming` since before
    `older_than`, with the bot still owning the conversation (the reply sweeper's work list)."""
    pending_states = (
        Message.State.RECEIVED,
        Message.State.SEARCHING,
        Message.State.ANSWERING,
        Message.State.CALLING_TOOL,
    )
    rows = (
        Message.objects.filter(
            role=Message.Role.CUSTOMER,
            state__in=pending_states,
            updated_at__lt=older_than,
            conversation__owner=Conversation.Owner.BOT,
            conversation__state=Conversation.State.OPEN,
        )
        .exclude(replies__role=Message.Role.BOT, replies__state=Message.State.DELIVERED)
        .exclude(
            replies__role=Message.Role.BOT,
            replies__state=Message.State.STREAMING,
            replies__updated_at__gte=older_than,
        )
        .order_by("id")
    )
    return list(rows[:limit])
