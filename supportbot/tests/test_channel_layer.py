"""The channel layer against a real Valkey: a consumer that goes away mid-receive (its socket
closed) never takes another consumer's message with it."""

from __future__ import annotations

import asyncio
import secrets

import pytest
import redis.asyncio
from django.conf import settings

from supportbot import channel_layer as layer_module
from supportbot.channel_layer import ResilientRedisChannelLayer


@pytest.fixture
async def layer():
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    # The product's capacity: 40 consumers' 200 messages share the process channel, and the
    # default 100 made a send fail (ChannelFull) whenever a loaded machine slowed the pump.
    layer = ResilientRedisChannelLayer(
        hosts=config["hosts"],
        capacity=config["capacity"],
        prefix=f"test-layer-{secrets.token_hex(4)}",
    )
    yield layer
    await layer.flush()


@pytest.fixture
def pop_lands_late(monkeypatch):
    """Every BZPOPMIN that pops a message returns it 0.2 s late, as on a loaded event loop:
    the message has left Redis, and whoever awaits the pop may be cancelled meanwhile."""
    popped = asyncio.Event()
    real = redis.asyncio.Redis.bzpopmin

    async def late(self, *args, **kwargs):
        result = await real(self, *args, **kwargs)
        if result is not None:
            popped.set()
            await asyncio.sleep(0.2)
        return result

    monkeypatch.setattr(redis.asyncio.Redis, "bzpopmin", late)
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
