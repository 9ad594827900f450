"""Deterministic tool proposals from the customer's own words (checked before any model).

- An order id (`A-1042`) with refund words and a stated amount ("refund $40 for A-1042")
  proposes `request_refund` for that amount.
- An order id with refund words but no amount proposes `check_order` with
  `follow_up="ask_refund_amount"`: the bot shows the order and asks how much to refund.
  We never guess the amount (not even the full order total) — a wrong financial action is
  worse than one more question.
- An order id with status words ("where is A-1042?", "A-1042 hasn't arrived") or alone
  proposes `check_order`; a how-to question that merely names an order goes to the help
  center. Ids named as claims, tickets or RMAs are not orders.
- No order id: None (the model may still propose; `action_propose` validates either way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ORDER_ID = re.compile(r"\b([A-Z]-\d{3,8})\b", re.IGNORECASE)
REFUND = re.compile(
    r"\b(refund\w*|reimburs\w*|money back|pay(ing)? me back|give me back|"
    r"return (my|the) money|charge(d)? back my|credit (it )?back)\b",
    re.IGNORECASE,
)
AMOUNT = re.compile(
    r"(?:\$|usd\s?)\s?(\d{1,6}(?:[.,]\d{1,2})?)\b"
    r"|\b(\d{1,6}(?:[.,]\d{1,2})?)\s?(?:\$|usd\b|dollars?\b|bucks\b)",
    re.IGNORECASE,
)


# Order status and whereabouts: these look the order up.
STATUS = re.compile(
    r"\b(where|status|track\w*|arriv\w*|deliver\w*|shipp?ed|dispatch\w*|when will|eta|late|"
    r"lost|(hasn'?t|not|never) moved|stuck|look (it |this )?up|check( on)?|what happened|"
    r"hasn'?t (come|arrived))\b",
    re.IGNORECASE,
)
# Ids that are not orders: warranty claims, tickets, return authorizations.
NOT_AN_ORDER = re.compile(r"\b(claim|ticket|case|rma|reference|ref)\s*#?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Proposal:
    tool: str
    arguments: dict[str, Any]
    source: str = "intent"
    follow_up: str | None = None  # "ask_refund_amount": show the order, ask for the amount
    detail: dict[str, Any] = field(default_factory=dict)


def _amount(text: str) -> float | None:
    match = AMOUNT.search(ORDER_ID.sub(" ", text))
    if not match:
        return None
    raw = (match.group(1) or match.group(2)).replace(",", ".")
    return float(raw)


def propose_from_text(text: str) -> Proposal | None:
    """The tool call the customer's words ask for, or None. Arguments are validated later."""
    if not isinstance(text, str):
        return None
    ids = {
        m.group(1).upper()
        for m in ORDER_ID.finditer(text)
        if not NOT_AN_ORDER.search(text[max(0, m.start() - 12) : m.start()])
    }
    if len(ids) != 1:  # none, or ambiguous: let the bot ask which order
        return None
    order_id = ids.pop()
    if REFUND.search(text):
        amount = _amount(text)
        if amount is not None:
            return Proposal(
                tool="request_refund",
                arguments={
                    "order_id": order_id,
                    "amount": amount,
                    "reason": "Customer asked for a refund in chat.",
                },
            )
        return Proposal(
            tool="check_order",
            arguments={"order_id": order_id},
            follow_up="ask_refund_amount",
        )
    if STATUS.search(text) or len(text.split()) <= 4:
        return Proposal(tool="check_order", arguments={"order_id": order_id})
    # A how-to question that merely names an order ("how do I return A-1042?") is answered
    # from the help center.
    return None
