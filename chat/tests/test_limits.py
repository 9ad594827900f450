"""Abuse limits on the chat socket and the partner API (real Redis; Redis unreachable)."""

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from chat import limits
from chat.tests.test_consumers import ORIGIN, connect, receive_until, start
from config.asgi import application
from conversations.models import Conversation, Customer, Message
from supportbot import ratelimit
from supportbot.errors import RateLimited

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


async def _session_starts(tenant, n: int, client=("203.0.113.7", 5000)) -> list[dict]:
    """`n` session.start events without a visitor token from `client`; the first reply each."""
    replies = []
    for _ in range(n):
        comm = WebsocketCommunicator(application, "/ws/chat/", headers=ORIGIN)
        comm.scope["client"] = list(client)
        assert (await comm.connect())[0]
        await comm.send_json_to({"type": "session.start", "tenant": tenant.slug})
        replies.append(await comm.receive_json_from(timeout=20))
        await comm.disconnect()
    return replies


async def test_anonymous_sessions_per_ip_and_tenant_are_limited(
    tenant, other_tenant, strict_limits, local_cache
):
    strict_limits(session_anonymous="3/600")
    replies = await _session_starts(tenant, 5)
    assert [r["type"] for r in replies] == ["session.ready"] * 3 + ["rate_limited"] * 2
    limited = replies[3]
    assert limited["limit"] == "session_anonymous"
    # The window slides: three hits in this window keep the next one out until the window
    # ends and a third of the next has passed (a third of them slid out), so up to 800 s.
    assert 1 <= limited["retry_after"] <= 800
    assert limited["event_type"] == "session.start"
    assert await database_sync_to_async(Customer.objects.filter(tenant=tenant).count)() == 3
    # Another address, or another tenant, is counted apart.
    other_ip = await _session_starts(tenant, 1, client=("198.51.100.1", 1))
    other_site = await _session_starts(other_tenant, 1)
    assert other_ip[0]["type"] == other_site[0]["type"] == "session.ready"


async def test_a_returning_visitor_token_is_not_a_new_anonymous_session(
    tenant, strict_limits, local_cache
):
    strict_limits(session_anonymous="1/600")
    comm = await connect()
    ready = await start(comm, tenant.slug)
    for _ in range(3):
        again = await start(comm, tenant.slug, visitor_token=ready["visitor_token"])
        assert again["conversation_id"] == ready["conversation_id"]
    await comm.send_json_to({"type": "session.start", "tenant": tenant.slug})
    assert (await comm.receive_json_from())["type"] == "rate_limited"
    await comm.disconnect()


async def test_messages_per_customer_get_a_rate_limited_event_and_are_not_saved(
    tenant, help_center, strict_limits, local_cache
):
    strict_limits(message_customer="2/60")
    comm = await connect()
    await start(comm, tenant.slug)
    for n in range(2):
        await comm.send_json_to(
            {"type": "message.send", "client_message_id": f"m{n}", "text": "hi"}
        )
        await receive_until(comm, "answer.completed")
    await comm.send_json_to({"type": "message.send", "client_message_id": "m9", "text": "hi"})
    event, _ = await receive_until(comm, "rate_limited")
    assert event["client_message_id"] == "m9"
    assert event["limit"] == "message_customer"
    assert event["retry_after"] >= 1
    assert not await database_sync_to_async(Message.objects.filter(client_message_id="m9").exists)()
    await comm.send_json_to({"type": "ping"})  # the socket stays open
    assert (await receive_until(comm, "pong"))[0]["type"] == "pong"
    await comm.disconnect()


async def test_dropping_the_visitor_token_does_not_reset_the_message_count(
    tenant, help_center, strict_limits, local_cache
):
    """Each message from a fresh anonymous session (a new customer each time) still counts
    against the address."""
    strict_limits(message_ip="3/60")
    outcomes = []
    for n in range(5):
        comm = await connect()
        await start(comm, tenant.slug)  # no visitor token: a new customer every time
        await comm.send_json_to(
            {"type": "message.send", "client_message_id": f"x{n}", "text": "hi"}
        )
        first = await comm.receive_json_from(timeout=20)
        while first["type"] == "message.created":
            first = await comm.receive_json_from(timeout=20)
        outcomes.append(first["type"])
        if first["type"] == "message.accepted":  # let the answer finish inside this test
            await receive_until(comm, "answer.completed")
        await comm.disconnect()
    assert outcomes == ["message.accepted"] * 3 + ["rate_limited"] * 2
    customers = await database_sync_to_async(Customer.objects.filter(tenant=tenant).count)()
    assert customers == 5


