"""The worker pool of one process: registry cache, health/metrics poller, breakers, picking.

One `Pool` per process (`get_pool()`). It starts lazily in the running event loop on first
use (daphne, or any process that calls the gateway) and then polls every registered worker's
`/health` and `/metrics` each `poll_interval_s`, writing what it saw onto the registry row.
Routing uses the in-memory copy; metrics older than `stale_after_s` count as saturated, so a
stalled poller fails safe. The registry (DB) is re-read each tick, so a worker launched or
set to draining by another process is picked up within one interval. `INFERENCE_WORKERS`
entries are upserted into the registry when the pool starts.

With `INFERENCE_DISCOVERY` set, the pool also asks the platform (Kubernetes endpoints or a
headless Service's DNS, `inference/discovery.py`) for the ready vLLM pods every
`discovery_interval_s` and syncs the registry with the answer. A worker that leaves the
answer is draining at once in this process (no new requests; calls already on it finish)
and in the registry for the others; after `drain_timeout_s` its row is stopped. When the
source cannot be read, the last known set stays.

If the event loop changes (a new loop per test, `async_to_sync` in a sync caller), the pool
restarts its poller and clients on the new loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections import deque
from dataclasses import dataclass, field

import httpx
from asgiref.sync import sync_to_async
from django.conf import settings
from redis.asyncio import Redis

from inference import discovery, router, selectors, services
from inference.admission import TenantLimiter
from inference.breaker import BreakerState, CircuitBreaker
from inference.client import WorkerFailure, fetch_health, fetch_metrics
from inference.config import InferenceConfig, get_config
from inference.errors import PoolUnavailable
from inference.metrics import WorkerMetrics
from inference.models import ModelWorker
from supportbot.db_connections import connections_release

logger = logging.getLogger(__name__)


@dataclass
class WorkerState:
    """This process's live view of one registered worker."""

    id: int
    name: str
    base_url: str
    model_name: str
    role: str
    state: str
    breaker: CircuitBreaker
    healthy: bool = False
    last_error: str = ""
    metrics: WorkerMetrics | None = None
    metrics_at: float | None = None  # time.monotonic() of the last good scrape
    tokens_per_s: float | None = None
    inflight: int = 0
    health_failures: int = 0
    _prev_tokens: tuple[float, float] | None = field(default=None, repr=False)
    # (monotonic time, metrics) every ~10 s over the last ~5 min: engine-side windowed percentiles
    _history: deque = field(default_factory=lambda: deque(maxlen=31), repr=False)

    def engine_window(self, now: float) -> dict:
        """Engine-side TTFT/ITL p50/p95 (ms) over the recent window, from histogram deltas."""
        if self.metrics is None:
            return {}
        if not self._history or now - self._history[-1][0] >= 10.0:
            self._history.append((now, self.metrics))
        since, base = self._history[0]
        out: dict = {"window_s": round(now - since, 1)}
        for name in ("ttft", "itl"):
            hist = getattr(self.metrics, name)
            if base is not self.metrics:
                hist = hist.minus(getattr(base, name))
            for q in (50, 95):
                value = hist.quantile(q / 100)
                out[f"{name}_p{q}_ms"] = None if value is None else round(value * 1000, 1)
        return out

    def view(self, now: float) -> router.WorkerView:
        m = self.metrics
        return router.WorkerView(
            key=self.name,
            role=self.role,
            ready=self.state == ModelWorker.State.READY,
            healthy=self.healthy,
            breaker_allows=self.breaker.can_attempt(),
            metrics_age_s=None if self.metrics_at is None else now - self.metrics_at,
            running=m.running if m else 0.0,
            waiting=m.waiting if m else 0.0,
            kv_cache_usage=m.kv_cache_usage if m else 0.0,
            local_inflight=self.inflight,
        )


