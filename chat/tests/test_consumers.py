"""The chat WebSocket through the real ASGI application and the Redis channel layer."""

import contextlib

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection

from actions import services as action_services
from chat.identity import identity_token_make
from chat.orchestrator.slots import _slots
from config.asgi import application
from conversations import services
from conversations.models import Conversation, Customer, Feedback, Message

pytestmark = [pytest.mark.django_db(transaction=True)]
ORIGIN = [(b"origin", b"http://127.0.0.1:8000")]


async def connect(headers=ORIGIN):
    comm = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    connected, _ = await comm.connect()
    assert connected
    return comm


async def receive_until(comm, event_type, timeout=30):
    seen = []
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        seen.append(event)
        if event["type"] == event_type:
            return event, seen


async def start(comm, tenant_slug, **extra):
    await comm.send_json_to({"type": "session.start", "tenant": tenant_slug, **extra})
    ready, _ = await receive_until(comm, "session.ready")
    return ready


@pytest.fixture
def local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


async def test_question_streams_an_answer_with_sources(tenant, help_center, local_cache):
    comm = await connect()
    ready = await start(comm, tenant.slug)
    assert ready["visitor_token"]
    await comm.send_json_to(
        {"type": "message.send", "client_message_id": "m1", "text": "How long do refunds take?"}
    )
    completed, seen = await receive_until(comm, "answer.completed")
    types = [e["type"] for e in seen if e["type"] != "message.created"]  # group copies
    assert types[:2] == ["message.accepted", "answer.started"]
    assert "answer.delta" in types
    assert completed["citations"][0]["document_id"] == help_center["returns"].pk
    assert "5-10 business days" in completed["text"]
    await comm.disconnect()


async def test_too_deep_or_nul_events_get_error_events_and_the_socket_stays_up(tenant, local_cache):
    comm = await connect()
    await comm.send_to(text_data="[" * 100_000 + "]" * 100_000)
    assert (await comm.receive_json_from())["code"] == "bad_json"
    await start(comm, tenant.slug)
    await comm.send_json_to({"type": "message.send", "client_message_id": "a\u0000", "text": "hi"})
    error = await comm.receive_json_from()
    assert (error["code"], error["field"]) == ("invalid", "client_message_id")
    await comm.send_json_to({"type": "ping"})
    assert (await comm.receive_json_from())["type"] == "pong"
    await comm.disconnect()


async def test_a_lone_surrogate_in_a_message_gets_an_invalid_error_and_nothing_is_saved(
    tenant, local_cache
):
    comm = await connect()
    await start(comm, tenant.slug)
    await comm.send_to(  # "\\ud800": valid JSON, but no UTF-8 text can hold it
        text_data='{"type": "message.send", "client_message_id": "s1", "text": "hi \\ud800"}'
    )
    error = await comm.receive_json_from()
    assert (error["type"], error["code"], error["field"]) == ("error", "invalid", "text")
    assert error["client_message_id"] == "s1"
    assert "surrogate" in error["detail"]
    await comm.send_json_to({"type": "ping"})
    assert (await comm.receive_json_from())["type"] == "pong"
    saved = await database_sync_to_async(Message.objects.filter(tenant=tenant).count)()
    assert saved == 0
    await comm.disconnect()


async def test_malformed_events_get_error_events_and_the_socket_stays_up(tenant, local_cache):
    comm = await connect()
    await comm.send_to(text_data="{not json")
    assert (await comm.receive_json_from())["code"] == "bad_json"
    await comm.send_json_to({"type": "message.send", "client_message_id": "x", "text": "hi"})
    assert (await comm.receive_json_from())["code"] == "no_session"
    await comm.send_json_to({"type": "launch.rockets"})
    assert (await comm.receive_json_from())["code"] == "unknown_type"
    await comm.send_json_to(["not", "an", "object"])
    assert (await comm.receive_json_from())["code"] == "bad_event"
    await start(comm, tenant.slug)
    await comm.send_json_to({"type": "message.send", "client_message_id": "", "text": "hi"})
    error = await comm.receive_json_from()
    assert (error["code"], error["field"]) == ("invalid", "client_message_id")
    await comm.send_json_to({"type": "message.send", "client_message_id": "a", "text": "  "})
    assert (await comm.receive_json_from())["field"] == "text"
    await comm.send_json_to({"type": "feedback.send", "message_id": "x", "rating": "helpful"})
    assert (await comm.receive_json_from())["field"] == "message_id"
    await comm.send_json_to({"type": "ping"})
    assert (await comm.receive_json_from())["type"] == "pong"
    await comm.disconnect()


