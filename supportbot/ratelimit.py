"""Abuse limits: sliding-window counters in Redis, a stricter in-process fallback without it.

Every limit is `count` hits per `window` seconds of one key (an IP and tenant, a customer, a
conversation, an API key, a user name). Limits are named in `settings.RATE_LIMITS` (each from an
env var, `"<count>/<seconds>"`). The counters live in the project's Redis (`REDIS_URL`), shared
by every process. When Redis cannot be reached the limiter keeps working from counters in this
process, with each limit divided by `RATE_LIMIT_FALLBACK_DIVISOR` (several processes count
separately then, so each one allows less), and tries Redis again after
`RATE_LIMIT_REDIS_RETRY_S`. A limit never fails open.

The window slides: a hit counts the current fixed window plus the previous one weighted by how
much of it still lies inside the last `window` seconds, so two bursts on either side of a window
boundary cannot pass twice the limit (a fixed window lets `1/60` through twice within a second).

`rate_limit_enforce` raises `RateLimited` (429, `Retry-After`, the one JSON error shape);
sockets turn it into a `rate_limited` event (docs/chat-protocol.md).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from supportbot.errors import RateLimited

logger = logging.getLogger(__name__)

KEY_PREFIX = "sb:rl"


@dataclass(frozen=True)
class Limit:
    name: str
    count: int
    window: int


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: Limit
    hits: int
    retry_after: int
    backend: str  # "redis" | "local"


def parse_limit(name: str, text: str) -> Limit:
    """`"20/60"` → 20 hits per 60 s; raise ImproperlyConfigured for anything else."""
    try:
        count_text, window_text = text.split("/")
        count, window = int(count_text), int(window_text)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"Rate limit {name}: {text!r} is not '<count>/<seconds>'."
        ) from exc
    if count < 1 or window < 1:
        raise ImproperlyConfigured(f"Rate limit {name}: count and seconds must be positive.")
    return Limit(name=name, count=count, window=window)


def limit_get(name: str) -> Limit:
    """The configured limit `name` (settings.RATE_LIMITS)."""
    try:
        text = settings.RATE_LIMITS[name]
    except KeyError as exc:
        raise ImproperlyConfigured(f"No rate limit named {name!r} in RATE_LIMITS.") from exc
    return parse_limit(name, text)


def _digest(parts: tuple) -> str:
    raw = "\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()[:32]


class _Local:
    """This process's counters (the fallback, lockouts, marks); pruned as windows pass."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, tuple[int, float]] = {}  # key -> (hits, window end)
        self.windows: dict[tuple[str, int], int] = {}  # (key, window index) -> hits

    def hit(self, key: str, window_index: int, cost: int) -> tuple[int, int]:
        """Add `cost` to this window of `key`; return (previous window's, this window's) hits."""
        with self.lock:
            current = self.windows.get((key, window_index), 0) + cost
            self.windows[(key, window_index)] = current
            previous = self.windows.get((key, window_index - 1), 0)
            if len(self.windows) > 50_000:
                self.windows = {k: v for k, v in self.windows.items() if k[1] >= window_index - 1}
            return previous, current

    def clear(self) -> None:
        with self.lock:
            self.counts.clear()
            self.windows.clear()


class _RedisState:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.client: redis.Redis | None = None
        self.url: str | None = None
        self.down_until = 0.0

    def get(self) -> redis.Redis | None:
        """The client, or None while Redis is considered down."""
        if time.monotonic() < self.down_until:
            return None
        with self.lock:
            if self.client is None or self.url != settings.REDIS_URL:
                timeout = settings.RATE_LIMIT_REDIS_TIMEOUT_S
                self.url = settings.REDIS_URL
                self.client = redis.Redis.from_url(
                    self.url, socket_timeout=timeout, socket_connect_timeout=timeout
                )
            return self.client

    def failed(self, exc: Exception) -> None:
        if time.monotonic() >= self.down_until:
            logger.warning("rate limits fall back to in-process counters: %s", exc)
        self.down_until = time.monotonic() + settings.RATE_LIMIT_REDIS_RETRY_S


_local = _Local()
_redis = _RedisState()


