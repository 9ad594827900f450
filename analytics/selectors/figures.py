"""One tenant's daily figures over a range of days, aggregated in SQL.

Every figure of a day is about the conversations that started that day (UTC): their outcomes,
their bot replies, feedback and actions, wherever those fell. So a day's row changes only
while its conversations go on or their outcomes change, and re-running it changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db import connection

from actions.models import ActionRequest

TOP = 10
REFUND_TOOL = "request_refund"


@dataclass
class DayFigures:
    """The raw figures of one day; `services.rollups` derives rates and costs from them."""

    conversations: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    withdrawn: int = 0
    not_final: int = 0
    handoffs_by_reason: dict[str, int] = field(default_factory=dict)
    ratings: dict[str, int] = field(default_factory=dict)
    first_words_p50_ms: float | None = None
    first_words_p95_ms: float | None = None
    bot_turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answer_paths: dict[str, int] = field(default_factory=dict)
    actions: dict[str, dict[str, int]] = field(default_factory=dict)
    refunds_succeeded: int = 0
    refund_amount: Decimal = Decimal("0.00")
    duplicate_refunds_prevented: int = 0
    top_questions: list[dict] = field(default_factory=list)
    top_unanswered: list[dict] = field(default_factory=list)


def _bounds(since: date, until: date) -> tuple[datetime, datetime]:
    start = datetime.combine(since, time.min, tzinfo=UTC)
    return start, datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC)


_DAY = "(c.created_at AT TIME ZONE 'UTC')::date"


def _scope(join: str = "", where: str = "") -> str:
    """The tenant's conversations of the range (params: tenant id, start, end), joined."""
    return (
        f"conversations_conversation c {join} WHERE c.tenant_id = %s"
        f" AND c.created_at >= %s AND c.created_at < %s {where}"
    )


_MESSAGES = "JOIN conversations_message m ON m.conversation_id = c.id"
_REPLIES = _scope(_MESSAGES, "AND m.role = 'bot' AND m.state = 'delivered'")


