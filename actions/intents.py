"""Deterministic tool proposals from the customer's own words (checked before any model).

- An order id (`A-1042`) with refund words and a stated amount ("refund $40 for A-1042")
  proposes `request_refund` for that amount.
- An order id with refund words but no amount proposes `check_order` with
  `follow_up="ask_refund_amount"`: the bot shows the order and asks how much to refund.
  We never guess the amount (not even the full order total) — a wrong financial action is
  worse than one more question.
- An order id alone ("where is A-1042?") proposes `check_order`.
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
    ids = {m.upper() for m in ORDER_ID.findall(text)}
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
    return Proposal(tool="check_order", arguments={"order_id": order_id})
