"""Answer evaluation: run labelled questions through the real orchestrator and score them.

Each question runs in a fresh conversation of an evaluation customer, so results do not
depend on each other. What reached the customer is checked again independently: every quoted
or generated sentence must be supported by the passage it cites.
"""

from __future__ import annotations

import re
import statistics
import uuid
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async

from conversations import orchestrator, services
from conversations.models import Conversation, Message
from inference import gateway
from inference.pool import get_pool
from knowledge import selectors as knowledge
from supportbot.models import Tenant
from verification import quote_is_verbatim, verify_answer

ANSWER_KINDS = (Message.Kind.ANSWER, Message.Kind.EXTRACTIVE)
DECLINE_KINDS = (Message.Kind.REFUSAL, Message.Kind.CLARIFY, Message.Kind.HANDOFF)
_QUOTE_RE = re.compile(r"“(.+?)”", re.S)


@dataclass
class Case:
    question: str
    expect: str  # "answer" | "decline"
    document: str | None = None
    heading: str | None = None
    must_contain: list[str] = field(default_factory=list)
    must_not_contain: list[str] = field(default_factory=list)
    category: str = "in_scope"


@dataclass
class CaseResult:
    case: Case
    kind: str
    text: str
    cited_titles: list[str]
    correct: bool
    unsupported: list[str]
    ttft_ms: float | None
    total_ms: float | None
    reason: str = ""


def unsupported_sentences(reply: Message, tenant: Tenant) -> list[str]:
    """Sentences of a delivered answer that its cited passages do not support."""
    if reply.kind not in ANSWER_KINDS and not reply.citations:
        return []
    chunk_ids = [c["chunk_id"] for c in reply.citations]
    passages = {p.chunk_id: p for p in knowledge.chunk_get_many(tenant=tenant, chunk_ids=chunk_ids)}
    by_index = {c["index"]: passages.get(c["chunk_id"]) for c in reply.citations}
    if reply.kind in (Message.Kind.EXTRACTIVE, Message.Kind.CLARIFY):
        problems = []
        for n, quote in enumerate(_QUOTE_RE.findall(reply.text), start=1):
            passage = by_index.get(n)
            problems += quote_is_verbatim(quote, passage.text) if passage else [quote]
        return problems
    texts = [by_index[i].text if by_index.get(i) else "" for i in sorted(by_index)]
    result = verify_answer(reply.text, texts)
    return [c.sentence for c in result.unsupported]


async def run_case(*, tenant: Tenant, case: Case, customer) -> CaseResult:
    """Ask one question in a fresh conversation through the real orchestrator."""
    conversation = await sync_to_async(services.conversation_start)(
        tenant=tenant, customer=customer, channel=Conversation.Channel.API
    )
    outcome = await orchestrator.handle_customer_message(
        conversation=conversation, client_message_id=uuid.uuid4().hex, text=case.question
    )
    reply = outcome.reply
    await sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        state=Conversation.State.CLOSED
    )
    if reply is None:
        return CaseResult(case, "none", "", [], False, [], None, None, "no reply")
    titles = [c["title"] for c in reply.citations]
    unsupported = await sync_to_async(unsupported_sentences)(reply, tenant)
    reason = ""
    if case.expect == "decline":
        correct = reply.kind in DECLINE_KINDS
        reason = "" if correct else f"answered ({reply.kind}) instead of declining"
    else:
        # A hedged reply (weak evidence: "the closest thing is … does that answer it?") that
        # quotes the right source counts as answered; it is reported separately as well.
        answered = reply.kind in ANSWER_KINDS or (
            reply.kind == Message.Kind.CLARIFY and bool(reply.citations)
        )
        correct = answered and (case.document is None or case.document in titles)
        if not correct:
            reason = f"{reply.kind}; cited {titles or 'nothing'}"
        lowered = reply.text.lower()
        missing = [m for m in case.must_contain if m.lower() not in lowered]
        forbidden = [m for m in case.must_not_contain if m.lower() in lowered]
        if correct and (missing or forbidden):
            correct = False
            reason = f"missing {missing}; forbidden {forbidden}"
    return CaseResult(
        case,
        reply.kind,
        reply.text,
        titles,
        correct,
        unsupported,
        reply.ttft_ms,
        reply.total_ms,
        reason,
    )


async def run_all(*, tenant: Tenant, cases: list[Case], customer) -> tuple[list[CaseResult], str]:
    """Run every case in one event loop (one gateway pool, polled before the first question)."""
    pool = get_pool()
    await pool.ensure_running()
    await pool.poll_once()
    mode = "generative (vLLM gateway)" if gateway.gateway_available() else "extractive only"
    results = [await run_case(tenant=tenant, case=c, customer=customer) for c in cases]
    await pool.flush()
    await pool.stop()
    return results, mode


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summarize(results: list[CaseResult]) -> dict:
    def rate(rows: list[CaseResult]) -> tuple[int, int]:
        return sum(r.correct for r in rows), len(rows)

    in_scope = [r for r in results if r.case.expect == "answer"]
    declines = [r for r in results if r.case.expect == "decline"]
    tricky = [r for r in results if r.case.category == "tricky"]
    ttfts = [r.ttft_ms for r in results if r.ttft_ms is not None]
    return {
        "in_scope_correct": rate(in_scope),
        "in_scope_hedged": sum(1 for r in in_scope if r.correct and r.kind == Message.Kind.CLARIFY),
        "out_of_scope_declined": rate(declines),
        "tricky_correct": rate(tricky),
        "unsupported_delivered": sum(len(r.unsupported) for r in results),
        "ttft_p50_ms": percentile(ttfts, 50),
        "ttft_count": len(ttfts),
        "ttft_p95_ms": percentile(ttfts, 95),
        "total_p50_ms": statistics.median([r.total_ms for r in results if r.total_ms] or [0]),
        "kinds": {k: sum(1 for r in results if r.kind == k) for k in {r.kind for r in results}},
    }
