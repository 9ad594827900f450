"""Chat socket guards: Origin before accept, the session.start deadline, the per-address cap."""

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chat.sockets import chat_sockets
from chat.tests.test_consumers import ORIGIN, start
from config.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _isolated(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    yield
    assert not chat_sockets.open, "every test socket gave its place back"


def _socket(client=("203.0.113.20", 4000), headers=ORIGIN) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    comm.scope["client"] = list(client)
    return comm


async def test_a_socket_without_session_start_is_closed_at_the_deadline(tenant, settings):
    settings.CHAT_SESSION_START_TIMEOUT_S = 0.2
    comm = _socket()
    assert (await comm.connect())[0]
    error = await comm.receive_json_from(timeout=10)
    assert (error["type"], error["code"]) == ("error", "session_timeout")
    assert await comm.receive_output(timeout=10) == {"type": "websocket.close", "code": 4408}
    await comm.disconnect()


async def test_a_failed_session_start_does_not_stop_the_deadline(tenant, settings):
    settings.CHAT_SESSION_START_TIMEOUT_S = 0.5
    comm = _socket()
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "session.start", "tenant": "no-such-tenant"})
    assert (await comm.receive_json_from(timeout=10))["code"] == "not_found"
    assert (await comm.receive_json_from(timeout=10))["code"] == "session_timeout"
    await comm.disconnect()


async def test_a_started_session_outlives_the_deadline(tenant, settings):
    settings.CHAT_SESSION_START_TIMEOUT_S = 0.5
    comm = _socket()
    assert (await comm.connect())[0]
    await start(comm, tenant.slug)
    await asyncio.sleep(1.0)  # past the deadline: nothing may close the socket
    await comm.send_json_to({"type": "ping"})
    assert (await comm.receive_json_from(timeout=10))["type"] == "pong"
    await comm.disconnect()


async def test_parallel_handshakes_of_one_address_get_at_most_the_cap(tenant, settings):
    settings.CHAT_SOCKETS_PER_IP = 3
    barrier = asyncio.Barrier(8)
    comms = [_socket() for _ in range(8)]

    async def handshake(comm):
        await barrier.wait()  # all eight race for the three places
        return await comm.connect(timeout=20)

    results = await asyncio.gather(*(handshake(c) for c in comms))
    accepted = [c for c, (ok, _) in zip(comms, results, strict=True) if ok]
    assert len(accepted) == 3
    assert sorted(code for ok, code in results if not ok) == [4429] * 5
    other = _socket(client=("198.51.100.3", 1))
    assert (await other.connect())[0]  # another address has its own count
    await accepted[0].disconnect()  # a closed socket gives its place back
    again = _socket()
    assert (await again.connect())[0]
    for comm in [*accepted[1:], other, again]:
        await comm.disconnect()
    for comm, (ok, _) in zip(comms, results, strict=True):
        if not ok:
            await comm.disconnect(timeout=5)


async def test_an_origin_some_tenant_allows_passes_the_handshake(tenant, other_tenant):
    tenant.allowed_origins = ["https://shop.example.com"]
    await database_sync_to_async(tenant.save)()
    allowed = _socket(headers=[(b"origin", b"https://shop.example.com")])
    assert (await allowed.connect())[0]
    await allowed.disconnect()
    refused = _socket(headers=[(b"origin", b"https://shop.example.com.evil.example")])
    assert await refused.connect() == (False, 4403)
    await refused.disconnect(timeout=5)
