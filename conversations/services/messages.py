"""Customer, agent and system messages, and feedback on answers."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations import events
from conversations.models import Conversation, Feedback, Message
from supportbot import input_guard
from supportbot.errors import ApplicationError, Conflict, NotFound

MAX_MESSAGE_CHARS = 4000


def message_as_event(message: Message) -> dict[str, Any]:
    """The public shape of a message (customer chat, REST, console)."""
    return {
        "id": message.pk,
        "conversation_id": message.conversation_id,
        "role": message.role,
        "kind": message.kind,
        "text": message.text,
        "state": message.state,
        "client_message_id": message.client_message_id,
        "reply_to": message.reply_to_id,
        "citations": message.citations,
        "author": message.author_label if message.role == Message.Role.AGENT else "",
        "action_id": (message.meta or {}).get("action_id"),
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def message_announce(message: Message, *, origin: str | None = None) -> None:
    """Publish a new message to the conversation's connections on commit under its one wire
    name (`events.message_saved`); bot answers are published by the orchestrator as
    `answer.completed` instead."""
    if message.role == Message.Role.BOT:
        return
    events.publish_on_commit(
        message.conversation_id, events.message_saved(message_as_event(message)), origin=origin
    )


def _clean_text(text: Any, field: str = "text") -> str:
    if not isinstance(text, str):
        raise ApplicationError("Text must be a string.", field=field)
    if not input_guard.is_storable_text(text):
        raise ApplicationError(input_guard.UNSTORABLE_DETAIL, field=field)
    text = text.strip()
    if not text:
        raise ApplicationError("Text must not be empty.", field=field)
    if len(text) > MAX_MESSAGE_CHARS:
        raise ApplicationError(f"Text is longer than {MAX_MESSAGE_CHARS} characters.", field=field)
    return text


def message_receive(
    *, conversation: Conversation, client_message_id: str, text: str, origin: str | None = None
) -> tuple[Message, bool]:
    """Save a customer message; a repeated `client_message_id` returns the saved one (False)."""
    if not isinstance(client_message_id, str) or not (0 < len(client_message_id) <= 100):
        raise ApplicationError(
            "client_message_id must be a string of 1-100 characters.", field="client_message_id"
        )
    if not input_guard.is_storable_text(client_message_id):
        raise ApplicationError(input_guard.UNSTORABLE_DETAIL, field="client_message_id")
    # The common case is a new message: insert first (one statement), and read the saved one
    # only when the unique client id refuses the row or the message cannot be taken.
    try:
        text = _clean_text(text)
        if conversation.state != Conversation.State.OPEN:
            raise Conflict("This conversation is closed.", field="conversation")
    except ApplicationError:
        existing = _saved_message(conversation, client_message_id)
        if existing is not None:  # a retry of a message taken before it closed
            return existing, False
        raise
    try:
        with transaction.atomic():
            message = Message.objects.create(
                tenant_id=conversation.tenant_id,
                conversation=conversation,
                role=Message.Role.CUSTOMER,
                text=text,
                client_message_id=client_message_id,
                state=Message.State.RECEIVED,
            )
            Conversation.objects.filter(pk=conversation.pk).update(last_message_at=timezone.now())
            message_announce(message, origin=origin)
    except IntegrityError:
        # A repeat of a saved message (a retry, or the same id racing in from another
        # connection), or the conversation was erased meanwhile (its customer deleted): the
        # foreign key refused the row.
        saved = _saved_message(conversation, client_message_id)
        if saved is None:
            raise NotFound("No such conversation.") from None
        return saved, False
    return message, True


def _saved_message(conversation: Conversation, client_message_id: str) -> Message | None:
    return Message.objects.filter(
        tenant_id=conversation.tenant_id,
        conversation=conversation,
        client_message_id=client_message_id,
    ).first()


def message_set_state(*, message_id: int, state: str) -> None:
    Message.objects.filter(pk=message_id).update(state=state, updated_at=timezone.now())


@transaction.atomic
def message_post(
    *,
    conversation: Conversation,
    role: str,
    text: str,
    kind: str = Message.Kind.TEXT,
    author_label: str = "",
    meta: dict | None = None,
) -> Message:
    """Post an agent or system message (never a bot answer: those go through reply_*)."""
    if role not in (Message.Role.AGENT, Message.Role.SYSTEM):
        raise ApplicationError("Only agent or system messages can be posted.", field="role")
    message = Message.objects.create(
        tenant_id=conversation.tenant_id,
        conversation=conversation,
        role=role,
        kind=kind,
        text=_clean_text(text),
        author_label=author_label,
        state=Message.State.DELIVERED,
        meta=meta or {},
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_message_at=timezone.now())
    message_announce(message)
    return message


@transaction.atomic
def feedback_set(*, message: Message, rating: str, comment: str = "") -> Feedback:
    """Record (or change) the customer's rating of a bot answer."""
    if message.role != Message.Role.BOT:
        raise ApplicationError("Only bot answers can be rated.", field="message_id")
    if rating not in Feedback.Rating.values:
        raise ApplicationError(
            f"rating must be one of {', '.join(Feedback.Rating.values)}.", field="rating"
        )
    if not isinstance(comment, str) or len(comment) > 2000:
        raise ApplicationError(
            "comment must be a string of at most 2000 characters.", field="comment"
        )
    feedback, _ = Feedback.objects.update_or_create(
        message=message,
        defaults={"tenant_id": message.tenant_id, "rating": rating, "comment": comment.strip()},
    )
    return feedback