class Pool:
    def __init__(self, config: InferenceConfig | None = None, *, redis_prefix: str = "sb:inf"):
        self.config = config or get_config()
        self.redis_prefix = redis_prefix
        self.workers: dict[str, WorkerState] = {}
        self.last_poll_at: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._start_lock: asyncio.Lock | None = None
        self._external_synced = False
        self._background: set[asyncio.Task] = set()
        self.http: httpx.AsyncClient | None = None
        self.limiter: TenantLimiter | None = None
        self.discovery = discovery.Feed.from_config(self.config)

    # ------------------------------------------------------------------ lifecycle
    @property
    def weights(self) -> router.RouterWeights:
        c = self.config
        return router.RouterWeights(
            stale_after_s=c.stale_after_s, max_waiting=c.worker_max_waiting, max_kv=c.worker_max_kv
        )

    def running_in(self, loop: asyncio.AbstractEventLoop) -> bool:
        return self._loop is loop and self._task is not None and not self._task.done()

    async def ensure_running(self) -> None:
        """Start the poller in the current loop (once) and wait for its first full poll."""
        loop = asyncio.get_running_loop()
        if self.running_in(loop):
            return
        if self._loop is not loop or self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self.running_in(loop):
                return
            self._loop = loop
            self._wake = asyncio.Event()
            self.http = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)
            )
            redis = Redis.from_url(settings.REDIS_URL)
            c = self.config
            self.limiter = TenantLimiter(
                redis,
                tokens_per_minute=c.tenant_tokens_per_minute,
                burst=c.tenant_token_burst,
                max_concurrency=c.tenant_max_concurrency,
                prefix=self.redis_prefix,
            )
            try:
                await self.poll_once()
            except Exception:  # DB or network trouble: route with what is known (maybe nothing)
                logger.exception("first inference pool poll failed")
            self._task = loop.create_task(
                self._run(), name="inference-pool-poller", context=_outside_turns()
            )

    async def stop(self) -> None:
        """Finish background writes, stop the poller and close clients (tests, shutdown)."""
        if self._loop is asyncio.get_running_loop():
            await self.flush()
        if self._task is not None and self._loop is asyncio.get_running_loop():
            self._task.cancel()
            done, _ = await asyncio.wait({self._task}, timeout=10.0)
            if not done:
                logger.error("inference pool poller did not stop within 10 s")
            if self.http is not None:
                await self.http.aclose()
            if self.limiter is not None:
                await self.limiter.redis.aclose()
        self._task = None

    def clients(self) -> tuple[TenantLimiter, httpx.AsyncClient]:
        """The limiter and HTTP client of the running pool (after `ensure_running`)."""
        if self.limiter is None or self.http is None:
            raise RuntimeError("the pool is not running; await ensure_running() first")
        return self.limiter, self.http

    async def _run(self) -> None:
        wake = self._wake or asyncio.Event()
        while True:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
            # races with the event being set, and the poller would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.poll_interval_s):
                    await wake.wait()
            wake.clear()
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep polling; stale metrics already fail safe
                logger.exception("inference pool poll failed")

    def spawn(self, coro) -> None:
        """Run bookkeeping (usage rows) off the request path; failures are logged."""
        task = asyncio.get_running_loop().create_task(coro, context=_outside_turns())
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("inference bookkeeping failed: %r", task.exception())

    async def flush(self) -> None:
        """Wait for pending background writes (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def request_check(self) -> None:
        """Ask the poller for an immediate round (after a failure)."""
        if self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------------ polling
    async def refresh_registry(self) -> None:
        """Re-read the registry; add new workers, update changed ones, drop removed ones."""
        if not self._external_synced and self.config.workers.strip():
            specs = services.parse_external_workers(
                self.config.workers, default_model=self.config.served_model_name
            )
            await sync_to_async(released(services.workers_sync_external))(specs=specs)
        self._external_synced = True
        if self.discovery is not None:
            found = await self.discovery.refresh()
            if found is not None:
                await sync_to_async(released(services.workers_sync_discovered))(
                    base_urls=found,
                    role=self.discovery.spec.role,
                    model_name=self.discovery.spec.model or self.config.served_model_name,
                    drain_after_s=self.config.drain_timeout_s,
                )
        rows = await sync_to_async(released(selectors.workers_active))()
        seen = set()
        for row in rows:
            seen.add(row.name)
            if self.discovery is not None:
                row.state = self.discovery.local_state(row)
            ws = self.workers.get(row.name)
            if ws is None or ws.id != row.id or ws.base_url != row.base_url:
                self.workers[row.name] = WorkerState(
                    id=row.id,
                    name=row.name,
                    base_url=row.base_url,
                    model_name=row.model_name,
                    role=row.role,
                    state=row.state,
                    breaker=CircuitBreaker(
                        failure_threshold=self.config.breaker_failures,
                        reset_timeout_s=self.config.breaker_reset_s,
                    ),
                )
            else:
                ws.role, ws.state, ws.model_name = row.role, row.state, row.model_name
        for name in set(self.workers) - seen:
            del self.workers[name]

    async def poll_once(self) -> None:
        """One round: registry, then every worker's health + metrics concurrently."""
        await self.refresh_registry()
        workers = list(self.workers.values())
        results = await asyncio.gather(*(self._poll_worker(w) for w in workers))
        self.last_poll_at = time.monotonic()
        await sync_to_async(released(_record_polls))(results)

    async def _poll_worker(self, ws: WorkerState) -> dict:
        _, http = self.clients()
        # A busy CPU engine can answer slowly; only repeated timeouts count (see below).
        timeout = self.config.health_timeout_s
        health, metrics = await asyncio.gather(
            fetch_health(http, ws.base_url, timeout_s=timeout),
            fetch_metrics(http, ws.base_url, timeout_s=timeout),
            return_exceptions=True,
        )
        now = time.monotonic()
        errors = [str(r) for r in (health, metrics) if isinstance(r, BaseException)]
        for r in (health, metrics):
            if isinstance(r, BaseException) and not isinstance(r, WorkerFailure):
                logger.warning("poll of %s raised %r", ws.name, r)
        if isinstance(health, BaseException):
            ws.health_failures += 1
            # Only a slow answer (a busy CPU engine) must repeat to count. Anything else is
            # definitive: refused, a non-200, or a connection reset or closed without an
            # answer, which is what the first poll after a crash sees while the kernel
            # tears the dead server's socket down.
            definitive = not isinstance(health.__cause__, httpx.TimeoutException)
            if definitive or ws.health_failures >= 3:
                ws.healthy = False
        else:
            ws.health_failures = 0
            ws.healthy = True
        ws.last_error = "; ".join(errors)[:500]
        if isinstance(metrics, WorkerMetrics):
            if ws.metrics_at is not None and ws._prev_tokens is not None:
                dt = now - ws._prev_tokens[0]
                if dt > 0:
                    generated = metrics.generation_tokens - ws._prev_tokens[1]
                    ws.tokens_per_s = max(0.0, generated / dt)
            ws._prev_tokens = (now, metrics.generation_tokens)
            ws.metrics, ws.metrics_at = metrics, now
        stored = None
        if isinstance(metrics, WorkerMetrics):
            stored = metrics.to_dict()
            stored["tokens_per_s"] = ws.tokens_per_s
            stored["prefix_cache_hit_rate"] = metrics.prefix_cache_hit_rate
            stored["engine_window"] = ws.engine_window(now)
        return {
            "worker_id": ws.id,
            "healthy": ws.healthy,
            "error": ws.last_error,
            "metrics": stored,
            "breaker_state": str(ws.breaker.state),
        }

    def mark_down(self, ws: WorkerState, error: str) -> None:
        """A connection to the worker was refused: stop routing to it until a poll succeeds."""
        ws.healthy = False
        ws.last_error = error[:500]
        self.request_check()

    # ------------------------------------------------------------------ picking
    def views(self) -> list[router.WorkerView]:
        now = time.monotonic()
        return [w.view(now) for w in self.workers.values()]

    def has_healthy_worker(self) -> bool:
        return any(w.state == ModelWorker.State.READY and w.healthy for w in self.workers.values())

    async def pick(
        self,
        *,
        role: str,
        affinity_key: str | None,
        exclude: frozenset[str],
        deadline: float,
    ) -> tuple[WorkerState, router.Decision]:
        """Reserve a worker (breaker attempt + in-flight count), waiting while all are saturated.

        Raise PoolUnavailable at once when no worker can take work, or at `deadline`
        (loop time) when the eligible ones stay saturated.
        """
        loop = asyncio.get_running_loop()
        while True:
            decision = router.choose(
                self.views(),
                role=role,
                affinity_key=affinity_key,
                exclude=exclude,
                weights=self.weights,
            )
            for view in decision.ranked:
                ws = self.workers[view.key]
                if ws.breaker.begin_attempt():
                    ws.inflight += 1
                    return ws, decision
            if decision.reason == "no_worker":
                raise PoolUnavailable(
                    "no healthy inference worker can take this request",
                    retry_after=self._retry_after_no_worker(),
                )
            if loop.time() >= deadline:
                raise PoolUnavailable(
                    "every inference worker is saturated (queue deadline passed)",
                    retry_after=max(1.0, self.config.queue_deadline_s),
                )
            await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))

    def _retry_after_no_worker(self) -> float:
        if any(w.breaker.state is BreakerState.OPEN for w in self.workers.values()):
            return self.config.breaker_reset_s
        return max(5.0, self.config.poll_interval_s * 2)

    def release(self, ws: WorkerState) -> None:
        ws.inflight = max(0, ws.inflight - 1)


def _record_polls(results: list[dict]) -> None:
    for r in results:
        services.worker_record_poll(**r)


def _outside_turns() -> contextvars.Context:
    """A fresh context for background work (usage rows, the poller).

    It outlives the turn that started it: in the turn's context it would run on (and
    revive) the turn's thread and use the turn's database connection objects after the turn
    gave them back. In a fresh context asgiref runs it on the process's shared thread, with
    connection objects of its own, which `released` closes after every call.
    """
    return contextvars.Context()


def released(fn):
    """`fn`, then give this context's database connections back to the pool."""

    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            connections_release()

    return run


_pool: Pool | None = None


def get_pool() -> Pool:
    """The process's pool (created on first use; started by `ensure_running`)."""
    global _pool
    if _pool is None:
        _pool = Pool()
    return _pool


def set_pool(pool: Pool | None) -> Pool | None:
    """Replace the process's pool (tests); return the previous one."""
    global _pool
    previous, _pool = _pool, pool
    return previous
