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


def _what(action: ActionRequest) -> str:
    amount = action.arguments.get("amount", 0)
    figure = _money(amount) if amount != "full" else "the full amount"
    return f"refund of {figure} for order {action.arguments.get('order_id', '')}"


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
        amount = action.arguments.get("amount", 0)
        if amount == "full":
            return f"Order {order_id} has nothing left to refund."
        return (
            f"A refund of {_money(amount)} is more than what can still be refunded for order "
            f"{order_id}."
        )
    if code == "currency_mismatch":
        return (
            f"Order {order_id} was paid in "
            f"{action.order_snapshot.get('currency') or 'another currency'}; please tell me the "
            "amount in that currency."
        )
    return "I can't do that for this order. A person from our team can help."


def proposal_summary(action: ActionRequest) -> str:
    """One line: what the proposal does ("Refund $40.00 for order A-1042")."""
    order_id = action.arguments.get("order_id", "")
    if action.tool == "request_refund":
        amount = action.arguments.get("amount")
        figure = _money(amount) if amount not in (None, "full") else "the full amount"
        return f"Refund {figure} for order {order_id}"
    return f"Look up order {order_id}"


def proposal_next_step(action: ActionRequest) -> str:
    """What happens when the customer confirms (policy decides; the text never promises)."""
    if action.tool != "request_refund":
        return ""
    tenant = action.tenant
    try:
        amount = Decimal(str(action.arguments.get("amount")))
    except ArithmeticError:
        amount = Decimal(0)
    if amount > tenant.refund_auto_limit:
        return (
            "If you confirm, a person from our team reviews it first, then it goes back to your "
            "original payment method."
        )
    return (
        "If you confirm, I submit it to our payment system now; refunds reach your original "
        "payment method within 5-10 business days. Refunds above your daily limit wait for a "
        "quick review."
    )


def customer_text(action: ActionRequest) -> str:
    """The customer-facing sentence(s) for the action's current ledger state."""
    if action.state == State.REJECTED:
        return _rejected(action)
    if action.state in (State.CANCELLED, State.EXPIRED):
        return _withdrawn(action)
    if action.state == State.AWAITING_CONFIRMATION and action.tool == "request_refund":
        return (
            f"I can request a {_what(action)}. Please confirm to go ahead, or cancel. "
            f"{proposal_next_step(action)}"
        )
    if action.state == State.FAILED and action.attempts == 0:
        return _failed_unsent(action)
    if action.tool == "check_order":
        if action.state == State.SUCCEEDED:
            return _order_text(action.result or action.order_snapshot)
        return "I'm looking up that order now."
    return _refund_progress(action)


def already_open(*, elsewhere: bool) -> str:
    """Said before a card shown again because the customer asked for the same refund again
    (here or in another of their conversations): the card answers here too."""
    if elsewhere:
        return (
            "You already have this refund request open in another conversation; you can answer "
            'it here too (reply "yes" or "no"). '
        )
    return 'You already have this refund request open (reply "yes" or "no"). '


def confirm_prompt(action: ActionRequest) -> str:
    """The question back when the customer acknowledged a card without an explicit yes."""
    return (
        f"Nothing has been requested yet. To go ahead with the {_what(action)}, press Confirm "
        'on the card or reply "yes"; reply "no" to cancel it.'
    )


def _withdrawn(action: ActionRequest) -> str:
    """A proposal nobody confirmed: cancelled (or a duplicate) or expired."""
    if action.state == State.CANCELLED:
        if action.error_code == "duplicate":
            return "That refund was already requested."
        return f"OK — I won't request the {_what(action)}. Nothing was refunded."
    return (
        f"The proposed {_what(action)} expired before it was confirmed, so nothing was "
        "refunded. Ask again if you still want it."
    )


def _failed_unsent(action: ActionRequest) -> str:
    """A failure before anything was sent to the provider."""
    if action.error_code in ("order_not_found",):
        return NOT_FOUND
    if action.error_code == "amount_exceeds_order":
        return (
            f"The {_what(action)} can't be made: the order no longer has that much left to "
            "refund. Nothing was refunded."
        )
    return UNAVAILABLE


def _refund_progress(action: ActionRequest) -> str:
    """How far the refund has got: being submitted, under review, sent, or settled."""
    what = _what(action)
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
    if action.state == State.APPROVED and action.error_code == "provider_unavailable":
        return (
            f"Your {what} is approved, but I couldn't reach our payment system to submit it yet. "
            "I'll retry automatically and tell you here once it's confirmed — nothing was "
            "refunded so far."
        )
    # proposed, approved, executing
    return f"I'm submitting your {what} now. I'll confirm once our payment system answers."
