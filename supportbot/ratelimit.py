"""Abuse limits: fixed-window counters in Redis, a stricter in-process fallback without it.

Every limit is `count` hits per `window` seconds of one key (an IP and tenant, a customer, a
conversation, an API key, a user name). Limits are named in `settings.RATE_LIMITS` (each from an
env var, `"<count>/<seconds>"`). The counters live in the project's Redis (`REDIS_URL`), shared
by every process. When Redis cannot be reached the limiter keeps working from counters in this
process, with each limit divided by `RATE_LIMIT_FALLBACK_DIVISOR` (several processes count
separately then, so each one allows less), and tries Redis again after
`RATE_LIMIT_REDIS_RETRY_S`. A limit never fails open.

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
    """Fixed-window counters of this process (the fallback); pruned as windows pass."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, tuple[int, float]] = {}  # key -> (hits, window end)

    def hit(self, key: str, window: int, now: float, cost: int) -> tuple[int, float]:
        with self.lock:
            hits, ends = self.counts.get(key, (0, 0.0))
            if ends <= now:
                hits, ends = 0, (now // window + 1) * window
            hits += cost
            self.counts[key] = (hits, ends)
            if len(self.counts) > 50_000:
                self.counts = {k: v for k, v in self.counts.items() if v[1] > now}
            return hits, ends

    def clear(self) -> None:
        with self.lock:
            self.counts.clear()


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


def rate_limit_hit(*, limit: Limit, key: tuple, cost: int = 1) -> Decision:
    """Count `cost` hits of `key` under `limit`; return whether this hit is allowed."""
    now = time.time()
    window_index = int(now // limit.window)
    ends = (window_index + 1) * limit.window
    redis_key = f"{KEY_PREFIX}:{limit.name}:{_digest(key)}:{window_index}"
    client = _redis.get()
    if client is not None:
        try:
            pipe = client.pipeline(transaction=True)
            pipe.incrby(redis_key, cost)
            pipe.expire(redis_key, limit.window + 1)
            hits = int(pipe.execute()[0])
        except redis.RedisError as exc:
            _redis.failed(exc)
        else:
            allowed = hits <= limit.count
            return Decision(allowed, limit, hits, max(1, int(ends - now + 0.999)), "redis")
    allowed_local = max(1, limit.count // max(1, settings.RATE_LIMIT_FALLBACK_DIVISOR))
    hits, local_ends = _local.hit(f"{limit.name}:{_digest(key)}", limit.window, now, cost)
    return Decision(
        hits <= allowed_local, limit, hits, max(1, int(local_ends - now + 0.999)), "local"
    )


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
