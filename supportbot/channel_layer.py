"""The Redis channel layer, degrading instead of failing while Redis is unreachable.

Without Redis no event can cross processes, but a socket should not die of it: a consumer's
`receive` waits (retrying every `RETRY_S`) instead of raising, which would close every open
socket of the process; `group_add`, `group_discard` and `group_send` log and carry on. The
orchestrator then sends a turn's events straight to the connection that asked
(`TurnEvents.publish` sees the lost group send), so a customer's own socket keeps getting its
answers from PostgreSQL-backed turns; other tabs and agents catch up from the saved history
when Redis is back (`session.start` with `last_message_id`, the console refetches).

It also never loses a message when a connection closes. All connections of a process share
one blocking pop (BZPOPMIN) on the process's Redis key, run by whichever `receive` holds
channels-redis' receive lock; when that connection closes, its `receive` is cancelled, and a
message for *another* connection that Redis popped in that instant was dropped with it
(reproduced: 1-2 of 30 tries with a message arriving as the pop was cancelled; seen in the
chat load as one answer whose `answer.completed` never came). Here the pop runs to its end in
a task of its own and what it got goes to the waiting connections' buffers.
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


def _reusable(pop: asyncio.Future) -> bool:
    """A pop another caller can take over: of this event loop (the layer outlives a test's
    loop), and running or finished with a message (not cancelled, not failed)."""
    if pop.get_loop() is not asyncio.get_running_loop() or pop.cancelled():
        return False
    return not pop.done() or pop.exception() is None


class ResilientRedisChannelLayer(RedisChannelLayer):
    """`RedisChannelLayer` whose Redis outages are waited out or skipped, never raised."""

    _last_warning = 0.0

    def _warn(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        if now - ResilientRedisChannelLayer._last_warning > 10:
            ResilientRedisChannelLayer._last_warning = now
            logger.warning("channel layer %s failed (Redis unreachable?): %s", what, exc)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pops: dict[str, asyncio.Future] = {}

    async def receive(self, channel):
        try:
            while True:
                try:
                    return await super().receive(channel)
                except _ERRORS as exc:
                    self._warn("receive", exc)
                    await asyncio.sleep(RETRY_S)
        finally:
            self._drop_idle_pops()

    async def receive_single(self, channel):
        """Pop one message off `channel`. A cancelled caller leaves its pop running: the next
        caller for the same channel (the connection that now holds the receive lock) takes
        over that pop and its message, instead of starting a second one."""
        pop = self._pops.get(channel)
        if pop is None or not _reusable(pop):
            pop = asyncio.ensure_future(super().receive_single(channel))
            self._pops[channel] = pop
        try:
            result = await asyncio.shield(pop)
        except asyncio.CancelledError:
            raise  # the pop goes on (or its result waits) for the next caller
        except BaseException:
            if self._pops.get(channel) is pop:
                del self._pops[channel]
            raise
        if self._pops.get(channel) is pop:
            del self._pops[channel]
        return result

    def _drop_idle_pops(self) -> None:
        """No connection receives any more: stop the pops nobody will take over."""
        if self.receive_count == 0:
            for pop in self._pops.values():
                pop.cancel()
            self._pops.clear()

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
