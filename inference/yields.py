"""Verified-sentence yield per model, the generate-or-skip policy, and answer-path metrics.

The orchestrator releases a generated answer one verified sentence at a time; a model whose
sentences never pass verification only makes the customer wait. This module measures that:

- `record(model=, worker=, kept=, dropped=, waited_ms=)` after each generated answer: how many
  sentences verification kept and dropped, and how long the answer waited on the model.
- `estimate(model)` -> `YieldEstimate` over the last `yield_window` answers (younger than
  `yield_max_age_s`): yield = kept / (kept + dropped), an answer with no sentence at all counts
  as one dropped sentence (the model wrote nothing supportable).
- `should_generate(model)` -> `(generate, reason)`: skip the model while its answer yield —
  the share of its recent answers in which verification kept a sentence, i.e. the model gave
  the customer its first words within the budget, taken at the lower bound of its 95% Wilson
  interval so a lucky streak of a few samples does not count — is below `yield_threshold`, but keep
  probing (one call every `yield_probe_interval_s`, plus a random `yield_probe_fraction` of
  answers) and resume as soon as the last `yield_recovery_samples` answers each kept one, so
  a better model or worker is noticed. The policy looks at answers, not sentences: a model
  whose every fourth sentence verifies but that rarely starts an answer in time (SmolLM2 on
  a CPU) only makes customers wait.
- `answer_path_record(path=, reason=, waited_ms=, model=)` once per answer: which path gave
  the customer its first words (`generated`, `extractive`, `cached`, `skipped`) and why.

Everything is cheap and never blocks: samples go into in-process memory and a one-shot
background task flushes them to Redis every `yield_flush_interval_s` (lists per model, trimmed
to the window), reading back what every other web process recorded, so all processes decide
from the same measurements. Without Redis or without a running loop the process decides from
its own samples. Probe timing is per process (N processes probe up to N times as often).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis as redis_sync
from django.conf import settings
from redis.asyncio import Redis
from redis.exceptions import RedisError

from inference import telemetry
from inference.config import InferenceConfig, get_config
from inference.pool import get_pool

logger = logging.getLogger(__name__)

PATHS = ("generated", "extractive", "cached", "skipped")
_PATH_KEEP = 500  # answer-path samples kept per model for the ops page's skip rate


@dataclass(frozen=True)
class YieldSample:
    ts: float  # wall clock (time.time), comparable across processes
    worker: str
    kept: int
    dropped: int
    waited_ms: float

    @property
    def sentences(self) -> int:
        return max(1, self.kept + self.dropped)

    @property
    def rate(self) -> float:
        return self.kept / self.sentences

    def to_json(self) -> str:
        return json.dumps([self.ts, self.worker, self.kept, self.dropped, self.waited_ms])

    @classmethod
    def from_json(cls, raw: bytes | str) -> YieldSample:
        ts, worker, kept, dropped, waited = json.loads(raw)
        return cls(float(ts), str(worker), int(kept), int(dropped), float(waited))


@dataclass(frozen=True)
class YieldEstimate:
    """The measured yield of one model (optionally one worker) over the recent window."""

    model: str
    samples: int
    yield_rate: float | None  # kept / sentences; None without samples
    answer_yield: float | None  # share of answers with at least one kept sentence
    p50_wait_ms: float | None
    p95_wait_ms: float | None
    # The answer yield the samples vouch for: the lower bound of its one-sided 95% Wilson
    # score interval. Ten answers of a model that keeps a sentence in one answer of ten show
    # 2/10 (20%) a quarter of the time; their lower bound is 6%.
    answer_yield_low: float | None = None


WILSON_Z = 1.645  # one-sided 95%


def wilson_lower(successes: int, trials: int, z: float = WILSON_Z) -> float | None:
    """The lower bound of the Wilson score interval of a proportion (None without trials)."""
    if trials <= 0:
        return None
    p = successes / trials
    z2 = z * z
    centre = p + z2 / (2 * trials)
    margin = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials))
    return max(0.0, (centre - margin) / (1 + z2 / trials))


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _estimate(model: str, samples: list[YieldSample]) -> YieldEstimate:
    if not samples:
        return YieldEstimate(model, 0, None, None, None, None)
    waits = [s.waited_ms for s in samples]
    answered = sum(1 for s in samples if s.kept > 0)
    return YieldEstimate(
        model=model,
        samples=len(samples),
        yield_rate=sum(s.kept for s in samples) / sum(s.sentences for s in samples),
        answer_yield=answered / len(samples),
        p50_wait_ms=_quantile(waits, 0.5),
        p95_wait_ms=_quantile(waits, 0.95),
        answer_yield_low=wilson_lower(answered, len(samples)),
    )


class YieldBook:
    """One process's yield measurements and policy state (`get_book()`); tests build their
    own with an injected `clock` (wall seconds) and `rng` (returns floats in [0, 1))."""

    def __init__(
        self,
        *,
        config: InferenceConfig | None = None,
        clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
        redis_url: str | None = None,
        prefix: str = "sb:inf",
    ) -> None:
        self._config = config
        self.clock = clock
        self.rng = rng
        self.redis_url = redis_url
        self.prefix = prefix
        self._shared: dict[str, list[YieldSample]] = {}  # as read back from Redis
        self._pending: list[tuple[str, YieldSample]] = []
        self._pending_paths: list[tuple[str, str]] = []  # (model, json)
        self._last_probe: dict[str, float] = {}
        self._redis: Redis | None = None
        self._redis_loop: asyncio.AbstractEventLoop | None = None
        self._flush_task: asyncio.Task | None = None

    @property
    def config(self) -> InferenceConfig:
        return self._config or get_config()

    # ------------------------------------------------------------------ measurements
    def record(self, *, model: str, worker: str, kept: int, dropped: int, waited_ms: float) -> None:
        """Note one generated answer: sentences verification kept and dropped, time waited."""
        sample = YieldSample(self.clock(), worker, max(0, kept), max(0, dropped), waited_ms)
        self._pending.append((model, sample))
        keep = self.config.yield_window * 4  # bounded while Redis is away
        if len(self._pending) > keep:
            del self._pending[:-keep]
        self._kick()

    def window(self, model: str, worker: str | None = None) -> list[YieldSample]:
        """The samples the policy looks at: newest `yield_window`, younger than the max age."""
        cfg = self.config
        oldest = self.clock() - cfg.yield_max_age_s
        merged = set(self._shared.get(model, []))
        merged.update(s for m, s in self._pending if m == model)
        samples = sorted(
            (s for s in merged if s.ts >= oldest and (worker is None or s.worker == worker)),
            key=lambda s: s.ts,
        )
        return samples[-cfg.yield_window :]

    def estimate(self, model: str, worker: str | None = None) -> YieldEstimate:
        """The measured yield of `model` (or of one of its workers) over the window."""
        return _estimate(model, self.window(model, worker))

    # ------------------------------------------------------------------ policy
    def should_generate(self, model: str) -> tuple[bool, str]:
        """Whether to call `model` for this answer, and why (a short, stable reason code):
        `policy_off`, `warming_up`, `yield_ok`, `recovering`, `probe_interval`,
        `probe_random` (generate) or `low_yield` (skip: answer extractively at once).
        Each decision is counted (`supportbot_generate_decisions_total{reason}`)."""
        decision = self._decide(model)
        telemetry.GENERATE_DECISIONS.labels(decision[1]).inc()
        return decision

    def _decide(self, model: str) -> tuple[bool, str]:
        cfg = self.config
        if not cfg.yield_policy:
            return True, "policy_off"
        self._kick()  # refresh the shared view while deciding
        samples = self.window(model)
        if len(samples) < cfg.yield_min_samples:
            return True, "warming_up"
        est = _estimate(model, samples)
        if est.answer_yield_low is not None and est.answer_yield_low >= cfg.yield_threshold:
            return True, "yield_ok"
        recent = samples[-cfg.yield_recovery_samples :] if cfg.yield_recovery_samples > 0 else []
        if recent and all(s.kept > 0 for s in recent):
            return True, "recovering"
        now = self.clock()
        if now - self._last_probe.get(model, -math.inf) >= cfg.yield_probe_interval_s:
            self._last_probe[model] = now
            return True, "probe_interval"
        if self.rng() < cfg.yield_probe_fraction:
            self._last_probe[model] = now
            return True, "probe_random"
        return False, "low_yield"

    # ------------------------------------------------------------------ answer paths
    def answer_path(self, *, path: str, reason: str, waited_ms: float, model: str = "") -> None:
        """Count one answer by path and reason; observe the time it waited on the model."""
        if path not in PATHS:
            raise ValueError(f"path {path!r} not one of {PATHS}")
        telemetry.ANSWERS.labels(path, reason).inc()
        telemetry.MODEL_WAIT.labels(path).observe(max(0.0, waited_ms) / 1000.0)
        self._pending_paths.append(
            (model, json.dumps([self.clock(), path, reason, round(waited_ms, 1)]))
        )
        if len(self._pending_paths) > _PATH_KEEP:
            del self._pending_paths[:-_PATH_KEEP]
        self._kick()

    # ------------------------------------------------------------------ sharing
    def _key(self, kind: str, model: str) -> str:
        return f"{self.prefix}:{kind}:{model}"

    def _client(self) -> Redis:
        loop = asyncio.get_running_loop()
        if self._redis is None or self._redis_loop is not loop:
            self._redis = Redis.from_url(self.redis_url or settings.REDIS_URL)
            self._redis_loop = loop
        return self._redis

    def _kick(self) -> None:
        """Schedule one flush in `yield_flush_interval_s` if none is pending on this loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # sync caller: samples wait for the next flush from async code
        task = self._flush_task
        if task is not None and not task.done() and task.get_loop() is loop:
            return
        self._flush_task = loop.create_task(self._flush_later(), name="inference-yield-flush")

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.config.yield_flush_interval_s)
        await self.flush()

    async def flush(self) -> None:
        """Push pending samples to Redis and read back every model's window (all processes).
        Redis trouble keeps the samples pending and the process deciding on its own data."""
        cfg = self.config
        pending, paths = self._pending, self._pending_paths
        self._pending, self._pending_paths = [], []
        ttl = max(60, int(cfg.yield_max_age_s))
        models_key = f"{self.prefix}:yield-models"
        try:
            r = self._client()
            async with r.pipeline(transaction=False) as pipe:
                for model, sample in pending:
                    key = self._key("yield", model)
                    pipe.rpush(key, sample.to_json())
                    pipe.ltrim(key, -cfg.yield_window * 2, -1)
                    pipe.expire(key, ttl)
                    pipe.sadd(models_key, model)
                for model, raw in paths:
                    key = self._key("paths", model)
                    pipe.rpush(key, raw)
                    pipe.ltrim(key, -_PATH_KEEP, -1)
                    pipe.expire(key, ttl)
                    pipe.sadd(models_key, model)
                pipe.expire(models_key, ttl)
                await pipe.execute()
            models = [m.decode() for m in await r.smembers(models_key)]
            async with r.pipeline(transaction=False) as pipe:
                for model in models:
                    pipe.lrange(self._key("yield", model), 0, -1)
                lists = await pipe.execute()
        except (RedisError, OSError) as exc:
            logger.warning("yield flush failed, keeping samples in this process: %r", exc)
            self._pending = pending + self._pending
            self._pending_paths = paths + self._pending_paths
            return
        shared = {}
        for model, raws in zip(models, lists, strict=True):
            samples = []
            for raw in raws:
                with contextlib.suppress(ValueError, TypeError):
                    samples.append(YieldSample.from_json(raw))
            shared[model] = samples
        self._shared = shared

    async def aclose(self) -> None:
        """Flush and close the Redis client (tests, shutdown)."""
        if self._flush_task is not None and not self._flush_task.done():
            self._flush_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._flush_task
        await self.flush()
        if self._redis is not None:
            await self._redis.aclose()
            self._redis = None

    def shared_snapshot(self) -> list[dict]:
        """Per model, from Redis (every process): yield, samples, wait p50/p95, skip rate and
        answers by path over the recent window, and what the policy would decide now. Sync
        (the ops page and `/metrics`); an empty list when Redis is unreachable."""
        cfg = self.config
        oldest = self.clock() - cfg.yield_max_age_s
        client = redis_sync.Redis.from_url(self.redis_url or settings.REDIS_URL)
        try:
            models = sorted(m.decode() for m in client.smembers(f"{self.prefix}:yield-models"))
            pipe = client.pipeline(transaction=False)
            for model in models:
                pipe.lrange(self._key("yield", model), 0, -1)
                pipe.lrange(self._key("paths", model), 0, -1)
            raw = pipe.execute()
        except (RedisError, OSError) as exc:
            logger.warning("yield snapshot unavailable: %r", exc)
            return []
        finally:
            client.close()
        out = []
        for i, model in enumerate(models):
            samples = []
            for item in raw[2 * i]:
                with contextlib.suppress(ValueError, TypeError):
                    samples.append(YieldSample.from_json(item))
            samples = sorted((s for s in samples if s.ts >= oldest), key=lambda s: s.ts)
            samples = samples[-cfg.yield_window :]
            est = _estimate(model, samples)
            by_path: dict[str, int] = {}
            answers = 0
            for item in raw[2 * i + 1]:
                with contextlib.suppress(ValueError, TypeError):
                    ts, path, _reason, _waited = json.loads(item)
                    if ts >= oldest:
                        by_path[path] = by_path.get(path, 0) + 1
                        answers += 1
            if not samples and not answers:
                continue
            out.append(
                {
                    "model": model or "(unknown)",
                    "samples": est.samples,
                    "yield_rate": est.yield_rate,
                    "answer_yield": est.answer_yield,
                    "p50_wait_ms": est.p50_wait_ms,
                    "p95_wait_ms": est.p95_wait_ms,
                    "answers": answers,
                    "by_path": by_path,
                    "skip_rate": by_path.get("skipped", 0) / answers if answers else None,
                    "skipping": bool(
                        cfg.yield_policy
                        and est.samples >= cfg.yield_min_samples
                        and (est.answer_yield_low or 0.0) < cfg.yield_threshold
                    ),
                }
            )
        return out


