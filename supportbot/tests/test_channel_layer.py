"""The channel layer against a real Valkey: a consumer that goes away mid-receive (its socket
closed) never takes another consumer's message with it, and a cancelled pump always stops."""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time

import pytest
import redis
import redis.asyncio
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from supportbot import channel_layer as layer_module
from supportbot.channel_layer import ResilientRedisChannelLayer


def _new_layer() -> ResilientRedisChannelLayer:
    """A layer configured as the product's, under a prefix of its own. The product's capacity
    matters: 40 consumers' 200 messages share the process channel, and the default 100 made a
    send fail (ChannelFull) whenever a loaded machine slowed the pump."""
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    return ResilientRedisChannelLayer(
        hosts=config["hosts"],
        capacity=config["capacity"],
        channel_capacity=config["channel_capacity"],
        prefix=f"test-layer-{secrets.token_hex(4)}",
    )


@pytest.fixture
async def layer():
    layer = _new_layer()
    yield layer
    await layer.flush()


@pytest.fixture
def pop_lands_late(monkeypatch):
    """Every BZPOPMIN that pops a message returns it 0.2 s late, as on a loaded event loop:
    the message has left Redis, and whoever awaits the pop may be cancelled meanwhile."""
    popped = asyncio.Event()
    real = ResilientRedisChannelLayer._pop_into_backup

    async def late(self, *args, **kwargs):
        result = await real(self, *args, **kwargs)
        if result is not None:
            popped.set()
            await asyncio.sleep(0.2)
        return result

    monkeypatch.setattr(ResilientRedisChannelLayer, "_pop_into_backup", late)
    return popped


async def test_a_consumer_cancelled_while_its_pop_is_in_flight_loses_no_other_message(
    layer, pop_lands_late
):
    leaving, staying = await layer.new_channel(), await layer.new_channel()
    leaving_receive = asyncio.ensure_future(layer.receive(leaving))  # first in: it pops
    staying_receive = asyncio.ensure_future(layer.receive(staying))
    await asyncio.sleep(0.05)
    await layer.send(staying, {"type": "answer.completed", "n": 1})
    await asyncio.wait_for(pop_lands_late.wait(), 5)
    leaving_receive.cancel()  # its socket closed while the message was on its way
    message = await asyncio.wait_for(staying_receive, 5)
    assert message == {"type": "answer.completed", "n": 1}
    assert leaving_receive.cancelled()


async def test_a_pump_cancelled_after_redis_popped_its_message_loses_nothing(layer):
    """The server has popped the message for the pump's blocked pop, and the reply sits
    unread on its socket, when the pump is cancelled (its event loop ends). redis-py alone
    drops the connection, and the popped message with it; the layer has the pop answered,
    backs the message up, and the next pump delivers it."""
    channel = await layer.new_channel()
    first = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.2)  # the pump is blocked in its pop
    pump = layer._pump_task
    key = layer.prefix + layer.non_local_name(channel)
    message = {"type": "answer.completed", "__asgi_channel__": channel}
    # sent by a blocking client, so the loop does not run until the cancel: the server pops
    # at once and its reply waits, unread, on the pump's socket
    with redis.Redis.from_url(settings.REDIS_URL) as sender:
        sender.zadd(key, {layer.serialize(message): time.time()})
        time.sleep(0.1)  # noqa: ASYNC251
    pump.cancel()
    first.cancel()
    await asyncio.wait({pump, first}, timeout=5)
    assert pump.cancelled()
    assert first.cancelled()
    assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "answer.completed"}


async def test_a_pump_cancelled_while_the_pool_is_busy_keeps_its_message_and_connection(layer):
    """The pop has its message, but the connection pool is busy (another task holds its lock)
    when the pump is cancelled. The message is backed up and the connection returned once the
    pool is free: before, the cancel left the message only in the ended task's hands and the
    connection marked in use for good."""
    channel = await layer.new_channel()
    first = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0.2)  # the pump is blocked in its pop
    pump = layer._pump_task
    pool = layer.connection(0).connection_pool
    key = layer.prefix + layer.non_local_name(channel)
    message = {"type": "answer.completed", "__asgi_channel__": channel}
    async with pool._lock:  # a task taking or returning a connection at that moment
        with redis.Redis.from_url(settings.REDIS_URL) as sender:
            sender.zadd(key, {layer.serialize(message): time.time()})
        await asyncio.sleep(0.2)  # the pop's reply is read; the pump now waits on the pool
        pump.cancel()
        first.cancel()
        await asyncio.sleep(0.1)
    await asyncio.wait({pump, first}, timeout=5)
    assert pump.cancelled()
    for _ in range(50):  # the shielded return finishes on its own
        if not pool._in_use_connections:
            break
        await asyncio.sleep(0.02)
    assert not pool._in_use_connections
    assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "answer.completed"}


