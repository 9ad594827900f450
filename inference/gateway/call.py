"""One admitted request across its attempts: admission (hard caps, the tenant's budget and
concurrency in Redis), choosing a worker, one attempt on it, retry or raise, and how each
attempt ended (breaker, metrics, usage rows, the tenant's bill)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
from redis.exceptions import RedisError

from inference import router, telemetry
from inference.admission import Lease, TenantLimiter, check_caps, estimate_prompt_tokens
from inference.client import ChunkEvent, WorkerFailure, chat_payload, stream_chat_completion
from inference.config import InferenceConfig, get_config
from inference.errors import (
    InputTooLarge,
    PoolUnavailable,
    StreamBroken,
    TenantRateLimited,
    UpstreamRejected,
)
from inference.gateway.metering import ReceivedAttempt, elapsed_ms, meter_attempt
from inference.gateway.results import ChatResult
from inference.models import InferenceUsage
from inference.pool import Pool, WorkerState, get_pool


@dataclass(frozen=True)
class ChatRequest:
    """What the caller of `stream_chat` asked for."""

    tenant_id: int
    messages: list[dict]
    max_tokens: int
    role: str
    affinity_key: str | None
    temperature: float
    response_format: dict | None
    timeout_s: float | None


async def admit(request: ChatRequest) -> ChatCall:
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
    return ChatCall(
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
class AttemptStream:
    """One attempt in progress: its worker, the worker's chunk stream, what it received."""

    ws: WorkerState
    stream: AsyncIterator[ChunkEvent]
    received: ReceivedAttempt
    retry: bool = False  # it failed before any text, and another worker may be tried


@dataclass
class ChatCall:
    """One admitted request across its attempts: choosing a worker, running one attempt on
    it, and observing how each ended (breaker, metrics, usage rows, the tenant's bill)."""

    request: ChatRequest
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
    resent: set[str] = field(default_factory=set)  # workers asked again after a closed connection
    last_failure: str | None = None  # "<worker>: <detail>" of the latest failed attempt
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
        except PoolUnavailable as exc:
            telemetry.ADMISSION_REJECTIONS.labels("pool_unavailable").inc()
            self.outcome = "unavailable"
            if self.last_failure is None:
                raise
            # Say why the workers already tried are out, not only that none is left.
            raise PoolUnavailable(
                f"{exc.detail}; the last attempt failed on {self.last_failure}",
                retry_after=exc.retry_after,
            ) from exc
        return ws

    # ------------------------------------------------------------ one attempt
    @contextlib.asynccontextmanager
    async def attempt(self, ws: WorkerState) -> AsyncIterator[AttemptStream]:
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

    def _open(self, ws: WorkerState) -> AttemptStream:
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
        received = ReceivedAttempt(
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
        return AttemptStream(ws=ws, stream=stream, received=received)

    async def next_event(self, attempt: AttemptStream) -> ChunkEvent | None:
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

    def _retry_or_raise(self, attempt: AttemptStream, failure: WorkerFailure) -> None:
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
        self.last_failure = f"{ws.name}: {failure.detail}"
        if failure.resend and ws.name not in self.resent:
            self.resent.add(ws.name)  # once per worker: the same one may be picked again
        else:
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
    def _record_failure(self, attempt: AttemptStream, failure: WorkerFailure) -> None:
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

    def record_success(self, attempt: AttemptStream) -> ChatResult:
        """Tell the breaker, observe TTFT and ITL, meter the call as ok; return its result."""
        ws, received = attempt.ws, attempt.received
        ws.breaker.record_success()
        total_ms = (time.perf_counter() - self.started) * 1000.0
        prompt_tokens, completion_tokens, _estimated = received.tokens()
        ttft_ms = (
            elapsed_ms(self.started, received.first_at)
            if received.first_at is not None
            else total_ms
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

    def meter(self, received: ReceivedAttempt, call_outcome: str) -> None:
        """Record one attempt the worker took (off the request path) and bill its tokens."""
        self.billed += meter_attempt(
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
