"""Generation released one verified sentence at a time, within a first-words budget.

Every model sentence is checked against the retrieved passages (`verification`), against the
question (relevance gate) and against the model's instructions (echo gate: no piece of the
system message) before the customer sees it; CPU work runs in the bounded pool
and each text is embedded once per turn. Generation gives up — and the caller answers
extractively — when no verified sentence arrived within the budget, or when the model's
last sentences all failed. Every outcome is recorded in the model's yield book
(`inference.yields`), which decides whether later answers try the model at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

from django.conf import settings

from chat.orchestrator.base import Draft, Turn, cpu
from chat.orchestrator.extractive import quote_for
from chat.orchestrator.prompt import PROMPT_VERSION
from conversations import events
from conversations.models import Message
from inference import gateway, yields
from inference.config import get_config
from supportbot.observability import tracing
from verification import (
    EchoGate,
    PassageVerifier,
    RelevanceGate,
    SentenceCheck,
    split_sentences,
)

logger = logging.getLogger(__name__)

ANSWER_MAX_TOKENS = 160
MAX_DROPPED_IN_A_ROW = 2


def first_sentence_budget_s() -> float:
    """From the start of the turn (search included): past it without a verified sentence,
    the customer gets the extractive answer at once (first words p95 target: 1 s)."""
    return settings.ANSWER_FIRST_WORDS_BUDGET_S


@dataclass
class Generation:
    draft: Draft | None = None
    emitted: bool = False  # verified sentences reached the customer
    error: str | None = None
    kept: int = 0
    dropped: int = 0
    waited_ms: float = 0.0
    model: str = ""
    worker: str = ""
    reason: str = ""  # why it ended without a draft: budget | drifted | nothing_verified | error
    dropped_sentences: list[dict] = field(default_factory=list)


def _give_up(kept: list, dropped: list, started: float) -> bool:
    """Stop generating: no verified sentence within budget, or the last ones all failed."""
    if not kept:
        return len(dropped) >= MAX_DROPPED_IN_A_ROW or (
            time.monotonic() - started > first_sentence_budget_s()
        )
    since_last_kept = sum(1 for d in dropped if d.get("after") == len(kept))
    return since_last_kept >= MAX_DROPPED_IN_A_ROW


def citation_order(kept: list[tuple[str, int]]) -> list[int]:
    """Passage indexes in the order the answer first cites them (citation [1], [2], …)."""
    return list(dict.fromkeys(idx for _, idx in kept))


async def _checkers(turn: Turn, ordered: list) -> tuple[PassageVerifier, RelevanceGate]:
    """The verifier and the relevance gate of this turn's passages (in the CPU pool)."""
    texts = [p.text for p in ordered]
    return await asyncio.gather(
        cpu(PassageVerifier, texts, embed=turn.embedder),
        cpu(RelevanceGate, turn.message.text, texts, embed=turn.embedder),
    )


class TakenOver(Exception):
    """An agent claimed the conversation while the model wrote: stop, send nothing more."""


@dataclass
class _Run:
    """One generation in progress: its checkers and what its sentences have become so far."""

    turn: Turn
    setup: asyncio.Future  # the (verifier, relevance gate) pair, built while the model reads
    probe: bool
    echo: EchoGate  # pieces of the system message no passage holds
    started: float = field(default_factory=time.monotonic)
    result: Generation = field(default_factory=Generation)
    kept: list[tuple[str, int]] = field(default_factory=list)  # (sentence, 1-based passage)
    dropped: list[dict] = field(default_factory=list)
    first_delta_ms: float | None = None
    final: gateway.ChatResult | None = None

    async def release(self, sentences: list[str]) -> None:
        """Check `sentences`; keep (and unless probing, publish) the verified, on-point new ones."""
        verifier, gate = await asyncio.shield(self.setup)
        with tracing.span("turn.verify", **{"supportbot.sentences": len(sentences)}):
            checks = await cpu(verifier.check_many, sentences)
            relevant = await cpu(gate.relevant, [c.sentence for c in checks])
        for check, on_point in zip(checks, relevant, strict=True):
            reasons = self._drop_reasons(check, on_point)
            if reasons is None:
                await self._keep(check.sentence, check.passage_index)
            else:
                self.dropped.append(
                    {"sentence": check.sentence, "reasons": reasons, "after": len(self.kept)}
                )

    def _drop_reasons(self, check: SentenceCheck, on_point: bool) -> list[str] | None:
        """Why a checked sentence is dropped; None when it is kept."""
        if not check.supported:
            return check.reasons
        echoed = self.echo.echoed(check.sentence)
        if echoed:
            return [f"repeats the instructions: {echoed[0]!r}"]
        if any(check.sentence == k for k, _ in self.kept):
            return ["repeated"]
        if not on_point:
            return ["beside the question"]
        return None

    async def _keep(self, sentence: str, passage_index: int) -> None:
        """Keep a verified sentence; unless probing, publish it with its citation label.

        Raise TakenOver (the sentence not kept) when an agent owns the conversation now."""
        self.kept.append((sentence, passage_index))
        label = citation_order(self.kept).index(passage_index) + 1
        if self.first_delta_ms is None:
            self.first_delta_ms = (time.monotonic() - self.started) * 1000
        if self.probe:
            return
        delta = events.answer_delta(message_id=self.turn.reply.pk, text=f"{sentence} [{label}] ")
        if not await self.turn.events.speak(delta):
            self.kept.pop()
            raise TakenOver


