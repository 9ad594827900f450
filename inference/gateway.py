"""The inference gateway: the one entry point for model output.

`stream_chat` admits the request (hard caps, tenant token bucket and concurrency in Redis),
picks a worker (role tiers, load, affinity; waits at most the queue deadline while all are
saturated), streams from it and yields `ChatDelta`s, then one final `ChatResult`.

Failure contract:
- `InputTooLarge` (413): prompt or max_tokens over the hard caps.
- `TenantRateLimited` (429, `retry_after`): the tenant's budget or concurrency is used up.
- `PoolUnavailable` (503, `retry_after`): no healthy worker, all saturated past the queue
  deadline, every attempt failed before any text was yielded, or Redis (admission) is down.
- `UpstreamRejected`: the worker refused the request itself (4xx), not retried.
- `StreamBroken` (`partial_text`): the stream failed after text was yielded. A failure before
  the first text is retried on another worker (at most `max_attempts` attempts); after it,
  never: the caller must fall back or hand off, never show a silently truncated answer.
Metering: every attempt a worker took is one `InferenceUsage` row, however it ends — `ok`,
`stream_broken`, `error` (failed after the worker answered 200, before any text) or
`cancelled` (the caller broke out, called `aclose()`, was cancelled or timed out) — with the
prompt tokens processed and the completion tokens received before the stop (`estimated` when
the engine did not report them). Rows are written in the background (`Pool.spawn`;
`Pool.flush()` waits for pending writes). The tenant's token bucket is settled with the sum of
those tokens: an attempt no worker took costs nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from asgiref.sync import sync_to_async
from django.db import connections
from redis.exceptions import RedisError

from inference import router, selectors, services, telemetry
from inference.admission import Lease, TenantLimiter, check_caps, estimate_prompt_tokens
from inference.client import ChunkEvent, WorkerFailure, chat_payload, stream_chat_completion
from inference.config import InferenceConfig, get_config
from inference.errors import (
    InferenceError,
    InputTooLarge,
    PoolUnavailable,
    StreamBroken,
    TenantRateLimited,
    UpstreamRejected,
)
from inference.models import InferenceUsage
from inference.pool import Pool, WorkerState, get_pool, released

__all__ = [
    "ChatDelta",
    "ChatResult",
    "InferenceError",
    "InputTooLarge",
    "PoolUnavailable",
    "StreamBroken",
    "TenantRateLimited",
    "UpstreamRejected",
    "complete",
    "gateway_available",
    "stream_chat",
]


@dataclass
class ChatDelta:
    text: str


@dataclass
class ChatResult:
    """The final record of a completed stream (yielded last)."""

    text: str
    model: str
    worker: str
    prompt_tokens: int
    completion_tokens: int
    ttft_ms: float
    total_ms: float
    itl_ms: list[float] = field(default_factory=list)
    finish_reason: str | None = None


async def stream_chat(
    *,
    tenant_id: int,
    messages: list[dict],
    max_tokens: int = 256,
    role: str = "primary",
    affinity_key: str | None = None,
    temperature: float = 0.2,
    response_format: dict | None = None,
    timeout_s: float | None = None,
) -> AsyncIterator[ChatDelta | ChatResult]:
    """Stream a chat completion; see the module docstring for the contract.

    `affinity_key` (e.g. the conversation id) keeps one conversation on one worker while that
    worker is not overloaded, so its prompt prefix stays in that worker's cache; without one,
    requests sharing a system prompt prefer one worker the same way. `timeout_s`
    bounds the whole request (default: first-byte plus idle timeouts apply per worker).
    """
    call = await _admit(
        _ChatRequest(
            tenant_id=tenant_id,
            messages=messages,
            max_tokens=max_tokens,
            role=role,
            affinity_key=affinity_key,
            temperature=temperature,
            response_format=response_format,
            timeout_s=timeout_s,
        )
    )
    try:
        while True:
            ws = await call.pick_worker()
            async with call.attempt(ws) as attempt:
                while (event := await call.next_event(attempt)) is not None:
                    if event.content:
                        yield ChatDelta(event.content)
            if attempt.retry:
                continue
            result = call.record_success(attempt)
            await call.settle()
            yield result
            return
    except (GeneratorExit, asyncio.CancelledError):
        call.outcome = "cancelled"
        raise
    finally:
        await call.settle()


@dataclass(frozen=True)
class _ChatRequest:
    """What the caller of `stream_chat` asked for."""

    tenant_id: int
    messages: list[dict]
    max_tokens: int
    role: str
    affinity_key: str | None
    temperature: float
    response_format: dict | None
    timeout_s: float | None


async def _admit(request: _ChatRequest) -> _ChatCall:
    """Admit the request (hard caps, then the tenant's budget and concurrency in Redis) and
    return its call, holding the tenant lease and the deadlines.

    Raise InputTooLarge, TenantRateLimited, or PoolUnavailable when Redis is down, each counted
    as an admission rejection.
    """
    cfg = get_config()
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    prompt_estimate = estimate_prompt_tokens(request.messages)
    try:
        check_caps(
            prompt_tokens=prompt_estimate,
            max_tokens=request.max_tokens,
            max_input=cfg.max_input_tokens,
            max_output=cfg.max_output_tokens,
        )
    except InputTooLarge:
        telemetry.ADMISSION_REJECTIONS.labels("input_too_large").inc()
        raise
    pool = get_pool()
    await pool.ensure_running()
    limiter, http = pool.clients()
    lease_ttl = (request.timeout_s or cfg.first_byte_timeout_s + 600.0) + cfg.queue_deadline_s
    try:
        lease = await limiter.acquire(
            tenant_id=request.tenant_id,
            cost=prompt_estimate + request.max_tokens,
            lease_ttl_s=lease_ttl,
        )
    except TenantRateLimited:
        telemetry.ADMISSION_REJECTIONS.labels("tenant_limit").inc()
        raise
    except RedisError as exc:
        # Limits cannot be enforced without Redis: fail closed, briefly.
        telemetry.ADMISSION_REJECTIONS.labels("admission_store_down").inc()
        raise PoolUnavailable(f"admission store unavailable: {exc}", retry_after=5.0) from exc
    overall_deadline = loop.time() + request.timeout_s if request.timeout_s else None
    queue_deadline = loop.time() + cfg.queue_deadline_s
    if overall_deadline is not None:
        queue_deadline = min(queue_deadline, overall_deadline)
    return _ChatCall(
        request=request,
        cfg=cfg,
        loop=loop,
        pool=pool,
        limiter=limiter,
        http=http,
        lease=lease,
        started=started,
        prompt_estimate=prompt_estimate,
        overall_deadline=overall_deadline,
        queue_deadline=queue_deadline,
        route_key=request.affinity_key or router.prefix_affinity_key(request.messages),
    )


@dataclass
class _AttemptStream:
    """One attempt in progress: its worker, the worker's chunk stream, what it received."""

    ws: WorkerState
    stream: AsyncIterator[ChunkEvent]
    received: _Attempt
    retry: bool = False  # it failed before any text, and another worker may be tried


@dataclass
class _ChatCall:
    """One admitted request across its attempts: choosing a worker, running one attempt on
    it, and observing how each ended (breaker, metrics, usage rows, the tenant's bill)."""

    request: _ChatRequest
    cfg: InferenceConfig
    loop: asyncio.AbstractEventLoop
    pool: Pool
    limiter: TenantLimiter
    http: httpx.AsyncClient
    lease: Lease
    started: float
    prompt_estimate: int
    overall_deadline: float | None
    queue_deadline: float
    route_key: str
    tried: set[str] = field(default_factory=set)
    attempts: int = 0
    outcome: str = "error"  # how the request is counted when settled
    billed: int = 0  # tokens of every metered attempt: what the tenant's bucket is charged
    settled: bool = False

    # ------------------------------------------------------------ choosing a worker
    async def pick_worker(self) -> WorkerState:
        """The worker for the next attempt, never one already tried; raise PoolUnavailable
        when none frees up by the queue deadline."""
        try:
            ws, _decision = await self.pool.pick(
                role=self.request.role,
                affinity_key=self.route_key,
                exclude=frozenset(self.tried),
                deadline=self.queue_deadline,
            )
        except PoolUnavailable:
            telemetry.ADMISSION_REJECTIONS.labels("pool_unavailable").inc()
            self.outcome = "unavailable"
            raise
        return ws

    # ------------------------------------------------------------ one attempt
    @contextlib.asynccontextmanager
    async def attempt(self, ws: WorkerState) -> AsyncIterator[_AttemptStream]:
        """Send the request to `ws` for the caller to read (`next_event`); on the way out, tell
        the breaker and the pool how it ended and meter it if the worker took it.

        A failure another worker may retry is swallowed (`retry` is then set); any other
        WorkerFailure is raised as the caller's error (see `_retry_or_raise`).
        """
        self.attempts += 1
        attempt = self._open(ws)
        breaker_told = False  # breaker told success/failure
        try:
            async with contextlib.aclosing(attempt.stream):
                yield attempt
        except WorkerFailure as failure:
            breaker_told = True
            self._record_failure(attempt, failure)
            self._retry_or_raise(attempt, failure)
            attempt.retry = True
        except (GeneratorExit, asyncio.CancelledError):
            # The caller stopped (break/aclose, task cancelled, its own timeout): the
            # request was sent, so the worker may have spent tokens on it; vLLM aborts it
            # when the connection closes.
            self.meter(attempt.received, InferenceUsage.Outcome.CANCELLED)
            raise
        finally:
            if not breaker_told:
                # Reached only on success (handled by the caller) or when the caller stopped
                # consuming: neither is the worker's fault.
                ws.breaker.release_probe()
            self.pool.release(ws)

    def _open(self, ws: WorkerState) -> _AttemptStream:
        """The (not yet started) chunk stream of the request on `ws`; its first byte is due
        within the first-byte timeout, or sooner when the request's own deadline is nearer."""
        cfg, request = self.cfg, self.request
        payload = chat_payload(
            model=ws.model_name,
            messages=request.messages,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            response_format=request.response_format,
            continuous_usage=cfg.continuous_usage,
        )
        first_byte = cfg.first_byte_timeout_s
        if self.overall_deadline is not None:
            first_byte = max(0.001, min(first_byte, self.overall_deadline - self.loop.time()))
        received = _Attempt(
            worker=ws.name,
            worker_id=ws.id,
            model=ws.model_name,
            started=self.started,
            prompt_estimate=self.prompt_estimate,
        )
        stream = stream_chat_completion(
            self.http,
            ws.base_url,
            payload,
            connect_timeout_s=cfg.connect_timeout_s,
            first_byte_timeout_s=first_byte,
            idle_timeout_s=cfg.idle_timeout_s,
        )
        return _AttemptStream(ws=ws, stream=stream, received=received)

    async def next_event(self, attempt: _AttemptStream) -> ChunkEvent | None:
        """The attempt's next chunk, recorded; None at its end. Past the request's own deadline
        (`timeout_s`) raise a WorkerFailure that is not retried."""
        try:
            if self.overall_deadline is None:
                event = await anext(attempt.stream)
            else:
                async with asyncio.timeout_at(self.overall_deadline):
                    event = await anext(attempt.stream)
        except StopAsyncIteration:
            return None
        except TimeoutError as exc:
            raise WorkerFailure(
                f"request timeout of {self.request.timeout_s}s passed",
                started=bool(attempt.received.parts),
                retryable=False,
                breaker=False,
                accepted=True,
            ) from exc
        attempt.received.observe(event)
        return event

    def _retry_or_raise(self, attempt: _AttemptStream, failure: WorkerFailure) -> None:
        """Return when another worker may be tried: the failure came before any text, is
        retryable, and attempts are left. Otherwise raise UpstreamRejected (the worker refused
        the request itself), PoolUnavailable (before any text) or StreamBroken (after it)."""
        ws, received = attempt.ws, attempt.received
        if received.parts:
            self.outcome = "stream_broken"
            raise StreamBroken(
                f"stream from {ws.name} broke after {len(received.parts)} chunks: {failure.detail}",
                partial_text="".join(received.parts),
                worker=ws.name,
            ) from failure
        self.tried.add(ws.name)
        if not failure.retryable and failure.status is not None:
            self.outcome = "rejected"
            raise UpstreamRejected(failure.detail) from failure
        if failure.retryable and self.attempts < self.cfg.max_attempts:
            telemetry.RETRIES.labels(ws.name).inc()
            return
        self.outcome = "unavailable"
        raise PoolUnavailable(
            f"inference failed before the first token: {failure.detail}",
            retry_after=max(1.0, self.cfg.breaker_reset_s / 2),
        ) from failure

    # ------------------------------------------------------------ observation
    def _record_failure(self, attempt: _AttemptStream, failure: WorkerFailure) -> None:
        """Tell the breaker (a refused connection also marks the worker down, another failure
        against it asks for a health check) and meter the attempt if the worker took it."""
        ws, received = attempt.ws, attempt.received
        if failure.breaker:
            ws.breaker.record_failure()
            if isinstance(failure.__cause__, httpx.ConnectError):
                self.pool.mark_down(ws, failure.detail)  # refused: nothing listens there
            else:
                self.pool.request_check()
        else:
            ws.breaker.release_probe()
        if failure.accepted or received.accepted:
            self.meter(
                received,
                InferenceUsage.Outcome.STREAM_BROKEN
                if received.parts
                else InferenceUsage.Outcome.ERROR,
            )

    def record_success(self, attempt: _AttemptStream) -> ChatResult:
        """Tell the breaker, observe TTFT and ITL, meter the call as ok; return its result."""
        ws, received = attempt.ws, attempt.received
        ws.breaker.record_success()
        total_ms = (time.perf_counter() - self.started) * 1000.0
        prompt_tokens, completion_tokens, _estimated = received.tokens()
        ttft_ms = (
            _ms(self.started, received.first_at) if received.first_at is not None else total_ms
        )
        result = ChatResult(
            text="".join(received.parts),
            model=received.model,
            worker=ws.name,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            ttft_ms=ttft_ms,
            total_ms=total_ms,
            itl_ms=received.itl_ms,
            finish_reason=received.finish_reason,
        )
        telemetry.TTFT.labels(ws.name).observe(ttft_ms / 1000.0)
        for gap in received.itl_ms:
            telemetry.ITL.labels(ws.name).observe(gap / 1000.0)
        self.meter(received, InferenceUsage.Outcome.OK)
        self.outcome = "ok"
        return result

    def meter(self, received: _Attempt, call_outcome: str) -> None:
        """Record one attempt the worker took (off the request path) and bill its tokens."""
        self.billed += _meter(
            self.pool,
            received,
            tenant_id=self.request.tenant_id,
            role=self.request.role,
            outcome=call_outcome,
            attempts=self.attempts,
        )

    async def settle(self) -> None:
        """Count the request, free its tenant slot and bill the tokens actually used, exactly
        once (before the last yield, so a caller that stops at the ChatResult does not hold
        the slot until GC)."""
        if self.settled:
            return
        self.settled = True
        telemetry.REQUESTS.labels(self.request.role, self.outcome).inc()
        with contextlib.suppress(Exception):
            await self.limiter.release(self.lease, used_tokens=self.billed)


@dataclass
class _Attempt:
    """What one attempt on one worker received, so it can be metered however it ends.

    Token counts come from the engine when it reported them: the final usage chunk, or the
    running usage vLLM puts on every chunk with `continuous_usage_stats`. Otherwise they are
    estimates (`estimated`): prompt tokens from `estimate_prompt_tokens` (characters / 3.5
    plus a few per message, leaning high), completion tokens = content deltas received (each
    delta holds at least one token, so this leans low). Tokens the engine generated after the
    last chunk we read, before it saw the disconnect, are not counted.
    """

    worker: str
    worker_id: int | None
    model: str
    started: float
    prompt_estimate: int
    accepted: bool = False  # at least one chunk arrived
    parts: list[str] = field(default_factory=list)
    itl_ms: list[float] = field(default_factory=list)
    first_at: float | None = None
    last_at: float | None = None
    usage: dict | None = None
    finish_reason: str | None = None

    def observe(self, event) -> None:
        self.accepted = True
        self.model = event.model or self.model
        self.finish_reason = event.finish_reason or self.finish_reason
        if event.usage:
            self.usage = event.usage
        if event.content:
            now = time.perf_counter()
            if self.first_at is None:
                self.first_at = now
            else:
                self.itl_ms.append((now - self.last_at) * 1000.0)
            self.last_at = now
            self.parts.append(event.content)

    def tokens(self) -> tuple[int, int, bool]:
        """(prompt tokens, completion tokens, estimated) consumed so far."""
        usage = self.usage or {}
        estimated = False
        prompt = usage.get("prompt_tokens")
        if not prompt:
            prompt, estimated = self.prompt_estimate, True
        completion = usage.get("completion_tokens")
        if completion is None or int(completion) < len(self.parts):
            completion, estimated = max(int(completion or 0), len(self.parts)), True
        return int(prompt), int(completion), estimated


def _meter(pool, attempt: _Attempt, *, tenant_id: int, role: str, outcome: str, attempts: int):
    """Count one model call in Prometheus and write its usage row in the background; return
    the tokens it used (what the tenant's bucket is charged)."""
    prompt, completion, estimated = attempt.tokens()
    telemetry.CALLS.labels(outcome).inc()
    telemetry.CALL_TOKENS.labels(outcome, "prompt").inc(prompt)
    telemetry.CALL_TOKENS.labels(outcome, "completion").inc(completion)
    telemetry.TOKENS.labels("prompt").inc(prompt)
    telemetry.TOKENS.labels("completion").inc(completion)
    _record(
        pool,
        tenant_id=tenant_id,
        worker_id=attempt.worker_id,
        worker_name=attempt.worker,
        model=attempt.model,
        role=role,
        outcome=outcome,
        prompt_tokens=prompt,
        completion_tokens=completion,
        ttft_ms=_ms(attempt.started, attempt.first_at),
        total_ms=(time.perf_counter() - attempt.started) * 1000.0,
        itl_ms=list(attempt.itl_ms),
        attempts=attempts,
        estimated=estimated,
    )
    return prompt + completion


async def complete(
    *,
    tenant_id: int,
    messages: list[dict],
    max_tokens: int = 256,
    role: str = "small",
    affinity_key: str | None = None,
    response_format: dict | None = None,
    temperature: float = 0.0,
    timeout_s: float | None = None,
) -> ChatResult:
    """Run `stream_chat` to the end and return its ChatResult (same errors)."""
    stream = stream_chat(
        tenant_id=tenant_id,
        messages=messages,
        max_tokens=max_tokens,
        role=role,
        affinity_key=affinity_key,
        temperature=temperature,
        response_format=response_format,
        timeout_s=timeout_s,
    )
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, ChatResult):
                return item
    raise InferenceError("the stream ended without a final result")  # not reachable by contract


