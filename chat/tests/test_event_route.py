"""One event route: every connection of a conversation sees the same stream, each event once.

Two customer tabs of one conversation and an agent watching it from the console, through the
real ASGI application and the Redis channel layer.
"""

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from config.asgi import application
from conversations.models import Conversation
from handoffs import services as handoff_services

pytestmark = [pytest.mark.django_db(transaction=True)]
ORIGIN = [(b"origin", b"http://127.0.0.1:8000")]


@pytest.fixture
def local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


async def _until(comm, event_type, seen=None, timeout=30):
    seen = [] if seen is None else seen
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        seen.append(event)
        if event["type"] == event_type:
            return seen


async def _drain(comm, seen, quiet=0.5):
    """Collect what arrives until the connection stays quiet (without cancelling it)."""
    while not await comm.receive_nothing(timeout=quiet):
        seen.append(await comm.receive_json_from(timeout=5))
    return seen


def _key(event):
    return (
        event["type"],
        event.get("message_id"),
        event.get("text"),
        event.get("message", {}).get("id"),
    )


async def test_two_tabs_and_an_agent_see_the_same_answer_stream_each_event_once(
    tenant, help_center, agent, local_cache
):
    tab1 = WebsocketCommunicator(application, "/ws/chat/", headers=ORIGIN)
    assert (await tab1.connect())[0]
    await tab1.send_json_to({"type": "session.start", "tenant": tenant.slug})
    ready = (await _until(tab1, "session.ready"))[-1]
    tab2 = WebsocketCommunicator(application, "/ws/chat/", headers=ORIGIN)
    assert (await tab2.connect())[0]
    await tab2.send_json_to(
        {
            "type": "session.start",
            "tenant": tenant.slug,
            "visitor_token": ready["visitor_token"],
            "conversation_id": ready["conversation_id"],
        }
    )
    assert (await _until(tab2, "session.ready"))[-1]["conversation_id"] == ready["conversation_id"]

    # The agent watches the conversation (a queued handoff; the bot still answers).
    conversation = await database_sync_to_async(Conversation.objects.get)(
        pk=ready["conversation_id"]
    )
    handoff, _ = await database_sync_to_async(handoff_services.handoff_request)(
        conversation=conversation, reason="customer_request", detail="watch"
    )
    console = WebsocketCommunicator(
        application, f"/ws/console/?tenant={tenant.slug}", headers=ORIGIN
    )
    console.scope["user"] = agent
    assert (await console.connect())[0]
    await console.send_json_to({"type": "view", "handoff_id": handoff.pk})
    await _drain(console, [])

    await tab1.send_json_to(
        {"type": "message.send", "client_message_id": "q1", "text": "How long do refunds take?"}
    )
    seen1 = await _until(tab1, "answer.completed")
    seen2 = await _until(tab2, "answer.completed")
    agent_seen = await _until(console, "answer.completed", [])
    for seen, comm in ((seen1, tab1), (seen2, tab2), (agent_seen, console)):
        await _drain(comm, seen)

    deltas1 = [e["text"] for e in seen1 if e["type"] == "answer.delta"]
    deltas2 = [e["text"] for e in seen2 if e["type"] == "answer.delta"]
    deltas_agent = [e["text"] for e in agent_seen if e["type"] == "answer.delta"]
    assert deltas1
    assert deltas1 == deltas2 == deltas_agent
    # The console is told which conversation each event is of (it drops any other's).
    stamped = {
        e["conversation_id"] for e in agent_seen if e["type"] not in ("pong", "queue.changed")
    }
    assert stamped == {ready["conversation_id"]}
    for seen in (seen1, seen2, agent_seen):
        keys = [_key(e) for e in seen if e["type"] not in ("pong", "queue.changed")]
        assert len(keys) == len(set(keys)), keys  # each event once per connection
    # The sender got its acknowledgement and no echo of its own message; the other tab got it.
    assert [e["type"] for e in seen1].count("message.accepted") == 1
    assert not [e for e in seen1 if e["type"] == "message.created"]
    created2 = [e for e in seen2 if e["type"] == "message.created"]
    assert [e["message"]["client_message_id"] for e in created2] == ["q1"]
    assert [e["type"] for e in seen2].count("answer.completed") == 1
    # The agent sees the same saved messages under the same names as the customer's tabs.
    assert [
        e["message"]["client_message_id"] for e in agent_seen if e["type"] == "message.created"
    ] == ["q1"]
    assert [e["type"] for e in agent_seen].count("answer.completed") == 1
    assert not [e for e in agent_seen if e["type"] == "conversation.message"]
    completed = [e for e in seen1 if e["type"] == "answer.completed"][0]
    assert "5-10 business days" in completed["text"]
    for comm in (tab1, tab2, console):
        await comm.disconnect()
