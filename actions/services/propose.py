"""Validate a proposal, find the ledger row it stands for, and check it against the order.

A read (`check_order`) is one row per customer message and runs at once with fresh provider
data. A write (`request_refund`) is one live row per dedupe key: asking again — in this or
another conversation, or a partner's retry — returns the existing row; a deliberate second
refund (`distinct=True`, from words that say so) takes the next sequence number. Checks that
pass leave a write `awaiting_confirmation` (the customer's card); nothing executes here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from actions import registry
from actions.models import LIVE_STATES, ActionRequest
from actions.providers import ProviderError
from actions.services.config import action_policy_get, provider_for
from actions.services.ledger import (
    POLICY,
    State,
    announce,
    audit,
    dedupe_key_for,
    load,
    reject,
    retry_key_for,
    transition_or_reload,
)
from conversations.models import Conversation, Customer
from supportbot import encryption
from supportbot.errors import ApplicationError, NotFound
from supportbot.services import Actor, audit_code, audit_event_record

logger = logging.getLogger(__name__)

# Ledger states whose amount is on its way to the provider (not yet in its refunded total).
IN_FLIGHT = (State.AWAITING_APPROVAL, State.APPROVED, State.EXECUTING, State.UNKNOWN)


def _reject_proposal(
    *, conversation: Conversation, tool: Any, source: str, code: str, detail: str, field=None
):
    # Codes only, in the log and the audit trail: the model's tool name and the schema's
    # message can quote what the customer typed (the audit trail outlives an erasure).
    spec = registry.tool_get(tool) if isinstance(tool, str) else None
    tool_name = spec.name if spec is not None else "unknown"
    fields = {"tool", *(spec.schema.get("properties", {}) if spec else ())}
    known_field = field if field in fields else None
    logger.warning(
        "rejected %s tool proposal in conversation %s: %s (tool %s, field %s)",
        source,
        conversation.pk,
        code,
        tool_name,
        known_field,
    )
    audit_event_record(
        tenant=conversation.tenant,
        actor=Actor.system(f"actions.{source}"),
        action="action.proposal_rejected",
        target_type="conversation",
        target_id=conversation.pk,
        data={"tool": tool_name, "code": code, "field": known_field},
    )
    raise ApplicationError(detail, code=code, field=field)


def _retire_expired(dedupe_key: str) -> None:
    """Mark this key's cards that nobody confirmed in time `expired` (as the sweeper would)."""
    stale = ActionRequest.objects.filter(
        dedupe_key=dedupe_key, state=State.AWAITING_CONFIRMATION, expires_at__lt=timezone.now()
    )
    for action in stale.select_related("tenant", "customer", "conversation"):
        expire(action)


def expire(action: ActionRequest) -> ActionRequest:
    return transition_or_reload(
        action, to=State.EXPIRED, event="action.expired", actor=POLICY, error_code="expired"
    )


def _existing(dedupe_key: str, since: datetime) -> ActionRequest | None:
    """The live row for `dedupe_key` (newest sequence), if it still stands for the refund."""
    row = (
        ActionRequest.objects.filter(dedupe_key=dedupe_key, state__in=LIVE_STATES)
        .order_by("-sequence", "-id")
        .first()
    )
    if row is None:
        return None
    if row.state == State.SUCCEEDED and (row.completed_at or row.created_at) < since:
        return None  # an old refund outside the window: a new one is a new refund
    return row


