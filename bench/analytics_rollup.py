"""Analytics benchmark: the daily rollups of one tenant with 100,000 conversations.

Runs against the bench database (`supportbot_bench` on the embedded PostgreSQL, or
BENCH_DATABASE_URL; `bench.knowledge_search` sets it up). Seeds one tenant
(`bench-analytics`) with 100k conversations over 30 days — a customer question each, a bot
reply (first-words time, tokens, answer path) for all but the abandoned ones, feedback, refund
and order-lookup actions, handoffs and an outcome with a topic for every conversation —
with COPY and the foreign-key triggers off for the load (rows consistent by construction;
about 15-30 s on 2 cores; kept for the next run unless `--rebuild`). Message
text and action arguments are sealed with the tenant's key like the product's own rows (a few
sealed values reused). Then times `rollups_compute` over all 30 days (the backfill), over the
scheduled job's 10 recent days, and a re-run, against the 60 s target, and writes
bench/out/analytics_rollup.md.

    python -m bench.analytics_rollup [--rebuild] [--conversations 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from bench.harness import machine_note
from bench.knowledge_search import bench_database_url, django_setup

SLUG = "bench-analytics"
DAYS = 30
CUSTOMERS = 10_000
TOPICS = 300
TARGET_S = 60.0
FIRST_DAY = date(2026, 10, 1)
OUT = Path(__file__).resolve().parent / "out" / "analytics_rollup.md"

# Endings by i % 20: the outcome kind, the reply kind and path, and what else happened.
ENDINGS = (
    ["strong"] * 10
    + ["refund"] * 2
    + ["handoff"] * 2
    + ["weak"] * 3
    + ["not_helpful"]
    + ["abandoned"] * 2
)
KIND = {
    "strong": "resolved",
    "refund": "resolved",
    "handoff": "handed_off",
    "weak": "unresolved",
    "not_helpful": "unresolved",
    "abandoned": "abandoned",
}
REPLY = {
    "strong": ("answer", {"strength": "strong", "path": "generated"}),
    "refund": ("action", {"path": "tool", "path_reason": "request_refund"}),
    "handoff": ("handoff", {"reason": "customer_request"}),
    "weak": ("clarify", {"strength": "weak", "path": "weak_evidence"}),
    "not_helpful": ("extractive", {"strength": "strong", "path": "extractive"}),
}


class Copier:
    """COPY rows of a model: every concrete column, defaults for the ones a row leaves out."""

    def __init__(self, connection, now: datetime):
        self.connection, self.now = connection, now

    def _default(self, field):
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            return self.now
        return field.get_default()

    @staticmethod
    def _plain(value):
        if isinstance(value, dict | list):
            return json.dumps(value)
        return value

    def copy(self, model, rows, *, ids: bool = False) -> int:
        """COPY `rows` (dicts by attname); with `ids` they carry their primary keys."""
        fields = [f for f in model._meta.concrete_fields if ids or not f.primary_key]
        columns = ", ".join(f'"{f.column}"' for f in fields)
        defaults = {f.attname: self._default(f) for f in fields}
        n = 0
        sql = f'COPY "{model._meta.db_table}" ({columns}) FROM STDIN'
        with self.connection.cursor() as cursor, cursor.cursor.copy(sql) as cp:
            for row in rows:
                cp.write_row([self._plain(row.get(f.attname, defaults[f.attname])) for f in fields])
                n += 1
        return n


def _next_ids(connection, model, count: int) -> int:
    """Reserve `count` ids of `model`'s sequence; return the first."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        # A model's own table name, not input.
        sql = f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce((SELECT max(id) FROM {table}), 0) + %s)"  # noqa: E501, S608
        cursor.execute(sql, [count])
        last = cursor.fetchone()[0]
    return last - count + 1


