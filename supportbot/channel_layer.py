"""The Redis channel layer, degrading instead of failing while Redis is unreachable.

Without Redis no event can cross processes, but a socket should not die of it: a consumer's
`receive` waits (retrying every `RETRY_S`) instead of raising, which would close every open
socket of the process; `group_add`, `group_discard` and `group_send` log and carry on. The
orchestrator then sends a turn's events straight to the connection that asked
(`TurnEvents.publish` sees the lost group send), so a customer's own socket keeps getting its
answers from PostgreSQL-backed turns; other tabs and agents catch up from the saved history
when Redis is back (`session.start` with `last_message_id`, the console refetches).
"""

from __future__ import annotations

import asyncio
import logging
import time

import redis
from channels_redis.core import RedisChannelLayer

logger = logging.getLogger(__name__)

RETRY_S = 1.0
_ERRORS = (redis.RedisError, OSError)


class ResilientRedisChannelLayer(RedisChannelLayer):
    """`RedisChannelLayer` whose Redis outages are waited out or skipped, never raised."""

    _last_warning = 0.0

    def _warn(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        if now - ResilientRedisChannelLayer._last_warning > 10:
            ResilientRedisChannelLayer._last_warning = now
            logger.warning("channel layer %s failed (Redis unreachable?): %s", what, exc)

    async def receive(self, channel):
        while True:
            try:
                return await super().receive(channel)
            except _ERRORS as exc:
                self._warn("receive", exc)
                await asyncio.sleep(RETRY_S)

    async def group_add(self, group, channel):
        try:
            await super().group_add(group, channel)
        except _ERRORS as exc:
            self._warn("group_add", exc)

    async def group_discard(self, group, channel):
        try:
            await super().group_discard(group, channel)
        except _ERRORS as exc:
            self._warn("group_discard", exc)

    async def group_send(self, group, message) -> bool:
        """Send to the group; False when Redis is unreachable (the event reached no one), so
        callers that can deliver another way (the orchestrator) do."""
        try:
            await super().group_send(group, message)
        except _ERRORS as exc:
            self._warn("group_send", exc)
            return False
        return True
