"""Execution: claim `approved` → `executing` (one winner), re-read the order, send once.

After a timeout or a malformed answer the state is `unknown`; the next step (a repeat of
`action_run`, the sweeper or an approver) claims the row and looks the refund up by its key
before any resend. A refund is `succeeded` only when the provider confirmed it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from actions import registry
from actions.models import ActionRequest
from actions.providers import ProviderError, ProviderRejected, ProviderUnavailable
from actions.services.config import provider_for
from actions.services.ledger import EXECUTOR, State, load, transition, transition_or_reload
from actions.services.propose import check
from supportbot.services import audit_code

logger = logging.getLogger(__name__)


def action_run(*, action_id: int) -> ActionRequest:
    """Move the action as far as it may go without the customer or a person.

    `proposed` is checked (a read completes; a write waits for confirmation), `approved` is
    executed, `unknown` and stale `executing` rows are looked up at the provider. Idempotent:
    a settled action, or one waiting for the customer or an approver, is returned as is.
    """
    action = load(action_id)
    if (
        action.state == State.FAILED
        and action.error_code in ("provider_unavailable", "provider_unknown")
        and action.attempts == 0
        and action.confirmed_at is None
        and not action.is_write
    ):
        # A read that could not reach the provider: read again.
        action = transition_or_reload(
            action, to=State.PROPOSED, event="action.rechecked", actor=EXECUTOR
        )
    if action.state == State.PROPOSED:
        action = check(action)
    if action.state == State.APPROVED:
        return execute(action)
    if action.state == State.UNKNOWN:
        return resolve(action)
    if action.state == State.EXECUTING and _stale(action.executing_since):
        return resolve(action)
    return action


def _stale(since: datetime | None) -> bool:
    limit = timedelta(seconds=settings.ACTIONS["STALE_EXECUTING_S"])
    return since is None or timezone.now() - since > limit


def _still_refundable(action: ActionRequest) -> tuple[bool, str]:
    """Re-read the order just before sending: (ok, why not). Raises ProviderError."""
    with provider_for(action.tenant) as provider:
        order = provider.get_order(action.arguments["order_id"])
    if order is None or order.get("owner") != action.customer.external_id:
        return False, "order_not_found"
    refundable = Decimal(str(order["amount"])) - Decimal(str(order.get("refunded_amount") or 0))
    if Decimal(action.arguments["amount"]) > refundable:
        return False, "amount_exceeds_order"
    return True, ""


def execute(action: ActionRequest) -> ActionRequest:
    """Claim approved → executing (one winner), re-read the order, then call the provider."""
    claimed = transition(
        action,
        to=State.EXECUTING,
        event="action.executing",
        actor=EXECUTOR,
        executing_since=timezone.now(),
    )
    if claimed is None:  # another worker or approver got there first
        return load(action.pk)
    return _send_checked(claimed)


def _send_checked(action: ActionRequest) -> ActionRequest:
    try:
        ok, why = _still_refundable(action)
    except ProviderError as exc:
        # Nothing was sent: back to `approved`; the sweeper executes it when the provider is up.
        logger.warning("action %s: order re-read failed before sending: %s", action.pk, exc)
        return transition_or_reload(
            action,
            to=State.APPROVED,
            event="action.deferred",
            actor=EXECUTOR,
            data={"code": audit_code(exc.code), "step": "pre-send read"},
            error_code="provider_unavailable",
            error=str(exc)[:500],
        )
    if not ok:
        return transition_or_reload(
            action,
            to=State.FAILED,
            event="action.failed",
            actor=EXECUTOR,
            data={"code": why, "step": "pre-send read"},
            error_code=why,
            error="The order no longer allows this refund (re-read before sending).",
        )
    sending = transition(
        action,
        to=State.EXECUTING,
        event="action.sending",
        actor=EXECUTOR,
        attempts=F("attempts") + 1,
        executing_since=timezone.now(),
    )
    return send(sending) if sending is not None else load(action.pk)


def _confirmed(action: ActionRequest, record: dict[str, Any] | None) -> bool:
    """True when the provider's record is a finished refund matching the ledger."""
    if not isinstance(record, dict) or not record.get("id") or record.get("status") != "succeeded":
        return False
    try:
        same_amount = Decimal(str(record.get("amount"))) == Decimal(action.arguments["amount"])
    except ArithmeticError:
        return False
    return same_amount and str(record.get("order_id", "")).upper() == action.arguments["order_id"]


def _settle_success(action: ActionRequest, record: dict[str, Any], via: str) -> ActionRequest:
    return transition_or_reload(
        action,
        to=State.SUCCEEDED,
        event="action.succeeded",
        actor=EXECUTOR,
        data={"provider_request_id": record["id"], "via": via},
        provider_request_id=str(record["id"])[:100],
        result=record,
        error_code="",
        error="",
    )


def _settle_unknown(action: ActionRequest, code: str, detail: str) -> ActionRequest:
    return transition_or_reload(
        action,
        to=State.UNKNOWN,
        event="action.unknown",
        actor=EXECUTOR,
        data={"code": audit_code(code)},
        error_code=code,
        error=detail[:500],
    )


def send(action: ActionRequest) -> ActionRequest:
    """Call the provider for a claimed (`executing`) action and record what is known."""
    spec = registry.tool_get(action.tool)
    try:
        with provider_for(action.tenant) as provider:
            record = spec.call(provider, action.arguments, action.retry_key)
    except ProviderRejected as exc:
        return transition_or_reload(
            action,
            to=State.FAILED,
            event="action.failed",
            actor=EXECUTOR,
            data={"code": audit_code(exc.code), "status": exc.status},
            error_code=exc.code[:50],
            error=exc.detail or str(exc),
        )
    except ProviderUnavailable as exc:
        # The request never reached the provider (connection refused): nothing committed.
        logger.warning("action %s: provider unreachable at send: %s", action.pk, exc)
        return _settle_unknown(action, exc.code, str(exc))
    except ProviderError as exc:
        logger.warning("action %s: outcome unknown after send: %s", action.pk, exc)
        return _settle_unknown(action, exc.code, str(exc))
    if _confirmed(action, record):
        return _settle_success(action, record, via="response")
    return _settle_unknown(action, "unconfirmed", f"provider answered {str(record)[:200]}")


def resolve(action: ActionRequest) -> ActionRequest:
    """Look the refund up by its idempotency key; resend only if the provider has none."""
    claimed = transition(
        action,
        to=State.EXECUTING,
        event="action.resolving",
        actor=EXECUTOR,
        executing_since=timezone.now(),
    )
    if claimed is None:
        return load(action.pk)
    spec = registry.tool_get(claimed.tool)
    if spec.lookup is not None:
        try:
            with provider_for(claimed.tenant) as provider:
                record = spec.lookup(provider, claimed.retry_key)
        except ProviderError as exc:
            return _settle_unknown(claimed, exc.code, f"lookup failed: {exc}")
        if record is not None:
            if _confirmed(claimed, record):
                return _settle_success(claimed, record, via="lookup")
            return _settle_unknown(claimed, "unconfirmed", f"lookup found {str(record)[:200]}")
    if claimed.attempts >= settings.ACTIONS["MAX_ATTEMPTS"]:
        return transition_or_reload(
            claimed,
            to=State.FAILED,
            event="action.failed",
            actor=EXECUTOR,
            data={"code": "gave_up", "attempts": claimed.attempts},
            error_code="gave_up",
            error=f"Not committed at the provider after {claimed.attempts} attempts.",
        )
    # The provider has no record under this key: nothing was committed. Re-read the order
    # (it may have changed) and send again with the same key.
    return _send_checked(claimed)
