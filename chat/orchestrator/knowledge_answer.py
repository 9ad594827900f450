"""An answer from the help center: search, then the answer cache, or a fresh answer — generated
within the budget, else extractive — which is cached; weak evidence goes to `weak`."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from chat.orchestrator import answer_cache, followup
from chat.orchestrator.answerable import names_unknown
from chat.orchestrator.base import Draft, Outcome, Turn, cpu, db
from chat.orchestrator.extractive import citations, extractive_draft
from chat.orchestrator.finish import finish
from chat.orchestrator.generate import (
    PROBE,
    WARMING_UP,
    WARMING_UP_BUSY,
    Generation,
    generate,
    probe_kind,
    shadow_probe,
    shadow_probe_free,
    warmup_slot,
)
from chat.orchestrator.handoff import request_handoff
from chat.orchestrator.prompt import RECENT_MESSAGES, build_prompt
from chat.orchestrator.weak import weak_answer
from conversations import events, selectors, services
from conversations.models import Conversation, Message
from handoffs.models import Handoff
from inference import gateway, yields
from inference.errors import TenantRateLimited
from knowledge import selectors as knowledge
from supportbot.observability import tracing

MAX_PASSAGES = 4
# Passages an extractive answer chooses among (`extractive.CANDIDATES`); the search judges its
# strength on its first eight whatever the number asked for.
CANDIDATE_PASSAGES = 24
# Refusals that say nothing about the model: the tenant's token budget or concurrency is spent.
# The answer is extractive as for any failure, but they never count towards a handoff.
NOT_MODEL_FAILURES = frozenset({TenantRateLimited.code})


def _audience(conversation: Conversation) -> knowledge.Audience:
    customer = conversation.customer
    segments = tuple(customer.segments) if customer.verified else ()
    return knowledge.Audience.customer(segments=segments)


# Reasons an answer did not wait on a model it could have: the policy measured it useless, or
# has not measured it yet (measured in the background, or enough calls already measure it).
SKIP_REASONS = frozenset({"low_yield", WARMING_UP, WARMING_UP_BUSY})


async def _extractive(turn: Turn, passages: list) -> Draft:
    return await cpu(
        extractive_draft, query=turn.message.text, passages=passages, embed=turn.embedder
    )


def _drop(future: asyncio.Future) -> None:
    """Cancel an unused fallback; its failure, if any, is of no interest."""
    future.cancel()
    future.add_done_callback(lambda f: f.cancelled() or f.exception())


@dataclass(frozen=True)
class _Search:
    """What the help-center search found for this turn's message (resolved as a follow-up)."""

    resolved: followup.Resolved
    audience: knowledge.Audience
    result: knowledge.SearchResult
    found: list  # every passage with evidence, best first: the extractive answer's candidates

    @property
    def passages(self) -> list:
        """The passages a generated answer is written from."""
        return self.found[:MAX_PASSAGES]

    @property
    def weak(self) -> bool:
        """Whether the evidence is too weak for a confident answer."""
        return self.result.strength != "strong" or not self.passages


@dataclass(frozen=True)
class _ModelPlan:
    """How this answer uses the model (`route`), and the path reason it records.

    `generate`: the customer waits on the model, within the first-words budget, while the
    extractive fallback is composed; `background`: a call of `kind` (PROBE or WARMUP) runs in
    the background and the customer gets the extractive answer; `none`: no model call."""

    route: Literal["generate", "background", "none"]
    reason: str
    model: str = ""
    kind: str | None = None


@dataclass(frozen=True)
class _Attempt:
    """What came of the model plan: the path reason, and the generation or probe if any."""

    reason: str
    generation: Generation | None = None
    fallback: asyncio.Future | None = None  # the extractive draft composed meanwhile
    probing: bool = False

    @property
    def emitted(self) -> bool:
        """Whether verified sentences already reached the customer."""
        return bool(self.generation and self.generation.emitted)

    @property
    def error(self) -> str | None:
        """The inference error the generation ended with, if any."""
        return self.generation.error if self.generation else None


