"""Fault tests with real processes: Redis killed during chat traffic, PostgreSQL restarted
during chat traffic. Loopback only, bounded in count and time.

"Keeps answering" with Redis down means: the REST (and SSE) chat path answers every message
from PostgreSQL (no answer cache, no channel-layer fan-out, summaries not enqueued), abuse
limits fall back to stricter per-process counts, and every acknowledged message is answered
exactly once. Sockets stay open and get their own turns' events directly (the channel layer
waits the outage out; see supportbot/channel_layer.py).
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from django.db import connection
from websockets.asyncio.client import connect

from chat import tasks
from conversations.models import Message
from supportbot.services import api_key_create
from supportbot.tests import clusterprocs
from supportbot.tests.webprocs import start_web

pytestmark = [pytest.mark.django_db(transaction=True)]


def _post(web, headers, conversation_id: int, client_message_id: str, text: str):
    return httpx.post(
        f"{web.url}/api/v1/conversations/{conversation_id}/messages",
        json={"client_message_id": client_message_id, "text": text},
        headers=headers,
        timeout=60,
    )


def _conversation(web, headers, external_id: str) -> int:
    r = httpx.post(
        f"{web.url}/api/v1/conversations",
        json={"customer": {"external_id": external_id}},
        headers=headers,
        timeout=30,
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _assert_each_answered_once(acknowledged: dict[str, int]) -> None:
    for client_message_id, message_id in acknowledged.items():
        message = Message.objects.get(pk=message_id)
        assert message.client_message_id == client_message_id
        replies = Message.objects.filter(reply_to_id=message_id, role="bot")
        assert replies.count() == 1, (client_message_id, list(replies.values("id", "state")))
        assert replies.get().state == Message.State.DELIVERED


QUESTIONS = ["How long do refunds take?", "Is standard shipping free?", "warranty claim?"]


def test_redis_killed_during_traffic_chat_keeps_answering_and_loses_nothing(
    tenant, help_center, private_valkey, tmp_path
):
    _, raw = api_key_create(tenant=tenant, name="crm")
    headers = {"Authorization": f"Bearer {raw}"}
    env = {
        "REDIS_URL": private_valkey.url,
        "RATE_LIMIT_MESSAGE_CONVERSATION": "10/600",
        "RATE_LIMIT_MESSAGE_CUSTOMER": "1000/600",
        "RATE_LIMIT_FALLBACK_DIVISOR": "2",
        "RATE_LIMIT_REDIS_RETRY_S": "600",  # stay on the fallback for the whole outage
    }
    (web,) = start_web(tmp_path, count=1, env=env)
    acknowledged: dict[str, int] = {}
    try:
        conversation_id = _conversation(web, headers, "cust-redis")
        for n in range(3):  # Redis up: counted in Redis
            r = _post(web, headers, conversation_id, f"up-{n}", QUESTIONS[n % 3])
            assert r.status_code == 201, r.text
            acknowledged[f"up-{n}"] = r.json()["message"]["id"]

        private_valkey.kill()
        outage = []
        for n in range(7):  # Redis gone: answered from PostgreSQL, limits per process
            r = _post(web, headers, conversation_id, f"down-{n}", QUESTIONS[n % 3])
            outage.append(r.status_code)
            if r.status_code == 201:
                body = r.json()
                assert body["reply"]["text"], body
                acknowledged[f"down-{n}"] = body["message"]["id"]
            else:
                assert r.status_code == 429, r.text
                assert r.json()["error"]["code"] == "rate_limited"
                assert int(r.headers["Retry-After"]) >= 1
        # The fallback allows 10 / 2 = 5 in this process (its count starts afresh), never
        # more: limits get stricter, not open.
        assert outage == [201] * 5 + [429] * 2

        other = _conversation(web, headers, "cust-redis-2")  # new chats start, too
        r = _post(web, headers, other, "down-other", QUESTIONS[0])
        assert r.status_code == 201, r.text
        acknowledged["down-other"] = r.json()["message"]["id"]

        private_valkey.start()  # back (empty: it kept nothing)
        r = _post(web, headers, other, "after", QUESTIONS[1])
        assert r.status_code == 201, r.text
        acknowledged["after"] = r.json()["message"]["id"]
        assert httpx.get(f"{web.url}/healthz", timeout=10).status_code == 200
    finally:
        web.stop()
    _assert_each_answered_once(acknowledged)
    assert len(acknowledged) == 10


@pytest.mark.process
def test_postgres_restarted_during_traffic_every_acknowledged_message_answered_once(
    tenant, help_center, tmp_path, settings
):
    _, raw = api_key_create(tenant=tenant, name="crm")
    headers = {"Authorization": f"Bearer {raw}"}
    (web,) = start_web(tmp_path, count=1)
    acknowledged: dict[str, int] = {}
    statuses: list[int | str] = []
    try:
        conversation_id = _conversation(web, headers, "cust-pg")
        for n in range(2):
            r = _post(web, headers, conversation_id, f"before-{n}", QUESTIONS[n])
            assert r.status_code == 201, r.text
            acknowledged[f"before-{n}"] = r.json()["message"]["id"]

        clusterprocs.pg_restart()
        # Traffic right after the restart: the pool's connections were all cut.
        for n in range(6):
            try:
                r = _post(web, headers, conversation_id, f"after-{n}", QUESTIONS[n % 3])
            except httpx.HTTPError as exc:
                statuses.append(type(exc).__name__)
                continue
            statuses.append(r.status_code)
            if r.status_code in (200, 201):
                acknowledged[f"after-{n}"] = r.json()["message"]["id"]
            else:
                assert r.headers["content-type"].startswith("application/json"), r.text
            time.sleep(0.3)
        # A retry with the same client_message_id returns the saved result, never a 2nd answer.
        for client_message_id in [k for k in acknowledged if k.startswith("after-")][:2]:
            r = _post(web, headers, conversation_id, client_message_id, "again")
            assert r.status_code == 200, r.text
            assert r.json()["duplicate"] is True
    finally:
        web.stop()
        # This process's own pooled connections were cut too: drop them, here and on
        # asgiref's shared thread, where the async tests' sync_to_async calls keep theirs
        # from test to test (the next async test queried a dead one: AdminShutdown).
        clusterprocs.connections_drop()
    assert statuses == [201] * 6, statuses  # the pool checks each connection it hands out
    # Anything acknowledged but left unanswered by the cut is the sweeper's.
    settings.ANSWER_STALE_AFTER_S = 0.5
    time.sleep(1)
    tasks.unanswered_messages_sweep_task()
    _assert_each_answered_once(acknowledged)
    assert connection.is_usable()


async def _until(ws, match, timeout: float = 90.0) -> dict:
    """Read events until one matches; fail past the deadline."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            event = json.loads(await asyncio.wait_for(ws.recv(), left))
        except TimeoutError:
            break
        if match(event):
            return event
    raise AssertionError(f"no matching event in {timeout}s")


