"""Writes of the action ledger: propose → check → (approve) → execute → settle.

The model (or a deterministic intent) only proposes. This module validates the arguments
against the tool's schema, checks the customer's identity and ownership of the order and the
tenant's policy, and executes through the provider with the ledger's retry key as the
Idempotency-Key. Every state change is a conditional UPDATE on (state, version) with an audit
event in the same transaction, so two workers or two agents racing produce one execution.

After a timeout the state is `unknown`; the next step (a repeat of `action_run`, the sweeper
or an approver) claims the row and looks the refund up by its key before any resend. A refund
is `succeeded` only when the provider confirmed it.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from actions import crypto, registry, selectors
from actions.messages import customer_text
from actions.models import ActionRequest, ProviderConfig
from actions.providers import (
    OrderProvider,
    ProviderError,
    ProviderRejected,
    ProviderSettings,
)
from conversations import services as conversation_services
from conversations.models import Conversation, Customer, Message
from handoffs import services as handoff_services
from handoffs.models import Handoff
from supportbot.errors import ApplicationError, Conflict, NotFound
from supportbot.models import Tenant
from supportbot.services import Actor, audit_event_record

logger = logging.getLogger(__name__)

State = ActionRequest.State
POLICY = Actor.system("actions.policy")
EXECUTOR = Actor.system("actions.executor")


class ProviderNotConfigured(ProviderError):
    code = "provider_not_configured"


# --------------------------------------------------------------------------- provider config


@transaction.atomic
def provider_config_set(
    *,
    tenant: Tenant,
    base_url: str,
    token: str,
    timeout_seconds: float | None = None,
    actor: Actor | None = None,
) -> ProviderConfig:
    """Point `tenant` at its order API; the token is stored encrypted (never logged)."""
    if not base_url.startswith(("http://", "https://")):
        raise ApplicationError("base_url must be an http(s) URL.", field="base_url")
    defaults: dict[str, Any] = {
        "base_url": base_url.rstrip("/"),
        "credentials_encrypted": crypto.encrypt(token),
        "enabled": True,
    }
    if timeout_seconds is not None:
        defaults["timeout_seconds"] = timeout_seconds
    config, created = ProviderConfig.objects.update_or_create(tenant=tenant, defaults=defaults)
    audit_event_record(
        tenant=tenant,
        actor=actor or Actor.system(),
        action="provider_config.set",
        target_type="provider_config",
        target_id=config.pk,
        data={"base_url": config.base_url, "created": created},
    )
    return config


def _provider(tenant: Tenant) -> OrderProvider:
    config = selectors.provider_config_get(tenant=tenant)
    if config is None:
        raise ProviderNotConfigured("This tenant has no order system configured.")
    return OrderProvider(
        ProviderSettings(
            base_url=config.base_url,
            token=crypto.decrypt(config.credentials_encrypted),
            timeout_seconds=config.timeout_seconds or settings.ACTIONS["PROVIDER_TIMEOUT_S"],
        )
    )


# --------------------------------------------------------------------------- helpers


def retry_key_for(*, tenant_id: int, conversation_id: int, tool: str, key_arguments: str) -> str:
    """sha256(tenant + conversation + tool + normalized arguments): one row per intent."""
    raw = f"{tenant_id}|{conversation_id}|{tool}|{key_arguments}"
    return hashlib.sha256(raw.encode()).hexdigest()


def _audit(action: ActionRequest, event: str, actor: Actor, **data: Any) -> None:
    audit_event_record(
        tenant=action.tenant,
        actor=actor,
        action=event,
        target_type=selectors.AUDIT_TARGET,
        target_id=action.pk,
        data={"tool": action.tool, "state": action.state, **data},
    )


def _announce(action: ActionRequest) -> None:
    conversation_services.broadcast_on_commit(
        f"actions_{action.tenant_id}",
        {
            "type": "action.changed",
            "action_id": action.pk,
            "state": action.state,
            "version": action.version,
        },
    )


def _load(action_id: int) -> ActionRequest:
    action = (
        ActionRequest.objects.select_related("tenant", "customer", "conversation", "decided_by")
        .filter(pk=action_id)
        .first()
    )
    if action is None:
        raise NotFound("No such action.")
    return action


def _transition(
    action: ActionRequest,
    *,
    to: str,
    event: str,
    actor: Actor,
    data: dict[str, Any] | None = None,
    **fields: Any,
) -> ActionRequest | None:
    """Move `action` from its loaded (state, version) to `to`; None if someone moved it first."""
    now = timezone.now()
    if to in (State.SUCCEEDED, State.FAILED, State.DENIED, State.REJECTED):
        fields.setdefault("completed_at", now)
    with transaction.atomic():
        moved = ActionRequest.objects.filter(
            pk=action.pk, state=action.state, version=action.version
        ).update(state=to, version=F("version") + 1, updated_at=now, **fields)
        if not moved:
            return None
        fresh = _load(action.pk)
        _audit(fresh, event, actor, **{"from": action.state, **(data or {})})
        _announce(fresh)
    return fresh


def _reject_proposal(
    *, conversation: Conversation, tool: Any, source: str, code: str, detail: str, field=None
):
    logger.warning(
        "rejected %s tool proposal in conversation %s: %s (%s)",
        source,
        conversation.pk,
        code,
        detail,
    )
    audit_event_record(
        tenant=conversation.tenant,
        actor=Actor.system(f"actions.{source}"),
        action="action.proposal_rejected",
        target_type="conversation",
        target_id=conversation.pk,
        data={"tool": str(tool)[:50], "code": code, "detail": detail[:300], "field": field},
    )
    raise ApplicationError(detail, code=code, field=field)


# --------------------------------------------------------------------------- propose


def action_propose(
    *,
    conversation: Conversation,
    customer: Customer,
    tool: str,
    arguments: dict,
    source: str,
) -> ActionRequest:
    """Validate a proposal and record it (state `proposed`); a repeat returns the same row.

    Raise ApplicationError — logged and audited, nothing recorded, no provider call — for an
    unknown tool or arguments that do not fit the tool's schema (wrong types, amount <= 0).
    """
    if customer.pk != conversation.customer_id or customer.tenant_id != conversation.tenant_id:
        raise NotFound("No such customer in this conversation.")
    if source not in ActionRequest.Source.values:
        raise ApplicationError(f"Unknown proposal source {source!r}.", field="source")
    spec = registry.tool_get(tool)
    if spec is None:
        _reject_proposal(
            conversation=conversation,
            tool=tool,
            source=source,
            code="unknown_tool",
            detail=f"Unknown tool {str(tool)[:50]!r}.",
            field="tool",
        )
    try:
        normalized = spec.validate(arguments)
    except registry.ArgumentsInvalid as exc:
        _reject_proposal(
            conversation=conversation,
            tool=tool,
            source=source,
            code="invalid_arguments",
            detail=exc.detail,
            field=exc.field,
        )
    key = retry_key_for(
        tenant_id=conversation.tenant_id,
        conversation_id=conversation.pk,
        tool=spec.name,
        key_arguments=spec.key_arguments(normalized),
    )
    existing = ActionRequest.objects.filter(retry_key=key).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            action = ActionRequest.objects.create(
                tenant_id=conversation.tenant_id,
                conversation=conversation,
                customer=customer,
                tool=spec.name,
                arguments=normalized,
                retry_key=key,
                risk=spec.risk,
                proposed_by=source,
            )
            action = _load(action.pk)
            _audit(action, "action.proposed", Actor.system(f"actions.{source}"), source=source)
            _announce(action)
    except IntegrityError:  # the same proposal raced in from another worker
        action = ActionRequest.objects.get(retry_key=key)
    return action


# --------------------------------------------------------------------------- run


def action_run(*, action_id: int) -> ActionRequest:
    """Move the action as far as policy allows: check, then execute or park for approval.

    Idempotent: a settled action is returned as is; an `unknown` one is first looked up at
    the provider; one that another worker is executing is returned untouched.
    """
    action = _load(action_id)
    if (
        action.state == State.FAILED
        and action.error_code in ("provider_unavailable", "provider_unknown")
        and action.attempts == 0
    ):
        # The check itself could not reach the provider (nothing was written): check again.
        action = _transition(
            action, to=State.PROPOSED, event="action.rechecked", actor=POLICY
        ) or _load(action_id)
    if action.state == State.PROPOSED:
        action = _check(action)
    if action.state == State.APPROVED:
        return _execute(action)
    if action.state == State.UNKNOWN:
        return _resolve(action)
    if action.state == State.EXECUTING and _stale(action.executing_since):
        return _resolve(action)
    return action


def _stale(since: datetime | None) -> bool:
    limit = timedelta(seconds=settings.ACTIONS["STALE_EXECUTING_S"])
    return since is None or timezone.now() - since > limit


def _order_view(order: dict[str, Any]) -> dict[str, Any]:
    """What the ledger keeps of the order (the owner id stays out of it)."""
    keep = ("id", "status", "items", "amount", "refunded_amount", "currency")
    view = {k: order.get(k) for k in keep}
    view["placed_at"] = order.get("placed_at")
    view["delivered_at"] = order.get("delivered_at")
    return view


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _reject(action: ActionRequest, code: str, detail: str, **data: Any) -> ActionRequest:
    return _transition(
        action,
        to=State.REJECTED,
        event="action.rejected",
        actor=POLICY,
        data={"code": code, **data},
        error_code=code,
        error=detail,
    ) or _load(action.pk)


def _check(action: ActionRequest) -> ActionRequest:
    """Identity, ownership and tenant policy; then approve, park for a person, or reject."""
    spec = registry.tool_get(action.tool)
    customer = action.customer
    denied = spec.permission(customer)
    if denied:
        return _reject(action, denied, "The customer is not signed in.")
    order_id = action.arguments["order_id"]
    try:
        with _provider(action.tenant) as provider:
            order = provider.get_order(order_id)
    except ProviderError as exc:
        return _transition(
            action,
            to=State.FAILED,
            event="action.failed",
            actor=POLICY,
            data={"code": exc.code, "step": "check"},
            error_code="provider_unavailable"
            if exc.code != "provider_not_configured"
            else exc.code,
            error=str(exc)[:500],
        ) or _load(action.pk)
    if order is None or order.get("owner") != customer.external_id:
        # Another customer's order is answered exactly like a missing one.
        why = "missing" if order is None else "not_owner"
        return _reject(action, "order_not_found", "No such order for this customer.", why=why)
    snapshot = _order_view(order)
    if spec.risk == ActionRequest.Risk.READ:
        return _transition(
            action,
            to=State.SUCCEEDED,
            event="action.succeeded",
            actor=POLICY,
            order_snapshot=snapshot,
            result=snapshot,
        ) or _load(action.pk)
    ActionRequest.objects.filter(pk=action.pk).update(order_snapshot=snapshot)
    action.order_snapshot = snapshot
    return _check_refund_policy(action, snapshot)


def _check_refund_policy(action: ActionRequest, order: dict[str, Any]) -> ActionRequest:
    tenant = action.tenant
    amount = Decimal(action.arguments["amount"])
    delivered_at = _parse_time(order.get("delivered_at"))
    if order.get("status") != "delivered" or delivered_at is None:
        return _reject(action, "not_delivered", "The order has not been delivered yet.")
    days = (timezone.now() - delivered_at).days
    if days > tenant.refund_window_days:
        return _reject(
            action,
            "outside_refund_window",
            f"Delivered {days} days ago; the window is {tenant.refund_window_days} days.",
            days_since_delivery=days,
        )
    refundable = Decimal(order["amount"]) - Decimal(order.get("refunded_amount") or 0)
    if amount > refundable:
        return _reject(
            action,
            "amount_exceeds_order",
            f"{amount} is more than the refundable {refundable}.",
            refundable=f"{refundable:.2f}",
        )
    recent = selectors.refund_total_recent(customer=action.customer, exclude_id=action.pk)
    approval = None
    if recent + amount > tenant.refund_per_customer_daily_limit:
        approval = "daily_limit"
    elif amount > tenant.refund_auto_limit:
        approval = "over_auto_limit"
    if approval is None:
        return _transition(
            action,
            to=State.APPROVED,
            event="action.approved",
            actor=POLICY,
            data={"by": "policy", "auto_limit": f"{tenant.refund_auto_limit:.2f}"},
            decided_at=timezone.now(),
            decision_reason=f"Within the automatic limit of {tenant.refund_auto_limit:.2f}.",
        ) or _load(action.pk)
    with transaction.atomic():
        parked = _transition(
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
    return parked or _load(action.pk)


# --------------------------------------------------------------------------- execute


def _execute(action: ActionRequest) -> ActionRequest:
    """Claim approved → executing (one winner), then call the provider once."""
    claimed = _transition(
        action,
        to=State.EXECUTING,
        event="action.executing",
        actor=EXECUTOR,
        executing_since=timezone.now(),
        attempts=F("attempts") + 1,
    )
    if claimed is None:  # another worker or approver got there first
        return _load(action.pk)
    return _send(claimed)


def _confirmed(action: ActionRequest, record: dict[str, Any] | None) -> bool:
    """True when the provider's record is a finished refund matching the ledger."""
    if not record or not record.get("id") or record.get("status") != "succeeded":
        return False
    try:
        same_amount = Decimal(str(record.get("amount"))) == Decimal(action.arguments["amount"])
    except ArithmeticError:
        return False
    return same_amount and str(record.get("order_id", "")).upper() == action.arguments["order_id"]