def action_propose(
    *,
    conversation: Conversation,
    customer: Customer,
    tool: str,
    arguments: dict,
    source: str,
    customer_message_id: int | None = None,
    initiated_by=None,
    distinct: bool = False,
) -> ActionRequest:
    """Validate a proposal and return its ledger row (new in `proposed`, or the existing one).

    Raise ApplicationError — logged and audited, nothing recorded, no provider call — for an
    unknown tool or arguments that do not fit the tool's schema (wrong types, amount <= 0).
    """
    spec, normalized = _proposal_validate(
        conversation=conversation, customer=customer, tool=tool, arguments=arguments, source=source
    )
    dedupe_key = _proposal_dedupe_key(
        conversation=conversation,
        customer=customer,
        spec=spec,
        normalized=normalized,
        customer_message_id=customer_message_id,
    )
    policy = action_policy_get(tenant=conversation.tenant)
    since = timezone.now() - timedelta(hours=policy.dedupe_window_hours)
    _retire_expired(dedupe_key)
    existing = _existing(dedupe_key, since)
    if existing is not None and not (distinct and existing.state == State.SUCCEEDED):
        return existing
    slot = _slot_next(dedupe_key)
    try:
        return _proposal_record(
            conversation=conversation,
            customer=customer,
            spec=spec,
            normalized=normalized,
            dedupe_key=dedupe_key,
            slot=slot,
            source=source,
            customer_message_id=customer_message_id,
            initiated_by=initiated_by,
        )
    except IntegrityError:  # the same proposal raced in from another worker or conversation
        raced = _existing(dedupe_key, since)
        if raced is None:
            raise
        return raced


def _proposal_validate(
    *, conversation: Conversation, customer: Customer, tool: str, arguments: dict, source: str
) -> tuple[registry.Tool, dict]:
    """The tool's spec and the normalized arguments; NotFound / ApplicationError otherwise
    (an unknown tool or arguments that do not fit are logged and audited)."""
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
    return spec, normalized


def _proposal_dedupe_key(
    *,
    conversation: Conversation,
    customer: Customer,
    spec: registry.Tool,
    normalized: dict,
    customer_message_id: int | None,
) -> str:
    """The ledger's dedupe key of this proposal."""
    key_arguments = spec.key_arguments(normalized)
    if not spec.is_write:
        # A read: one per customer message (a repeat of the message is the same read), fresh
        # provider data for every new message.
        key_arguments += f"|message:{customer_message_id or timezone.now().timestamp()}"
    return dedupe_key_for(
        tenant_id=conversation.tenant_id,
        customer_id=customer.pk,
        tool=spec.name,
        key_arguments=key_arguments,
    )


@dataclass(frozen=True)
class _Slot:
    """Where a new row goes under its dedupe key: its sequence, and how many rows already
    took that sequence (the retry key's generation)."""

    sequence: int
    generation: int


def _slot_next(dedupe_key: str) -> _Slot:
    # Live rows outside the window (an old refund), or the one a deliberate second refund
    # adds to, keep their sequence; this one takes the next.
    last = ActionRequest.objects.filter(dedupe_key=dedupe_key, state__in=LIVE_STATES).aggregate(
        seq=Max("sequence")
    )["seq"]
    sequence = (last or 0) + 1
    generation = ActionRequest.objects.filter(dedupe_key=dedupe_key, sequence=sequence).count()
    # A "full" row keeps the retry key it was made with once its amount is resolved (its
    # dedupe key moves to the figure's), so that key stays taken with no row left to count it:
    # asking "in full" again must not take it a second time.
    while ActionRequest.objects.filter(
        retry_key=retry_key_for(dedupe_key=dedupe_key, sequence=sequence, generation=generation)
    ).exists():
        generation += 1
    return _Slot(sequence=sequence, generation=generation)


def _proposal_record(
    *,
    conversation: Conversation,
    customer: Customer,
    spec: registry.Tool,
    normalized: dict,
    dedupe_key: str,
    slot: _Slot,
    source: str,
    customer_message_id: int | None,
    initiated_by,
) -> ActionRequest:
    """Create the row in `proposed`, audit and announce it, in one transaction (IntegrityError
    when the same proposal raced in)."""
    with transaction.atomic():
        action = ActionRequest.objects.create(
            tenant_id=conversation.tenant_id,
            conversation=conversation,
            customer=customer,
            tool=spec.name,
            arguments=normalized,
            order_key=order_key_for(tenant_id=conversation.tenant_id, arguments=normalized),
            dedupe_key=dedupe_key,
            sequence=slot.sequence,
            retry_key=retry_key_for(
                dedupe_key=dedupe_key, sequence=slot.sequence, generation=slot.generation
            ),
            risk=spec.risk,
            proposed_by=source,
            requested_in_message_id=customer_message_id,
            initiated_by=initiated_by,
        )
        action = load(action.pk)
        audit(
            action,
            "action.proposed",
            Actor.for_user(initiated_by) if initiated_by else Actor.system(f"actions.{source}"),
            source=source,
            sequence=slot.sequence,
        )
        announce(action)
    return action


