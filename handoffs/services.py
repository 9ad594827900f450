"""Handoff state machine: requested → queued → assigned → resolved | returned_to_bot (| expired).

Every transition checks the expected version and bumps it, so two agents racing produce one
winner and a clear Conflict for the other. The conversation's owner follows the handoff:
`human` while assigned, `bot` when given back.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from conversations import services as conversation_services
from conversations.models import Conversation, Message
from handoffs import events as queue_events
from handoffs import presence, selectors
from handoffs.models import OPEN_STATES, CannedResponse, Handoff, InternalNote, Team
from supportbot.errors import ApplicationError, Conflict, NotFound, PermissionDenied
from supportbot.models import Membership
from supportbot.queue import task_enqueue_on_commit
from supportbot.services import Actor, audit_event_record


@transaction.atomic
def handoff_request(
    *,
    conversation: Conversation,
    reason: str,
    detail: str = "",
    trigger_message: Message | None = None,
    actor: Actor | None = None,
    priority: int | None = None,
) -> tuple[Handoff, bool]:
    """Open a handoff for `conversation`, or return the open one (False). Queued at once."""
    if reason not in Handoff.Reason.values:
        raise ApplicationError(f"Unknown handoff reason {reason!r}.", field="reason")
    existing = Handoff.objects.filter(conversation=conversation, state__in=OPEN_STATES).first()
    if existing is not None:
        return existing, False
    if priority is None:
        priority = 1 if reason in (Handoff.Reason.HIGH_RISK, Handoff.Reason.APPROVAL_NEEDED) else 2
    try:
        with transaction.atomic():
            handoff = Handoff.objects.create(
                tenant_id=conversation.tenant_id,
                conversation=conversation,
                trigger_message=trigger_message,
                state=Handoff.State.QUEUED,
                reason=reason,
                reason_detail=detail[:300],
                priority=priority,
            )
    except IntegrityError:  # another request opened one first
        return Handoff.objects.get(conversation=conversation, state__in=OPEN_STATES), False
    audit_event_record(
        tenant=conversation.tenant,
        actor=actor or Actor.system("orchestrator"),
        action="handoff.requested",
        target_type="handoff",
        target_id=handoff.pk,
        # The reason code only: `detail` may quote the customer (it lives, sealed, on the
        # handoff, which erasure deletes; the append-only audit trail outlives it).
        data={"conversation_id": conversation.pk, "reason": reason},
    )
    queue_events.publish_on_commit(
        handoff.tenant_id, queue_events.handoff_queued(handoff_id=handoff.pk)
    )
    task_enqueue_on_commit("handoffs.tasks.handoff_summarize_task", handoff.pk)
    transaction.on_commit(lambda: handoff_route(handoff_id=handoff.pk))
    return handoff, True


def queue_text(position: selectors.QueuePosition) -> str:
    """Tell the customer their place in the queue, or to leave an email when nobody is on."""
    if position.ask_for_email:
        return (
            "Everyone on our team is busy or offline right now, so this may take a while. Your "
            "conversation stays in the queue; leave your email and we'll follow up there."
        )
    return (
        f"You're number {position.position} in the queue; the wait is about "
        f"{max(1, round(position.estimated_wait_minutes))} minute(s). "
        "You can keep writing here and they will see everything."
    )


@transaction.atomic
def handoff_open_with_notice(
    *,
    conversation: Conversation,
    reason: str,
    detail: str = "",
    actor: Actor | None = None,
) -> tuple[Handoff, bool, selectors.QueuePosition]:
    """Open (or return) the conversation's handoff outside a message (button, partner API,
    an agent's takeover); on open, tell the customer their queue position in a notice.

    Return the handoff, whether it was opened now, and its queue position; the caller
    publishes `handoff.started` (the chat path to the caller's own connection as well).
    """
    handoff, created = handoff_request(
        conversation=conversation, reason=reason, detail=detail, actor=actor
    )
    position = selectors.handoff_queue_position(handoff=handoff)
    if created:
        conversation_services.message_post(
            conversation=conversation,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.NOTICE,
            text="A person from our team will join shortly. " + queue_text(position),
            meta={"handoff_id": handoff.pk},
        )
    return handoff, created, position


def _transition(
    *, handoff_id: int, tenant_id: int, expected_version: int | None, allowed_from: tuple[str, ...]
) -> Handoff:
    handoff = (
        Handoff.objects.select_for_update(of=("self",))
        .select_related("assigned_to")
        .filter(pk=handoff_id, tenant_id=tenant_id)
        .first()
    )
    if handoff is None:
        raise NotFound("No such handoff.")
    if expected_version is not None and handoff.version != expected_version:
        holder = handoff.assigned_to.get_username() if handoff.assigned_to else None
        detail = (
            f"Already claimed by {holder}."
            if holder and handoff.state == "assigned"
            else "This handoff changed since you loaded it; reload and try again."
        )
        raise Conflict(detail, code="stale_version", extra={"current_version": handoff.version})
    if handoff.state not in allowed_from:
        raise Conflict(f"Handoff is {handoff.state}.", code="invalid_state")
    return handoff


@transaction.atomic
def handoff_claim(*, tenant_id: int, handoff_id: int, agent, expected_version: int) -> Handoff:
    """Assign the handoff to `agent`; raise Conflict if another agent holds it."""
    handoff = _transition(
        handoff_id=handoff_id,
        tenant_id=tenant_id,
        expected_version=expected_version,
        allowed_from=("requested", "queued"),
    )
    handoff.state = Handoff.State.ASSIGNED
    handoff.assigned_to = agent
    handoff.assigned_at = timezone.now()
    handoff.version = F("version") + 1
    handoff.save(update_fields=["state", "assigned_to", "assigned_at", "version", "updated_at"])
    handoff.refresh_from_db()
    conversation_services.conversation_set_owner(
        conversation_id=handoff.conversation_id, owner=Conversation.Owner.HUMAN
    )
    audit_event_record(
        tenant=handoff.tenant,
        actor=Actor.for_user(agent),
        action="handoff.claimed",
        target_type="handoff",
        target_id=handoff.pk,
    )
    queue_events.publish_on_commit(
        handoff.tenant_id, queue_events.handoff_assigned(handoff_id=handoff.pk)
    )
    return handoff


@transaction.atomic
def handoff_close(
    *, tenant_id: int, handoff_id: int, agent, expected_version: int, outcome: str
) -> Handoff:
    """Resolve the handoff or give the conversation back to the bot."""
    if outcome not in (Handoff.State.RESOLVED, Handoff.State.RETURNED_TO_BOT):
        raise ApplicationError("outcome must be resolved or returned_to_bot.", field="outcome")
    handoff = _transition(
        handoff_id=handoff_id,
        tenant_id=tenant_id,
        expected_version=expected_version,
        allowed_from=OPEN_STATES,
    )
    handoff.state = outcome
    handoff.closed_at = timezone.now()
    handoff.version = F("version") + 1
    handoff.save(update_fields=["state", "closed_at", "version", "updated_at"])
    handoff.refresh_from_db()
    conversation_services.conversation_set_owner(
        conversation_id=handoff.conversation_id, owner=Conversation.Owner.BOT
    )
    conversation_services.conversation_weak_streak_reset(conversation_id=handoff.conversation_id)
    audit_event_record(
        tenant=handoff.tenant,
        actor=Actor.for_user(agent),
        action=f"handoff.{outcome}",
        target_type="handoff",
        target_id=handoff.pk,
    )
    queue_events.publish_on_commit(
        handoff.tenant_id, queue_events.handoff_closed(handoff_id=handoff.pk, outcome=outcome)
    )
    return handoff


def handoff_set_summary(*, handoff_id: int, summary: str, source: str) -> None:
    """Store the (rebuildable) summary and tell the console."""
    handoff = Handoff.objects.get(pk=handoff_id)
    handoff.summary, handoff.summary_source = summary, source
    handoff.save(update_fields=["summary", "summary_source"])
    with transaction.atomic():
        queue_events.publish_on_commit(
            handoff.tenant_id, queue_events.handoff_summarized(handoff_id=handoff.pk)
        )


# --------------------------------------------------------------------------- routing


def _agent_name(user) -> str:
    return user.get_full_name() or user.get_username()


def _team_for(handoff: Handoff) -> Team | None:
    teams = list(Team.objects.filter(tenant_id=handoff.tenant_id).prefetch_related("members"))
    for team in teams:
        if handoff.reason in (team.handles_reasons or []):
            return team
    return next((t for t in teams if not t.handles_reasons), None)


@transaction.atomic
def handoff_route(*, handoff_id: int) -> Handoff | None:
    """Offer a waiting handoff to the least busy online agent of its team (round robin on ties).

    The agent still claims it; `handoff_escalate_overdue` re-routes and raises the priority
    of handoffs nobody claimed in time. Returns None when no agent is online.
    """
    handoff = Handoff.objects.select_for_update().filter(pk=handoff_id).first()
    if handoff is None or handoff.state not in ("requested", "queued"):
        return None
    team = handoff.team or _team_for(handoff)
    online = set(presence.agents_online(tenant_id=handoff.tenant_id))
    members = Membership.objects.filter(tenant_id=handoff.tenant_id, user_id__in=online)
    if team is not None:
        members = members.filter(user__in=team.members.all())
    candidates = list(members.values_list("user_id", flat=True))
    if handoff.routed_to_id in candidates and len(candidates) > 1 and handoff.escalated_at:
        candidates.remove(handoff.routed_to_id)  # escalation: offer it to someone else
    if not candidates:
        if team is not None and handoff.team_id != team.pk:
            handoff.team = team
            handoff.save(update_fields=["team", "updated_at"])
        return None

    def load(user_id: int) -> tuple[int, float]:
        busy = Handoff.objects.filter(assigned_to_id=user_id, state="assigned").count()
        last = (
            Handoff.objects.filter(routed_to_id=user_id)
            .order_by("-created_at")
            .values_list("created_at", flat=True)
            .first()
        )
        return busy, last.timestamp() if last else 0.0

    chosen = min(candidates, key=load)
    handoff.routed_to_id = chosen
    handoff.team = team
    handoff.save(update_fields=["routed_to", "team", "updated_at"])
    queue_events.publish_on_commit(
        handoff.tenant_id, queue_events.handoff_routed(handoff_id=handoff.pk)
    )
    return handoff


def handoff_escalate_overdue(*, older_than_seconds: int) -> list[int]:
    """Raise and re-route handoffs left unclaimed for too long; return their ids."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    ids = list(
        Handoff.objects.filter(
            state__in=("requested", "queued"), created_at__lt=cutoff, escalated_at__isnull=True
        ).values_list("pk", flat=True)
    )
    for handoff_id in ids:
        with transaction.atomic():
            handoff = Handoff.objects.select_for_update().get(pk=handoff_id)
            if handoff.state not in ("requested", "queued") or handoff.escalated_at:
                continue
            handoff.escalated_at = timezone.now()
            handoff.priority = 1
            handoff.version = F("version") + 1
            handoff.save(update_fields=["escalated_at", "priority", "version", "updated_at"])
            handoff.refresh_from_db()
            audit_event_record(
                tenant=handoff.tenant,
                actor=Actor.system("escalation"),
                action="handoff.escalated",
                target_type="handoff",
                target_id=handoff.pk,
            )
            queue_events.publish_on_commit(
                handoff.tenant_id, queue_events.handoff_escalated(handoff_id=handoff.pk)
            )
        handoff_route(handoff_id=handoff_id)
    return ids


