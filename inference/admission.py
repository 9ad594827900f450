"""Admission control: hard token caps, and per-tenant token buckets + concurrency in Redis.

Each request costs its estimated prompt tokens plus `max_tokens`. A tenant's bucket holds at
most `burst` tokens and refills at `tokens_per_minute / 60` per second; a request needs its
whole cost in the bucket. Concurrency is a sorted set of leases scored by expiry, so a process
that dies mid-stream cannot leak a slot for longer than the lease TTL. Both checks and both
updates happen in one Lua script on Redis time, so they hold across processes and hosts.
On release the bill is settled with the tokens the call actually used (every call, cancelled
and failed ones included): the unused part of the estimate is refunded, an excess is charged.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from dataclasses import dataclass

from redis.asyncio import Redis

from inference.errors import InputTooLarge, TenantRateLimited
from supportbot.cancellation import cancel_count, cancel_swallowed_since

logger = logging.getLogger(__name__)

# Per message the chat template adds a few tokens (role markers, separators).
_TOKENS_PER_MESSAGE = 4
_CHARS_PER_TOKEN = 3.5

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local max_conc = tonumber(ARGV[4])
local lease_ttl = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= max_conc then
  return {0, 'concurrency', '1'}
end
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = cap
  ts = now
end
tokens = math.min(cap, tokens + math.max(0, now - ts) * rate)
local bucket_ttl = math.ceil(cap / rate) + 60
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], bucket_ttl)
if tokens < cost then
  return {0, 'tokens', tostring((cost - tokens) / rate)}
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens - cost))
redis.call('ZADD', KEYS[2], now + lease_ttl, ARGV[5])
redis.call('EXPIRE', KEYS[2], math.ceil(lease_ttl) + 60)
return {1, 'ok', tostring(tokens - cost)}
"""

_RELEASE = """
redis.call('ZREM', KEYS[2], ARGV[1])
local delta = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
if delta ~= 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens')) or 0
  tokens = math.max(-cap, math.min(cap, tokens + delta))
  redis.call('HSET', KEYS[1], 'tokens', tostring(tokens))
end
return 1
"""


def estimate_prompt_tokens(messages: list[dict]) -> int:
    """A cheap upper-leaning estimate of prompt tokens (no tokenizer in the serving process)."""
    chars = 0
    for message in messages:
        content = message.get("content") or ""
        if isinstance(content, list):  # OpenAI content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        chars += len(str(content))
    return math.ceil(chars / _CHARS_PER_TOKEN) + _TOKENS_PER_MESSAGE * len(messages) + 2


def check_caps(*, prompt_tokens: int, max_tokens: int, max_input: int, max_output: int) -> None:
    """Raise InputTooLarge when the request can never be admitted."""
    if max_tokens < 1:
        raise InputTooLarge("max_tokens must be at least 1", field="max_tokens")
    if max_tokens > max_output:
        raise InputTooLarge(
            f"max_tokens {max_tokens} exceeds the cap of {max_output}", field="max_tokens"
        )
    if prompt_tokens > max_input:
        raise InputTooLarge(
            f"the prompt (~{prompt_tokens} tokens) exceeds the cap of {max_input}",
            field="messages",
        )


@dataclass(frozen=True)
class Lease:
    tenant_id: int
    lease_id: str
    cost: int


class TenantLimiter:
    """Token bucket + concurrency cap per tenant, shared through Redis."""

    def __init__(
        self,
        redis: Redis,
        *,
        tokens_per_minute: int,
        burst: int,
        max_concurrency: int,
        prefix: str = "sb:inf",
    ) -> None:
        if tokens_per_minute <= 0 or burst <= 0 or max_concurrency <= 0:
            raise ValueError("limits must be positive")
        self.redis = redis
        self.rate_per_s = tokens_per_minute / 60.0
        self.burst = burst
        self.max_concurrency = max_concurrency
        self.prefix = prefix
        self._acquire = redis.register_script(_ACQUIRE)
        self._release = redis.register_script(_RELEASE)

    def _keys(self, tenant_id: int) -> list[str]:
        return [f"{self.prefix}:tb:{tenant_id}", f"{self.prefix}:cc:{tenant_id}"]

    async def acquire(self, *, tenant_id: int, cost: int, lease_ttl_s: float) -> Lease:
        """Take `cost` tokens and one concurrency slot, or raise TenantRateLimited."""
        if cost > self.burst:
            raise InputTooLarge(
                f"request cost {cost} tokens exceeds the tenant burst of {self.burst}"
            )
        lease_id = uuid.uuid4().hex
        before = cancel_count()
        ok, reason, value = await self._acquire(
            keys=self._keys(tenant_id),
            args=[self.burst, self.rate_per_s, cost, self.max_concurrency, lease_id, lease_ttl_s],
        )
        if cancel_swallowed_since(before):
            # Cancelled while taking the lease, and redis-py swallowed it: the caller is gone,
            # so the slot and tokens go back now, not when the lease expires.
            if int(ok):
                try:
                    await self.release(
                        Lease(tenant_id=tenant_id, lease_id=lease_id, cost=cost), used_tokens=0
                    )
                except Exception:  # the cancel is what the caller must see; the lease expires
                    logger.warning(
                        "lease release after a cancel failed; it expires in %ss",
                        lease_ttl_s,
                        extra={"tenant_id": tenant_id},
                        exc_info=True,
                    )
            raise asyncio.CancelledError
        reason = reason.decode() if isinstance(reason, bytes) else reason
        if not int(ok):
            wait = float(value)
            if reason == "concurrency":
                raise TenantRateLimited(
                    f"tenant has {self.max_concurrency} requests in flight", retry_after=wait
                )
            raise TenantRateLimited(
                f"tenant token budget exhausted; {cost} tokens needed", retry_after=wait
            )
        return Lease(tenant_id=tenant_id, lease_id=lease_id, cost=cost)

    async def release(self, lease: Lease, *, used_tokens: int | None = None) -> None:
        """Free the slot and settle the bill when the actual use is known: refund
        `cost - used_tokens`, or charge the excess when the call used more than its estimate
        (the bucket may go negative, at most one burst deep, so the tenant waits it off).
        Without `used_tokens` the whole estimate stays charged."""
        delta = lease.cost - used_tokens if used_tokens is not None else 0
        await self._release(
            keys=self._keys(lease.tenant_id), args=[lease.lease_id, delta, self.burst]
        )

    async def in_flight(self, *, tenant_id: int) -> int:
        return int(await self.redis.zcard(self._keys(tenant_id)[1]))