async def test_a_foreign_origin_is_refused_at_the_handshake(tenant, local_cache):
    comm = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"https://evil.example")]
    )
    assert await comm.connect() == (False, 4403)  # never accepted: daphne answers HTTP 403
    assert not await database_sync_to_async(Customer.objects.filter(tenant=tenant).exists)()
    await comm.disconnect(timeout=5)  # daphne tells the refused application; it ends


@pytest.mark.parametrize(
    "headers",
    [[], [(b"origin", b"")], [(b"origin", b"https://x\x00.example")], [(b"origin", b"\xff\xfe")]],
)
async def test_a_handshake_without_a_usable_origin_is_refused(tenant, local_cache, headers):
    comm = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    assert await comm.connect() == (False, 4403)
    await comm.disconnect(timeout=5)


async def test_the_tenants_allowed_origin_starts_a_session_and_only_for_that_tenant(
    tenant, other_tenant, local_cache
):
    tenant.allowed_origins = ["https://shop.example.com"]
    await database_sync_to_async(tenant.save)()
    comm = await connect(headers=[(b"origin", b"https://shop.example.com")])
    ready = await start(comm, tenant.slug)
    assert ready["conversation_id"]
    await comm.send_json_to({"type": "session.start", "tenant": other_tenant.slug})
    assert (await comm.receive_json_from())["code"] == "origin_not_allowed"
    await comm.disconnect()