async def generate(
    turn: Turn, messages: list[dict], ordered: list, *, probe: bool = False
) -> Generation:
    """Stream from the gateway; publish each verified sentence; return what happened.

    The checkers are built while the model reads its prompt (the first sentence waits for
    both); the first-words budget covers both. With `probe` (a background measurement:
    `shadow_probe`) nothing is published and the stream stops at the first kept sentence —
    all the yield policy needs — so a probe costs the worker no more than the answer would."""
    instructions = " ".join(m["content"] for m in messages if m["role"] == "system")
    echo = EchoGate(instructions, [p.text for p in ordered])
    run = _Run(turn, asyncio.ensure_future(_checkers(turn, ordered)), probe, echo)
    await _stream(run, messages)
    _tally(run)
    result = run.result
    if result.error or not run.kept:
        result.reason = result.reason or "nothing_verified"
        return result
    result.draft, result.emitted = _draft(run, ordered), True
    return result


async def _stream(run: _Run, messages: list[dict]) -> None:
    """Stream the answer within the first-words budget, releasing its sentences; note in
    `run.result` why it ended early (budget, error), never raising an inference error."""
    turn, result = run.turn, run.result
    stream = gateway.stream_chat(
        tenant_id=turn.conversation.tenant_id,
        messages=messages,
        max_tokens=ANSWER_MAX_TOKENS,
        role="primary",
        affinity_key=f"conv:{turn.conversation.pk}",
    )
    remaining = first_sentence_budget_s() - (time.monotonic() - turn.started)
    first_sentence_deadline = asyncio.timeout(max(0.05, remaining))
    try:
        async with first_sentence_deadline, contextlib.aclosing(stream):
            await _consume(run, stream, first_sentence_deadline)
    except TimeoutError:
        # No verified sentence within the first-words budget (enforced even while the
        # engine is silent): answer extractively now.
        logger.info("no verified sentence within %.2f s for message %s", remaining, turn.message.pk)
        result.reason = "budget"
    except TakenOver:
        logger.info("an agent took over during the answer to message %s", turn.message.pk)
        result.reason = "taken_over"
    except gateway.InferenceError as exc:
        logger.warning("generation failed for message %s: %s", turn.message.pk, exc)
        result.error = getattr(exc, "code", exc.__class__.__name__)
        result.reason = "error"
        result.emitted = bool(run.kept)
        result.worker = getattr(exc, "worker", "") or ""
    finally:
        _settle(run.setup)


async def _consume(
    run: _Run, stream: AsyncIterator, first_sentence_deadline: asyncio.Timeout
) -> None:
    """Release each complete sentence as it streams in, then the rest; stop early once a
    probe has its first kept sentence, or when the model drifted off (`_give_up`)."""
    buffer = ""
    async for item in stream:
        if not isinstance(item, gateway.ChatDelta):
            run.final = item
            continue
        buffer += item.text
        sentences = split_sentences(buffer)
        if len(sentences) > 1:
            await run.release(sentences[:-1])
            # The unfinished sentence keeps the space it ends with ("days. Express "): the
            # next piece may start with a word.
            buffer = sentences[-1] + buffer[len(buffer.rstrip()) :]
        if run.kept and run.probe:
            return  # measured: the first words would have been the model's
        if run.kept:
            first_sentence_deadline.reschedule(None)  # first words are out
        if _give_up(run.kept, run.dropped, run.turn.started):
            # The model drifted off: stop paying for tokens; the customer gets the
            # extractive answer or what is kept.
            run.result.reason = "drifted"
            return
    if buffer.strip():
        await run.release([buffer.strip()])


def _settle(setup: asyncio.Future) -> None:
    """Cancel the checkers' setup if still running, else retrieve its failure (if any: it
    surfaced through `release` already)."""
    if not setup.done():
        setup.cancel()
    elif not setup.cancelled():
        setup.exception()


def _tally(run: _Run) -> None:
    """Fill in the counts, wait and model of `run.result`; record the yield unless it failed."""
    result = run.result
    result.kept, result.dropped = len(run.kept), len(run.dropped)
    result.waited_ms = (
        run.first_delta_ms
        if run.first_delta_ms is not None
        else (time.monotonic() - run.started) * 1000
    )
    result.dropped_sentences = run.dropped
    if run.final is not None:
        result.model, result.worker = run.final.model, run.final.worker
    result.model = result.model or yields.model_for_role("primary")
    if not result.error:
        yields.record(
            model=result.model,
            worker=result.worker,
            kept=result.kept,
            dropped=result.dropped,
            waited_ms=result.waited_ms,
        )


