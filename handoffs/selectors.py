"""Reads of handoffs, always filtered by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from conversations.models import Conversation
from handoffs import presence
from handoffs.models import OPEN_STATES, CannedResponse, Handoff, InternalNote
from supportbot.errors import NotFound
from supportbot.models import Membership, Tenant

DEFAULT_HANDLE_MINUTES = 4.0


@dataclass(frozen=True)
class QueuePosition:
    position: int  # 1 = next
    estimated_wait_minutes: float
    agents_online: int
    ask_for_email: bool  # nobody online or capacity full: offer to follow up by email


def handoff_open_for(*, conversation_id: int) -> Handoff | None:
    return Handoff.objects.filter(conversation_id=conversation_id, state__in=OPEN_STATES).first()


def handoff_get(*, tenant: Tenant, handoff_id: int) -> Handoff:
    handoff = (
        Handoff.objects.select_related("conversation", "conversation__customer", "assigned_to")
        .filter(tenant=tenant, pk=handoff_id)
        .first()
    )
    if handoff is None:
        raise NotFound("No such handoff.")
    return handoff


def handoff_queue(*, tenant: Tenant) -> QuerySet[Handoff]:
    """Open handoffs, most urgent and oldest first."""
    return (
        Handoff.objects.filter(tenant=tenant, state__in=OPEN_STATES)
        .select_related("conversation", "conversation__customer", "assigned_to")
        .order_by("priority", "created_at")
    )


def handoff_queue_position(*, handoff: Handoff) -> QueuePosition:
    """Where a waiting handoff stands, and a wait estimate from recent claim times."""
    ahead = (
        Handoff.objects.filter(tenant_id=handoff.tenant_id, state__in=("requested", "queued"))
        .filter(
            Q(priority__lt=handoff.priority)
            | Q(priority=handoff.priority, created_at__lt=handoff.created_at)
        )
        .count()
    )
    recent = list(
        Handoff.objects.filter(tenant_id=handoff.tenant_id, assigned_at__isnull=False)
        .order_by("-assigned_at")
        .values_list("created_at", "assigned_at")[:20]
    )
    if recent:
        per_case = sum((a - c).total_seconds() for c, a in recent) / len(recent) / 60
    else:
        per_case = DEFAULT_HANDLE_MINUTES
    per_case = max(per_case, 0.5)
    online = len(presence.agents_online(tenant_id=handoff.tenant_id))
    open_count = Handoff.objects.filter(tenant_id=handoff.tenant_id, state__in=OPEN_STATES).count()
    capacity = handoff.tenant.handoff_capacity * online
    return QueuePosition(
        position=ahead + 1,
        estimated_wait_minutes=round(per_case * (ahead + 1) / max(online, 1), 1),
        agents_online=online,
        ask_for_email=online == 0 or open_count > capacity,
    )


def notes_for(*, tenant: Tenant, conversation_id: int) -> QuerySet:
    return InternalNote.objects.filter(
        tenant=tenant, conversation_id=conversation_id
    ).select_related("author")


def canned_responses(*, tenant: Tenant) -> QuerySet:
    return CannedResponse.objects.filter(tenant=tenant)


def knowledge_gaps(*, tenant: Tenant, limit: int = 100) -> list[dict]:
    """Questions that ended in a handoff for weak evidence, newest first."""
    rows = (
        Handoff.objects.filter(tenant=tenant, reason=Handoff.Reason.WEAK_EVIDENCE)
        .select_related("trigger_message")
        .order_by("-created_at")[:limit]
    )
    gaps = []
    for handoff in rows:
        question = handoff.trigger_message.text if handoff.trigger_message else ""
        previous = list(
            handoff.conversation.messages.filter(role="customer")
            .exclude(pk=handoff.trigger_message_id)
            .order_by("-id")
            .values_list("text", flat=True)[:2]
        )
        gaps.append(
            {
                "handoff_id": handoff.pk,
                "conversation_id": handoff.conversation_id,
                "question": question,
                "earlier_questions": previous,
                "created_at": handoff.created_at,
                "state": handoff.state,
            }
        )
    return gaps


def bot_conversations_active(*, tenant: Tenant, minutes: int = 30, limit: int = 20):
    """Open conversations the bot is handling now (no open handoff): agents may take over."""
    since = timezone.now() - timedelta(minutes=minutes)
    return (
        Conversation.objects.filter(
            tenant=tenant, owner="bot", state="open", last_message_at__gte=since
        )
        .exclude(handoffs__state__in=OPEN_STATES)
        .select_related("customer")
        .order_by("-last_message_at")[:limit]
    )


def console_membership(*, user, slug: str | None) -> tuple[Tenant | None, bool]:
    """(tenant, is_member); staff may watch a tenant they are not a member of."""
    if not user or not user.is_authenticated:
        return None, False
    memberships = Membership.objects.filter(user=user, tenant__is_active=True).select_related(
        "tenant"
    )
    if slug:
        memberships = memberships.filter(tenant__slug=slug)
    found = list(memberships[:2])
    if len(found) == 1:
        return found[0].tenant, True
    if slug and user.is_staff:
        return Tenant.objects.filter(slug=slug, is_active=True).first(), False
    return None, False


def handoff_conversation_id(*, tenant: Tenant, handoff_id: int) -> int | None:
    """The conversation of the tenant's handoff `handoff_id` (None for anyone else's)."""
    return (
        Handoff.objects.filter(pk=handoff_id, tenant=tenant)
        .values_list("conversation_id", flat=True)
        .first()
    )
