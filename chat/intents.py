"""Deterministic signals, checked before any model runs."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HUMAN = re.compile(
    r"\b(talk|speak|chat|connect)\w*\s+(me\s+)?(to|with)\s+(a|an|some|your)?\s*"
    r"(human|person|agent|representative|rep|someone|people|operator|staff|manager)\b"
    r"|\b(real|live)\s+(person|human|agent)\b"
    r"|\b(human|agent|representative|operator)\s+please\b"
    r"|^\s*(human|agent|representative|operator)\s*[.!?]*\s*$",
    re.IGNORECASE,
)
_HIGH_RISK = {
    "legal": re.compile(
        r"\b(lawyer|attorney|lawsuit|sue|suing|legal action|court|small claims)\b", re.I
    ),
    "chargeback": re.compile(
        r"\b(chargeback|charge back|dispute (the|this|a) (charge|payment)|bank dispute)\b", re.I
    ),
    "account_compromise": re.compile(
        r"\b(hacked|compromised|someone (else )?(logged|accessed|used) my|"
        r"unauthori[sz]ed (charge|order|access|login)|stolen (card|account|password)|fraud)\b",
        re.I,
    ),
    "safety": re.compile(
        r"\b(injur\w*|caught fire|burn(ed|t)|explod\w*|electric shock|unsafe|hurt me|"
        r"hospital|poison\w*|suicid\w*|self[- ]harm|kill myself)\b",
        re.I,
    ),
}
_ABUSE = re.compile(
    r"\b(f+u+c+k+\w*|shit\w*|bullshit|idiot\w*|stupid|useless|scam\w*|worst|ripoff|rip-off|"
    r"garbage|hate (you|this)|furious|ridiculous|unacceptable)\b",
    re.I,
)
ORDER_ID = re.compile(r"\b([A-Z]-\d{3,8})\b", re.I)
_PII = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+|\b\d{3,}\b|\b[A-Z]-\d{3,}\b", re.I)


@dataclass(frozen=True)
class Signal:
    kind: str  # "human_request" | "high_risk" | "negative_sentiment"
    detail: str


def detect(text: str) -> Signal | None:
    """The strongest deterministic signal in a customer message, if any."""
    for category, pattern in _HIGH_RISK.items():
        if pattern.search(text):
            return Signal("high_risk", category)
    if _HUMAN.search(text):
        return Signal("human_request", "asked for a person")
    abuse = _ABUSE.findall(text)
    if abuse:
        return Signal("negative_sentiment", "negative or abusive language")
    return None


def has_personal_data(text: str) -> bool:
    """True when the text holds something personal-looking (email, long numbers, order ids)."""
    return bool(_PII.search(text))


def normalize_question(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
