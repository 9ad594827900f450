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
(`brpop_timeout`, 5 s) after its cancel.

A cancel never loses a popped message. channels-redis pops with BZPOPMIN and only then copies
the message into the channel's backup queue: a cancel that lands while the server has popped
but before the copy (redis-py drops the connection, the popped message with it; channels_redis
issue #366) lost it, once in some thousand stops under load. Our pop (`_pop_into_backup`) is
answered instead: on a cancel it has the server end the blocked pop at once (CLIENT UNBLOCK),
reads the reply (no message, or the one just popped), backs that up, and only then stops. The
next pop of the channel puts the backup back first, so the message reaches its consumer (or,
at worst, twice: a cleaner cancelled with its event loop leaves a delivered one in the backup).
A cancel waits at most `UNBLOCK_S` for that answer: a frozen or partitioned Redis accepts
connections and never replies, and a shutdown must not wait the 30 s socket timeout.

A popped message whose backup copy fails (a pooled connection to a Redis that restarted: the
pop ran on a fresh connection, the copy on a stale one) is delivered from the process anyway:
it has left Redis, and the backup is only a safety net for a cancel. Before, the error dropped
it, and after every Redis restart the first event of the process was lost.
Group memberships live in Redis. A Redis that comes back empty (restarted without persistence,
failed over) has forgotten them, and a `group_add` made while it was down never reached it:
the socket got its own turns' events but never again an event of its conversation (an agent's
reply), for as long as it stayed open. So the layer keeps the memberships of its own consumers
and the pump re-adds them when a pop succeeds after a failed one, and every `REASSERT_S`
(which also renews the groups' expiry for sockets open longer than a day).
Where the server refuses CLIENT (an ACL, some managed Redis) a cancel drops the connection as
channels-redis does; and Redis failing during that answer never turns the cancel into an error
the pump would retry after. A popped message is backed up before its connection goes back to
the pool, and that return is shielded, so a cancel meeting a busy pool loses neither.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time

import redis
from channels_redis.core import ChannelLock, RedisChannelLayer

from supportbot.cancellation import keeping_cancel

logger = logging.getLogger(__name__)

RETRY_S = 1.0
# How long a cancelled pop waits for Redis to answer its unblock before giving up on it: a
# frozen or partitioned Redis never answers, and a shutdown must not wait the socket timeout.
UNBLOCK_S = 2.0
# A buffer nobody has waited on for this long belongs to a consumer that is gone (channel
# names are never reused); channels-redis expires undelivered messages after 60 s as well.
IDLE_BUFFER_S = 120.0
# Re-add this process's group memberships this often even without a failure seen (a Redis
# restarted between two pops), and to renew the groups' expiry (channels-redis: one day).
REASSERT_S = 60.0
_ERRORS = (redis.RedisError, OSError)
# Put a channel's backed-up messages (popped, not yet delivered) back in front of it, each with
# its own score, so the channel stays in send order; the channel keeps its expiry.
_RESTORE_BACKUP = """
local kept = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #kept, 2 do
    redis.call('ZADD', KEYS[1], kept[i + 1], kept[i])
end
redis.call('DEL', KEYS[2])
"""


async def _client_id(conn) -> int:
    """The reply to CLIENT ID: the connection's id, or 0 where the server refuses CLIENT (an
    ACL, a managed Redis). Without it a cancelled pop drops its connection, as channels-redis
    does, and a message popped at that instant can be lost."""
    try:
        return await conn.read_response(disconnect_on_error=False)
    except redis.ResponseError:
        return 0


async def _backed_up(client, backup: str, reply) -> None:
    """Copy a BZPOPMIN reply's member into the backup queue (nothing for no reply). ZADD is
    idempotent: a copy a cancel interrupted is made again, then the cancel is raised."""
    if not reply:
        return
    _, member, score = reply
    try:
        await client.zadd(backup, {member: float(score)})
    except asyncio.CancelledError:
        await client.zadd(backup, {member: float(score)})
        raise


async def _returned(pool, conn, *, drop: bool) -> None:
    """Give the pop's connection back to the pool, dropped first when a reply may still be on
    its way (an error, or a second cancel) so that no later command reads it."""
    if drop:
        await conn.disconnect(nowait=True)
    await pool.release(conn)


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
        # this process's consumers' groups (channel -> groups), re-added after an outage
        self._memberships: collections.defaultdict[str, set[str]] = collections.defaultdict(set)
        self._reasserted_at = time.monotonic()

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
        """Pop the process's channel until cancelled and buffer each message for its consumer;
        after a failed pop, once Redis answers again, re-add the consumers' groups."""
        outage = False
        while True:
            try:
                if outage or time.monotonic() - self._reasserted_at > REASSERT_S:
                    await self._memberships_reassert()
                    outage = False
                targets, message = await self.receive_single(real_channel)
            except _ERRORS as exc:
                self._warn("receive", exc)
                outage = True
                await asyncio.sleep(RETRY_S)
                continue
            except Exception:  # never let the pump die: every consumer would wait forever
                logger.exception("channel layer pump failed; retrying")
                outage = True
                await asyncio.sleep(RETRY_S)
                continue
            now = time.monotonic()
            for target in targets if isinstance(targets, list) else [targets]:
                self.receive_buffer[target].put_nowait(message)
                self._last_used.setdefault(target, now)
            self._prune(now)

    async def _brpop_with_clean(self, index, channel, timeout):
        """Pop the channel's oldest message into its backup queue and return it (None after
        `timeout` s), after putting back what earlier pops left there (popped, never
        delivered). A receiver (the pump) whose cancellation redis-py swallowed stops here, and
        a cancel at any moment loses nothing (see the module docstring)."""
        client = self.connection(index)
        backup = self._backup_channel_name(channel)
        await keeping_cancel(client.eval(_RESTORE_BACKUP, 2, channel, backup))
        return await keeping_cancel(self._pop_into_backup(client, channel, backup, timeout))

    async def _pop_into_backup(self, client, channel: str, backup: str, timeout) -> bytes | None:
        """BZPOPMIN on a connection of our own, so that a cancel can have the server answer
        the blocked pop (CLIENT UNBLOCK) and the message it may already have popped is backed
        up before the cancel is raised."""
        pool = client.connection_pool
        conn = await pool.get_connection()
        settled = False  # no reply is left on its way to the connection
        client_id = None
        try:
            # one write, one round trip: CLIENT ID is answered at once, then the pop blocks
            await conn.send_packed_command(
                conn.pack_commands([("CLIENT", "ID"), ("BZPOPMIN", channel, timeout)])
            )
            try:
                client_id = await _client_id(conn)
                reply = await conn.read_response(disconnect_on_error=False)
            except asyncio.CancelledError:
                reply = None
                # Redis failing (or, frozen, never answering) now saves nothing more, and must
                # neither turn the cancel into an error the pump would retry after nor hold a
                # shutdown for the socket timeout: the cancel is raised whatever happens here.
                with contextlib.suppress(*_ERRORS, TimeoutError):
                    async with asyncio.timeout(UNBLOCK_S):
                        if client_id is None:
                            client_id = await _client_id(conn)
                        if client_id:
                            await client.client_unblock(client_id)  # it answers now, popped or not
                            reply = await conn.read_response(disconnect_on_error=False)
                            settled = True
                            await _backed_up(client, backup, reply)
                            reply = None  # kept in the backup for the next pop
                if reply:  # popped, and the backup failed: the consumer still gets it
                    self._buffer_popped(reply[1])
                raise
            settled = True
            # backed up before the connection goes back: a cancel while the pool is busy (its
            # lock taken) must not leave the popped message only in this task's hands
            try:
                await _backed_up(client, backup, reply)
            except _ERRORS as exc:
                # Redis popped it and then failed (a pooled connection to a server that
                # restarted): the message has left Redis, so it is delivered from here.
                self._warn("backup", exc)
        finally:
            # shielded: a cancel while the pool's lock is taken would leave it marked in use
            await asyncio.shield(_returned(pool, conn, drop=not settled))
        return reply[1] if reply else None

    async def _memberships_reassert(self) -> None:
        """Add every recorded membership again, as `group_add` does, one pipeline per shard
        (idempotent; raises while Redis is down)."""
        self._reasserted_at = time.monotonic()
        by_shard: collections.defaultdict[int, list[tuple[str, str]]] = collections.defaultdict(
            list
        )
        for channel, groups in list(self._memberships.items()):
            for group in groups:
                by_shard[self.consistent_hash(group)].append((self._group_key(group), channel))
        now = time.time()
        for index, members in by_shard.items():
            pipe = self.connection(index).pipeline(transaction=False)
            for key, channel in members:
                pipe.zadd(key, {channel: now})
                pipe.expire(key, self.group_expiry)
            await keeping_cancel(pipe.execute())

    def _buffer_popped(self, content: bytes) -> None:
        """Hand a message this process popped straight to its consumer's buffer."""
        message = self.deserialize(content)
        target = message.pop("__asgi_channel__", None)
        if target is not None:
            self.receive_buffer[target].put_nowait(message)
            self._last_used.setdefault(target, time.monotonic())

    def _prune(self, now: float) -> None:
        """Drop the buffers of consumers that are gone (nobody waited on them for a while)."""
        if now - self._pruned_at < IDLE_BUFFER_S / 4:
            return
        self._pruned_at = now
        for channel, used in list(self._last_used.items()):
            if now - used > IDLE_BUFFER_S and not self._waiting.get(channel):
                del self._last_used[channel]
                self.receive_buffer.pop(channel, None)
                self._memberships.pop(channel, None)

    async def send(self, channel, message):
        await keeping_cancel(super().send(channel, message))

    async def group_add(self, group, channel):
        if "!" in channel:  # one of this process's consumers: kept to re-add after an outage
            self._memberships[channel].add(group)
        try:
            await keeping_cancel(super().group_add(group, channel))
        except _ERRORS as exc:
            self._warn("group_add", exc)

    async def group_discard(self, group, channel):
        if channel in self._memberships:
            self._memberships[channel].discard(group)
            if not self._memberships[channel]:
                del self._memberships[channel]
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