@pytest.fixture
def memory_channel_layer(settings):
    """An in-memory channel layer: a refused handshake's consumer still waits on the layer,
    and cancelling a Redis receive there can outlive this test's loop (seen hanging in CI)."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def test_console_socket_refuses_a_foreign_origin_at_the_handshake(
    agent, memory_channel_layer
):
    comm = WebsocketCommunicator(
        application, "/ws/console/", headers=[(b"origin", b"https://evil.example")]
    )
    comm.scope["user"] = agent
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect(timeout=5)  # daphne tells the refused application; it ends


async def test_unknown_tenant_is_an_error_event(db):
    comm = await connect()
    await comm.send_json_to({"type": "session.start", "tenant": "nope"})
    event = await comm.receive_json_from()
    assert (event["type"], event["code"]) == ("error", "not_found")
    await comm.disconnect()


async def test_repeated_client_message_id_replays_the_saved_answer(
    tenant, help_center, local_cache
):
    comm = await connect()
    await start(comm, tenant.slug)
    send = {"type": "message.send", "client_message_id": "dup", "text": "Is shipping free?"}
    await comm.send_json_to(send)
    first, _ = await receive_until(comm, "answer.completed")
    await comm.send_json_to(send)
    accepted, _ = await receive_until(comm, "message.accepted")
    assert accepted["duplicate"] is True
    again, seen = await receive_until(comm, "answer.completed")
    assert again["message_id"] == first["message_id"]
    assert "answer.started" not in [e["type"] for e in seen]
    count = await database_sync_to_async(
        Message.objects.filter(reply_to__client_message_id="dup", role="bot").count
    )()
    assert count == 1
    await comm.disconnect()


async def test_reconnect_resumes_with_missed_messages_only(tenant, help_center, local_cache):
    comm = await connect()
    ready = await start(comm, tenant.slug)
    token, conv_id = ready["visitor_token"], ready["conversation_id"]
    await comm.send_json_to(
        {"type": "message.send", "client_message_id": "r1", "text": "Is shipping free?"}
    )
    first, _ = await receive_until(comm, "answer.completed")
    await comm.send_json_to(
        {"type": "message.send", "client_message_id": "r2", "text": "How long do refunds take?"}
    )
    await comm.disconnect()  # leaves before (or while) the second answer arrives

    comm = await connect()
    resumed = await start(
        comm, tenant.slug, visitor_token=token, last_message_id=first["message_id"]
    )
    assert resumed["conversation_id"] == conv_id
    history_ids = [m["id"] for m in resumed["history"]]
    assert all(i > first["message_id"] for i in history_ids)
    # The second answer finishes even though its socket closed; wait for it if needed.
    texts = [m["text"] for m in resumed["history"]]
    if not any("business days" in t for t in texts if t):
        event, _ = await receive_until(comm, "answer.completed")  # through the group
        texts.append(event["message"]["text"])
    assert any("5-10 business days" in t for t in texts)
    await comm.disconnect()
    count = await database_sync_to_async(
        Message.objects.filter(conversation_id=conv_id, role="customer").count
    )()
    assert count == 2


async def test_forged_visitor_token_is_rejected(tenant, local_cache):
    comm = await connect()
    await comm.send_json_to(
        {"type": "session.start", "tenant": tenant.slug, "visitor_token": "forged:token"}
    )
    event = await comm.receive_json_from()
    assert (event["type"], event["code"]) == ("error", "invalid_identity")
    await comm.disconnect()


async def test_identity_token_makes_a_verified_customer(tenant, local_cache):
    token = await database_sync_to_async(identity_token_make)(tenant=tenant, external_id="crm-9")
    comm = await connect()
    ready = await start(comm, tenant.slug, identity_token=token)
    assert ready["customer"]["verified"] is True
    assert ready["visitor_token"] is None
    customer = await database_sync_to_async(Customer.objects.get)(
        tenant=tenant, external_id="crm-9"
    )
    assert customer.verified
    await comm.disconnect()


async def test_feedback_and_handoff_request(tenant, help_center, local_cache):
    comm = await connect()
    await start(comm, tenant.slug)
    await comm.send_json_to(
        {"type": "message.send", "client_message_id": "f1", "text": "Is shipping free?"}
    )
    completed, _ = await receive_until(comm, "answer.completed")
    await comm.send_json_to(
        {"type": "feedback.send", "message_id": completed["message_id"], "rating": "helpful"}
    )
    saved, _ = await receive_until(comm, "feedback.saved")
    assert saved["rating"] == "helpful"
    rating = await database_sync_to_async(
        lambda: Feedback.objects.get(message_id=completed["message_id"]).rating
    )()
    assert rating == "helpful"
    await comm.send_json_to({"type": "handoff.request"})
    started, _ = await receive_until(comm, "handoff.started")
    assert started["position"] == 1
    await comm.disconnect()


async def test_agent_messages_reach_the_customer_live(tenant, help_center, agent, local_cache):
    comm = await connect()
    ready = await start(comm, tenant.slug)
    conversation = await database_sync_to_async(Conversation.objects.get)(
        pk=ready["conversation_id"]
    )
    await database_sync_to_async(services.message_post)(
        conversation=conversation, role="agent", text="Hi, I'm Sam from Acme.", author_label="Sam"
    )
    event, _ = await receive_until(comm, "agent.message")
    assert event["message"]["text"] == "Hi, I'm Sam from Acme."
    assert event["message"]["author"] == "Sam"
    await comm.disconnect()


@pytest.fixture
def shop(tenant, orders):
    tenant.refund_auto_limit = 50
    tenant.save()
    action_services.provider_config_set(
        tenant=tenant, base_url=orders.url, token=orders.token, timeout_seconds=3.0
    )
    return orders


async def test_refund_card_over_the_socket_confirms_once_and_every_tab_sees_it(
    tenant, shop, local_cache
):
    token = await database_sync_to_async(identity_token_make)(
        tenant=tenant, external_id="cust-1001"
    )
    first, second = await connect(), await connect()
    ready = await start(first, tenant.slug, identity_token=token)
    # A token is redeemed once; the second tab (like a reconnect) uses the identity session.
    session = ready["identity_session"]
    await start(
        second, tenant.slug, identity_session=session, conversation_id=ready["conversation_id"]
    )
    await first.send_json_to(
        {"type": "message.send", "client_message_id": "m1", "text": "refund $18 for A-1042"}
    )
    proposed, _ = await receive_until(first, "action.proposed")
    card = proposed["action"]
    assert (card["amount"], card["needs_confirmation"]) == ("18.00", True)
    assert shop.refund_posts() == 0

    await first.send_json_to({"type": "action.confirm", "action_id": card["id"], "version": 0})
    stale, _ = await receive_until(first, "error")
    assert stale["code"] == "stale_version"
    assert stale["action_id"] == card["id"]

    await first.send_json_to(
        {"type": "action.confirm", "action_id": card["id"], "version": card["version"]}
    )
    while True:
        updated, _ = await receive_until(second, "action.updated")
        if updated["action"]["state"] == "succeeded":
            break
    assert "submitted and confirmed" in updated["action"]["text"]
    assert shop.refund_posts() == 1

    await second.send_json_to(
        {"type": "action.cancel", "action_id": card["id"], "version": updated["action"]["version"]}
    )
    refused, _ = await receive_until(second, "error")
    assert refused["code"] == "invalid_state"
    assert shop.refund_posts() == 1
    again = await start(second, tenant.slug, identity_session=session)
    assert [a["state"] for a in again["actions"]] == ["succeeded"]
    await first.disconnect()
    await second.disconnect()


async def test_action_events_validate_their_fields(tenant, local_cache):
    comm = await connect()
    await start(comm, tenant.slug)
    await comm.send_json_to({"type": "action.confirm", "action_id": "7", "version": 1})
    bad, _ = await receive_until(comm, "error")
    assert bad["field"] == "action_id"
    await comm.send_json_to({"type": "action.confirm", "action_id": 999999, "version": 1})
    missing, _ = await receive_until(comm, "error")
    assert missing["code"] == "not_found"
    await comm.disconnect()


async def test_socket_events_give_their_database_connections_back(tenant, local_cache):
    """Every event runs in a thread of its own; its pooled connection must be returned, or a
    busy socket would exhaust the pool (each handoff.request uses the orchestrator)."""
    pool = getattr(connection, "pool", None)

    def in_use() -> int:
        stats = pool.get_stats() if pool is not None else {}
        return stats.get("pool_size", 0) - stats.get("pool_available", 0)

    comm = await connect()
    await start(comm, tenant.slug)
    before = in_use()
    for i in range(30):  # more than the pool holds
        await comm.send_json_to({"type": "handoff.request", "detail": f"try {i}"})
        event, _ = await receive_until(comm, "handoff.started", timeout=30)
        assert event["handoff_id"]
    assert in_use() - before <= 1, pool.get_stats() if pool is not None else None
    await comm.disconnect()


async def test_answered_messages_give_their_database_connections_back(
    tenant, help_center, local_cache
):
    """A turn is a task the `message.send` event starts: it must run on a thread of its own
    and return that thread's connection, not die with the event's thread holding it."""
    pool = getattr(connection, "pool", None)
    assert pool is not None, "the test database runs pooled, as production does"

    def in_use() -> int:
        stats = pool.get_stats()
        return stats.get("pool_size", 0) - stats.get("pool_available", 0)

    comm = await connect()
    await start(comm, tenant.slug)
    before = in_use()
    for i in range(25):  # more than the pool holds
        text = f"How long do refunds take? ({i})"
        await comm.send_json_to(
            {"type": "message.send", "client_message_id": f"m{i}", "text": text}
        )
        await receive_until(comm, "answer.completed", timeout=30)
    assert in_use() - before <= 1, pool.get_stats()
    await comm.disconnect()


async def test_a_message_is_acknowledged_while_every_turn_slot_of_its_tenant_is_busy(
    tenant, help_center, local_cache
):
    """Saving and acknowledging come before the queue for a turn slot: on a busy Monday the
    customer sees `message.accepted` at once, then `answer.queued` with a place in line, and
    the answer once a slot frees up."""
    comm = await connect()
    await start(comm, tenant.slug)
    slots = _slots()  # the process's slots (the consumer runs on this event loop)
    busy = contextlib.AsyncExitStack()
    for _ in range(slots.per_tenant_limit):
        await busy.enter_async_context(slots.hold(tenant.pk))

    await comm.send_json_to(
        {"type": "message.send", "client_message_id": "m1", "text": "How long do refunds take?"}
    )
    accepted, _ = await receive_until(comm, "message.accepted", timeout=5)
    assert accepted["client_message_id"] == "m1"
    queued, _ = await receive_until(comm, "answer.queued", timeout=5)
    assert (queued["reply_to"], queued["position"]) == (accepted["message"]["id"], 1)
    assert queued["wait_seconds"] >= 1
    assert await comm.receive_nothing(timeout=0.5)  # no answer while the slots are held

    await busy.aclose()
    completed, seen = await receive_until(comm, "answer.completed")
    assert "answer.started" in [e["type"] for e in seen]
    assert "5-10 business days" in completed["text"]
    assert (
        await database_sync_to_async(
            Message.objects.filter(conversation__tenant=tenant, role=Message.Role.BOT).count
        )()
        == 1
    )
    await comm.disconnect()
