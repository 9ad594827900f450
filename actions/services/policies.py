"""A tenant's policies as its admins edit them in the console: the refund limits, handoff
capacity and retention kept on the tenant, and the action policy (proposal lifetime, approver
roles per risk class). One change is one transaction and one audit row with old and new values.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from actions.models import ActionPolicy
from actions.services.config import approver_roles_checked, proposal_ttl_checked
from supportbot.errors import ApplicationError
from supportbot.models import Tenant
from supportbot.services import Actor, audit_event_record

MONEY_MAX = Decimal("99999999.99")  # Tenant's DecimalField(max_digits=10, decimal_places=2)
HANDOFF_CAPACITY_MAX = 1000
TENANT_FIELDS = (
    "refund_auto_limit",
    "refund_per_customer_daily_limit",
    "handoff_capacity",
    "retention_days",
)
RETENTION_DAYS_MAX = 3650


@dataclass(frozen=True)
class Policies:
    """Every policy a tenant admin edits, as one value (None retention: keep forever)."""

    refund_auto_limit: Decimal
    refund_per_customer_daily_limit: Decimal
    handoff_capacity: int
    retention_days: int | None
    proposal_ttl_seconds: int
    approver_roles: dict[str, list[str]]

    @classmethod
    def of(cls, tenant: Tenant, policy: ActionPolicy) -> Policies:
        return cls(
            refund_auto_limit=tenant.refund_auto_limit,
            refund_per_customer_daily_limit=tenant.refund_per_customer_daily_limit,
            handoff_capacity=tenant.handoff_capacity,
            retention_days=tenant.retention_days,
            proposal_ttl_seconds=policy.proposal_ttl_seconds,
            approver_roles={risk: sorted(roles) for risk, roles in policy.approver_roles.items()},
        )


def policies_get(*, tenant: Tenant) -> Policies:
    """The tenant's policies (the action policy's defaults when it never set one)."""
    policy = ActionPolicy.objects.filter(tenant=tenant).first() or ActionPolicy(tenant=tenant)
    return Policies.of(tenant, policy)


def _money_checked(value: Decimal, field: str) -> Decimal:
    if value < 0 or value > MONEY_MAX or value != value.quantize(Decimal("0.01")):
        raise ApplicationError(
            f"Use an amount from 0 to {MONEY_MAX} with at most 2 decimals.", field=field
        )
    return value.quantize(Decimal("0.01"))


def _checked(new: Policies, *, current_roles: dict[str, list[str]]) -> Policies:
    if not 1 <= new.handoff_capacity <= HANDOFF_CAPACITY_MAX:
        raise ApplicationError(
            f"Use 1 to {HANDOFF_CAPACITY_MAX} open handoffs per agent.", field="handoff_capacity"
        )
    if new.retention_days is not None and not 1 <= new.retention_days <= RETENTION_DAYS_MAX:
        raise ApplicationError(
            f"Use 1 to {RETENTION_DAYS_MAX} days, or leave it empty to keep conversations.",
            field="retention_days",
        )
    return Policies(
        refund_auto_limit=_money_checked(new.refund_auto_limit, "refund_auto_limit"),
        refund_per_customer_daily_limit=_money_checked(
            new.refund_per_customer_daily_limit, "refund_per_customer_daily_limit"
        ),
        handoff_capacity=new.handoff_capacity,
        retention_days=new.retention_days,
        proposal_ttl_seconds=proposal_ttl_checked(new.proposal_ttl_seconds),
        approver_roles=approver_roles_checked(new.approver_roles, current=current_roles),
    )


def _audit_value(value):
    return f"{value:.2f}" if isinstance(value, Decimal) else value


@transaction.atomic
def policies_set(*, tenant: Tenant, actor: Actor, policies: Policies) -> dict[str, dict]:
    """Set the tenant's policies; return what changed ({field: {"old", "new"}}), which is also
    the audit row `policies.changed` (none when nothing changed). Raise ApplicationError with
    `field` for a value out of range; nothing is written then. Rows are locked: two admins
    saving at once are applied one after the other, each audited against what it replaced."""
    locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
    action_policy, _ = ActionPolicy.objects.select_for_update().get_or_create(tenant=locked)
    old = Policies.of(locked, action_policy)
    new = _checked(policies, current_roles=action_policy.approver_roles)
    changes = {
        field: {"old": _audit_value(before), "new": _audit_value(getattr(new, field))}
        for field, before in vars(old).items()
        if before != getattr(new, field)
    }
    if not changes:
        return {}
    tenant_fields = [f for f in TENANT_FIELDS if f in changes]
    for field in tenant_fields:
        setattr(locked, field, getattr(new, field))
    if tenant_fields:
        locked.save(update_fields=tenant_fields)
    action_policy.proposal_ttl_seconds = new.proposal_ttl_seconds
    action_policy.approver_roles = new.approver_roles
    action_policy.save()
    audit_event_record(
        tenant=locked,
        actor=actor,
        action="policies.changed",
        target_type="tenant",
        target_id=locked.pk,
        data={"changes": changes},
    )
    for field in tenant_fields:  # the caller's object shows the new values too
        setattr(tenant, field, getattr(new, field))
    return changes
