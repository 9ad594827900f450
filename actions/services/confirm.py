"""The customer's answer to a proposal card, and admission against the limits.

`action_confirm` accepts only the exact proposal the customer saw (id + version), before it
expires. Admission then runs under the customer's `LimitLock` row (SELECT … FOR UPDATE), so
concurrent confirmations are admitted one at a time against the daily limit and the order's
refundable amount (ledger amounts already on their way count). Within policy → `approved`
and executed; otherwise `awaiting_approval` with a handoff to a person.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import IntegrityError, transaction
from django.utils import timezone

from actions import selectors
from actions.models import ActionRequest, LimitLock
from actions.services.execute import execute
from actions.services.ledger import POLICY, State, load, reject, transition
from actions.services.propose import expire, parse_time, refundable_now
from conversations.models import Customer
from handoffs import services as handoff_services
from handoffs.models import Handoff
from supportbot.errors import Conflict, NotFound
from supportbot.services import Actor

VIA = ("button", "typed", "api")


def _limit_lock(customer: Customer) -> None:
    """Create the customer's lock row once (a concurrent creator is fine)."""
    if LimitLock.objects.filter(customer=customer).exists():
        return
    try:
        with transaction.atomic():
            LimitLock.objects.create(tenant_id=customer.tenant_id, customer=customer)
    except IntegrityError:
        pass


def _stale(action: ActionRequest, expected_version: int) -> Conflict:
    if action.state == State.EXPIRED:
        return Conflict(
            "This proposal expired; ask again if you still want it.",
            code="proposal_expired",
            extra={"state": action.state, "current_version": action.version},
        )
    if action.state != State.AWAITING_CONFIRMATION:
        return Conflict(
            f"This proposal is already {action.state.replace('_', ' ')}.",
            code="invalid_state",
            extra={"state": action.state, "current_version": action.version},
        )
    return Conflict(
        "This proposal changed since it was shown; reload and try again.",
        code="stale_version",
        extra={"state": action.state, "current_version": action.version},
    )


def _locked_for_answer(*, action_id: int, customer: Customer, expected_version: int):
    action = ActionRequest.objects.select_for_update(of=("self",)).filter(pk=action_id).first()
    mine = action is not None and (action.customer_id, action.tenant_id) == (
        customer.pk,
        customer.tenant_id,
    )
    if not mine:
        raise NotFound("No such action.")
    action = load(action.pk)
    if (
        action.state == State.AWAITING_CONFIRMATION
        and action.expires_at
        and action.expires_at < timezone.now()
    ):
        action = expire(action)
    return action


def action_confirm(
    *, action_id: int, customer: Customer, expected_version: int, via: str = "button"
) -> ActionRequest:
    """Confirm the proposal `customer` was shown; admit it against the limits and run it.

    Idempotent for a retry: confirming an action already confirmed returns it unchanged.
    Raise Conflict for an expired or cancelled proposal or a stale version; NotFound for
    another customer's action.
    """
    if via not in VIA:
        via = "api"
    _limit_lock(customer)
    with transaction.atomic():
        LimitLock.objects.select_for_update().get(customer=customer)
        action = _locked_for_answer(
            action_id=action_id, customer=customer, expected_version=expected_version
        )
        already = action.confirmed_at is not None and action.version >= expected_version
        if already:
            return action  # a retried confirmation: nothing new happens
        if action.state != State.AWAITING_CONFIRMATION or action.version != expected_version:
            raise _stale(action, expected_version)
        confirmed = transition(
            action,
            to=State.AWAITING_CONFIRMATION,
            event="action.confirmed",
            actor=Actor.system(f"customer:{customer.pk}"),
            data={"via": via},
            confirmed_at=timezone.now(),
            confirmed_via=via,
        )
        if confirmed is None:
            raise _stale(load(action_id), expected_version)
        admitted = _admit(confirmed)
    if admitted.state == State.APPROVED:
        return execute(admitted)
    return admitted


def _admit(action: ActionRequest) -> ActionRequest:
    """Under the customer's limit lock: approve, park for a person, or reject."""
    tenant = action.tenant
    amount = Decimal(action.arguments["amount"])
    snapshot = action.order_snapshot or {}
    read_at = parse_time(snapshot.get("read_at")) or action.created_at
    refundable = refundable_now(action, {"amount": 0, **snapshot}, read_at)
    if amount > refundable:
        return reject(
            action,
            "amount_exceeds_order",
            f"{amount} is more than the refundable {refundable}.",
            refundable=f"{max(refundable, Decimal(0)):.2f}",
        )
    recent = selectors.refund_total_recent(customer=action.customer, exclude_id=action.pk)
    denied_before = (
        ActionRequest.objects.filter(dedupe_key=action.dedupe_key, state=State.DENIED)
        .exclude(pk=action.pk)
        .exists()
    )
    approval = None
    if recent + amount > tenant.refund_per_customer_daily_limit:
        approval = "daily_limit"
    elif amount > tenant.refund_auto_limit:
        approval = "over_auto_limit"
    elif denied_before:
        approval = "previously_denied"
    if approval is None:
        return transition(
            action,
            to=State.APPROVED,
            event="action.approved",
            actor=POLICY,
            data={
                "by": "policy",
                "auto_limit": f"{tenant.refund_auto_limit:.2f}",
                "recent_refunds": f"{recent:.2f}",
            },
            decided_at=timezone.now(),
            decision_reason=f"Within the automatic limit of {tenant.refund_auto_limit:.2f}.",
        ) or load(action.pk)
    parked = transition(
        action,
        to=State.AWAITING_APPROVAL,
        event="action.awaiting_approval",
        actor=POLICY,
        data={"approval_reason": approval, "recent_refunds": f"{recent:.2f}"},
        approval_reason=approval,
    )
    if parked is not None:
        handoff_services.handoff_request(
            conversation=action.conversation,
            reason=Handoff.Reason.APPROVAL_NEEDED,
            detail=(
                f"Refund of ${amount:.2f} for order {action.arguments['order_id']} "
                f"needs approval ({approval}); action #{action.pk}."
            ),
            actor=POLICY,
        )
    return parked or load(action.pk)


def action_cancel(*, action_id: int, customer: Customer, expected_version: int) -> ActionRequest:
    """Cancel the proposal `customer` was shown (nothing executes). A repeat is a no-op."""
    with transaction.atomic():
        action = _locked_for_answer(
            action_id=action_id, customer=customer, expected_version=expected_version
        )
        if action.state == State.CANCELLED:
            return action
        if action.state != State.AWAITING_CONFIRMATION or action.version != expected_version:
            raise _stale(action, expected_version)
        cancelled = transition(
            action,
            to=State.CANCELLED,
            event="action.cancelled",
            actor=Actor.system(f"customer:{customer.pk}"),
            error_code="cancelled",
        )
        if cancelled is None:
            raise _stale(load(action_id), expected_version)
    return cancelled