def _settle_success(action: ActionRequest, record: dict[str, Any], via: str) -> ActionRequest:
    return _transition(
        action,
        to=State.SUCCEEDED,
        event="action.succeeded",
        actor=EXECUTOR,
        data={"provider_request_id": record["id"], "via": via},
        provider_request_id=str(record["id"])[:100],
        result=record,
        error_code="",
        error="",
    ) or _load(action.pk)


def _settle_unknown(action: ActionRequest, code: str, detail: str) -> ActionRequest:
    return _transition(
        action,
        to=State.UNKNOWN,
        event="action.unknown",
        actor=EXECUTOR,
        data={"code": code, "detail": detail[:300]},
        error_code=code,
        error=detail[:500],
    ) or _load(action.pk)


def _send(action: ActionRequest) -> ActionRequest:
    """Call the provider for a claimed (`executing`) action and record what is known."""
    spec = registry.tool_get(action.tool)
    try:
        with _provider(action.tenant) as provider:
            record = spec.call(provider, action.arguments, action.retry_key)
    except ProviderRejected as exc:
        return _transition(
            action,
            to=State.FAILED,
            event="action.failed",
            actor=EXECUTOR,
            data={"code": exc.code, "status": exc.status, "detail": exc.detail},
            error_code=exc.code[:50],
            error=exc.detail or str(exc),
        ) or _load(action.pk)
    except ProviderError as exc:
        logger.warning("action %s: outcome unknown after send: %s", action.pk, exc)
        return _settle_unknown(action, exc.code, str(exc))
    if _confirmed(action, record):
        return _settle_success(action, record, via="response")
    return _settle_unknown(action, "unconfirmed", f"provider answered {str(record)[:200]}")