async def test_a_pump_cancelled_while_redis_fails_to_unblock_it_still_stops(layer, monkeypatch):
    """Redis failing while a cancelled pop is being answered saves nothing more, and the
    cancel stays a cancel: an error there would be retried by the pump, which never ended."""

    async def failing(self, *args, **kwargs):
        raise redis.ConnectionError("Valkey went away")

    monkeypatch.setattr(redis.asyncio.Redis, "client_unblock", failing)
    receiving = asyncio.ensure_future(layer.receive(await layer.new_channel()))
    await asyncio.sleep(0.2)  # the pump is blocked in its pop
    pump = layer._pump_task
    pending = await _stop({receiving, pump}, within=3)
    assert not pending
    assert pump.cancelled()


async def test_a_server_that_refuses_client_commands_still_delivers_and_stops(layer):
    """Managed Redis services and ACLs may refuse CLIENT: messages still arrive, and a
    cancelled pump still stops (dropping its connection, as channels-redis does)."""
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]
    user = f"no-client-{secrets.token_hex(4)}"
    admin = redis.asyncio.Redis.from_url(config["address"])
    await admin.execute_command(
        "ACL", "SETUSER", user, "on", "nopass", "~*", "&*", "+@all", "-client"
    )
    try:
        limited = ResilientRedisChannelLayer(
            hosts=[{**config, "username": user}], prefix=f"test-layer-{secrets.token_hex(4)}"
        )
        with pytest.raises(redis.exceptions.NoPermissionError):
            await limited.connection(0).client_id()
        channel = await limited.new_channel()
        receiving = asyncio.ensure_future(limited.receive(channel))
        await limited.send(channel, {"type": "answer.completed"})
        assert await asyncio.wait_for(receiving, 5) == {"type": "answer.completed"}
        waiting = asyncio.ensure_future(limited.receive(channel))
        await asyncio.sleep(0.2)
        pump = limited._pump_task
        assert not await _stop({waiting, pump}, within=3)
        assert pump.cancelled()
        await limited.flush()
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
        await admin.aclose()


async def test_a_message_that_arrives_between_two_receives_waits_for_the_next(layer):
    channel = await layer.new_channel()
    first = asyncio.ensure_future(layer.receive(channel))
    await layer.send(channel, {"type": "a"})
    await layer.send(channel, {"type": "b"})  # nobody waits for it yet
    assert await asyncio.wait_for(first, 5) == {"type": "a"}
    await asyncio.sleep(0.1)
    assert await asyncio.wait_for(layer.receive(channel), 5) == {"type": "b"}


async def test_many_consumers_coming_and_going_each_get_every_message_once(layer):
    async def consumer(n: int) -> list[int]:
        channel = await layer.new_channel()
        others = asyncio.ensure_future(layer.receive(await layer.new_channel()))
        got = []
        sender = asyncio.ensure_future(
            asyncio.gather(*(layer.send(channel, {"type": "m", "i": i}) for i in range(5)))
        )
        try:
            for _ in range(5):
                got.append((await asyncio.wait_for(layer.receive(channel), 10))["i"])
        except TimeoutError:
            if sender.done() and sender.exception():
                raise sender.exception() from None  # a send failed: say why, not "timeout"
            raise
        others.cancel()  # a neighbour's socket closes mid-receive, again and again
        await sender
        return sorted(got)

    results = await asyncio.gather(*(consumer(n) for n in range(40)))
    assert results == [[0, 1, 2, 3, 4]] * 40


