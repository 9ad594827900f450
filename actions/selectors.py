"""Reads of the action ledger, always filtered by tenant."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from actions.messages import customer_text, proposal_next_step, proposal_summary
from actions.models import ActionPolicy, ActionRequest, ProviderConfig, default_approver_roles
from conversations.models import Customer, Message
from supportbot.errors import NotFound
from supportbot.models import AuditEvent, Membership, Tenant

AUDIT_TARGET = "action_request"
# States whose refund amount counts against the customer's daily limit (done or on its way).
LIMIT_STATES = ("awaiting_approval", "approved", "executing", "unknown", "succeeded")
WRITE_TOOLS = ("request_refund",)


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


def can_see(*, user, tenant: Tenant) -> bool:
    """Members of the tenant and staff operators see its ledger."""
    return user.is_staff or Membership.objects.filter(tenant=tenant, user=user).exists()


def decide_refusal(
    *, user, tenant: Tenant, action: ActionRequest | None = None
) -> tuple[str, str] | None:
    """Why `user` may not decide approvals (of `action`) as (code, detail), or None when they
    may: a member whose role the tenant's policy allows for its risk class, and never the
    person who proposed it."""
    membership = Membership.objects.filter(tenant=tenant, user=user).first()
    if membership is None:
        return "not_a_member", "Only agents of this tenant decide approvals."
    if action is None:
        return None
    if action.initiated_by_id and action.initiated_by_id == user.pk:
        return "own_proposal", "You proposed this action, so someone else has to approve it."
    policy = ActionPolicy.objects.filter(tenant=tenant).first()
    roles = policy.approver_roles if policy else default_approver_roles()
    if membership.role not in roles.get(action.risk, []):
        return (
            "role_not_allowed",
            f"Your role ({membership.role}) may not approve {action.risk}-risk actions here.",
        )
    return None


def can_decide(*, user, tenant: Tenant, action: ActionRequest | None = None) -> bool:
    """Whether `user` may decide approvals (of `action`); see `decide_refusal`."""
    return decide_refusal(user=user, tenant=tenant, action=action) is None


def action_card(action: ActionRequest) -> dict[str, Any]:
    """The public shape of an action for the customer's chat (card) and partner API.

    Built from the ledger row only: what would happen, the state, the text the customer is
    shown, and the version a confirmation must name.
    """
    arguments = action.arguments or {}
    amount = arguments.get("amount")
    return {
        "id": action.pk,
        "version": action.version,
        "tool": action.tool,
        "state": action.state,
        "conversation_id": action.conversation_id,
        "order_id": arguments.get("order_id"),
        "amount": amount if action.tool in WRITE_TOOLS else None,
        "currency": arguments.get("currency") if action.tool in WRITE_TOOLS else None,
        "needs_confirmation": action.state == ActionRequest.State.AWAITING_CONFIRMATION,
        "expires_at": action.expires_at.isoformat() if action.expires_at else None,
        "summary": proposal_summary(action),
        "next_step": proposal_next_step(action),
        "text": customer_text(action),
        "provider_reference": action.provider_request_id or None,
    }


def action_load(*, action_id: int) -> ActionRequest:
    action = ActionRequest.objects.select_related("tenant").filter(pk=action_id).first()
    if action is None:
        raise NotFound("No such action.")
    return action


def proposal_answered_by(*, conversation, message) -> ActionRequest | None:
    """The proposal card a typed answer (`message`) answers: the card shown by the message
    right before it in its conversation, when that card is this customer's.

    Nothing may stand in between: another customer message, a bot answer, a system notice (a
    queue position, another card's outcome) or an agent's message each mean the customer's
    words answer that, not the card. Every showing counts, in whichever of the customer's
    conversations it was shown (the same refund asked again elsewhere shows the same card).
    The card is returned in any state: a re-driven "yes" whose first run confirmed it before
    the process died finds it answered already.
    """
    previous = (
        Message.objects.filter(conversation_id=conversation.pk, pk__lt=message.pk)
        .order_by("-pk")
        .values("role", "meta")
        .first()
    )
    if previous is None or previous["role"] != Message.Role.BOT:
        return None
    shown = previous["meta"] or {}
    action_id = shown.get("action_id")
    if (
        shown.get("action_state") != ActionRequest.State.AWAITING_CONFIRMATION
        or not isinstance(action_id, int)
        or isinstance(action_id, bool)
    ):
        return None
    return (
        ActionRequest.objects.select_related("tenant")
        .filter(
            pk=action_id,
            tenant_id=conversation.tenant_id,
            customer_id=conversation.customer_id,
            tool__in=WRITE_TOOLS,
        )
        .first()
    )


def action_cards_for_conversation(*, conversation_id: int) -> list[dict[str, Any]]:
    """Cards of the write actions shown in a conversation (their current state)."""
    rows = ActionRequest.objects.select_related("tenant").filter(
        conversation_id=conversation_id, tool__in=WRITE_TOOLS
    )
    return [action_card(a) for a in rows.order_by("id")]


def action_card_get(*, tenant: Tenant, action_id: int) -> dict[str, Any] | None:
    action = ActionRequest.objects.select_related("tenant").filter(tenant=tenant, pk=action_id)
    found = action.first()
    return action_card(found) if found else None
