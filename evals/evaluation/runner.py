"""Run eval cases through the real orchestrator, one fresh conversation per case.

What reached the customer is checked again independently: every quoted or generated sentence
must be supported by the passage it cites. A follow-up case asks its earlier turns first in the
same conversation and is scored on its last turn; unsupported sentences count on every turn.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.db import connections

from chat import orchestrator
from conversations import services
from conversations.models import Conversation, Message
from evals.evaluation.cases import Case
from evals.evaluation.metrics import key_fact_found, normalize
from inference import gateway
from inference.pool import get_pool
from knowledge import selectors as knowledge
from supportbot.models import Tenant
from verification import quote_is_verbatim, verify_answer

ANSWER_KINDS = (Message.Kind.ANSWER, Message.Kind.EXTRACTIVE)
DECLINE_KINDS = (Message.Kind.REFUSAL, Message.Kind.CLARIFY, Message.Kind.HANDOFF)
# A quote as the extractive path writes it: “…” [n] (an inner ” of the source does not end it).
_QUOTE_RE = re.compile(r"“(.+?)”\s*\[(\d{1,2})\]", re.S)


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
    right_source: bool = False
    key_fact: bool | None = None  # None: the case has no key facts
    earlier: list[str] = field(default_factory=list)  # replies to the earlier turns
    conversation_id: int | None = None
    alone_key_fact: bool | None = None  # follow-ups: the last turn asked in a fresh conversation

    def as_dict(self) -> dict:
        """A JSON-ready record of the case and what the customer got."""
        return {
            "question": self.case.question,
            "before": self.case.before,
            "expect": self.case.expect,
            "category": self.case.category,
            "document": self.case.documents if len(self.case.documents) > 1 else self.case.document,
            "key_facts": self.case.key_facts,
            "kind": self.kind,
            "text": self.text,
            "cited": self.cited_titles,
            "correct": self.correct,
            "right_source": self.right_source,
            "key_fact": self.key_fact,
            "unsupported": self.unsupported,
            "reason": self.reason,
            "earlier": self.earlier,
            "ttft_ms": self.ttft_ms,
            "conversation_id": self.conversation_id,
            "alone_key_fact": self.alone_key_fact,
        }


def unsupported_sentences(reply: Message, tenant: Tenant) -> list[str]:
    """Sentences of a delivered answer that its cited passages do not support."""
    if reply.kind not in ANSWER_KINDS and not reply.citations:
        return []
    chunk_ids = [c["chunk_id"] for c in reply.citations]
    passages = {p.chunk_id: p for p in knowledge.chunk_get_many(tenant=tenant, chunk_ids=chunk_ids)}
    by_index = {c["index"]: passages.get(c["chunk_id"]) for c in reply.citations}
    quotes = _QUOTE_RE.findall(reply.text)
    # A hedged reply and a handoff that quotes the closest passages frame verbatim quotes in
    # fixed wording of ours: the quotes are what must be the source's.
    framed = (Message.Kind.CLARIFY, Message.Kind.HANDOFF)
    if (reply.kind == Message.Kind.EXTRACTIVE or reply.kind in framed) and quotes:
        problems = []
        for quote, n in quotes:
            passage = by_index.get(int(n))
            problems += (
                quote_is_verbatim(quote, passage.text + passage.continuation)
                if passage
                else [quote]
            )
        return problems
    if reply.kind in framed:
        return []  # asks back, or hands off, without quoting
    # Generated text, or quotes in another format: every sentence must be supported.
    texts = [by_index[i].text if by_index.get(i) else "" for i in sorted(by_index)]
    result = verify_answer(reply.text, texts)
    return [c.sentence for c in result.unsupported]


def _score(case: Case, reply: Message) -> tuple[bool, bool, bool | None, str]:
    """(correct, right_source, key_fact, reason) of the reply to the case's last turn."""
    titles = [c["title"] for c in reply.citations]
    if case.expect == "decline":
        correct = reply.kind in DECLINE_KINDS
        return correct, False, None, "" if correct else f"answered ({reply.kind}) not declined"
    # A hedged reply (weak evidence: "the closest thing is … does that answer it?") that quotes
    # the right source counts as answered; it is reported separately as well.
    answered = reply.kind in ANSWER_KINDS or (
        reply.kind == Message.Kind.CLARIFY and bool(reply.citations)
    )
    right_source = answered and (not case.documents or not set(titles).isdisjoint(case.documents))
    key_fact = (answered and key_fact_found(reply.text, case.key_facts)) if case.key_facts else None
    text = normalize(reply.text)
    missing = [m for m in case.must_contain if normalize(m) not in text]
    forbidden = [m for m in case.must_not_contain if normalize(m) in text]
    correct = right_source and not missing and not forbidden
    reasons = []
    if not right_source:
        reasons.append(f"{reply.kind}; cited {titles or 'nothing'}")
    if key_fact is False:
        reasons.append(f"no key fact of {case.key_facts}")
    if missing or forbidden:
        reasons.append(f"missing {missing}; forbidden {forbidden}")
    return correct, right_source, key_fact, "; ".join(reasons)