async def test_buffers_of_consumers_that_left_are_dropped(layer, monkeypatch):
    monkeypatch.setattr(layer_module, "IDLE_BUFFER_S", 0.2)
    gone, live = await layer.new_channel(), await layer.new_channel()
    await layer.send(gone, {"type": "never read"})
    reader = asyncio.ensure_future(layer.receive(live))
    await asyncio.sleep(0.5)
    await layer.send(live, {"type": "read"})
    assert await asyncio.wait_for(reader, 5) == {"type": "read"}
    assert gone not in layer.receive_buffer


# ------------------------------------------------------------------ stopping the pump


def _make_layer() -> ResilientRedisChannelLayer:
    made = _new_layer()
    made.brpop_timeout = 1  # the bound on a stop whose cancel was swallowed
    return made


async def _stop(loop_tasks: set[asyncio.Task], *, within: float) -> set[asyncio.Task]:
    """Cancel the tasks as an event loop's teardown does; return those still running."""
    for task in loop_tasks:
        task.cancel()
    _, pending = await asyncio.wait(loop_tasks, timeout=within)
    return pending


def test_a_pump_whose_cancellation_redis_py_swallowed_still_stops(monkeypatch):
    """Python 3.11's `asyncio.wait_for` (around each redis-py write) can return the finished
    write instead of raising the cancel; the pump then popped an idle channel forever."""
    made = _make_layer()
    real = ResilientRedisChannelLayer._pop_into_backup
    swallowed = []

    async def swallowing(self, *args):
        if not swallowed:
            try:
                await asyncio.sleep(30)  # the write in flight when the cancel lands
            except asyncio.CancelledError:
                swallowed.append(True)  # what wait_for does when the write had just finished
        return await real(self, *args)

    monkeypatch.setattr(ResilientRedisChannelLayer, "_pop_into_backup", swallowing)

    async def scenario() -> tuple[set[asyncio.Task], asyncio.Task]:
        receiving = asyncio.ensure_future(made.receive(await made.new_channel()))
        await asyncio.sleep(0.2)
        pump = made._pump_task
        return await _stop({receiving, pump}, within=made.brpop_timeout + 3), pump

    pending, pump = asyncio.run(scenario())
    assert swallowed, "the seam never saw the cancel"
    assert not pending, f"still running after the cancel: {pending}"
    assert pump.cancelled()


def test_a_receive_lock_left_held_by_an_ended_loop_does_not_stall_the_next_loop():
    made = _make_layer()

    async def first_loop() -> None:
        channel = await made.new_channel()
        receiving = asyncio.ensure_future(made.receive(channel))
        await made.send(channel, {"type": "one"})
        assert await asyncio.wait_for(receiving, 5) == {"type": "one"}
        assert not await _stop({made._pump_task}, within=5)
        # the loop ends while the lock is held (its cleaner task never ran)
        key = made.prefix + made.non_local_name(channel)
        await made.receive_clean_locks.acquire(key)

    async def second_loop() -> dict:
        channel = await made.new_channel()
        receiving = asyncio.ensure_future(made.receive(channel))
        await made.send(channel, {"type": "two"})
        try:
            return await asyncio.wait_for(receiving, 5)
        finally:
            await _stop({made._pump_task}, within=5)
            await made.flush()

    asyncio.run(first_loop())
    assert asyncio.run(second_loop()) == {"type": "two"}