def _answer_to(message_id: int):
    return lambda e: e["type"] == "answer.completed" and e["reply_to"] == message_id


def test_redis_killed_with_sockets_open_they_stay_and_their_events_resume(
    tenant, help_center, private_valkey, tmp_path
):
    """Two sockets of one conversation (two tabs) on a real daphne: Redis killed, the sockets
    stay open and the asking tab still gets its answer; Redis back empty, the other tab gets
    the conversation's events again without reconnecting (its group membership re-added)."""
    (web,) = start_web(tmp_path, count=1, env={"REDIS_URL": private_valkey.url})
    url = web.url.replace("http://", "ws://") + "/ws/chat/"

    async def scenario() -> dict[str, dict]:
        async with (
            connect(url, origin=web.url, open_timeout=30) as tab_a,
            connect(url, origin=web.url, open_timeout=30) as tab_b,
        ):
            await tab_a.send(json.dumps({"type": "session.start", "tenant": tenant.slug}))
            ready = await _until(tab_a, lambda e: e["type"] == "session.ready")
            resume = {
                "type": "session.start",
                "tenant": tenant.slug,
                "visitor_token": ready["visitor_token"],
                "conversation_id": ready["conversation_id"],
            }
            await tab_b.send(json.dumps(resume))
            await _until(tab_b, lambda e: e["type"] == "session.ready")
            seen: dict[str, dict] = {}
            asked: dict[str, int] = {}

            async def ask(cid: str, text: str) -> None:
                await tab_a.send(
                    json.dumps({"type": "message.send", "client_message_id": cid, "text": text})
                )
                accepted = await _until(
                    tab_a,
                    lambda e: e["type"] == "message.accepted" and e["client_message_id"] == cid,
                )
                asked[cid] = accepted["message"]["id"]
                seen[f"{cid} asking tab"] = await _until(tab_a, _answer_to(asked[cid]))

            await ask("before", QUESTIONS[0])
            seen["before other tab"] = await _until(tab_b, _answer_to(asked["before"]))

            private_valkey.kill()
            await ask("during", QUESTIONS[1])

            await asyncio.to_thread(private_valkey.start)  # back, and empty
            await asyncio.sleep(3)  # the pump pops again and re-adds the groups
            await ask("after", QUESTIONS[2])
            seen["after other tab"] = await _until(tab_b, _answer_to(asked["after"]), 30)
            return seen

    try:
        seen = asyncio.run(scenario())
    finally:
        web.stop()
    assert set(seen) == {
        "before asking tab",
        "before other tab",
        "during asking tab",
        "after asking tab",
        "after other tab",
    }
    assert seen["before other tab"]["message_id"] == seen["before asking tab"]["message_id"]
    assert Message.objects.filter(role="bot", state=Message.State.DELIVERED).count() == 3