def _resolve(action: ActionRequest) -> ActionRequest:
    """Look the refund up by its idempotency key; resend only if the provider has none."""
    claimed = _transition(
        action,
        to=State.EXECUTING,
        event="action.resolving",
        actor=EXECUTOR,
        executing_since=timezone.now(),
    )
    if claimed is None:
        return _load(action.pk)
    spec = registry.tool_get(claimed.tool)
    if spec.lookup is not None:
        try:
            with _provider(claimed.tenant) as provider:
                record = spec.lookup(provider, claimed.retry_key)
        except ProviderError as exc:
            return _settle_unknown(claimed, exc.code, f"lookup failed: {exc}")
        if record is not None:
            if _confirmed(claimed, record):
                return _settle_success(claimed, record, via="lookup")
            return _settle_unknown(claimed, "unconfirmed", f"lookup found {str(record)[:200]}")
    if claimed.attempts >= settings.ACTIONS["MAX_ATTEMPTS"]:
        return _transition(
            claimed,
            to=State.FAILED,
            event="action.failed",
            actor=EXECUTOR,
            data={"code": "gave_up", "attempts": claimed.attempts},
            error_code="gave_up",
            error=f"Not committed at the provider after {claimed.attempts} attempts.",
        ) or _load(claimed.pk)
    # The provider has no record under this key: nothing was committed, so send (same key).
    again = _transition(
        claimed,
        to=State.EXECUTING,
        event="action.resending",
        actor=EXECUTOR,
        attempts=F("attempts") + 1,
        executing_since=timezone.now(),
    )
    return _send(again) if again is not None else _load(claimed.pk)