# --------------------------------------------------------------------------- check


def _order_view(order: dict[str, Any]) -> dict[str, Any]:
    """What the ledger keeps of the order (the owner id stays out of it)."""
    keep = ("id", "status", "items", "amount", "refunded_amount", "currency")
    view = {k: order.get(k) for k in keep}
    view["placed_at"] = order.get("placed_at")
    view["delivered_at"] = order.get("delivered_at")
    view["read_at"] = timezone.now().isoformat()
    return view


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def order_key_for(*, tenant_id: int, arguments: dict[str, Any]) -> str:
    """The keyed hash of the arguments' order id (empty when the tool names no order)."""
    order_id = arguments.get("order_id")
    if not order_id:
        return ""
    return encryption.blind_index(tenant_id=tenant_id, purpose="order", value=str(order_id))


def _indexed_order_id(action: ActionRequest) -> str | None:
    order_id = action.arguments.get("order_id") if isinstance(action.arguments, dict) else None
    return str(order_id) if order_id else None


def order_keys_rekey(*, batch_size: int = 500) -> int:
    """Recompute every stored `order_key` under the newest blind-index key (from the
    decrypted arguments); return the rows changed. Idempotent (`manage.py blind_index_rekey`)."""
    return encryption.blind_index_rekey(
        ActionRequest.objects.exclude(order_key=""),
        field="order_key",
        purpose="order",
        value_of=_indexed_order_id,
        batch_size=batch_size,
    )


def in_flight_for_order(action: ActionRequest, order_read_at: datetime) -> Decimal:
    """Refund amounts of this order on their way (or settled after the order was read)."""
    order_id = action.arguments.get("order_id")
    order_keys = (
        encryption.blind_index_candidates(
            tenant_id=action.tenant_id, purpose="order", value=str(order_id)
        )
        if order_id
        else [""]
    )
    rows = ActionRequest.objects.filter(
        tenant_id=action.tenant_id,
        tool="request_refund",
        order_key__in=order_keys,
    ).exclude(pk=action.pk)
    pending = rows.filter(
        Q(state__in=IN_FLIGHT) | Q(state=State.SUCCEEDED, completed_at__gte=order_read_at)
    )
    return sum(
        (Decimal(a["amount"]) for a in pending.values_list("arguments", flat=True)), Decimal(0)
    )


def refundable_now(action: ActionRequest, order: dict[str, Any], read_at: datetime) -> Decimal:
    refunded = Decimal(str(order.get("refunded_amount") or 0))
    return Decimal(str(order["amount"])) - refunded - in_flight_for_order(action, read_at)


def order_refusal(action: ActionRequest, order: dict[str, Any] | None) -> tuple[str, str] | None:
    """Why the order does not allow this refund now ((code, detail)), or None."""
    tenant = action.tenant
    if order is None or order.get("owner") != action.customer.external_id:
        return "order_not_found", "No such order for this customer."
    delivered_at = parse_time(order.get("delivered_at"))
    if order.get("status") != "delivered" or delivered_at is None:
        return "not_delivered", "The order has not been delivered yet."
    days = (timezone.now() - delivered_at).days
    if days > tenant.refund_window_days:
        return (
            "outside_refund_window",
            f"Delivered {days} days ago; the window is {tenant.refund_window_days} days.",
        )
    currency = action.arguments.get("currency") or "USD"
    if order.get("currency") and order["currency"] != currency:
        return "currency_mismatch", f"The order is in {order['currency']}, not {currency}."
    return None