async def test_handoff_requests_are_limited_per_conversation(tenant, strict_limits, local_cache):
    strict_limits(handoff_conversation="2/600")
    comm = await connect()
    await start(comm, tenant.slug)
    types = []
    for _ in range(4):
        await comm.send_json_to({"type": "handoff.request"})
        event = await comm.receive_json_from(timeout=20)
        while event["type"] in ("message.created",):
            event = await comm.receive_json_from(timeout=20)
        types.append(event["type"])
    assert types[2:] == ["rate_limited", "rate_limited"]
    assert "rate_limited" not in types[:2]
    await comm.disconnect()


async def test_parallel_sockets_of_one_customer_share_the_message_limit(
    tenant, help_center, strict_limits, local_cache
):
    strict_limits(message_customer="4/60")
    first = await connect()
    ready = await start(first, tenant.slug)
    tabs = [first]
    for _ in range(3):
        tab = await connect()
        await start(tab, tenant.slug, visitor_token=ready["visitor_token"])
        tabs.append(tab)

    async def send(tab, n):
        await tab.send_json_to({"type": "message.send", "client_message_id": f"p{n}", "text": "hi"})

    await asyncio.gather(*(send(tab, n) for n, tab in enumerate(tabs * 2)))
    # Every tab sees every answer (the conversation's group): wait for the four on the first.
    completed = 0
    while completed < 4:
        event = await first.receive_json_from(timeout=60)
        completed += event["type"] == "answer.completed"
    saved = await database_sync_to_async(
        Message.objects.filter(role="customer", client_message_id__startswith="p").count
    )()
    assert saved == 4
    for tab in tabs:
        await tab.disconnect()


async def test_with_redis_down_limits_fall_back_and_chat_still_starts(
    tenant, settings, strict_limits, local_cache
):
    strict_limits(session_anonymous="4/600")
    settings.RATE_LIMIT_FALLBACK_DIVISOR = 2
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # the limiter's Redis only
    ratelimit._redis.down_until = 0.0
    replies = await _session_starts(tenant, 3)
    assert [r["type"] for r in replies] == ["session.ready", "session.ready", "rate_limited"]


def test_partner_message_and_handoff_limits_answer_429_json(
    api_client, tenant, strict_limits, settings
):
    strict_limits(message_conversation="1/60", handoff_conversation="1/600")
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    customer = Customer.objects.create(tenant=tenant, external_id="c-1", verified=True)
    conversation = Conversation.objects.create(tenant=tenant, customer=customer)
    url = f"/api/v1/conversations/{conversation.pk}"
    ok = api_client.post(f"{url}/messages", {"client_message_id": "a", "text": "hi"}, format="json")
    assert ok.status_code == 201, ok.content
    over = api_client.post(
        f"{url}/messages", {"client_message_id": "b", "text": "hi"}, format="json"
    )
    assert over.status_code == 429, over.content
    assert over.json()["error"]["code"] == "rate_limited"
    assert int(over["Retry-After"]) >= 1
    assert api_client.post(f"{url}/handoffs", {}, format="json").status_code == 201
    limited = api_client.post(f"{url}/handoffs", {}, format="json")
    assert limited.status_code == 429, limited.content
    assert limited.json()["error"]["limit"] == "handoff_conversation"


def test_per_key_request_rate_is_429_with_retry_after(api_client, strict_limits):
    strict_limits(api_key="3/60")
    codes = [api_client.get("/api/v1/tenant").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    response = api_client.get("/api/v1/tenant")
    assert response.json()["error"]["code"] == "rate_limited"
    assert response["Retry-After"].isdigit()


def test_searches_per_key_are_limited_and_another_key_is_not(
    api_client, tenant, other_tenant, strict_limits
):
    strict_limits(search_key="2/60")
    from rest_framework.test import APIClient

    from supportbot.services import api_key_create

    codes = [api_client.get("/api/v1/search", {"q": "refund"}).status_code for _ in range(3)]
    assert codes == [200, 200, 429]
    _key, raw = api_key_create(tenant=other_tenant, name="other")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert other.get("/api/v1/search", {"q": "refund"}).status_code == 200


def test_verified_customers_are_not_counted_per_ip(strict_limits):
    strict_limits(message_ip="1/60")
    for n in range(3):  # verified customers behind one address (an office): not per IP
        limits.message_enforce(
            tenant_id=1,
            customer_id=100 + n,
            conversation_id=200 + n,
            ip="203.0.113.5",
            verified=True,
        )
    limits.message_enforce(
        tenant_id=1, customer_id=1, conversation_id=1, ip="203.0.113.5", verified=False
    )
    with pytest.raises(RateLimited):  # a second anonymous visitor there is
        limits.message_enforce(
            tenant_id=1, customer_id=2, conversation_id=2, ip="203.0.113.5", verified=False
        )