def _sliding_decision(
    limit: Limit, previous: int, current: int, now: float, allowed_count: int, backend: str
) -> Decision:
    """Decide from two fixed windows: the previous one counts by its share still in range.

    `current` includes this hit. A refused hit is taken back by the caller, so `retry_after` is
    the wait until one more hit fits if nothing else arrives meanwhile.
    """
    window = limit.window
    ends = (int(now // window) + 1) * window
    into = 1.0 - (ends - now) / window  # share of the current window already passed
    estimate = previous * (1.0 - into) + current
    allowed = estimate <= allowed_count + 1e-9
    kept = current if allowed else current - 1
    if kept + 1 <= allowed_count:
        # Only the previous window's weight is in the way: wait until enough of it slid out.
        needed = 1.0 - (allowed_count - kept - 1) / previous if previous else into
        wait = (needed - into) * window
    else:
        # This window alone is full: wait for the next one, then for this one to slide out.
        wait = (ends - now) + (1.0 - (allowed_count - 1) / kept) * window
    return Decision(allowed, limit, int(estimate + 0.999), max(1, int(wait + 0.999)), backend)


def rate_limit_hit(
    *, limit: Limit, key: tuple, cost: int = 1, keep_refused: bool = False
) -> Decision:
    """Count `cost` hits of `key` under `limit`; return whether this hit is allowed.

    A refused hit is taken back, so a client that waits `retry_after` is let through; with
    `keep_refused` it stays counted (events that happened, such as failed logins, which back
    off further with each one past the limit).
    """
    now = time.time()
    window_index = int(now // limit.window)
    base = f"{KEY_PREFIX}:{limit.name}:{_digest(key)}"
    current_key = f"{base}:{window_index}"
    client = _redis.get()
    if client is not None:
        try:
            pipe = client.pipeline(transaction=True)
            pipe.incrby(current_key, cost)
            pipe.expire(current_key, 2 * limit.window + 1)
            pipe.get(f"{base}:{window_index - 1}")
            current, _expire, previous = pipe.execute()
            decision = _sliding_decision(
                limit, int(previous or 0), int(current), now, limit.count, "redis"
            )
            if not decision.allowed and not keep_refused:
                client.decrby(current_key, cost)
        except redis.RedisError as exc:
            _redis.failed(exc)
        else:
            return decision
    allowed_local = max(1, limit.count // max(1, settings.RATE_LIMIT_FALLBACK_DIVISOR))
    local_key = f"{limit.name}:{_digest(key)}"
    previous, current = _local.hit(local_key, window_index, cost)
    decision = _sliding_decision(limit, previous, current, now, allowed_local, "local")
    if not decision.allowed and not keep_refused:
        _local.hit(local_key, window_index, -cost)
    return decision


def rate_limit_enforce(*, name: str, key: tuple, cost: int = 1, detail: str | None = None) -> None:
    """Count a hit of `key` under the limit `name`; raise RateLimited when it is over."""
    if not settings.RATE_LIMITS_ENABLED:
        return
    decision = rate_limit_hit(limit=limit_get(name), key=key, cost=cost)
    if not decision.allowed:
        raise rate_limited_error(decision, detail=detail)


def rate_limited_error(decision: Decision, *, detail: str | None = None) -> RateLimited:
    """The 429 of `decision`: its limit's name and the seconds to wait."""
    limit = decision.limit
    return RateLimited(
        detail or f"Too many requests ({limit.count} per {limit.window} s); try again later.",
        extra={"limit": limit.name, "retry_after": decision.retry_after},
    )


def rate_limits_reset() -> None:
    """Forget every counter (tests): this process's and, when reachable, Redis's."""
    _local.clear()
    _redis.down_until = 0.0
    client = _redis.get()
    if client is None:
        return
    try:
        for key in client.scan_iter(match=f"{KEY_PREFIX}:*", count=1000):
            client.delete(key)
    except redis.RedisError:
        pass


def redis_available() -> bool:
    """Whether the limiter currently uses Redis (false while it falls back)."""
    return _redis.get() is not None


# --------------------------------------------------------------------------- lockouts


def lockout_set(*, name: str, key: tuple, seconds: int) -> None:
    """Lock `key` under `name` for `seconds` (Redis, else this process)."""
    lock_key = f"{KEY_PREFIX}:lock:{name}:{_digest(key)}"
    client = _redis.get()
    if client is not None:
        try:
            client.set(lock_key, 1, ex=max(1, seconds))
            return
        except redis.RedisError as exc:
            _redis.failed(exc)
    with _local.lock:
        _local.counts[lock_key] = (1, time.time() + seconds)


def lockout_remaining(*, name: str, key: tuple) -> int:
    """Seconds `key` stays locked under `name` (0: not locked); checks both stores."""
    lock_key = f"{KEY_PREFIX}:lock:{name}:{_digest(key)}"
    remaining = 0.0
    client = _redis.get()
    if client is not None:
        try:
            remaining = max(0, int(client.ttl(lock_key)))
        except redis.RedisError as exc:
            _redis.failed(exc)
    with _local.lock:
        _hits, ends = _local.counts.get(lock_key, (0, 0.0))
    remaining = max(remaining, ends - time.time())
    return int(remaining + 0.999) if remaining > 0 else 0


def lockout_clear(*, name: str, key: tuple) -> None:
    lock_key = f"{KEY_PREFIX}:lock:{name}:{_digest(key)}"
    client = _redis.get()
    if client is not None:
        try:
            client.delete(lock_key)
        except redis.RedisError as exc:
            _redis.failed(exc)
    with _local.lock:
        _local.counts.pop(lock_key, None)


def mark_once(*, name: str, key: tuple, ttl_seconds: int) -> bool:
    """Mark `key` seen for `ttl_seconds`; False if it was already marked (a replay).

    Redis SET NX decides across processes; without Redis this process's memory does (and the
    marks made there are kept until they expire, in case Redis lost them while down).
    """
    mark = f"{KEY_PREFIX}:once:{name}:{_digest(key)}"
    now = time.time()
    with _local.lock:
        _hits, ends = _local.counts.get(mark, (0, 0.0))
        if ends > now:
            return False
    client = _redis.get()
    if client is not None:
        try:
            if not client.set(mark, 1, nx=True, ex=max(1, ttl_seconds)):
                return False
        except redis.RedisError as exc:
            _redis.failed(exc)
    with _local.lock:
        _hits, ends = _local.counts.get(mark, (0, 0.0))
        if ends > now:
            return False
        _local.counts[mark] = (1, now + ttl_seconds)
    return True
