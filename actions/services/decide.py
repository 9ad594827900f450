"""A person's decision on an action waiting for approval.

Who may decide: a member of the tenant whose role the tenant's policy allows for the action's
risk class — never the person who proposed it on the customer's behalf. Every refused attempt
is audited. An approval re-validates the order (fresh provider read: owner, delivery window,
refundable amount including refunds on their way) before it executes.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from actions import selectors
from actions.models import ActionRequest
from actions.providers import ProviderError
from actions.services.config import provider_for
from actions.services.execute import execute
from actions.services.ledger import State, audit, reject, transition
from actions.services.propose import order_refusal, refundable_now
from actions.services.sweep import notify_customer
from supportbot.errors import ApplicationError, Conflict, NotFound, PermissionDenied
from supportbot.services import Actor


def _refuse(action: ActionRequest, agent, code: str, detail: str) -> PermissionDenied:
    audit(action, "action.decision_refused", Actor.for_user(agent), code=code)
    return PermissionDenied(detail, code=code)


def _authorize(action: ActionRequest, agent) -> None:
    """Raise PermissionDenied (audited) unless `agent` may decide `action`."""
    refusal = selectors.decide_refusal(user=agent, tenant=action.tenant, action=action)
    if refusal is not None:
        raise _refuse(action, agent, *refusal)


def _revalidate(action: ActionRequest) -> tuple[str, str] | None:
    """Why policy no longer allows the refund ((code, detail)), or None. Reads the provider."""
    read_at = timezone.now()
    with provider_for(action.tenant) as provider:
        order = provider.get_order(action.arguments["order_id"])
    refusal = order_refusal(action, order)
    if refusal:
        return refusal
    refundable = refundable_now(action, order, read_at)
    if Decimal(action.arguments["amount"]) > refundable:
        return "amount_exceeds_order", f"Only {refundable:.2f} is still refundable."
    return None


@transaction.atomic
def _decide(*, action_id: int, agent, approve: bool, reason: str, expected_version: int):
    action = (
        ActionRequest.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .filter(pk=action_id)
        .first()
    )
    if action.state != State.AWAITING_APPROVAL or action.version != expected_version:
        who = action.decided_by.get_username() if action.decided_by else None
        if who and action.state != State.AWAITING_APPROVAL:
            verb = "denied" if action.state == State.DENIED else "approved"
            detail = f"Already {verb} by {who}."
            code = "already_decided"
        elif action.state != State.AWAITING_APPROVAL:
            detail = f"This action is {action.state} and needs no decision."
            code = "invalid_state"
        else:
            detail = "This action changed since you loaded it; reload and try again."
            code = "stale_version"
        raise Conflict(
            detail,
            code=code,
            extra={"current_version": action.version, "state": action.state, "decided_by": who},
        )
    recent = selectors.refund_total_recent(customer=action.customer, exclude_id=action.pk)
    decided = transition(
        action,
        to=State.APPROVED if approve else State.DENIED,
        event="action.approved" if approve else "action.denied",
        actor=Actor.for_user(agent),
        data={
            "by": agent.get_username(),
            # The agent's reason stays on the action (erased with the customer): it may
            # quote the customer, and the audit trail outlives an erasure.
            "reason_given": bool(reason),
            "recent_refunds": f"{recent:.2f}",
            "daily_limit": f"{action.tenant.refund_per_customer_daily_limit:.2f}",
        },
        decided_by=agent,
        decided_at=timezone.now(),
        decision_reason=reason[:2000],
    )
    if decided is None:  # cannot happen under the row lock, but never report a second state
        raise Conflict("This action changed since you loaded it.", code="stale_version")
    return decided


def action_decide(
    *, action_id: int, agent, approve: bool, reason: str, expected_version: int
) -> ActionRequest:
    """Record `agent`'s approval or denial (with why); an approval is executed at once.

    Raise PermissionDenied (audited) when `agent` may not decide it; Conflict ("Already
    approved by X") when another agent decided first or the version is stale. An approval of
    a refund the order no longer allows ends `rejected`, with the reason, and sends nothing.
    """
    action = ActionRequest.objects.select_related("tenant", "customer").filter(pk=action_id).first()
    if action is None or not selectors.can_see(user=agent, tenant=action.tenant):
        raise NotFound("No such action.")
    _authorize(action, agent)
    reason = (reason or "").strip()
    if not approve and not reason:
        raise ApplicationError("Say why the action is denied.", field="reason")
    if approve and action.state == State.AWAITING_APPROVAL and action.version == expected_version:
        try:
            refusal = _revalidate(action)
        except ProviderError as exc:
            raise ApplicationError(
                "The order system cannot be reached to re-check this refund; try again shortly.",
                code="provider_unavailable",
            ) from exc
        if refusal:
            rejected = reject(action, *refusal, by=agent.get_username(), step="approval")
            notify_customer(action=rejected)
            return rejected
    decided = _decide(
        action_id=action_id,
        agent=agent,
        approve=approve,
        reason=reason,
        expected_version=expected_version,
    )
    if decided.state == State.APPROVED:
        decided = execute(decided)
    notify_customer(action=decided)
    return decided