def _unit_vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(384)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def _wipe(tenant_id: int) -> None:
    from django.db import connection, transaction

    tables = [
        "analytics_dailyrollup",
        "analytics_conversationoutcome",
        "analytics_topic",
        "conversations_feedback",
        "actions_actionrequest",
        "handoffs_handoff",
        "conversations_message",
        "conversations_conversation",
        "conversations_customer",
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        # The bench tenant's rows only reference each other: skip the foreign-key triggers,
        # whose deferred checks of ~400k deleted rows take minutes at COMMIT.
        cursor.execute("SET LOCAL session_replication_role = replica")
        for table in tables:
            cursor.execute(f"DELETE FROM {table} WHERE tenant_id = %s", [tenant_id])  # noqa: S608


@dataclass
class Plan:
    """What the generators below need: the tenant, reserved ids, start times, sealed values."""

    tenant_id: int
    n: int
    now: datetime
    rng: random.Random
    sealed: dict[str, str]
    starts: list[datetime] = field(default_factory=list)
    customer0: int = 0
    topic0: int = 0
    conversation0: int = 0
    message0: int = 0

    def ending(self, i: int) -> str:
        return ENDINGS[i % 20]

    def customer(self, i: int) -> int:
        return self.customer0 + i % CUSTOMERS

    def handoff_reason(self, i: int) -> str:
        return "customer_request" if i % 3 else "weak_evidence"


def _start(i: int) -> datetime:
    """Conversation `i`'s start: blocks of 20 (every ending) rotate over the days."""
    day = FIRST_DAY + timedelta(days=(i // 20) % DAYS)
    return datetime.combine(day, datetime.min.time(), UTC) + timedelta(minutes=480 + (i * 7) % 600)


def _conversations(p: Plan):
    for i in range(p.n):
        yield {
            "id": p.conversation0 + i,
            "tenant_id": p.tenant_id,
            "customer_id": p.customer(i),
            "created_at": p.starts[i],
            "updated_at": p.starts[i],
            "last_message_at": p.starts[i] + timedelta(minutes=3),
            "owner": "human" if p.ending(i) == "handoff" else "bot",
        }


def _messages(p: Plan):
    for i in range(p.n):
        common = {"tenant_id": p.tenant_id, "conversation_id": p.conversation0 + i}
        asked = p.message0 + 2 * i
        yield {
            **common,
            "id": asked,
            "role": "customer",
            "kind": "text",
            "text": p.sealed["question"],
            "state": "answered",
            "created_at": p.starts[i],
        }
        if p.ending(i) == "abandoned":
            continue
        kind, meta = REPLY[p.ending(i)]
        generated = kind == "answer"
        yield {
            **common,
            "id": asked + 1,
            "role": "bot",
            "kind": kind,
            "text": p.sealed["answer"],
            "state": "delivered",
            "reply_to_id": asked,
            "meta": meta,
            "ttft_ms": p.rng.uniform(150, 900) if generated else None,
            "total_ms": p.rng.uniform(200, 2500),
            "prompt_tokens": p.rng.randint(600, 1800) if generated else None,
            "completion_tokens": p.rng.randint(40, 300) if generated else None,
            "created_at": p.starts[i] + timedelta(seconds=2),
        }


def _feedback(p: Plan):
    for i in range(p.n):
        ending = p.ending(i)
        if ending == "not_helpful" or (ending == "strong" and i % 5 == 0):
            rating = "not_helpful" if ending == "not_helpful" else "helpful"
            yield {"tenant_id": p.tenant_id, "message_id": p.message0 + 2 * i + 1, "rating": rating}


def _actions(p: Plan):
    """A refund for each refund ending (every other one with a duplicate the ledger
    cancelled), an order lookup in every 25th conversation."""
    for i in range(p.n):
        base = {
            "tenant_id": p.tenant_id,
            "conversation_id": p.conversation0 + i,
            "customer_id": p.customer(i),
            "proposed_by": "intent",
            "state": "succeeded",
        }
        if p.ending(i) == "refund":
            refund = {
                **base,
                "tool": "request_refund",
                "arguments": p.sealed["refund"],
                "dedupe_key": f"b{i}",
                "risk": "low",
            }
            yield {**refund, "retry_key": f"b{i}r"}
            if i % 2:
                yield {
                    **refund,
                    "retry_key": f"b{i}d",
                    "sequence": 2,
                    "state": "cancelled",
                    "error_code": "duplicate",
                }
        elif i % 25 == 0:
            yield {
                **base,
                "tool": "check_order",
                "arguments": p.sealed["lookup"],
                "retry_key": f"b{i}c",
                "dedupe_key": f"b{i}c",
                "risk": "read",
            }


def _handoffs(p: Plan):
    for i in range(p.n):
        if p.ending(i) == "handoff":
            yield {
                "tenant_id": p.tenant_id,
                "conversation_id": p.conversation0 + i,
                "reason": p.handoff_reason(i),
                "state": "resolved",
            }


def _outcomes(p: Plan):
    for i in range(p.n):
        ending = p.ending(i)
        ended = p.starts[i] + timedelta(minutes=3)
        closes = ended + timedelta(days=7)
        yield {
            "tenant_id": p.tenant_id,
            "conversation_id": p.conversation0 + i,
            "customer_id": p.customer(i),
            "kind": KIND[ending],
            "reasons": {"codes": [ending]},
            "handoff_reason": p.handoff_reason(i) if ending == "handoff" else "",
            "topic_id": p.topic0 + int(p.rng.paretovariate(1.2)) % TOPICS,
            "first_question_id": p.message0 + 2 * i,
            "answered": ending in ("strong", "refund"),
            "day": p.starts[i].date(),
            "started_at": p.starts[i],
            "ended_at": ended,
            "window_closes_at": closes,
            "decided_at": ended + timedelta(minutes=30),
            "final": closes < p.now,
        }


def _sealed(tenant_id: int) -> dict[str, str]:
    """A few values sealed with the tenant's key, reused by every row."""
    from actions.models import ActionRequest
    from conversations.models import Message

    text = Message._meta.get_field("text")
    arguments = ActionRequest._meta.get_field("arguments")
    return {
        "question": str(text.seal_for(tenant_id, "How do I return a tent I bought?")),
        "answer": str(text.seal_for(tenant_id, "Returns are free within 30 days.")),
        "refund": str(arguments.seal_for(tenant_id, {"order_id": "A-1", "amount": "25.00"})),
        "lookup": str(arguments.seal_for(tenant_id, {"order_id": "A-1"})),
    }


def seed(tenant, n: int) -> float:
    """Seed `n` conversations; return the seconds it took."""
    from django.db import connection, transaction

    from actions.models import ActionRequest
    from analytics.models import ConversationOutcome, Topic
    from conversations.models import Conversation, Customer, Feedback, Message
    from handoffs.models import Handoff

    started = time.perf_counter()
    p = Plan(tenant.pk, n, datetime.now(UTC), random.Random(33), _sealed(tenant.pk))
    p.starts = [_start(i) for i in range(n)]
    copier = Copier(connection, p.now)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Rows consistent by construction: no per-row foreign-key checks while seeding.
            cursor.execute("SET LOCAL session_replication_role = replica")
        p.customer0 = _next_ids(connection, Customer, CUSTOMERS)
        customers = (
            {
                "id": p.customer0 + k,
                "tenant_id": p.tenant_id,
                "external_id": f"b-{k}",
                "verified": True,
            }
            for k in range(CUSTOMERS)
        )
        copier.copy(Customer, customers, ids=True)
        p.topic0 = _next_ids(connection, Topic, TOPICS)
        topics = (
            {"id": p.topic0 + k, "tenant_id": p.tenant_id, "embedding": str(_unit_vector(p.rng))}
            for k in range(TOPICS)
        )
        copier.copy(Topic, topics, ids=True)
        p.conversation0 = _next_ids(connection, Conversation, n)
        p.message0 = _next_ids(connection, Message, 2 * n)
        copier.copy(Conversation, _conversations(p), ids=True)
        copier.copy(Message, _messages(p), ids=True)
        copier.copy(Feedback, _feedback(p))
        copier.copy(ActionRequest, _actions(p))
        copier.copy(Handoff, _handoffs(p))
        copier.copy(ConversationOutcome, _outcomes(p))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.perf_counter() - started


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--conversations", type=int, default=100_000)
    args = parser.parse_args(argv)
    django_setup(bench_database_url())

    from analytics.models import DailyRollup
    from analytics.services import rollups_compute
    from conversations.models import Conversation
    from supportbot.models import Tenant

    tenant, _ = Tenant.objects.get_or_create(slug=SLUG, defaults={"name": "Bench analytics"})
    seeded = Conversation.objects.filter(tenant=tenant).count()
    seed_s = None
    if args.rebuild or seeded != args.conversations:
        _wipe(tenant.pk)
        seed_s = seed(tenant, args.conversations)
        print(f"seeded {args.conversations} conversations in {seed_s:.1f} s")
    last = FIRST_DAY + timedelta(days=DAYS - 1)
    DailyRollup.objects.filter(tenant=tenant).delete()

    def backfill():
        rollups_compute(tenant_id=tenant.pk, since=FIRST_DAY, until=last)

    def recent():
        rollups_compute(tenant_id=tenant.pk, since=last - timedelta(days=9), until=last)

    first_s = _timed(backfill)
    before = list(DailyRollup.objects.filter(tenant=tenant).order_by("day").values())
    rerun_s = _timed(backfill)
    recent_s = _timed(recent)
    after = list(DailyRollup.objects.filter(tenant=tenant).order_by("day").values())
    assert before == after, "re-running the rollup changed a row"
    total = sum(r["conversations"] for r in after)
    assert total == args.conversations, total
    resolved = sum(r["resolved"] for r in after)
    print(f"backfill {first_s:.2f} s, re-run {rerun_s:.2f} s, recent 10 days {recent_s:.2f} s")
    _report(args.conversations, seed_s, first_s, rerun_s, recent_s, after, resolved)


def _report(n, seed_s, first_s, rerun_s, recent_s, rows, resolved) -> None:
    day = rows[0]
    verdict = "within" if first_s < TARGET_S else "OVER"
    lines = [
        "# Analytics rollup benchmark",
        "",
        f"`python -m bench.analytics_rollup` — {machine_note()}.",
        "",
        f"One tenant, {n:,} conversations over {DAYS} days ({n // DAYS:,} a day), each with a "
        "question, a bot reply (all but the abandoned 10%), outcomes and topics for all, "
        "feedback, refund and order-lookup actions, handoffs.",
        f"Seeding (COPY, foreign-key triggers off: rows consistent by construction): "
        f"{f'{seed_s:.1f} s' if seed_s is not None else 'reused from an earlier run'}. "
        "Outcomes are seeded, not decided: the outcome sweep (embedding each first question) "
        "is not part of this timing.",
        "",
        "| run | days | seconds |",
        "|---|---|---|",
        f"| backfill (`rollups_compute` over the range, as `analytics_rollup --since` runs it)"
        f" | {DAYS} | {first_s:.2f} |",
        f"| the same again (idempotent: rows unchanged, checked) | {DAYS} | {rerun_s:.2f} |",
        f"| scheduled job (recent days) | 10 | {recent_s:.2f} |",
        "",
        f"Target: the whole tenant under {TARGET_S:.0f} s — {verdict} the target.",
        f"Rollup totals: {sum(r['conversations'] for r in rows):,} conversations, "
        f"{resolved:,} resolved.",
        "",
        f"A day's row ({day['day']}): {day['conversations']} conversations, resolution rate "
        f"{day['resolution_rate']}, first words p50/p95 {day['first_words_p50_ms']}/"
        f"{day['first_words_p95_ms']} ms, refunds {day['refunds_succeeded']} "
        f"({Decimal(day['refund_amount'])}), cost per resolved {day['cost_per_resolved']}.",
        "",
    ]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
