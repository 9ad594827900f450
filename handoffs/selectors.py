"""Reads of handoffs, always filtered by tenant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from conversations.models import Conversation, Customer, Message
from handoffs import presence
from handoffs.models import OPEN_STATES, CannedResponse, Handoff, InternalNote
from supportbot import replicas
from supportbot.errors import NotFound
from supportbot.models import Tenant

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
        .select_related("conversation", "conversation__customer")
        .order_by("priority", "created_at")
    )


@dataclass(frozen=True)
class AgentRef:
    id: int
    name: str


@dataclass(frozen=True)
class QueueRow:
    """One handoff as the console lists it: plain values, every related row already read."""

    id: int
    version: int
    state: str
    reason: str
    reason_label: str
    reason_detail: str
    priority: int
    conversation_id: int
    customer: str
    verified: bool
    customer_email: str
    last_message: str  # the customer's latest message, cut to 160 characters ("" for none)
    created_at: datetime
    waiting_seconds: int
    assigned_to: str | None
    assigned_to_id: int | None
    routed_to: str | None
    routed_to_id: int | None
    escalated: bool
    viewers: list[str]
    has_summary: bool


@dataclass(frozen=True)
class ActiveChat:
    conversation_id: int
    customer: str
    last_message_at: datetime | None


@dataclass(frozen=True)
class QueueSnapshot:
    handoffs: list[QueueRow]
    agents_online: list[AgentRef]
    active: list[ActiveChat]


def customer_label(customer: Customer) -> str:
    return customer.name or customer.external_id or f"Visitor {customer.pk}"


def agent_display_names(*, user_ids: set[int]) -> dict[int, str]:
    """Full name (or username) of each user, in one query."""
    if not user_ids:
        return {}
    users = get_user_model().objects.filter(pk__in=user_ids)
    return {u.pk: u.get_full_name() or u.get_username() for u in users}


def _with_last_customer_message(handoffs: QuerySet[Handoff]) -> QuerySet[Handoff]:
    last = (
        Message.objects.filter(conversation_id=OuterRef("conversation_id"), role="customer")
        .order_by("-id")
        .values("text")[:1]
    )
    return handoffs.select_related("conversation", "conversation__customer").annotate(
        last_customer_message=Subquery(last)
    )


def _queue_rows(
    *, tenant: Tenant, handoffs: QuerySet[Handoff]
) -> tuple[list[QueueRow], list[AgentRef]]:
    """Rows for `handoffs` and the agents online: one query for the handoffs, one round trip
    to Redis for presence, one query for every name shown, whatever the number of rows."""
    loaded = list(_with_last_customer_message(handoffs))
    online, viewing = presence.queue_presence(
        tenant_id=tenant.pk, handoff_ids=[h.pk for h in loaded]
    )
    user_ids = set(online)
    for h in loaded:
        user_ids.update(filter(None, [h.assigned_to_id, h.routed_to_id]))
        user_ids.update(viewing[h.pk])
    names = agent_display_names(user_ids=user_ids)
    now = timezone.now()
    rows = [
        QueueRow(
            id=h.pk,
            version=h.version,
            state=h.state,
            reason=h.reason,
            reason_label=h.get_reason_display(),
            reason_detail=h.reason_detail,
            priority=h.priority,
            conversation_id=h.conversation_id,
            customer=customer_label(h.conversation.customer),
            verified=h.conversation.customer.verified,
            customer_email=h.customer_email,
            last_message=(h.last_customer_message or "")[:160],
            created_at=h.created_at,
            waiting_seconds=int((now - h.created_at).total_seconds()),
            assigned_to=names.get(h.assigned_to_id) if h.assigned_to_id else None,
            assigned_to_id=h.assigned_to_id,
            routed_to=names.get(h.routed_to_id) if h.routed_to_id else None,
            routed_to_id=h.routed_to_id,
            escalated=h.escalated_at is not None,
            viewers=[names.get(v, str(v)) for v in viewing[h.pk]],
            has_summary=bool(h.summary),
        )
        for h in loaded
    ]
    return rows, [AgentRef(id=i, name=names.get(i, str(i))) for i in online]


@replicas.stale_tolerant
def handoff_queue_snapshot(*, tenant: Tenant) -> QueueSnapshot:
    """The console's live lists (open handoffs, agents online, bot chats an agent may take
    over) in a fixed number of queries and one Redis round trip, from the read replica when
    one is configured: the page refetches this on every queue event."""
    rows, online = _queue_rows(tenant=tenant, handoffs=handoff_queue(tenant=tenant))
    active = [
        ActiveChat(
            conversation_id=c.pk,
            customer=customer_label(c.customer),
            last_message_at=c.last_message_at,
        )
        for c in bot_conversations_active(tenant=tenant)
    ]
    return QueueSnapshot(handoffs=rows, agents_online=online, active=active)


def handoff_queue_row(*, tenant: Tenant, handoff_id: int) -> QueueRow:
    """One handoff of the tenant (open or closed) as the queue lists it; NotFound otherwise."""
    rows, _ = _queue_rows(
        tenant=tenant, handoffs=Handoff.objects.filter(tenant=tenant, pk=handoff_id)
    )
    if not rows:
        raise NotFound("No such handoff.")
    return rows[0]


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


def handoff_conversation_id(*, tenant: Tenant, handoff_id: int) -> int | None:
    """The conversation of the tenant's handoff `handoff_id` (None for anyone else's)."""
    return (
        Handoff.objects.filter(pk=handoff_id, tenant=tenant)
        .values_list("conversation_id", flat=True)
        .first()
    )