@pytest.mark.slow
def test_pumps_cancelled_at_any_moment_against_real_valkey_all_stop_and_lose_nothing():
    """Fifty event loops, each cancelled at a random moment of a busy channel, as fifty test
    teardowns or daphne shutdowns would. Each stops; every message sent reached its consumer
    or waits in its buffer (one a stopping pump popped is put back and popped by the next)."""
    made = _make_layer()
    rng = random.Random(12)
    sent: dict[str, list[int]] = {}
    got: dict[str, list[int]] = {}

    async def one_loop(n: int) -> set[asyncio.Task]:
        channel = await made.new_channel()
        sent[channel], got[channel] = [], []

        async def consume():
            while True:
                got[channel].append((await made.receive(channel))["i"])

        async def produce():
            for i in range(100):
                await made.send(channel, {"type": "m", "i": i})
                sent[channel].append(i)
                await asyncio.sleep(rng.random() * 0.004)

        tasks = {asyncio.ensure_future(consume()), asyncio.ensure_future(produce())}
        while not sent[channel]:
            await asyncio.sleep(0.001)
        await asyncio.sleep(rng.random() * 0.08)
        tasks.add(made._pump_task)
        return await _stop(tasks, within=made.brpop_timeout + 3)

    for n in range(50):
        assert not asyncio.run(one_loop(n)), f"loop {n} did not stop"

    async def drain() -> None:
        marker = await made.new_channel()
        receiving = asyncio.ensure_future(made.receive(marker))
        await made.send(marker, {"type": "last"})  # popped after every earlier message
        try:
            assert await asyncio.wait_for(receiving, 5) == {"type": "last"}
        finally:
            await _stop({made._pump_task}, within=5)
            await made.flush()

    asyncio.run(drain())
    lost = {}
    for channel, numbers in sent.items():
        buffer = made.receive_buffer.get(channel)
        while buffer is not None and not buffer.empty():
            got[channel].append(buffer.get_nowait()["i"])
        if missing := set(numbers) - set(got[channel]):
            lost[channel] = sorted(missing)
    assert all(sent.values())
    assert not lost


@pytest.mark.parametrize("call", ["send", "group_add", "group_discard", "group_send"])
async def test_a_cancel_redis_py_swallows_during_a_layer_call_is_raised_after_it(
    layer, monkeypatch, call
):
    real = getattr(RedisChannelLayer, call)
    entered = asyncio.Event()

    async def swallowing(self, *args):
        entered.set()
        # the write in flight when the cancel lands; Python 3.11's wait_for returns it
        # instead of raising when the write had just finished
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)
        return await real(self, *args)

    monkeypatch.setattr(RedisChannelLayer, call, swallowing)
    channel = await layer.new_channel()
    args = (channel, {"type": "m"}) if call == "send" else ("g", channel)
    if call == "group_send":
        args = ("g", {"type": "m"})
    after = []

    async def consumer_cleanup():
        await getattr(layer, call)(*args)
        after.append("went on as if never cancelled")
        await asyncio.sleep(30)  # e.g. waiting for socket input that never comes

    task = asyncio.ensure_future(consumer_cleanup())
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    assert task.cancelled()
    assert after == []


async def test_a_task_that_handled_its_cancel_before_a_layer_call_still_completes_it(layer):
    channel = await layer.new_channel()
    receiving = asyncio.ensure_future(layer.receive(channel))

    async def cleanup_after_cancel():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await layer.group_add("g", channel)  # cleanup that still needs the layer
            return await layer.group_send("g", {"type": "bye"})

    task = asyncio.ensure_future(cleanup_after_cancel())
    await asyncio.sleep(0.05)
    task.cancel()
    assert await asyncio.wait_for(task, 5) is True
    assert await asyncio.wait_for(receiving, 5) == {"type": "bye"}


async def test_events_sent_while_the_pump_is_starved_all_arrive(layer):
    """Every chat of a daphne process shares one Redis channel, and channels-redis' group_send
    drops events for a channel at capacity, logging only. Ten chats streaming 150 events each
    while the pump is held up (a busy event loop) must still get every one, in order."""
    chats = [await layer.new_channel() for _ in range(10)]
    for n, channel in enumerate(chats):
        await layer.group_add(f"chat-{n}", channel)
    for i in range(150):
        for n in range(len(chats)):
            assert await layer.group_send(f"chat-{n}", {"type": "answer.delta", "i": i})

    async def read(channel: str) -> list[int]:
        return [(await layer.receive(channel))["i"] for _ in range(150)]

    got = await asyncio.wait_for(asyncio.gather(*(read(c) for c in chats)), 30)
    assert got == [list(range(150))] * len(chats)


# ------------------------------------------------------------------ Redis down


def _layer_on(url: str) -> ResilientRedisChannelLayer:
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    return ResilientRedisChannelLayer(
        hosts=[{**config["hosts"][0], "address": url}],
        capacity=config["capacity"],
        channel_capacity=config["channel_capacity"],
        prefix=f"test-layer-{secrets.token_hex(4)}",
    )


