"""The deterministic outcome of a conversation from its facts: one kind and its reasons.

Pure: `selectors.conversation_facts` gathers the facts, `services.outcome_decide` stores the
verdict. Reason codes, in the order they are checked:

- `handoff` — a person took over (the first handoff's reason; `agent_takeover` when an agent
  owns the conversation with no handoff row): **handed_off**;
- `left_before_answer` — no bot reply reached the customer: **abandoned**;
- `not_helpful` — the customer rated a reply not helpful: **unresolved**, whatever else;
- `strong_evidence`, `action_completed`, `customer_confirmed` (the helpful button or a
  thank-you reply after an answer) — any of them: **resolved**;
- otherwise **unresolved** with what the replies were: `weak_evidence`, `declined`, `failed`,
  `action_not_completed`.

A resolution stands only without a repeat contact on the same topic within the window
(`services.outcomes`); that check needs other conversations, so it is not made here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RESOLVED, HANDED_OFF, UNRESOLVED, ABANDONED = "resolved", "handed_off", "unresolved", "abandoned"

# Bot reply kinds that answer (or try to); handoff notices and system notices do not.
ANSWER_KINDS = ("answer", "extractive")
REPLY_KINDS = (*ANSWER_KINDS, "clarify", "refusal", "action", "failed")
_UNRESOLVED_BY_KIND = {
    "clarify": "weak_evidence",
    "refusal": "declined",
    "failed": "failed",
    "action": "action_not_completed",
    "answer": "weak_evidence",
    "extractive": "weak_evidence",
}

# A short reply that thanks or confirms, and does not go on to say it did not work.
_THANKS = re.compile(
    r"^\W*(thanks?|thank\s*(you|u)|thx|ty|cheers|that\s+(helped|helps|worked|works)|"
    r"perfect|great|awesome|solved|got\s+it|all\s+good)\b",
    re.IGNORECASE,
)
_BUT = re.compile(r"\b(but|not|n't|still|however|doesn|didn|won)\b|\?", re.IGNORECASE)
THANKS_MAX_CHARS = 80


def is_confirmation(text: str) -> bool:
    """Is this customer reply a thank-you or a confirmation that the answer worked?"""
    text = text.strip()
    return (
        0 < len(text) <= THANKS_MAX_CHARS and bool(_THANKS.search(text)) and not _BUT.search(text)
    )


@dataclass
class Reply:
    """A bot reply that reached the customer: its kind and what its meta says."""

    kind: str
    strength: str = ""
    path: str = ""
    rating: str = ""  # helpful | not_helpful | ""


@dataclass
class Facts:
    """What a conversation's outcome is decided from (no text beyond the confirmation flag)."""

    replies: list[Reply] = field(default_factory=list)
    handoff_reasons: list[str] = field(default_factory=list)
    human_owner: bool = False
    actions_succeeded: int = 0
    thanked_after_answer: bool = False


@dataclass
class Verdict:
    kind: str
    codes: list[str]
    handoff_reason: str = ""
    answered: bool = False


def _is_strong(reply: Reply) -> bool:
    return reply.kind in ANSWER_KINDS and (reply.strength == "strong" or reply.path == "cached")


def _evidence(facts: Facts) -> list[str]:
    """The reasons that make a conversation resolved, in a fixed order."""
    codes = []
    if any(_is_strong(r) for r in facts.replies):
        codes.append("strong_evidence")
    if facts.actions_succeeded:
        codes.append("action_completed")
    if facts.thanked_after_answer or any(r.rating == "helpful" for r in facts.replies):
        codes.append("customer_confirmed")
    return codes


def decide(facts: Facts) -> Verdict:
    """Return the conversation's one outcome and its reasons."""
    evidence = _evidence(facts)
    answered = bool(evidence)
    if facts.handoff_reasons or facts.human_owner:
        reason = facts.handoff_reasons[0] if facts.handoff_reasons else "agent_takeover"
        return Verdict(HANDED_OFF, ["handoff", *evidence], reason, answered)
    replies = [r for r in facts.replies if r.kind in REPLY_KINDS]
    if not replies:
        return Verdict(ABANDONED, ["left_before_answer"])
    if any(r.rating == "not_helpful" for r in replies):
        return Verdict(UNRESOLVED, ["not_helpful", *evidence])  # the customer said no
    if evidence:
        return Verdict(RESOLVED, evidence, answered=True)
    codes = sorted({_UNRESOLVED_BY_KIND[r.kind] for r in replies})
    return Verdict(UNRESOLVED, codes)
