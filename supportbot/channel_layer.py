"""The Redis channel layer, degrading instead of failing while Redis is unreachable.

Without Redis no event can cross processes, but a socket should not die of it: a consumer's
`receive` waits (retrying every `RETRY_S`) instead of raising, which would close every open
socket of the process; `group_add`, `group_discard` and `group_send` log and carry on. The
orchestrator then sends a turn's events straight to the connection that asked
(`TurnEvents.publish` sees the lost group send), so a customer's own socket keeps getting its
answers from PostgreSQL-backed turns; other tabs and agents catch up from the saved history
when Redis is back (`session.start` with `last_message_id`, the console refetches).

Receiving on a process-local channel (every consumer's) goes through one pump task per event
loop: it pops the process's Redis channel and hands each message to its consumer's buffer.
channels-redis instead lets whichever consumer holds its receive lock pop for all of them; a
consumer whose socket closes is cancelled in the middle of that pop, and under load (128
chats, sockets closing as others wait) the cancel stuck for daphne's 10 s close timeout, the
other consumers of the process waited behind the lock, and a popped message could be lost
with it: a chat's `answer.completed` never arrived. Now a cancelled consumer only stops
waiting on its own buffer.

Stopping the pump. On Python 3.11 redis-py can swallow a cancellation: it wraps every socket
write in `asyncio.wait_for`, which returns the finished write instead of raising
`CancelledError` when the cancel lands just after the write completed (CPython gh-86296, fixed
in 3.12). channels-redis then starts its next blocking pop, and on an idle channel it pops again
every 5 s forever: a cancelled pump never ended, and a test's event-loop teardown (or a daphne
shutdown) waited on it for good. So every Redis call of the layer (each pop, `send`, the group
calls) raises a cancellation that arrived and was swallowed during it
(`supportbot.cancellation.keeping_cancel`): a pump ends at most one blocking pop
(`brpop_timeout`, 5 s) after its cancel. A message popped meanwhile stays in channels-redis'
backup queue, which the next pop of the channel puts back first, so nothing is lost.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

import redis
from channels_redis.core import ChannelLock, RedisChannelLayer

from supportbot.cancellation import keeping_cancel

logger = logging.getLogger(__name__)

RETRY_S = 1.0
# A buffer nobody has waited on for this long belongs to a consumer that is gone (channel
# names are never reused); channels-redis expires undelivered messages after 60 s as well.
IDLE_BUFFER_S = 120.0
_ERRORS = (redis.RedisError, OSError)


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
        self._pump_task: asyncio.Task | None = None  # the layer has one process channel
        self._waiting: collections.Counter[str] = collections.Counter()
        self._last_used: dict[str, float] = {}
        self._pruned_at = 0.0

    async def receive(self, channel):
        """The next message of `channel`. Cancelling it loses no message: a process-local
        channel is read from the buffer the pump fills (see the module docstring)."""
        self.require_valid_channel_name(channel)  # raises TypeError for a bad name
        if "!" not in channel:
            while True:
                try:
                    return (await self.receive_single(channel))[1]
                except _ERRORS as exc:
                    self._warn("receive", exc)
                    await asyncio.sleep(RETRY_S)
        real_channel = self.non_local_name(channel)
        if not real_channel.endswith(self.client_prefix + "!"):
            raise ValueError(f"{channel!r} is not a channel of this process")
        self._pump_ensure(real_channel)
        self._waiting[channel] += 1
        self._last_used[channel] = time.monotonic()
        try:
            return await self.receive_buffer[channel].get()
        finally:
            self._waiting[channel] -= 1
            if not self._waiting[channel]:
                del self._waiting[channel]
            self._last_used[channel] = time.monotonic()

    def _pump_ensure(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        pump = self._pump_task
        if pump is not None and not pump.done():
            owner = pump.get_loop()
            if owner is loop:
                return
            if owner.is_running() and not owner.is_closed():  # it would take our messages
                raise RuntimeError("Two event loops are trying to receive() at once")
        # none yet, or the last one's loop has ended
        if pump is not None and pump.get_loop() is not loop:
            # channels-redis' per-channel receive locks are bound to the loop that made them; one
            # still held when that loop ended (its cleaner task never ran) would fail every pop
            # of this loop with "bound to a different event loop". Only the pump takes them.
            self.receive_clean_locks = ChannelLock()
        self._pump_task = loop.create_task(
            self._pump(real_channel), name=f"channel-layer-pump {real_channel}"
        )

    async def _pump(self, real_channel: str) -> None:
        """Pop the process's channel until cancelled and buffer each message for its consumer."""
        while True:
            try:
                targets, message = await self.receive_single(real_channel)
            except _ERRORS as exc:
                self._warn("receive", exc)
                await asyncio.sleep(RETRY_S)
                continue
            except Exception:  # never let the pump die: every consumer would wait forever
                logger.exception("channel layer pump failed; retrying")
                await asyncio.sleep(RETRY_S)
                continue
            now = time.monotonic()
            for target in targets if isinstance(targets, list) else [targets]:
                self.receive_buffer[target].put_nowait(message)
                self._last_used.setdefault(target, now)
            self._prune(now)

    async def _brpop_with_clean(self, index, channel, timeout):
        """channels-redis' pop, which loops on an empty channel: a receiver (the pump) whose
        cancellation redis-py swallowed stops here (see the module docstring); a popped member
        waits in the backup queue."""
        return await keeping_cancel(super()._brpop_with_clean(index, channel, timeout))

    def _prune(self, now: float) -> None:
        """Drop the buffers of consumers that are gone (nobody waited on them for a while)."""
        if now - self._pruned_at < IDLE_BUFFER_S / 4:
            return
        self._pruned_at = now
        for channel, used in list(self._last_used.items()):
            if now - used > IDLE_BUFFER_S and not self._waiting.get(channel):
                del self._last_used[channel]
                self.receive_buffer.pop(channel, None)

    async def send(self, channel, message):
        await keeping_cancel(super().send(channel, message))

    async def group_add(self, group, channel):
        try:
            await keeping_cancel(super().group_add(group, channel))
        except _ERRORS as exc:
            self._warn("group_add", exc)

    async def group_discard(self, group, channel):
        try:
            await keeping_cancel(super().group_discard(group, channel))
        except _ERRORS as exc:
            self._warn("group_discard", exc)

    async def group_send(self, group, message) -> bool:
        """Send to the group; False when Redis is unreachable (the event reached no one), so
        callers that can deliver another way (the orchestrator) do."""
        try:
            await keeping_cancel(super().group_send(group, message))
        except _ERRORS as exc:
            self._warn("group_send", exc)
            return False
        return True