def gateway_available() -> bool:
    """At least one ready worker is healthy, as far as this process knows (cheap).

    With a running poller in this process its fresh state answers; otherwise the registry row
    written by any process's poller, if seen healthy within `stale_after_s`.
    """
    cfg = get_config()
    pool = get_pool()
    if pool.last_poll_at is not None and time.monotonic() - pool.last_poll_at <= cfg.stale_after_s:
        return pool.has_healthy_worker()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return selectors.pool_has_healthy_worker(fresh_within_s=cfg.stale_after_s)
    # Called from async code without a fresh poller here: start one, answer from the registry.
    pool_task = asyncio.get_running_loop().create_task(pool.ensure_running())
    pool_task.add_done_callback(lambda t: t.exception())
    with contextlib.suppress(Exception):
        return _registry_check_in_thread(cfg.stale_after_s)
    return False


def _registry_check_in_thread(fresh_within_s: float) -> bool:
    """Run the registry query in a helper thread (the ORM refuses to run inside a loop)."""

    def check() -> bool:
        try:
            return selectors.pool_has_healthy_worker(fresh_within_s=fresh_within_s)
        finally:
            connections.close_all()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        return ex.submit(check).result(timeout=2.0)


def _ms(started: float, at: float | None) -> float | None:
    return None if at is None else (at - started) * 1000.0


def _record(pool, *, tenant_id: int, **fields) -> None:
    """Write the usage row in the background: the caller gets its result without waiting for
    the database (the ChatResult it saves with the answer is the authoritative copy)."""
    pool.spawn(
        sync_to_async(released(services.usage_record))(
            tenant_id=tenant_id, model_name=fields.pop("model"), **fields
        )
    )
