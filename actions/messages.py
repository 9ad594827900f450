"""What the customer is told about an action — built from the ledger row only, never from the
model's words. "Confirmed" appears only for a `succeeded` row (the provider confirmed it)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from actions.models import ActionRequest

State = ActionRequest.State

NOT_FOUND = (
    "I couldn't find that order for your account. Please check the order number "
    "(it looks like A-1042)."
)
SIGN_IN = (
    "Please sign in to your account first — I can only look up orders and refunds for "
    "signed-in customers."
)
UNAVAILABLE = (
    "I can't reach our order system right now. Please try again in a few minutes, or ask "
    "for a person from our team."
)


def _money(value) -> str:
    return f"${Decimal(str(value)):,.2f}"


def _date(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).strftime("%B %-d, %Y")
    except ValueError:
        return None


def _order_text(order: dict) -> str:
    items = ", ".join(
        f"{i.get('quantity', 1)} × {i.get('name', 'item')}" for i in order.get("items") or []
    )
    parts = [f"Order {order.get('id')} is {order.get('status', 'being processed')}."]
    delivered = _date(order.get("delivered_at"))
    placed = _date(order.get("placed_at"))
    if delivered:
        parts.append(f"It was delivered on {delivered}.")
    elif placed:
        parts.append(f"It was placed on {placed}.")
    if items:
        parts.append(f"Items: {items}.")
    if order.get("amount"):
        parts.append(f"Total: {_money(order['amount'])}.")
    if order.get("refunded_amount") and Decimal(order["refunded_amount"]) > 0:
        parts.append(f"Refunded so far: {_money(order['refunded_amount'])}.")
    return " ".join(parts)


def _rejected(action: ActionRequest) -> str:
    code = action.error_code
    order_id = action.arguments.get("order_id", "")
    if code == "sign_in_required":
        return SIGN_IN
    if code == "order_not_found":
        return NOT_FOUND
    if code == "not_delivered":
        return (
            f"Order {order_id} hasn't been delivered yet, so it can't be refunded. "
            "Once it arrives you can ask for a refund here."
        )
    if code == "outside_refund_window":
        return (
            f"Order {order_id} was delivered more than {action.tenant.refund_window_days} days "
            "ago, so it's outside our refund window. A person from our team can look at other "
            "options with you."
        )
    if code == "amount_exceeds_order":
        return (
            f"A refund of {_money(action.arguments.get('amount', 0))} is more than what can "
            f"still be refunded for order {order_id}."
        )
    return "I can't do that for this order. A person from our team can help."


def customer_text(action: ActionRequest) -> str:
    """The customer-facing sentence(s) for the action's current ledger state."""
    if action.state == State.REJECTED:
        return _rejected(action)
    if action.state == State.FAILED and action.attempts == 0:
        return UNAVAILABLE
    if action.tool == "check_order":
        if action.state == State.SUCCEEDED:
            return _order_text(action.result or action.order_snapshot)
        return "I'm looking up that order now."
    amount = _money(action.arguments.get("amount", 0))
    order_id = action.arguments.get("order_id", "")
    what = f"refund of {amount} for order {order_id}"
    if action.state == State.SUCCEEDED:
        return (
            f"Your {what} was submitted and confirmed. Reference: {action.provider_request_id}. "
            "It usually reaches your original payment method within 5-10 business days."
        )
    if action.state == State.AWAITING_APPROVAL:
        return (
            f"Your {what} needs a quick review by our team. I'll let you know here as soon as "
            "it's decided."
        )
    if action.state == State.DENIED:
        return (
            f"Our team reviewed your {what} and couldn't approve it. A person from our team can "
            "explain the options with you."
        )
    if action.state == State.FAILED:
        return (
            f"Your {what} could not be completed: our payment system declined it. Nothing was "
            "charged or refunded. A person from our team can help."
        )
    if action.state == State.UNKNOWN:
        return (
            f"Your {what} was sent, and we're confirming it with our payment system. I'll tell "
            "you here as soon as it's confirmed — there's no need to ask again."
        )
    # proposed, approved, executing
    return f"I'm submitting your {what} now. I'll confirm once our payment system answers."