# --------------------------------------------------------------------------- decide


@transaction.atomic
def _decide(*, action_id: int, agent, approve: bool, reason: str, expected_version: int):
    action = (
        ActionRequest.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .filter(pk=action_id)
        .first()
    )
    # `decided_by` is read after the lock: a join would show the pre-lock (empty) row.
    if action is None or not selectors.can_decide(user=agent, tenant=action.tenant):
        raise NotFound("No such action.")
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
    reason = (reason or "").strip()
    if not approve and not reason:
        raise ApplicationError("Say why the action is denied.", field="reason")
    decided = _transition(
        action,
        to=State.APPROVED if approve else State.DENIED,
        event="action.approved" if approve else "action.denied",
        actor=Actor.for_user(agent),
        data={"by": agent.get_username(), "reason": reason[:500]},
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

    Raise Conflict ("Already approved by X") when another agent decided first or the version
    is stale: two agents approving at once produce one decision and one execution.
    """
    action = _decide(
        action_id=action_id,
        agent=agent,
        approve=approve,
        reason=reason,
        expected_version=expected_version,
    )
    if action.state == State.APPROVED:
        action = _execute(action)
    notify_customer(action=action)
    return action


# --------------------------------------------------------------------------- sweep, notify


def action_mark_notified(*, action_id: int, state: str) -> None:
    """Record that the customer was already told about `state` (by the bot's own reply)."""
    ActionRequest.objects.filter(pk=action_id, state=state).update(notified_state=state)


def notify_customer(*, action: ActionRequest) -> Message | None:
    """Tell the customer a settled outcome reached outside their request (approval, sweeper).

    Posted once per state (`notified_state`), with text built from the ledger only.
    """
    if not action.is_settled and action.state != State.UNKNOWN:
        return None
    with transaction.atomic():
        marked = (
            ActionRequest.objects.filter(pk=action.pk)
            .exclude(notified_state=action.state)
            .update(notified_state=action.state)
        )
        if not marked:
            return None
        return conversation_services.message_post(
            conversation=action.conversation,
            role=Message.Role.SYSTEM,
            kind=Message.Kind.ACTION,
            text=customer_text(action),
            meta={"action_id": action.pk, "state": action.state},
        )


def actions_sweep(*, limit: int = 50) -> list[int]:
    """Resolve actions left `unknown`, stuck `executing` or `approved` but never started."""
    now = timezone.now()
    cfg = settings.ACTIONS
    stuck = (
        Q(state=State.UNKNOWN)
        | Q(
            state=State.EXECUTING,
            executing_since__lt=now - timedelta(seconds=cfg["STALE_EXECUTING_S"]),
        )
        | Q(state=State.APPROVED, updated_at__lt=now - timedelta(seconds=cfg["STALE_APPROVED_S"]))
    )
    ids = list(
        ActionRequest.objects.filter(stuck)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )
    for action_id in ids:
        try:
            action = action_run(action_id=action_id)
            if action.is_settled:
                notify_customer(action=action)
        except Exception:  # one bad row must not stop the sweep
            logger.exception("sweeping action %s failed", action_id)
    return ids