async def _ask(conversation: Conversation, text: str) -> Message | None:
    outcome = await orchestrator.handle_customer_message(
        conversation=conversation, client_message_id=uuid.uuid4().hex, text=text
    )
    return outcome.reply


async def _conversation(tenant: Tenant, customer) -> Conversation:
    return await sync_to_async(services.conversation_start)(
        tenant=tenant, customer=customer, channel=Conversation.Channel.API
    )


async def _close(conversation: Conversation) -> None:
    await sync_to_async(Conversation.objects.filter(pk=conversation.pk).update)(
        state=Conversation.State.CLOSED
    )


async def run_case(*, tenant: Tenant, case: Case, customer) -> CaseResult:
    """Ask a case's turns in a fresh conversation through the real orchestrator.

    A follow-up's last turn is also asked alone in another fresh conversation (the control: a
    follow-up that is answered without its context does not test the context).
    """
    conversation = await _conversation(tenant, customer)
    unsupported: list[str] = []
    earlier: list[str] = []
    reply = None
    for text in [*case.before, case.question]:
        reply = await _ask(conversation, text)
        if reply is None:
            break
        unsupported += await sync_to_async(unsupported_sentences)(reply, tenant)
        earlier.append(reply.text)
    await _close(conversation)
    if reply is None:
        return CaseResult(
            case, "none", "", [], False, unsupported, None, None, "no reply",
            conversation_id=conversation.pk,
        )  # fmt: skip
    correct, right_source, key_fact, reason = _score(case, reply)
    alone_key_fact = None
    if case.follow_up:
        alone = await _conversation(tenant, customer)
        alone_reply = await _ask(alone, case.question)
        await _close(alone)
        if alone_reply is not None:
            unsupported += await sync_to_async(unsupported_sentences)(alone_reply, tenant)
            alone_key_fact = _score(case, alone_reply)[2]
    return CaseResult(
        case=case,
        kind=reply.kind,
        text=reply.text,
        cited_titles=[c["title"] for c in reply.citations],
        correct=correct,
        unsupported=unsupported,
        ttft_ms=reply.ttft_ms,
        total_ms=reply.total_ms,
        reason=reason,
        right_source=right_source,
        key_fact=key_fact,
        earlier=earlier[:-1],
        conversation_id=conversation.pk,
        alone_key_fact=alone_key_fact,
    )


async def run_all(*, tenant: Tenant, cases: list[Case], customer) -> tuple[list[CaseResult], str]:
    """Run every case in one event loop (one gateway pool, polled before the first question)."""
    pool = get_pool()
    await pool.ensure_running()
    await pool.poll_once()
    mode = "generative (vLLM gateway)" if gateway.gateway_available() else "extractive only"
    try:
        results = [await run_case(tenant=tenant, case=c, customer=customer) for c in cases]
    finally:
        await pool.flush()
        await pool.stop()
        # The poller's ORM calls ran in asgiref's executor thread: close its connection there.
        await sync_to_async(connections.close_all)()
    return results, mode