def check(action: ActionRequest) -> ActionRequest:
    """Identity, ownership, order policy: a read succeeds; a write awaits confirmation."""
    spec = registry.tool_get(action.tool)
    denied = spec.permission(action.customer)
    if denied:
        return reject(action, denied, "The customer is not signed in.")
    read_at = timezone.now()
    try:
        with provider_for(action.tenant) as provider:
            order = provider.get_order(action.arguments["order_id"])
    except ProviderError as exc:
        return _provider_failed(action, exc)
    if order is None or order.get("owner") != action.customer.external_id:
        # Another customer's order is answered exactly like a missing one.
        why = "missing" if order is None else "not_owner"
        return reject(action, "order_not_found", "No such order for this customer.", why=why)
    snapshot = _order_view(order)
    if not spec.is_write:
        return transition_or_reload(
            action,
            to=State.SUCCEEDED,
            event="action.succeeded",
            actor=POLICY,
            order_snapshot=snapshot,
            result=snapshot,
        )
    return _check_refund(action, spec, order, snapshot, read_at)


def _provider_failed(action: ActionRequest, exc: ProviderError) -> ActionRequest:
    """The order could not be read: the check fails (nothing was sent)."""
    return transition_or_reload(
        action,
        to=State.FAILED,
        event="action.failed",
        actor=POLICY,
        data={"code": audit_code(exc.code), "step": "check"},
        error_code="provider_not_configured"
        if exc.code == "provider_not_configured"
        else "provider_unavailable",
        error=str(exc)[:500],
    )


def _check_refund(
    action: ActionRequest,
    spec: registry.Tool,
    order: dict[str, Any],
    snapshot: dict[str, Any],
    read_at: datetime,
) -> ActionRequest:
    """A write on the customer's order: the order's policy, then the amount against what is
    still refundable ("full" becomes that figure); what passes awaits confirmation."""
    refusal = order_refusal(action, order)
    if refusal:
        return reject(action, *refusal)
    refundable = refundable_now(action, order, read_at)
    arguments = dict(action.arguments)
    if arguments["amount"] == registry.FULL_AMOUNT:
        if refundable <= 0:
            return reject(
                action, "amount_exceeds_order", "Nothing is left to refund on this order."
            )
        arguments["amount"] = f"{refundable:.2f}"
    amount = Decimal(arguments["amount"])
    if amount > refundable:
        return reject(
            action,
            "amount_exceeds_order",
            f"{amount} is more than the refundable {refundable}.",
            refundable=f"{max(refundable, Decimal(0)):.2f}",
        )
    return _await_confirmation(action, spec, arguments, snapshot, refundable)


def _await_confirmation(
    action: ActionRequest,
    spec: registry.Tool,
    arguments: dict[str, Any],
    snapshot: dict[str, Any],
    refundable: Decimal,
) -> ActionRequest:
    """Show the refund of `arguments` as the customer's card (the existing one if "full"
    resolved to a refund that already stands)."""
    fields: dict[str, Any] = {
        "order_snapshot": snapshot,
        "expires_at": timezone.now()
        + timedelta(seconds=action_policy_get(tenant=action.tenant).proposal_ttl_seconds),
    }
    if arguments != action.arguments:
        # "full" became a figure: the row now stands for that refund (same dedupe as asking
        # for the figure itself).
        spec_key = spec.key_arguments(arguments)
        fields["arguments"] = arguments
        fields["dedupe_key"] = dedupe_key_for(
            tenant_id=action.tenant_id,
            customer_id=action.customer_id,
            tool=action.tool,
            key_arguments=spec_key,
        )
    try:
        return transition_or_reload(
            action,
            to=State.AWAITING_CONFIRMATION,
            event="action.awaiting_confirmation",
            actor=POLICY,
            data={"amount": arguments["amount"], "refundable": f"{refundable:.2f}"},
            **fields,
        )
    except IntegrityError:
        # The resolved figure is a refund that already stands: show that one instead.
        return _superseded(action, fields["dedupe_key"])


def _superseded(action: ActionRequest, dedupe_key: str) -> ActionRequest:
    """Cancel `action` for the live row that stands for the same refund; return that row."""
    same = (
        ActionRequest.objects.filter(dedupe_key=dedupe_key, state__in=LIVE_STATES)
        .order_by("-sequence")
        .first()
    )
    transition_or_reload(
        action,
        to=State.CANCELLED,
        event="action.superseded",
        actor=POLICY,
        data={"by": same.pk if same else None},
        error_code="duplicate",
    )
    return same or load(action.pk)
