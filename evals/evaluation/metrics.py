"""Scoring: key facts in a reply's text and the per-set summary."""

from __future__ import annotations

import re
import statistics
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from conversations.models import Message

if TYPE_CHECKING:
    from evals.evaluation.runner import CaseResult

_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"})
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Casefold, NFKC, straight quotes and dashes, single spaces (how facts are compared)."""
    text = unicodedata.normalize("NFKC", text or "").translate(_QUOTES)
    return _SPACES.sub(" ", text).strip().casefold()


def key_fact_found(text: str, facts: Sequence[str]) -> bool:
    """Does the text hold at least one of the any-of key-fact phrases?"""
    haystack = normalize(text)
    return any(normalize(f) and normalize(f) in haystack for f in facts)


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summarize(results: list[CaseResult]) -> dict:
    """The figures of one eval set (pairs are (hits, total))."""

    def rate(rows: list[CaseResult], hit) -> tuple[int, int]:
        return sum(1 for r in rows if hit(r)), len(rows)

    in_scope = [r for r in results if r.case.expect == "answer" and not r.case.follow_up]
    with_facts = [r for r in in_scope if r.case.key_facts]
    follow_ups = [r for r in results if r.case.follow_up and r.case.expect == "answer"]
    declines = [r for r in results if r.case.expect == "decline"]
    adjacent = [r for r in declines if r.case.category == "adjacent"]
    tricky = [r for r in results if r.case.category == "tricky"]
    ttfts = [r.ttft_ms for r in results if r.ttft_ms is not None]
    totals = [r.total_ms for r in results if r.total_ms]
    return {
        "in_scope_correct": rate(in_scope, lambda r: r.correct),
        "in_scope_source": rate(in_scope, lambda r: r.right_source),
        "in_scope_key_fact": rate(with_facts, lambda r: r.key_fact is True),
        "in_scope_hedged": sum(1 for r in in_scope if r.correct and r.kind == Message.Kind.CLARIFY),
        "follow_up_key_fact": rate(follow_ups, lambda r: r.key_fact is True),
        "follow_up_source": rate(follow_ups, lambda r: r.right_source),
        "follow_up_alone_key_fact": rate(follow_ups, lambda r: r.alone_key_fact is True),
        "out_of_scope_declined": rate(declines, lambda r: r.correct),
        "out_of_scope_adjacent_declined": rate(adjacent, lambda r: r.correct),
        "tricky_correct": rate(tricky, lambda r: r.correct),
        "unsupported_delivered": sum(len(r.unsupported) for r in results),
        "ttft_p50_ms": percentile(ttfts, 50),
        "ttft_p95_ms": percentile(ttfts, 95),
        "ttft_count": len(ttfts),
        "total_p50_ms": statistics.median(totals) if totals else None,
        "kinds": {k: sum(1 for r in results if r.kind == k) for k in {r.kind for r in results}},
    }
