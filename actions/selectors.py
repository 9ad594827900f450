"""Reads of the action ledger, always filtered by tenant."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone

from actions.models import ActionRequest, ProviderConfig
from conversations.models import Customer
from supportbot.errors import NotFound
from supportbot.models import AuditEvent, Membership, Tenant

AUDIT_TARGET = "action_request"
# States whose refund amount counts against the customer's daily limit (done or on its way).
LIMIT_STATES = ("awaiting_approval", "approved", "executing", "unknown", "succeeded")


def provider_config_get(*, tenant: Tenant) -> ProviderConfig | None:
    return ProviderConfig.objects.filter(tenant=tenant, enabled=True).first()


def action_get(*, tenant: Tenant, action_id: int) -> ActionRequest:
    action = (
        ActionRequest.objects.select_related("customer", "conversation", "decided_by")
        .filter(tenant=tenant, pk=action_id)
        .first()
    )
    if action is None:
        raise NotFound("No such action.")
    return action


def action_list(
    *, tenant: Tenant, state: str | None = None, limit: int = 200
) -> QuerySet[ActionRequest]:
    qs = ActionRequest.objects.filter(tenant=tenant).select_related("customer", "decided_by")
    if state:
        qs = qs.filter(state=state)
    return qs.order_by("-created_at", "-id")[:limit]


def pending_approvals(*, tenant: Tenant) -> QuerySet[ActionRequest]:
    """Actions waiting for a person, oldest first."""
    return (
        ActionRequest.objects.filter(tenant=tenant, state=ActionRequest.State.AWAITING_APPROVAL)
        .select_related("customer", "conversation")
        .order_by("created_at", "id")
    )


def actions_for_conversation(*, tenant: Tenant, conversation_id: int) -> QuerySet[ActionRequest]:
    return ActionRequest.objects.filter(tenant=tenant, conversation_id=conversation_id).order_by(
        "created_at", "id"
    )


def action_audit_trail(*, action: ActionRequest) -> QuerySet[AuditEvent]:
    """Every audited transition of `action`, oldest first."""
    return AuditEvent.objects.filter(
        tenant_id=action.tenant_id, target_type=AUDIT_TARGET, target_id=str(action.pk)
    ).order_by("created_at", "id")


def proposal_rejections(*, tenant: Tenant, limit: int = 50) -> QuerySet[AuditEvent]:
    """Malformed proposals (unknown tool, wrong types, bad amounts): no ledger row, no call."""
    return AuditEvent.objects.filter(tenant=tenant, action="action.proposal_rejected").order_by(
        "-created_at", "-id"
    )[:limit]


def refund_total_recent(
    *, customer: Customer, exclude_id: int | None = None, hours: int = 24
) -> Decimal:
    """Refund amounts of `customer` in the last `hours` that are done or on their way."""
    rows = ActionRequest.objects.filter(
        tenant_id=customer.tenant_id,
        customer=customer,
        tool="request_refund",
        state__in=LIMIT_STATES,
        created_at__gte=timezone.now() - timedelta(hours=hours),
    )
    if exclude_id is not None:
        rows = rows.exclude(pk=exclude_id)
    return sum((Decimal(a["amount"]) for a in rows.values_list("arguments", flat=True)), Decimal(0))


def console_tenants(*, user) -> QuerySet[Tenant]:
    """Tenants whose actions `user` may see: their memberships; staff see every tenant."""
    if user.is_staff:
        return Tenant.objects.order_by("slug")
    return Tenant.objects.filter(memberships__user=user).order_by("slug")


def can_decide(*, user, tenant: Tenant) -> bool:
    """Agents and admins of the tenant decide approvals (staff operators only watch)."""
    return Membership.objects.filter(tenant=tenant, user=user).exists()
