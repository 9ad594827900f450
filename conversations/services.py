"""Writes of conversation state. Events go out on commit, so nothing is announced that did not
commit. The database decides races: unique constraints and version columns."""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from conversations import events
from conversations.models import Conversation, Customer, Feedback, Message
from supportbot import encryption
from supportbot.errors import ApplicationError, Conflict, NotFound
from supportbot.models import Tenant
from supportbot.queue import task_enqueue_on_commit

logger = logging.getLogger(__name__)

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


def _announce(message: Message, *, origin: str | None = None) -> None:
    """Publish a new message to the conversation's connections on commit (bot answers are
    published by the orchestrator as `answer.completed` instead)."""
    if message.role == Message.Role.BOT:
        return
    events.publish_on_commit(
        message.conversation_id, events.message_created(message_as_event(message)), origin=origin
    )


# --------------------------------------------------------------------------- customers


def customer_get_or_create_visitor(*, tenant: Tenant, visitor_id: str) -> Customer:
    """The anonymous customer behind a (server-signed) visitor id."""
    try:
        with transaction.atomic():
            customer, _ = Customer.objects.get_or_create(tenant=tenant, visitor_id=visitor_id)
    except IntegrityError:
        customer = Customer.objects.get(tenant=tenant, visitor_id=visitor_id)
    return customer


def customer_get_or_create_verified(
    *, tenant: Tenant, external_id: str, name: str = "", email: str = ""
) -> Customer:
    """The verified customer with the tenant's `external_id` (identity checked by the caller)."""
    name, email = (name or "")[:200], (email or "")[:254]
    try:
        with transaction.atomic():
            customer, created = Customer.objects.get_or_create(
                tenant=tenant,
                external_id=external_id,
                defaults={"verified": True, "name": name, "email": email},
            )
    except IntegrityError:
        customer = Customer.objects.get(tenant=tenant, external_id=external_id)
    updates = {}
    if not customer.verified:
        updates["verified"] = True
    if name and customer.name != name:
        updates["name"] = name
    if email and customer.email != email:
        updates["email"] = email
    if updates:
        Customer.objects.filter(pk=customer.pk).update(
            **encryption.seal_fields(Customer, tenant_id=tenant.pk, fields=updates)
        )
        for key, value in updates.items():
            setattr(customer, key, value)
    return customer


# --------------------------------------------------------------------------- conversations


@transaction.atomic
def conversation_start(
    *, tenant: Tenant, customer: Customer, channel: str = Conversation.Channel.WEB
) -> Conversation:
    if customer.tenant_id != tenant.pk:
        raise NotFound("No such customer.")
    return Conversation.objects.create(tenant=tenant, customer=customer, channel=channel)


@transaction.atomic
def conversation_set_owner(*, conversation_id: int, owner: str) -> Conversation:
    """Switch who answers (bot or human) and bump the version; announce it on commit."""
    conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
    if conversation.owner != owner:
        conversation.owner = owner
        conversation.version = F("version") + 1
        conversation.save(update_fields=["owner", "version", "updated_at"])
        conversation.refresh_from_db()
        events.publish_on_commit(
            conversation.pk, events.owner_changed(owner=owner, version=conversation.version)
        )
    return conversation