# --------------------------------------------------------------------------- agent work


def _require_agent(*, tenant_id: int, user) -> Membership:
    membership = Membership.objects.filter(tenant_id=tenant_id, user=user).first()
    if membership is None:
        raise PermissionDenied("You are not an agent of this tenant.")
    return membership


@transaction.atomic
def agent_reply_post(*, tenant_id: int, handoff_id: int, agent, text: str) -> Message:
    """Send the assigned agent's reply to the customer's chat (live, on commit)."""
    handoff = (
        Handoff.objects.select_related("conversation")
        .filter(pk=handoff_id, tenant_id=tenant_id)
        .first()
    )
    if handoff is None:
        raise NotFound("No such handoff.")
    if handoff.state != Handoff.State.ASSIGNED or handoff.assigned_to_id != agent.pk:
        raise Conflict("Claim this handoff before replying.", code="not_assigned")
    message = conversation_services.message_post(
        conversation=handoff.conversation,
        role=Message.Role.AGENT,
        text=text,
        author_label=_agent_name(agent),
        meta={"agent_id": agent.pk, "handoff_id": handoff.pk},
    )
    audit_event_record(
        tenant=handoff.tenant,
        actor=Actor.for_user(agent),
        action="handoff.replied",
        target_type="handoff",
        target_id=handoff.pk,
        data={"message_id": message.pk, "conversation_id": handoff.conversation_id},
    )
    return message


