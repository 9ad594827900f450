"""Identity tokens on the chat socket: once only, reconnects, expiry on a long-lived socket."""

import asyncio
import time

import pytest
from channels.db import database_sync_to_async

from chat.identity import identity_token_make
from chat.tests.test_consumers import connect, receive_until, start
from conversations import events

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


async def _token(tenant, external_id="crm-1", ttl=3600):
    return await database_sync_to_async(identity_token_make)(
        tenant=tenant, external_id=external_id, ttl_seconds=ttl
    )


async def test_a_replayed_identity_token_is_refused_and_the_session_reconnects(tenant, local_cache):
    token = await _token(tenant)
    first = await connect()
    ready = await start(first, tenant.slug, identity_token=token)
    assert ready["customer"]["verified"]
    assert ready["identity_session"]
    await first.disconnect()

    thief = await connect()
    await thief.send_json_to(
        {"type": "session.start", "tenant": tenant.slug, "identity_token": token}
    )
    refused = await thief.receive_json_from(timeout=10)
    assert (refused["type"], refused["code"]) == ("error", "identity_replayed")
    await thief.disconnect()

    again = await connect()  # the page's reconnect: our identity session, not the token
    resumed = await start(again, tenant.slug, identity_session=ready["identity_session"])
    assert resumed["customer"]["verified"]
    assert resumed["conversation_id"] == ready["conversation_id"]
    await again.disconnect()


async def test_a_ten_year_token_is_refused_on_the_socket(tenant, local_cache):
    comm = await connect()
    token = await _token(tenant, ttl=10 * 365 * 86400)
    await comm.send_json_to(
        {"type": "session.start", "tenant": tenant.slug, "identity_token": token}
    )
    error = await comm.receive_json_from(timeout=10)
    assert (error["type"], error["code"]) == ("error", "invalid_identity")
    await comm.disconnect()


@pytest.mark.parametrize(
    "payload",
    [
        {"identity_token": 12345},
        {"identity_session": ["x"]},
        {"visitor_token": 7},
        {"identity_session": "forged"},
    ],
)
async def test_odd_identity_values_are_errors_not_internal(tenant, local_cache, payload):
    comm = await connect()
    await comm.send_json_to({"type": "session.start", "tenant": tenant.slug, **payload})
    error = await comm.receive_json_from(timeout=10)
    assert (error["type"], error["code"]) == ("error", "invalid_identity"), error
    await comm.disconnect()


async def test_another_tenants_identity_session_is_refused(tenant, other_tenant, local_cache):
    comm = await connect()
    ready = await start(comm, tenant.slug, identity_token=await _token(tenant))
    await comm.send_json_to(
        {
            "type": "session.start",
            "tenant": other_tenant.slug,
            "identity_session": ready["identity_session"],
        }
    )
    error = await comm.receive_json_from(timeout=10)
    assert error["code"] == "invalid_identity"
    await comm.disconnect()


async def test_a_socket_whose_token_expires_is_asked_to_reidentify(tenant, local_cache):
    comm = await connect()
    ready = await start(comm, tenant.slug, identity_token=await _token(tenant, ttl=2))
    assert ready["identity_expires_at"] <= time.time() + 3
    expired, _ = await receive_until(comm, "identity.expired", timeout=10)
    assert "session.start" in expired["detail"]
    # Events of the conversation no longer reach it, and it may not send.
    await events.publish(ready["conversation_id"], {"type": "conversation.owner", "owner": "human"})
    await comm.send_json_to({"type": "message.send", "client_message_id": "late", "text": "hi"})
    reply = await comm.receive_json_from(timeout=10)
    assert reply["code"] == "no_session", reply
    assert await comm.receive_nothing(timeout=1)
    # A fresh token verifies again on the same socket.
    renewed = await start(comm, tenant.slug, identity_token=await _token(tenant))
    assert renewed["customer"]["verified"]
    await comm.disconnect()


async def test_the_identity_session_expires_with_the_token(tenant, local_cache):
    comm = await connect()
    ready = await start(comm, tenant.slug, identity_token=await _token(tenant, ttl=1))
    await comm.disconnect()
    await asyncio.sleep(1.5)
    again = await connect()
    await again.send_json_to(
        {
            "type": "session.start",
            "tenant": tenant.slug,
            "identity_session": ready["identity_session"],
        }
    )
    error = await again.receive_json_from(timeout=10)
    assert error["code"] == "identity_expired"
    await again.disconnect()


async def test_two_sockets_redeeming_one_token_at_once_get_one_session(tenant, local_cache):
    token = await _token(tenant)
    a, b = await connect(), await connect()
    for comm in (a, b):
        await comm.send_json_to(
            {"type": "session.start", "tenant": tenant.slug, "identity_token": token}
        )
    replies = [await a.receive_json_from(timeout=10), await b.receive_json_from(timeout=10)]
    assert sorted(r["type"] for r in replies) == ["error", "session.ready"]
    await a.disconnect()
    await b.disconnect()