def conversation_weak_streak_bump(*, conversation_id: int) -> int:
    """Count one more weak-evidence turn (atomically, in the database); return the count."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            weak_evidence_streak=F("weak_evidence_streak") + 1
        )
        return Conversation.objects.values_list("weak_evidence_streak", flat=True).get(
            pk=conversation_id
        )


def conversation_weak_streak_reset(*, conversation_id: int) -> None:
    Conversation.objects.filter(pk=conversation_id, weak_evidence_streak__gt=0).update(
        weak_evidence_streak=0
    )


def conversation_count_model_failure(*, conversation_id: int) -> int:
    """Count one more model failure in the conversation; return the new count."""
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).update(
            model_failures=F("model_failures") + 1
        )
        return Conversation.objects.values_list("model_failures", flat=True).get(pk=conversation_id)


def conversation_set_summary(
    *, conversation_id: int, summary: str, through_message_id: int
) -> None:
    """Store the rebuildable summary of messages up to `through_message_id`."""
    tenant_id = Conversation.objects.values_list("tenant_id", flat=True).get(pk=conversation_id)
    Conversation.objects.filter(pk=conversation_id).update(
        **encryption.seal_fields(
            Conversation,
            tenant_id=tenant_id,
            fields={"summary": summary, "summary_through_message_id": through_message_id},
        )
    )


# --------------------------------------------------------------------------- messages


def _clean_text(text: Any, field: str = "text") -> str:
    if not isinstance(text, str):
        raise ApplicationError("Text must be a string.", field=field)
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
    existing = Message.objects.filter(
        tenant_id=conversation.tenant_id,
        conversation=conversation,
        client_message_id=client_message_id,
    ).first()
    if existing is not None:
        return existing, False
    text = _clean_text(text)
    if conversation.state != Conversation.State.OPEN:
        raise Conflict("This conversation is closed.", field="conversation")
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
            _announce(message, origin=origin)
    except IntegrityError:
        # The same id raced in from another connection, or the conversation was erased
        # meanwhile (its customer deleted): the foreign key refused the row.
        saved = Message.objects.filter(
            conversation=conversation, client_message_id=client_message_id
        ).first()
        if saved is None:
            raise NotFound("No such conversation.") from None
        return saved, False
    return message, True


def message_set_state(*, message_id: int, state: str) -> None:
    Message.objects.filter(pk=message_id).update(state=state, updated_at=timezone.now())


def reply_reserve(*, customer_message: Message) -> Message | None:
    """Reserve the one official bot reply row; return None if another worker holds it."""
    try:
        with transaction.atomic():
            return Message.objects.create(
                tenant_id=customer_message.tenant_id,
                conversation_id=customer_message.conversation_id,
                role=Message.Role.BOT,
                kind=Message.Kind.ANSWER,
                text="",
                reply_to=customer_message,
                state=Message.State.STREAMING,
            )
    except IntegrityError:
        return None


def reply_reserve_or_take_over(*, customer_message: Message, stale_after) -> Message | None:
    """Reserve the reply row, or take over one a dead worker left unfinished.

    The takeover is a conditional UPDATE on the row's (state, updated_at) as read: when two
    workers race for the same stale reply, the database lets exactly one of them win.
    Return None when another worker holds a fresh reservation.
    """
    reply = reply_reserve(customer_message=customer_message)
    if reply is not None:
        return reply
    existing = Message.objects.filter(reply_to=customer_message, role=Message.Role.BOT).first()
    now = timezone.now()
    if (
        existing is None
        or existing.state == Message.State.DELIVERED
        or now - existing.updated_at <= stale_after
    ):
        return None
    taken = Message.objects.filter(
        pk=existing.pk, state=existing.state, updated_at=existing.updated_at
    ).update(updated_at=now, meta={**existing.meta, "taken_over_at": now.isoformat()})
    if not taken:
        return None  # another worker took it over first
    existing.refresh_from_db()
    return existing


@transaction.atomic
def reply_finalize(
    *,
    reply: Message,
    text: str,
    kind: str,
    citations: list[dict],
    customer_state: str,
    stats: dict[str, Any] | None = None,
) -> Message:
    """Save the final reply text and stats, mark both messages final, announce on commit."""
    stats = stats or {}
    reply.text = text
    reply.kind = kind
    reply.citations = citations
    reply.state = Message.State.DELIVERED
    for field in (
        "model",
        "worker",
        "prompt_version",
        "prompt_tokens",
        "completion_tokens",
        "ttft_ms",
        "total_ms",
        "tool_outcome_ref",
    ):
        if field in stats and stats[field] is not None:
            setattr(reply, field, stats[field])
    reply.meta = {**reply.meta, **stats.get("meta", {})}
    reply.save()
    Message.objects.filter(pk=reply.reply_to_id).update(
        state=customer_state, updated_at=timezone.now()
    )
    Conversation.objects.filter(pk=reply.conversation_id).update(last_message_at=timezone.now())
    _announce(reply)
    if conversation_summary_due(conversation_id=reply.conversation_id):
        conversation_id = reply.conversation_id
        task_enqueue_on_commit("conversations.tasks.conversation_summarize_task", conversation_id)
    return reply


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
    _announce(message)
    return message


# --------------------------------------------------------------------------- feedback


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


SUMMARY_KEEP_RECENT = 6
SUMMARY_EVERY = 6


def conversation_summary_rebuild(*, conversation_id: int) -> str:
    """Summarize every message older than the most recent ones (kept verbatim in prompts).

    Extractive and deterministic: the customer's earlier questions and what the bot or agents
    answered, with the sources titles. Originals are never changed; rebuild at any time.
    """
    messages = list(
        Message.objects.filter(conversation_id=conversation_id)
        .exclude(state=Message.State.STREAMING)
        .exclude(text="")
        .order_by("id")
    )
    older = messages[:-SUMMARY_KEEP_RECENT]
    if not older:
        return ""
    lines = []
    for m in older:
        first = m.text.split("\n", 1)[0][:200]
        if m.role == Message.Role.CUSTOMER:
            lines.append(f"Customer asked: {first}")
        elif m.role == Message.Role.BOT:
            titles = ", ".join(dict.fromkeys(c.get("title", "") for c in m.citations))
            lines.append(f"Bot ({m.kind}){' from ' + titles if titles else ''}: {first}")
        elif m.role == Message.Role.AGENT:
            lines.append(f"Agent {m.author_label}: {first}")
    summary = "\n".join(lines)[-4000:]
    conversation_set_summary(
        conversation_id=conversation_id, summary=summary, through_message_id=older[-1].pk
    )
    return summary


def conversation_summary_due(*, conversation_id: int) -> bool:
    """True when enough messages piled up past the stored summary to rebuild it."""
    through = (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("summary_through_message_id", flat=True)
        .first()
    )
    newer = Message.objects.filter(conversation_id=conversation_id)
    if through:
        newer = newer.filter(pk__gt=through)
    return newer.count() >= SUMMARY_KEEP_RECENT + SUMMARY_EVERY