def _rows(sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _conversations(figures, params) -> None:
    sql = f"SELECT {_DAY}, count(*) FROM {_scope()} GROUP BY 1"  # noqa: S608 - constant fragments; values are parameters
    for day, n in _rows(sql, params):
        figures[day].conversations = n


def _outcomes(figures, tenant_id: int, since: date, until: date) -> None:
    sql = """
        SELECT day, kind, handoff_reason, count(*), count(*) FILTER (WHERE withdrawn),
               count(*) FILTER (WHERE NOT final)
        FROM analytics_conversationoutcome
        WHERE tenant_id = %s AND day >= %s AND day <= %s GROUP BY 1, 2, 3"""
    for day, kind, reason, n, withdrawn, not_final in _rows(sql, [tenant_id, since, until]):
        f = figures[day]
        f.outcomes[kind] = f.outcomes.get(kind, 0) + n
        f.withdrawn += withdrawn
        f.not_final += not_final
        if kind == "handed_off":
            f.handoffs_by_reason[reason] = f.handoffs_by_reason.get(reason, 0) + n


def _topics(figures, tenant_id: int, since: date, until: date) -> None:
    """The most asked topics and the most asked of those the bot did not answer."""
    sql = """
        SELECT day, topic_id, count(*),
               count(*) FILTER (WHERE NOT answered AND kind IN ('unresolved', 'handed_off'))
        FROM analytics_conversationoutcome
        WHERE tenant_id = %s AND day >= %s AND day <= %s AND topic_id IS NOT NULL
        GROUP BY 1, 2"""
    asked: dict[date, list] = defaultdict(list)
    for day, topic_id, n, unanswered in _rows(sql, [tenant_id, since, until]):
        asked[day].append((topic_id, n, unanswered))
    for day, rows in asked.items():
        by_count = sorted(rows, key=lambda r: (-r[1], r[0]))[:TOP]
        figures[day].top_questions = [{"topic": t, "conversations": n} for t, n, _ in by_count]
        missed = sorted((r for r in rows if r[2]), key=lambda r: (-r[2], r[0]))[:TOP]
        figures[day].top_unanswered = [{"topic": t, "conversations": u} for t, _, u in missed]


def _ratings(figures, params) -> None:
    sql = f"""
        SELECT {_DAY}, f.rating, count(*)
        FROM {_scope(_MESSAGES + " JOIN conversations_feedback f ON f.message_id = m.id")}
        GROUP BY 1, 2"""  # noqa: S608 - constant fragments; values are parameters
    for day, rating, n in _rows(sql, params):
        figures[day].ratings[rating] = n


def _replies(figures, params) -> None:
    """First-words percentiles (`ttft_ms` of a streamed reply, `total_ms` of one sent whole),
    turns and tokens of the bot's delivered replies."""
    sql = f"""
        SELECT {_DAY},
               percentile_cont(0.5) WITHIN GROUP (ORDER BY coalesce(m.ttft_ms, m.total_ms)),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY coalesce(m.ttft_ms, m.total_ms)),
               count(*), coalesce(sum(m.prompt_tokens), 0), coalesce(sum(m.completion_tokens), 0)
        FROM {_REPLIES} GROUP BY 1"""  # noqa: S608 - constant fragments; values are parameters
    for day, p50, p95, turns, prompt, completion in _rows(sql, params):
        f = figures[day]
        f.first_words_p50_ms = round(p50, 1) if p50 is not None else None
        f.first_words_p95_ms = round(p95, 1) if p95 is not None else None
        f.bot_turns, f.prompt_tokens, f.completion_tokens = turns, int(prompt), int(completion)
    sql = f"SELECT {_DAY}, m.meta->>'path', count(*) FROM {_REPLIES} GROUP BY 1, 2"  # noqa: S608 - constant fragments; values are parameters
    for day, path, n in _rows(sql, params):
        figures[day].answer_paths[path or "none"] = n


def _actions(figures, params) -> None:
    sql = f"""
        SELECT {_DAY}, a.tool, a.state, count(*),
               count(*) FILTER (WHERE a.error_code = 'duplicate' AND a.tool = %s)
        FROM {_scope("JOIN actions_actionrequest a ON a.conversation_id = c.id")}
        GROUP BY 1, 2, 3"""  # noqa: S608 - constant fragments; values are parameters
    for day, tool, state, n, duplicates in _rows(sql, [REFUND_TOOL, *params]):
        f = figures[day]
        f.actions.setdefault(tool, {})[state] = n
        f.duplicate_refunds_prevented += duplicates


def _refunds(figures, tenant_id: int, start: datetime, end: datetime) -> None:
    """Succeeded refunds and their amounts (the arguments are sealed: unsealed per row)."""
    rows = ActionRequest.objects.filter(
        tenant_id=tenant_id,
        tool=REFUND_TOOL,
        state=ActionRequest.State.SUCCEEDED,
        conversation__created_at__gte=start,
        conversation__created_at__lt=end,
    ).values_list("conversation__created_at", "arguments")
    for created_at, arguments in rows:
        f = figures[created_at.astimezone(UTC).date()]
        f.refunds_succeeded += 1
        f.refund_amount += Decimal(str(arguments.get("amount", "0")))


def daily_figures(*, tenant_id: int, since: date, until: date) -> dict[date, DayFigures]:
    """The figures of every day from `since` to `until` (inclusive), empty days included."""
    start, end = _bounds(since, until)
    figures: dict[date, DayFigures] = defaultdict(DayFigures)
    params = [tenant_id, start, end]
    _conversations(figures, params)
    _outcomes(figures, tenant_id, since, until)
    _topics(figures, tenant_id, since, until)
    _ratings(figures, params)
    _replies(figures, params)
    _actions(figures, params)
    _refunds(figures, tenant_id, start, end)
    days = (since + timedelta(days=n) for n in range((until - since).days + 1))
    return {day: figures[day] for day in days}