async def _consumers_waiting(made: ResilientRedisChannelLayer, count: int):
    """`count` consumers waiting on their channels, the pump shown to deliver first."""
    channels = [await made.new_channel() for _ in range(count)]
    first = asyncio.ensure_future(made.receive(channels[0]))
    await made.send(channels[0], {"type": "hello"})
    assert await asyncio.wait_for(first, 5) == {"type": "hello"}
    return channels, {asyncio.ensure_future(made.receive(c)) for c in channels}


@pytest.mark.parametrize("outage", ["killed", "frozen"])
def test_with_redis_down_a_teardown_stops_every_consumer_and_the_pump_promptly(
    private_valkey, outage
):
    """A daphne shutdown (or a test's loop teardown) while Redis is gone must not hang: killed,
    Redis refuses connections at once; frozen (a partition, a stalled server), it accepts them
    and never answers, so every read waits for the socket timeout (30 s) unless bounded."""
    made = _layer_on(private_valkey.url)

    async def scenario() -> tuple[set[asyncio.Task], float]:
        _, receivers = await _consumers_waiting(made, 5)
        await asyncio.sleep(0.3)  # the pump is blocked in its next pop
        private_valkey.kill() if outage == "killed" else private_valkey.freeze()
        await asyncio.sleep(1.5)  # the pump meets the outage (a failed pop, or a silent one)
        started = time.monotonic()
        pending = await _stop({*receivers, made._pump_task}, within=10)
        return pending, time.monotonic() - started

    pending, took = asyncio.run(scenario())
    assert not pending, f"still running {took:.1f} s after the cancel: {pending}"
    assert took < layer_module.UNBLOCK_S + 2, took


def test_consumers_waiting_through_a_redis_outage_get_the_events_sent_after_it(private_valkey):
    """Open sockets stay through an outage and their events resume: the pump retries until
    Redis is back (here a new, empty server on the same port) and delivers what is sent then."""
    made = _layer_on(private_valkey.url)

    async def scenario() -> list[dict]:
        channels, receivers = await _consumers_waiting(made, 5)
        private_valkey.kill()
        await asyncio.sleep(2 * layer_module.RETRY_S + 0.5)  # pops fail and are retried
        assert not any(r.done() for r in receivers)
        await asyncio.to_thread(private_valkey.start)
        for n, channel in enumerate(channels):
            await made.send(channel, {"type": "after", "n": n})
        try:
            done = await asyncio.wait_for(asyncio.gather(*receivers), 15)
        finally:
            await _stop({made._pump_task}, within=10)
        return sorted(done, key=lambda m: m["n"])

    assert asyncio.run(scenario()) == [{"type": "after", "n": n} for n in range(5)]


def test_group_members_get_group_events_after_redis_restarts_empty(private_valkey):
    """Group memberships live in Redis; a Redis that comes back empty (restarted, failed over)
    forgot them, and a socket that joined while it was down never reached it. Either way the
    socket's conversation events (an agent's reply) stopped for good. The layer re-adds the
    memberships of its own consumers once Redis answers again."""
    made = _layer_on(private_valkey.url)

    async def scenario() -> list[dict]:
        channels, receivers = await _consumers_waiting(made, 3)
        await made.group_add("before", channels[0])
        private_valkey.kill()
        await made.group_add("during", channels[1])  # fails: Redis is down
        await made.group_add("during", channels[2])
        await made.group_discard("during", channels[2])  # left while down: not re-added
        await asyncio.sleep(2 * layer_module.RETRY_S + 0.5)
        await asyncio.to_thread(private_valkey.start)  # a new, empty server
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # the pump re-adds once it pops again
            client = redis.Redis.from_url(private_valkey.url)
            if client.exists(made._group_key("before"), made._group_key("during")) == 2:
                break
            await asyncio.sleep(0.2)
        await made.group_send("before", {"type": "agent.reply", "n": 0})
        await made.group_send("during", {"type": "agent.reply", "n": 1})
        try:
            done, pending = await asyncio.wait(receivers, timeout=10)
        finally:
            await _stop({made._pump_task, *receivers}, within=10)
        return sorted((t.result() for t in done), key=lambda m: m["n"])

    assert asyncio.run(scenario()) == [
        {"type": "agent.reply", "n": 0},
        {"type": "agent.reply", "n": 1},
    ]
