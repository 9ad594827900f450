"""One message, end to end: save → deterministic signals → tools → search → cache →
generation within a budget (or extractive) → finish. Every step is in its own module."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal

from asgiref.sync import AsyncToSync, ThreadSensitiveContext
from django.conf import settings
from django.utils import timezone

from actions import intents as action_intents
from chat import intents, metrics
from chat.orchestrator import answer_cache, followup, tools
from chat.orchestrator.base import (
    Draft,
    Emit,
    Outcome,
    Turn,
    TurnEvents,
    cpu,
    db,
    noop,
)
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
from chat.orchestrator.handoff import hand_off, request_handoff
from chat.orchestrator.prompt import RECENT_MESSAGES, build_prompt
from conversations import events, selectors, services
from conversations.models import Conversation, Message
from handoffs.models import Handoff
from inference import gateway, yields
from inference.errors import TenantRateLimited
from knowledge import selectors as knowledge
from supportbot.db_connections import connections_release
from supportbot.observability import tracing

logger = logging.getLogger(__name__)

MAX_PASSAGES = 4
# Passages an extractive answer chooses among (`extractive.CANDIDATES`); the search judges its
# strength on its first eight whatever the number asked for.
CANDIDATE_PASSAGES = 24
# Refusals that say nothing about the model: the tenant's token budget or concurrency is spent.
# The answer is extractive as for any failure, but they never count towards a handoff.
NOT_MODEL_FAILURES = frozenset({TenantRateLimited.code})


def stale_reply_after() -> timedelta:
    """How long an unfinished reply may sit before another worker takes it over."""
    return timedelta(seconds=settings.ANSWER_STALE_AFTER_S)


WEAK_MAX_QUOTES = 2
# Said for every tenant, whatever it sells or documents: no scope is named that the tenant
# did not write ("products, orders, shipping" read wrong to a software project's users).
REFUSAL_TEXT = (
    "I couldn't find anything on that in {tenant}'s help center, and I'd rather not guess. "
    "Would you like to talk to a person from our team?"
)
SIGNAL_REASONS = {
    "human_request": Handoff.Reason.CUSTOMER_REQUEST,
    "high_risk": Handoff.Reason.HIGH_RISK,
    "negative_sentiment": Handoff.Reason.NEGATIVE_SENTIMENT,
}


_turn_slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class TurnSlots:
    """At most ORCHESTRATOR_MAX_CONCURRENT_TURNS turns at once in this process, and at most
    ORCHESTRATOR_MAX_TURNS_PER_TENANT of them for one tenant: a tenant whose order system
    hangs can hold only its share, never every slot. Saving and acknowledging a message is
    bounded separately (as many at once as turns), so a queue of turns never delays the
    customer's `message.accepted`."""

    def __init__(self, total: int, per_tenant: int) -> None:
        self.total = asyncio.Semaphore(total)
        self.receiving = asyncio.Semaphore(total)
        self.per_tenant_limit = max(1, min(per_tenant, total))
        self.tenants: dict[int, asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def hold(self, tenant_id: int):
        tenant = self.tenants.setdefault(tenant_id, asyncio.Semaphore(self.per_tenant_limit))
        async with tenant, self.total:
            yield


def _slots() -> TurnSlots:
    loop = asyncio.get_running_loop()
    if loop not in _turn_slots:
        total = settings.ORCHESTRATOR_MAX_CONCURRENT_TURNS
        _turn_slots[loop] = TurnSlots(
            total, settings.ORCHESTRATOR_MAX_TURNS_PER_TENANT or max(1, total // 2)
        )
    return _turn_slots[loop]


@contextlib.asynccontextmanager
async def _thread_of_its_own(name: str):
    """Run the block's ORM work (`db(...)`) in a thread of its own, closing its connection at
    the end.

    A plain ThreadSensitiveContext() is a no-op inside an inherited one (the consumer's
    per-event context, Django's per-request one), and the work would then run on a thread
    that dies with that event, holding its connection: hence an executor of its own. A sync
    caller (async_to_sync: a management command, a test inside its transaction) keeps the ORM
    work on its own thread, as asgiref does by default.
    """
    sync_caller = getattr(AsyncToSync.executors, "current", None) is not None
    executor = None if sync_caller else ThreadPoolExecutor(1, thread_name_prefix=name)
    try:
        async with ThreadSensitiveContext(executor=executor):
            try:
                yield
            finally:
                await db(connections_release)()
    finally:
        if executor is not None:
            executor.shutdown(wait=False)


@contextlib.asynccontextmanager
async def _own_thread(tenant_id: int):
    """Run a turn in a thread of its own, within the process's and the tenant's turn slots.

    Turns of different conversations proceed in parallel (asgiref would otherwise run every
    thread-sensitive call of the process on one shared thread); the bounds keep the
    process's database connections finite and one tenant from taking every slot.
    """
    async with metrics.turn_tracked(), _slots().hold(tenant_id), _thread_of_its_own("turn"):
        yield


@contextlib.asynccontextmanager
async def _receiving():
    """Save and acknowledge a message in a short thread of its own, outside the turn slots."""
    async with _slots().receiving, _thread_of_its_own("receive"):
        yield


async def handle_customer_message(
    *,
    conversation: Conversation,
    client_message_id: str,
    text: str,
    emit: Emit = noop,
    origin: str | None = None,
    subscribed: bool = False,
) -> Outcome:
    """Save the message (idempotent), then answer it unless a reply already exists.

    `emit` receives what only the caller needs (`message.accepted`, `answer.pending`) and,
    unless `subscribed` (the caller's connection is in the conversation's group), every
    conversation event of the turn too. `origin` names the calling connection.
    """
    async with _receiving():
        message, created = await db(services.message_receive)(
            conversation=conversation,
            client_message_id=client_message_id,
            text=text,
            origin=origin,
        )
        channel = TurnEvents(conversation.pk, emit, origin=origin, subscribed=subscribed)
        await channel.reply(
            events.message_accepted(
                client_message_id=client_message_id,
                message=services.message_as_event(message),
                duplicate=not created,
            )
        )
        if not created:
            reply = await db(selectors.reply_for)(customer_message=message)
            if reply is not None and reply.state == Message.State.DELIVERED:
                await channel.reply(events.answer_completed(services.message_as_event(reply)))
                return Outcome(customer_message=message, reply=reply, duplicate=True)
            stale = reply is not None and timezone.now() - reply.updated_at > stale_reply_after()
            if reply is not None and not stale:
                await channel.reply(events.answer_pending(reply_to=message.pk, message_id=reply.pk))
                return Outcome(customer_message=message, reply=None, duplicate=True)
            if reply is None and message.state not in (
                Message.State.RECEIVED,
                Message.State.SEARCHING,
                Message.State.ANSWERING,
                Message.State.CALLING_TOOL,
            ):
                return Outcome(customer_message=message, reply=None, duplicate=True)
    # Acknowledged: now wait for a turn slot (the sweeper answers it if this process dies).
    async with _own_thread(conversation.tenant_id):
        outcome = await _respond(conversation.pk, message, channel)
    outcome.duplicate = not created
    return outcome


async def respond(
    *, conversation_id: int, message: Message, emit: Emit = noop, subscribed: bool = False
) -> Outcome:
    """Answer one saved customer message (safe to call again: the reply row is reserved).

    The reply sweeper calls this for acknowledged messages whose reply is missing or stuck.
    """
    async with _own_thread(message.tenant_id):
        return await _respond(
            conversation_id, message, TurnEvents(conversation_id, emit, subscribed=subscribed)
        )


async def _respond(conversation_id: int, message: Message, channel: TurnEvents) -> Outcome:
    conversation = await db(selectors.conversation_for_turn)(conversation_id=conversation_id)
    if conversation.owner == Conversation.Owner.HUMAN:
        # The agent sees the message live; the bot stays silent while a person owns the chat.
        return Outcome(customer_message=message, reply=None)
    reply = await db(services.reply_reserve_or_take_over)(
        customer_message=message, stale_after=stale_reply_after()
    )
    if reply is None:
        await channel.reply(events.answer_pending(reply_to=message.pk))
        return Outcome(customer_message=message, reply=None)
    await channel.publish(events.answer_started(reply_to=message.pk, message_id=reply.pk))
    turn = Turn(conversation, message, reply, channel, time.monotonic())

    with tracing.span("turn.route"):
        answered = await tools.answer_pending_proposal(turn)
        signal = intents.detect(message.text) if answered is None else None
        proposal = None
        if answered is None and signal is None:
            proposal = await tools.propose(conversation, message)
    if answered is not None:
        return answered
    if signal is not None:
        return await hand_off(turn, SIGNAL_REASONS[signal.kind], signal.detail)
    if isinstance(proposal, action_intents.Clarify):
        return await tools.clarify(turn, proposal)
    if proposal is not None:
        return await tools.run(turn, proposal)
    return await _knowledge_answer(turn)


def _audience(conversation: Conversation) -> knowledge.Audience:
    customer = conversation.customer
    segments = tuple(customer.segments) if customer.verified else ()
    return knowledge.Audience.customer(segments=segments)


async def _weak_answer(turn: Turn, result, passages) -> Outcome:
    conversation, message = turn.conversation, turn.message
    streak = await db(services.conversation_weak_streak_bump)(conversation_id=conversation.pk)
    weak = result.strength != "none" and bool(passages)
    if streak >= 2:
        # A person takes over, and until one answers (everyone may be offline) the customer
        # still gets the closest passages, as on the first weak turn, not the queue alone.
        return await hand_off(
            turn,
            Handoff.Reason.WEAK_EVIDENCE,
            f"no strong evidence for: {message.text[:200]}",
            closest=await _closest(turn, passages) if weak else None,
        )
    if not weak:
        draft = Draft(REFUSAL_TEXT.format(tenant=conversation.tenant.name), Message.Kind.REFUSAL)
    else:
        # Weak evidence: never a confident answer. Quote the closest passages as a
        # possibility and ask back (a second weak turn hands off, above). Two quotes, not
        # one: the weak search ranks the answering passage second as often as first (dev
        # sets 233 -> 237 of 271 key facts; out-of-scope questions still declined).
        draft = await _closest(turn, passages)
        draft.kind = Message.Kind.CLARIFY
        draft.text = (
            f"I'm not sure I found exactly what you're asking about. {draft.text} "
            "Does that answer it? If not, "
            "tell me a bit more, or I can connect you with a person from our team."
        )
    draft.stats["meta"] = {
        "strength": result.strength,
        "search_ms": result.timings_ms,
        "path": "weak_evidence",
        "path_reason": "ambiguous" if result.ambiguous else result.strength,
    }
    return await finish(turn, draft, stream=True)


async def _closest(turn: Turn, passages) -> Draft:
    """Quotes of the passages closest to a weakly matched question, introduced as such."""
    draft = await cpu(
        extractive_draft,
        query=turn.message.text,
        passages=passages,
        embed=turn.embedder,
        max_quotes=WEAK_MAX_QUOTES,
    )
    closest = (
        "The closest thing in our help center is:"
        if len(draft.passages) == 1
        else "The closest things in our help center are:"
    )
    draft.text = f"{closest} {draft.text}"
    return draft


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


async def _knowledge_answer(turn: Turn) -> Outcome:
    """Answer from the help center: weakly (clarify, refuse, hand off), from the answer cache,
    or fresh — generated within the budget, else extractive — caching the fresh answer."""
    conversation = turn.conversation
    search = await _search(turn)
    if search.weak:
        return await _weak_answer(turn, search.result, search.passages)
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
    await db(services.message_set_state)(message_id=turn.message.pk, state=Message.State.ANSWERING)
    plan = await _model_plan()
    with _admission(plan) as admitted:
        if not admitted:  # enough answers already wait on the unmeasured model
            plan = replace(plan, route="none", reason=WARMING_UP_BUSY)
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
