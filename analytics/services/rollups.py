"""One tenant's daily rollups: computed from the day's conversations, upserted on
(tenant, day). Running it again for the same days writes the same values; two runs at once
both end in one row per day (INSERT … ON CONFLICT DO UPDATE on the unique constraint)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from analytics import selectors
from analytics.models import DailyRollup

CENT = Decimal("0.01")
MICRO = Decimal("0.000001")
UPDATE_FIELDS = [
    f.name for f in DailyRollup._meta.concrete_fields if f.name not in ("id", "tenant", "day")
]


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _cost(figures: selectors.DayFigures) -> Decimal:
    """Tokens at their prices plus the CPU of each bot turn."""
    tokens = (
        Decimal(figures.prompt_tokens) * settings.ANALYTICS_PROMPT_PRICE_PER_1K
        + Decimal(figures.completion_tokens) * settings.ANALYTICS_COMPLETION_PRICE_PER_1K
    ) / 1000
    return (tokens + figures.bot_turns * settings.ANALYTICS_CPU_COST_PER_TURN).quantize(MICRO)


def _row(tenant_id: int, day: date, figures: selectors.DayFigures) -> DailyRollup:
    outcomes = figures.outcomes
    decided = sum(outcomes.values())
    resolved = outcomes.get("resolved", 0)
    helpful, not_helpful = figures.ratings.get("helpful", 0), figures.ratings.get("not_helpful", 0)
    cost = _cost(figures)
    tokens = figures.prompt_tokens + figures.completion_tokens
    return DailyRollup(
        tenant_id=tenant_id,
        day=day,
        conversations=figures.conversations,
        undecided=max(figures.conversations - decided, 0),
        resolved=resolved,
        handed_off=outcomes.get("handed_off", 0),
        unresolved=outcomes.get("unresolved", 0),
        abandoned=outcomes.get("abandoned", 0),
        resolutions_withdrawn=figures.withdrawn,
        resolution_rate=_rate(resolved, decided),
        handoffs_by_reason=dict(sorted(figures.handoffs_by_reason.items())),
        helpful=helpful,
        not_helpful=not_helpful,
        helpful_rate=_rate(helpful, helpful + not_helpful),
        first_words_p50_ms=figures.first_words_p50_ms,
        first_words_p95_ms=figures.first_words_p95_ms,
        answer_paths=dict(sorted(figures.answer_paths.items())),
        actions={tool: dict(sorted(s.items())) for tool, s in sorted(figures.actions.items())},
        refunds_succeeded=figures.refunds_succeeded,
        refund_amount=figures.refund_amount.quantize(CENT),
        duplicate_refunds_prevented=figures.duplicate_refunds_prevented,
        bot_turns=figures.bot_turns,
        prompt_tokens=figures.prompt_tokens,
        completion_tokens=figures.completion_tokens,
        cost=cost,
        tokens_per_resolved=round(tokens / resolved, 2) if resolved else None,
        cost_per_resolved=(cost / resolved).quantize(MICRO) if resolved else None,
        top_questions=figures.top_questions,
        top_unanswered=figures.top_unanswered,
        final=figures.not_final == 0 and decided == figures.conversations,
    )


@transaction.atomic
def rollups_compute(*, tenant_id: int, since: date, until: date) -> int:
    """Compute and store the tenant's rollups of every day from `since` to `until`
    (inclusive, UTC days); return how many day rows were written."""
    if until < since:
        return 0
    figures = selectors.daily_figures(tenant_id=tenant_id, since=since, until=until)
    rows = [_row(tenant_id, day, f) for day, f in sorted(figures.items())]
    DailyRollup.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["tenant", "day"],
        update_fields=UPDATE_FIELDS,
    )
    return len(rows)
