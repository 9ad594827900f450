import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection

from analytics import selectors, services
from analytics.models import ConversationOutcome, DailyRollup
from analytics.tests.conftest import DAY0, STRONG, converse, seed_day0, seed_returns
from analytics.tests.factories import CustomerFactory

D0 = DAY0.date()


def _seed_and_decide(tenant, other_tenant) -> dict:
    """DAY0's seven endings, the day-3 and day-5 returns, and one conversation of another
    tenant on DAY0; decided as the sweeps would on days 1, 6 and 9."""
    day0 = seed_day0(tenant)
    returns = seed_returns(tenant, day0)
    converse(
        other_tenant,
        CustomerFactory(tenant=other_tenant),
        "How do I return a tent?",
        at=DAY0,
        replies=[{"meta": STRONG, "prompt_tokens": 5000, "ttft_ms": 9000, "rating": "helpful"}],
    )
    for days in (1, 6, 9):
        services.outcomes_sweep(now=DAY0 + timedelta(days=days))
    return {**day0, **returns}


def _topic(conversation) -> int:
    return ConversationOutcome.objects.get(conversation=conversation).topic_id


def _rows(tenant) -> list[dict]:
    return list(DailyRollup.objects.filter(tenant=tenant).order_by("day").values())


@pytest.mark.django_db
def test_rollup_of_a_seeded_day_has_every_figure(tenant, other_tenant, prices):
    c = _seed_and_decide(tenant, other_tenant)
    assert services.rollups_compute(tenant_id=tenant.pk, since=D0, until=D0) == 1
    row = DailyRollup.objects.get(tenant=tenant, day=D0)
    others = sorted(
        _topic(c[name]) for name in ("action", "thanked", "handoff", "not_helpful", "declined")
    )
    unanswered = sorted(_topic(c[name]) for name in ("handoff", "not_helpful", "declined"))
    expected = {
        "conversations": 7,
        "undecided": 0,
        "resolved": 2,  # the refund, the thanked weak answer
        "handed_off": 1,
        "unresolved": 3,  # the withdrawn resolution, not helpful, declined
        "abandoned": 1,
        "resolutions_withdrawn": 1,
        "resolution_rate": 0.2857,
        "handoffs_by_reason": {"customer_request": 1},
        "helpful": 1,
        "not_helpful": 1,
        "helpful_rate": 0.5,
        "first_words_p50_ms": 275.0,  # of 100, 200, 250, 300, 400, 600
        "first_words_p95_ms": 550.0,
        "answer_paths": {"generated": 2, "none": 1, "tool": 1, "weak_evidence": 2},
        "actions": {
            "check_order": {"succeeded": 1},
            "request_refund": {"cancelled": 1, "succeeded": 1},
        },
        "refunds_succeeded": 1,
        "refund_amount": Decimal("25.00"),
        "duplicate_refunds_prevented": 1,
        "bot_turns": 6,
        "prompt_tokens": 1800,
        "completion_tokens": 300,
        "cost": Decimal("1.410000"),  # 0.9 prompt + 0.45 completion + 6 turns × 0.01
        "tokens_per_resolved": 1050.0,
        "cost_per_resolved": Decimal("0.705000"),
        "top_questions": [
            {"topic": _topic(c["strong"]), "conversations": 2},
            *({"topic": t, "conversations": 1} for t in others),
        ],
        "top_unanswered": [{"topic": t, "conversations": 1} for t in unanswered],
        "final": True,
    }
    assert {k: getattr(row, k) for k in expected} == expected


@pytest.mark.django_db
def test_rollup_days_of_the_returns_and_the_quiet_days_between(tenant, other_tenant, prices):
    _seed_and_decide(tenant, other_tenant)
    services.rollups_compute(tenant_id=tenant.pk, since=D0, until=D0 + timedelta(days=6))
    by_day = {r["day"]: r for r in _rows(tenant)}
    assert [(by_day[D0 + timedelta(days=n)]["conversations"]) for n in range(7)] == [
        7,
        0,
        0,
        1,
        0,
        1,
        0,
    ]
    for n in (3, 5):
        day = by_day[D0 + timedelta(days=n)]
        assert (day["resolved"], day["resolution_rate"], day["final"]) == (1, 1.0, False)
    quiet = by_day[D0 + timedelta(days=1)]
    assert (quiet["resolution_rate"], quiet["first_words_p50_ms"], quiet["final"]) == (
        None,
        None,
        True,
    )


@pytest.mark.django_db
def test_rerunning_the_rollup_changes_nothing(tenant, other_tenant, prices):
    _seed_and_decide(tenant, other_tenant)
    until = D0 + timedelta(days=9)
    services.rollups_compute(tenant_id=tenant.pk, since=D0, until=until)
    first = _rows(tenant)
    services.rollups_compute(tenant_id=tenant.pk, since=D0, until=until)
    call_command(
        "analytics_rollup", "--since", str(D0), "--until", str(until), "--tenant", tenant.slug
    )
    assert len(first) == 10
    assert _rows(tenant) == first


@pytest.mark.django_db
def test_another_tenants_conversations_are_never_counted(tenant, other_tenant, prices):
    _seed_and_decide(tenant, other_tenant)
    services.rollups_compute(tenant_id=other_tenant.pk, since=D0, until=D0)
    theirs = DailyRollup.objects.get(tenant=other_tenant, day=D0)
    assert (theirs.conversations, theirs.resolved, theirs.prompt_tokens, theirs.helpful) == (
        1,
        1,
        5000,
        1,
    )
    assert theirs.first_words_p50_ms == 9000.0
    theirs_topics = {q["topic"] for q in theirs.top_questions}
    assert theirs_topics.isdisjoint(
        ConversationOutcome.objects.filter(tenant=tenant).values_list("topic_id", flat=True)
    )
    assert not DailyRollup.objects.filter(tenant=tenant).exists()


@pytest.mark.django_db
def test_backfill_command_writes_every_tenants_days(tenant, other_tenant):
    converse(tenant, CustomerFactory(tenant=tenant), "Where is my parcel?", at=DAY0)
    call_command("analytics_rollup", "--since", str(D0), "--until", str(D0 + timedelta(days=2)))
    assert DailyRollup.objects.filter(tenant=tenant).count() == 3
    assert DailyRollup.objects.filter(tenant=other_tenant).count() == 3
    assert DailyRollup.objects.get(tenant=tenant, day=D0).undecided == 1


@pytest.mark.django_db(transaction=True)
def test_two_rollups_at_once_for_the_same_days_leave_one_row_per_day(tenant, monkeypatch, prices):
    converse(
        tenant,
        CustomerFactory(tenant=tenant),
        "Where is my parcel?",
        at=DAY0,
        replies=[{"meta": STRONG, "ttft_ms": 100}],
    )
    both_computed = threading.Barrier(2, timeout=20)
    compute = selectors.daily_figures

    def computed_then_wait(**kwargs):
        figures = compute(**kwargs)
        both_computed.wait()  # both runs have read the day; now both write it
        return figures

    monkeypatch.setattr(selectors, "daily_figures", computed_then_wait)
    errors: list[BaseException] = []

    def run():
        try:
            services.rollups_compute(tenant_id=tenant.pk, since=D0, until=D0 + timedelta(days=1))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    rows = _rows(tenant)
    assert [(r["day"], r["conversations"], r["first_words_p50_ms"]) for r in rows] == [
        (D0, 1, 100.0),
        (D0 + timedelta(days=1), 0, None),
    ]