@transaction.atomic
def note_add(*, tenant_id: int, conversation_id: int, agent, text: str) -> InternalNote:
    """Add an internal note (agents only; never sent to the customer)."""
    _require_agent(tenant_id=tenant_id, user=agent)
    conversation = Conversation.objects.filter(pk=conversation_id, tenant_id=tenant_id).first()
    if conversation is None:
        raise NotFound("No such conversation.")
    text = (text or "").strip()
    if not text:
        raise ApplicationError("A note needs text.", field="text")
    note = InternalNote.objects.create(
        tenant_id=tenant_id, conversation=conversation, author=agent, text=text[:4000]
    )
    queue_events.publish_on_commit(
        tenant_id, queue_events.note_added(conversation_id=conversation.pk)
    )
    return note


def canned_response_ensure(*, tenant_id: int, title: str, text: str) -> CannedResponse:
    canned, _ = CannedResponse.objects.get_or_create(
        tenant_id=tenant_id, title=title, defaults={"text": text}
    )
    return canned


@transaction.atomic
def handoff_leave_contact(*, conversation: Conversation, email: str) -> Handoff:
    """Record the customer's email on the open handoff so an agent can follow up."""
    try:
        validate_email(email)
    except ValidationError as exc:
        raise ApplicationError("Enter a valid email address.", field="email") from exc
    handoff = (
        Handoff.objects.select_for_update()
        .filter(conversation=conversation, state__in=OPEN_STATES)
        .first()
    )
    if handoff is None:
        raise NotFound("There is no open handoff for this conversation.")
    handoff.customer_email = email
    handoff.save(update_fields=["customer_email", "updated_at"])
    queue_events.publish_on_commit(
        handoff.tenant_id, queue_events.handoff_contact_left(handoff_id=handoff.pk)
    )
    return handoff
