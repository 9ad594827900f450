"""Handoff state machine: requested → queued → assigned → resolved | returned_to_bot (| expired).

Every transition checks the expected version and bumps it, so two agents racing produce one
winner and a clear Conflict for the other. The conversation's owner follows the handoff:
`human` while assigned, `bot` when given back.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from conversations import services as conversation_services
from conversations.models import Conversation, Message
from handoffs.models import OPEN_STATES, Handoff
from supportbot.errors import ApplicationError, Conflict, NotFound
from supportbot.services import Actor, audit_event_record


def _queue_event(handoff: Handoff, event: str) -> None:
    conversation_services.broadcast_on_commit(
        f"handoffs_{handoff.tenant_id}",
        {"type": "handoff.changed", "event": event, "handoff_id": handoff.pk},
    )


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
        data={"conversation_id": conversation.pk, "reason": reason, "detail": detail[:300]},
    )
    _queue_event(handoff, "queued")
    return handoff, True


def _transition(
    *, handoff_id: int, tenant_id: int, expected_version: int | None, allowed_from: tuple[str, ...]
) -> Handoff:
    handoff = (
        Handoff.objects.select_for_update()
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
    _queue_event(handoff, "assigned")
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
    conversation_services.conversation_set_weak_streak(
        conversation_id=handoff.conversation_id, streak=0
    )
    audit_event_record(
        tenant=handoff.tenant,
        actor=Actor.for_user(agent),
        action=f"handoff.{outcome}",
        target_type="handoff",
        target_id=handoff.pk,
    )
    _queue_event(handoff, outcome)
    return handoff


def handoff_set_summary(*, handoff_id: int, summary: str, source: str) -> None:
    Handoff.objects.filter(pk=handoff_id).update(summary=summary, summary_source=source)