async def knowledge_answer(turn: Turn) -> Outcome:
    """Answer from the help center: weakly (clarify, refuse, hand off), from the answer cache,
    or fresh — generated within the budget, else extractive — caching the fresh answer."""
    conversation = turn.conversation
    search = await _search(turn)
    if search.weak:
        return await weak_answer(turn, search.result, search.passages)
    if unknown := await names_unknown(turn):
        # The question names what no document mentions: the passages found do not answer it.
        return await weak_answer(turn, search.result, search.passages, unknown=unknown)
    if conversation.weak_evidence_streak:
        await db(services.conversation_weak_streak_reset)(conversation_id=conversation.pk)
    # A follow-up is keyed by what it resolved to ("and for members?" means different
    # things in different conversations).
    key = await db(answer_cache.cache_key)(
        conversation=conversation, text=search.resolved.search, audience=search.audience
    )
    if key:
        cached = await db(answer_cache.cached_draft)(conversation=conversation, key=key)
        if cached is not None:
            cached.stats["meta"].update(path="cached", path_reason="cache_hit")
            yields.answer_path_record(path="cached", reason="cache_hit", waited_ms=0.0)
            return await finish(turn, cached, stream=True)
    plan = await _model_plan()
    with _admission(plan) as admitted:
        if not admitted:  # enough answers already wait on the unmeasured model
            plan = replace(plan, route="none", reason=WARMING_UP_BUSY)
        if plan.route == "generate":  # the customer waits on the model (else: searching →
            # answered in one go, a write fewer per turn)
            await db(services.message_set_state)(
                message_id=turn.message.pk, state=Message.State.ANSWERING
            )
        attempt = await _attempt(turn, search, plan)
    draft = await _answer_draft(turn, search.found, attempt)
    _note_path(turn, search, plan, attempt, draft)
    if attempt.emitted and draft.kind == Message.Kind.EXTRACTIVE:
        # Verified sentences were shown before the model failed: replace them whole.
        await turn.events.publish(
            events.answer_revised(
                message_id=turn.reply.pk, text=draft.text, citations=citations(draft)
            )
        )
    outcome = await finish(turn, draft, stream=not attempt.emitted)
    await _after_answer(turn, draft, key, attempt.error)
    return outcome


async def _search(turn: Turn) -> _Search:
    """Mark the message searching; search the help center for it, resolved as a follow-up."""
    conversation, message = turn.conversation, turn.message
    await db(services.message_set_state)(message_id=message.pk, state=Message.State.SEARCHING)
    audience = _audience(conversation)
    resolved = await db(followup.resolve)(conversation=conversation, message=message)
    with tracing.span("turn.search"):
        result = await db(knowledge.search_passages)(
            tenant=conversation.tenant,
            query=resolved.search,
            audience=audience,
            limit=CANDIDATE_PASSAGES,
            sentence_vectors=True,
        )
    if result.query_vector:  # the search embedded the question: the turn need not again
        turn.embedder.seed({result.query: np.asarray(result.query_vector, dtype=np.float32)})
    found = [p for p in result.passages if p.evidence > 0]
    return _Search(resolved, audience, result, found)


async def _model_plan() -> _ModelPlan:
    """Whether the answer waits on the model, calls it in the background, or does without:
    the gateway's availability, the yield policy, and the process's background bounds."""
    if not await db(gateway.gateway_available)():
        return _ModelPlan("none", "no_worker")
    model = yields.model_for_role("primary")
    try_model, reason = yields.should_generate(model)
    if not try_model:
        return _ModelPlan("none", reason, model)
    kind = probe_kind(reason)
    if kind is None:
        return _ModelPlan("generate", reason, model)
    if not shadow_probe_free(kind):
        # The process's probes (or warm-up calls) are busy: this one is skipped.
        return _ModelPlan("none", "low_yield" if kind == PROBE else WARMING_UP_BUSY, model)
    return _ModelPlan("background", reason, model, kind)


def _admission(plan: _ModelPlan) -> contextlib.AbstractContextManager[bool]:
    """The warm-up slot an answer waiting on the model holds (`warmup_slot`); other answers
    are always admitted."""
    return warmup_slot(plan.reason if plan.route == "generate" else "")