def _draft(run: _Run, ordered: list) -> Draft:
    """The answer of the kept sentences, its citations renumbered in order of first use."""
    used = citation_order(run.kept)
    renumber = {old: new for new, old in enumerate(used, start=1)}
    text = " ".join(f"{s} [{renumber[i]}]" for s, i in run.kept)
    quotes = {}
    for sentence, idx in run.kept:
        quotes.setdefault(renumber[idx], sentence)
    draft = Draft(text, Message.Kind.ANSWER, [ordered[i - 1] for i in used], {}, _stats(run))
    draft.quotes = {n: quote_for(ordered[i - 1].text, quotes[n]) for i, n in renumber.items()}
    return draft


def _stats(run: _Run) -> dict:
    """The draft's generation stats: model, worker, prompt, tokens, timings, drops."""
    final = run.final
    return {
        "model": final.model if final else "",
        "worker": final.worker if final else "",
        "prompt_version": PROMPT_VERSION,
        "prompt_tokens": final.prompt_tokens if final else None,
        "completion_tokens": final.completion_tokens if final else None,
        "ttft_ms": run.first_delta_ms,
        "meta": {
            "dropped_sentences": run.dropped,
            "engine_ttft_ms": final.ttft_ms if final else None,
        },
    }


WARMING_UP = "warming_up"
WARMING_UP_BUSY = "warming_up_busy"
# Reasons `inference.yields.should_generate` gives for trying a model it measured useless.
SHADOW_PROBES = ("probe_interval", "probe_random")
PROBE, WARMUP = "probe", "warmup"
# The model calls of this process nobody must pile onto, per kind: background probes of a
# model measured useless (PROBE), and calls measuring a model not measured yet (WARMUP: the
# background calls, or with INFERENCE_YIELD_WARMUP=foreground the answers waiting on it).
# One registry bounds both modes; only the event loop's thread touches it.
_probes: dict[str, set[asyncio.Task]] = {PROBE: set(), WARMUP: set()}


@contextlib.contextmanager
def warmup_slot(reason: str) -> Iterator[bool]:
    """Admit an answer the yield policy sends to the model (`reason`); False when it may not
    wait on it.

    With `INFERENCE_YIELD_WARMUP=foreground`, while a model is warming up (too few
    measurements) at most `INFERENCE_YIELD_WARMUP_IN_FLIGHT` answers of this process wait on
    it at once (the answer's task holds a WARMUP place while it waits): the rest are
    answered extractively at once. Thirty-two chats opening on a fresh model would otherwise
    all wait on it — on a co-located CPU engine, each making every other slower. Other
    reasons are always admitted."""
    if reason != WARMING_UP:
        yield True
        return
    task = asyncio.current_task()
    admitted = task is not None and shadow_probe_free(WARMUP)
    if admitted:
        _probes[WARMUP].add(task)
    try:
        yield admitted
    finally:
        if admitted:
            _probes[WARMUP].discard(task)


def probe_kind(reason: str) -> str | None:
    """Whether a model call the policy allowed (`reason`) runs in the background, never
    waited for: `probe` for a model measured useless, `warmup` for one not measured yet
    (unless `INFERENCE_YIELD_WARMUP=foreground`); None when the customer's answer waits on it."""
    if reason in SHADOW_PROBES:
        return PROBE
    if reason == WARMING_UP and get_config().yield_warmup != "foreground":
        return WARMUP
    return None


def _probe_limit(kind: str) -> int:
    cfg = get_config()
    return max(0, cfg.yield_probes_in_flight if kind == PROBE else cfg.yield_warmup_in_flight)


def shadow_probe_free(kind: str = PROBE) -> bool:
    """Whether this process may start another background call of this kind now."""
    return len(_probes[kind]) < _probe_limit(kind)


def shadow_probe(turn: Turn, messages: list[dict], ordered: list, *, kind: str = PROBE) -> bool:
    """Generate in the background, verify every sentence, record the yield; show nothing.

    At most `INFERENCE_YIELD_PROBES_IN_FLIGHT` probes (and, while a model is warming up,
    `INFERENCE_YIELD_WARMUP_IN_FLIGHT` warm-up calls) run in this process at once: one that
    falls due while they are busy is skipped (False), so a busy hour never piles calls onto
    a worker nobody waits for.
    """
    if not shadow_probe_free(kind):
        return False
    # A context of its own: the probe outlives the turn, whose thread-sensitive context
    # refuses calls once the turn is over.
    task = asyncio.create_task(
        _shadow_probe(turn, messages, ordered), context=contextvars.Context()
    )
    running = _probes[kind]
    running.add(task)
    task.add_done_callback(running.discard)
    return True


async def _shadow_probe(turn: Turn, messages: list[dict], ordered: list) -> None:
    """Measure what the real path would have shown — the same generation, budget and checks
    (`generate` records the yield), published nowhere."""
    try:
        await generate(turn, messages, ordered, probe=True)
    except Exception:  # a probe must never disturb anything
        logger.exception("shadow probe for message %s failed", turn.message.pk)