_book: YieldBook | None = None


def get_book() -> YieldBook:
    """The process's yield book (created on first use)."""
    global _book
    if _book is None:
        _book = YieldBook()
    return _book


def set_book(book: YieldBook | None) -> YieldBook | None:
    """Replace the process's yield book (tests); return the previous one."""
    global _book
    previous, _book = _book, book
    return previous


# ---------------------------------------------------------------------- the orchestrator's API
def record(*, model: str, worker: str, kept: int, dropped: int, waited_ms: float) -> None:
    """After a generated answer: `kept`/`dropped` verified sentences of `model` on `worker`
    (from the ChatResult) and `waited_ms` spent waiting on the model. Never blocks."""
    get_book().record(model=model, worker=worker, kept=kept, dropped=dropped, waited_ms=waited_ms)


def estimate(model: str, worker: str | None = None) -> YieldEstimate:
    """The measured verified-sentence yield of `model` over the recent window."""
    return get_book().estimate(model, worker)


def should_generate(model: str) -> tuple[bool, str]:
    """Before generating: `(False, "low_yield")` means skip the model and answer extractively
    now; otherwise generate (the reason says why: warming up, yield ok, probing…)."""
    return get_book().should_generate(model)


def answer_path_record(*, path: str, reason: str, waited_ms: float, model: str = "") -> None:
    """Once per answer: the path (`generated`, `extractive`, `cached`, `skipped`) that gave the
    customer its first verified words, a short stable reason code, and the time spent waiting
    on the model (0 when it was not called). Pass `model` to get per-model skip rates."""
    get_book().answer_path(path=path, reason=reason, waited_ms=waited_ms, model=model)


def model_for_role(role: str = "primary") -> str:
    """The model name the gateway would route `role` to now (in-process pool view), else the
    configured served model name: the key to pass to `should_generate`."""
    from_pool = _pool_model(role)
    return from_pool or get_config().served_model_name


def _pool_model(role: str) -> str | None:
    for ws in get_pool().workers.values():
        if ws.role == role and ws.healthy and ws.state == "ready":
            return ws.model_name
    return None