async def _attempt(turn: Turn, search: _Search, plan: _ModelPlan) -> _Attempt:
    """Carry out the model plan: generate (the fallback composed meanwhile), start a
    background call, or nothing."""
    match plan.route:
        case "none":
            return _Attempt(plan.reason)
        case "background":
            # The model is measured useless (a probe) or not measured yet (warm-up): never
            # make this customer wait for it. Call it in the background (verified, recorded,
            # never shown) so its yield is known; the customer gets the extractive answer now.
            messages, ordered = await _prompt(turn, search.passages)
            probing = shadow_probe(turn, messages, ordered, kind=plan.kind)
            reason = "low_yield" if plan.kind == PROBE else plan.reason
            return _Attempt(reason, probing=probing)
        case "generate":
            messages, ordered = await _prompt(turn, search.passages)
            # The extractive answer is composed while the model writes: when no verified
            # sentence comes within the budget, the customer gets it at once.
            fallback = asyncio.ensure_future(_extractive(turn, search.found))
            try:
                generation = await generate(turn, messages, ordered)
            except BaseException:
                _drop(fallback)
                raise
            reason = "verified" if generation.draft is not None else generation.reason
            return _Attempt(reason, generation, fallback)


async def _prompt(turn: Turn, passages: list) -> tuple[list[dict], list]:
    """The model's messages for this turn (recent history included), and their passages."""
    conversation = turn.conversation
    history = await db(selectors.recent_messages)(
        conversation=conversation, limit=RECENT_MESSAGES + 1
    )
    return build_prompt(
        tenant_name=conversation.tenant.name,
        summary=conversation.summary,
        history=history,
        message=turn.message,
        passages=passages,
    )


async def _answer_draft(turn: Turn, found: list, attempt: _Attempt) -> Draft:
    """The generated draft, else the extractive one (the fallback composed meanwhile, or
    composed now), marked as a fallback with the inference error if any."""
    draft = attempt.generation.draft if attempt.generation else None
    fallback = attempt.fallback
    if draft is not None:
        if fallback is not None:
            _drop(fallback)
        return draft
    draft = await (fallback if fallback is not None else _extractive(turn, found))
    draft.stats.setdefault("meta", {})["fallback"] = "extractive"
    if attempt.error:
        draft.stats["meta"]["inference_error"] = attempt.error
    return draft


def _note_path(
    turn: Turn, search: _Search, plan: _ModelPlan, attempt: _Attempt, draft: Draft
) -> None:
    """Record which path answered, and why, in the draft's meta and the answer-path metrics."""
    path = "generated" if draft.kind == Message.Kind.ANSWER else "extractive"
    if attempt.generation is None and attempt.reason in SKIP_REASONS:
        path = "skipped"  # the yield policy (or its bounds) kept the model out
    waited_ms = attempt.generation.waited_ms if attempt.generation else 0.0
    meta = draft.stats.setdefault("meta", {})
    meta.update(
        strength=search.result.strength,
        path=path,
        path_reason=attempt.reason,
        model_wait_ms=round(waited_ms, 1),
        embedded_texts=turn.embedder.computed,
        follow_up=search.resolved.follow_up,
    )
    if attempt.probing:
        meta["shadow_probe"] = True
    yields.answer_path_record(
        path=path, reason=attempt.reason, waited_ms=waited_ms, model=plan.model
    )


async def _after_answer(turn: Turn, draft: Draft, key: str | None, error: str | None) -> None:
    """After a fresh answer: count a model failure (a second one asks for a person), or
    cache the answer. A refusal of the tenant's own budget counts for neither."""
    if error in NOT_MODEL_FAILURES:
        return  # the tenant's own budget said no: answered extractively, no person needed
    conversation = turn.conversation
    if error:
        failures = await db(services.conversation_count_model_failure)(
            conversation_id=conversation.pk
        )
        if failures >= 2:
            await request_handoff(
                conversation=conversation,
                reason=Handoff.Reason.MODEL_FAILURE,
                detail=f"model failed {failures} times ({error})",
                emit=turn.events.reply,
                subscribed=turn.events.subscribed,
            )
        return
    if key:
        await db(answer_cache.cache_put)(key=key, draft=draft, conversation=conversation)
