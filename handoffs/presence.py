"""Who is online in the console and who is viewing which handoff (Redis, with expiry).

Presence is a heartbeat, not a truth: an agent whose console stopped beating for
`ONLINE_SECONDS` counts as offline. Nothing here is needed to rebuild the queue, which lives
in PostgreSQL.
"""

from __future__ import annotations

import time
from functools import lru_cache

import redis
from django.conf import settings

ONLINE_SECONDS = 60


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


def _online_key(tenant_id: int) -> str:
    return f"sb:presence:{tenant_id}:online"


def _viewing_key(tenant_id: int, handoff_id: int) -> str:
    return f"sb:presence:{tenant_id}:viewing:{handoff_id}"


def agent_heartbeat(*, tenant_id: int, user_id: int) -> None:
    _redis().zadd(_online_key(tenant_id), {str(user_id): time.time()})


def agent_offline(*, tenant_id: int, user_id: int) -> None:
    _redis().zrem(_online_key(tenant_id), str(user_id))


def agents_online(*, tenant_id: int) -> list[int]:
    r = _redis()
    key = _online_key(tenant_id)
    r.zremrangebyscore(key, 0, time.time() - ONLINE_SECONDS)
    return [int(m) for m in r.zrange(key, 0, -1)]


def viewing_set(*, tenant_id: int, handoff_id: int, user_id: int, viewing: bool) -> None:
    key = _viewing_key(tenant_id, handoff_id)
    r = _redis()
    if viewing:
        r.zadd(key, {str(user_id): time.time()})
        r.expire(key, ONLINE_SECONDS * 2)
    else:
        r.zrem(key, str(user_id))


def viewers(*, tenant_id: int, handoff_id: int) -> list[int]:
    r = _redis()
    key = _viewing_key(tenant_id, handoff_id)
    r.zremrangebyscore(key, 0, time.time() - ONLINE_SECONDS)
    return [int(m) for m in r.zrange(key, 0, -1)]


def queue_presence(
    *, tenant_id: int, handoff_ids: list[int]
) -> tuple[list[int], dict[int, list[int]]]:
    """Agents online and each handoff's viewers, in one round trip to Redis.

    Reads only (entries older than `ONLINE_SECONDS` are skipped, not pruned): the console
    refetches this on every queue event, so its cost must not grow with the queue.
    """
    cutoff = f"({time.time() - ONLINE_SECONDS}"
    pipe = _redis().pipeline(transaction=False)
    pipe.zrangebyscore(_online_key(tenant_id), cutoff, "+inf")
    for handoff_id in handoff_ids:
        pipe.zrangebyscore(_viewing_key(tenant_id, handoff_id), cutoff, "+inf")
    online, *viewing = pipe.execute()
    return [int(m) for m in online], {
        handoff_id: [int(m) for m in members]
        for handoff_id, members in zip(handoff_ids, viewing, strict=True)
    }
