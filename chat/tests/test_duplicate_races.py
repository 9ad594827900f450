"""The same `client_message_id` at once, for real: parallel senders on two daphne processes
(`supportbot/tests/webprocs.py`) released together by a `threading.Barrier`. The database
decides (the unique constraint on `(tenant, conversation, client_message_id)` and the reply
reservation): one customer message, one bot answer, and every sender gets the documented
answer — 201 for the one that saved it, 200 with `duplicate: true` for the others
(`docs/chat-protocol.md`, "REST equivalent" and `message.send`)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx
import pytest
from websockets.asyncio.client import connect

from conversations.models import Message
from supportbot.tests.webprocs import WebProcess, start_web

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.process]

# Generous: the first turn of a process loads the embedding model on a busy 2-core machine.
STEP_TIMEOUT = 180.0
# Per process: enough parallel requests that some insert at the same moment.
SENDERS_PER_PROCESS = 4
GENEROUS = "100000/60"


@pytest.fixture
def web(tmp_path):
    """Two daphne processes on the test database; message limits out of the way (this is
    about duplicates, not limits), no answer cache (each turn really answers), and a reply
    never stale within a test (a slow machine must not make a takeover legitimate)."""
    env = {
        "ANSWER_CACHE_ENABLED": "0",
        "ANSWER_STALE_AFTER_S": "3600",
        "RATE_LIMIT_MESSAGE_CUSTOMER": GENEROUS,
        "RATE_LIMIT_MESSAGE_CONVERSATION": GENEROUS,
        "RATE_LIMIT_MESSAGE_IP": GENEROUS,
        "RATE_LIMIT_SESSION_ANONYMOUS": GENEROUS,
        "RATE_LIMIT_API_KEY": GENEROUS,
    }
    procs = start_web(tmp_path, count=2, env=env)
    yield procs
    for proc in procs:
        proc.stop()


def _logs(procs: list[WebProcess]) -> str:
    return "\n".join(
        f"--- {p.log.name}\n{p.log.read_text(errors='replace')[-3000:]}" for p in procs
    )


def _partner(base: str, api_key) -> httpx.Client:
    return httpx.Client(
        base_url=base,
        headers={"Authorization": f"Bearer {api_key.raw}"},
        timeout=STEP_TIMEOUT,
    )


def _post_at_once(
    barrier: threading.Barrier, base: str, api_key, conversation_id: int, body: dict
) -> httpx.Response:
    """Wait for every other sender, then post the message."""
    with _partner(base, api_key) as client:
        barrier.wait(timeout=STEP_TIMEOUT)
        return client.post(f"/api/v1/conversations/{conversation_id}/messages", json=body)


def _rows(conversation_id: int) -> tuple[list[Message], list[Message]]:
    messages = list(Message.objects.filter(conversation_id=conversation_id).order_by("id"))
    customer = [m for m in messages if m.role == Message.Role.CUSTOMER]
    bot = [m for m in messages if m.role == Message.Role.BOT]
    return customer, bot


def _assert_one_saved_many_duplicates(responses: list[httpx.Response]) -> dict:
    """Every response is the documented one; return the body of the one that saved it."""
    for r in responses:
        assert r.status_code in (200, 201), (r.status_code, r.text[:1000])
    bodies = [r.json() for r in responses]
    assert len({b["message"]["id"] for b in bodies}) == 1, bodies
    created = [(r, b) for r, b in zip(responses, bodies, strict=True) if r.status_code == 201]
    assert len(created) == 1, [r.status_code for r in responses]
    assert created[0][1]["duplicate"] is False
    assert sorted(b["duplicate"] for b in bodies) == [False] + [True] * (len(bodies) - 1)
    for r, b in zip(responses, bodies, strict=True):
        assert b["duplicate"] is (r.status_code == 200), (r.status_code, b)
    return created[0][1]


def test_same_client_message_id_posted_at_once_to_two_processes_saves_and_answers_once(
    web, tenant, help_center, api_key
):
    a, b = web
    with _partner(a.url, api_key) as client:
        r = client.post("/api/v1/conversations", json={"customer": {"external_id": "crm-race"}})
    assert r.status_code == 201, r.text
    conversation_id = r.json()["id"]
    body = {"client_message_id": "race-1", "text": "How long do refunds take?"}
    targets = [a.url, b.url] * SENDERS_PER_PROCESS
    barrier = threading.Barrier(len(targets))

    with ThreadPoolExecutor(len(targets)) as pool:
        futures = [
            pool.submit(_post_at_once, barrier, base, api_key, conversation_id, body)
            for base in targets
        ]
        try:
            responses = [f.result(timeout=STEP_TIMEOUT * 2) for f in futures]
        except Exception as exc:
            raise AssertionError(f"{exc!r}\n{_logs(web)}") from exc

    try:
        _assert_one_saved_many_duplicates(responses)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_logs(web)}") from exc
    customer, bot = _rows(conversation_id)
    assert len(customer) == 1, [(m.pk, m.text) for m in customer]
    assert len(bot) == 1, [(m.pk, m.kind, m.state) for m in bot]
    assert bot[0].reply_to_id == customer[0].pk
    assert bot[0].state == Message.State.DELIVERED
    assert "taken_over_at" not in bot[0].meta, bot[0].meta  # one turn answered, none took over
    # Whoever carries the reply carries that one row; the others were told it is pending.
    replies = {resp.json()["reply"]["id"] for resp in responses if resp.json()["reply"]}
    assert replies == {bot[0].pk}

    # A late repeat (nothing racing any more) gets the saved message and the saved reply.
    with _partner(b.url, api_key) as client:
        again = client.post(f"/api/v1/conversations/{conversation_id}/messages", json=body)
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True
    assert again.json()["message"]["id"] == customer[0].pk
    assert again.json()["reply"]["id"] == bot[0].pk


@dataclass
class Tab:
    """One customer tab's socket and every event it received, in order."""

    events: list[dict] = field(default_factory=list)

    def of_type(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]


async def _session(proc: WebProcess, tenant, **resume) -> tuple[dict, object]:
    ws = await connect(
        proc.url.replace("http://", "ws://") + "/ws/chat/", origin=proc.url, open_timeout=30
    )
    await ws.send(json.dumps({"type": "session.start", "tenant": tenant.slug, **resume}))
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), STEP_TIMEOUT))
        if event["type"] == "session.ready":
            return event, ws
        assert event["type"] not in ("error", "rate_limited"), event


async def _new_chat(proc: WebProcess, tenant) -> dict:
    """Open an anonymous chat; return its `session.ready` (conversation and visitor token)."""
    ready, ws = await _session(proc, tenant)
    await ws.close()
    return ready


async def _tab_sends_at_once(
    barrier: threading.Barrier, proc: WebProcess, tenant, resume: dict, send: dict
) -> Tab:
    """Join the conversation, wait for the other senders, send, and read until this tab has
    its `message.accepted` and the answer to that message."""
    tab = Tab()
    _, ws = await _session(proc, tenant, **resume)
    try:
        await asyncio.to_thread(barrier.wait, STEP_TIMEOUT)
        await ws.send(json.dumps(send))
        accepted = None
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no accepted message and answer in time: {tab.events}")
            event = json.loads(await asyncio.wait_for(ws.recv(), left))
            tab.events.append(event)
            assert event["type"] not in ("error", "rate_limited"), event
            if event["type"] == "message.accepted":
                accepted = event
            if (
                accepted is not None
                and event["type"] == "answer.completed"
                and event["reply_to"] == accepted["message"]["id"]
            ):
                return tab
    finally:
        await ws.close()


def test_same_client_message_id_from_two_tabs_and_rest_at_once_is_one_message_one_answer(
    web, tenant, help_center, api_key
):
    a, b = web
    ready = asyncio.run(_new_chat(a, tenant))
    resume = {"visitor_token": ready["visitor_token"], "conversation_id": ready["conversation_id"]}
    conversation_id = ready["conversation_id"]
    send = {
        "type": "message.send",
        "client_message_id": "tab-1",
        "text": "How long do refunds take?",
    }
    body = {"client_message_id": "tab-1", "text": "How long do refunds take?"}
    barrier = threading.Barrier(3)

    with ThreadPoolExecutor(3) as pool:
        tabs = [
            pool.submit(asyncio.run, _tab_sends_at_once(barrier, proc, tenant, resume, send))
            for proc in (a, b)
        ]
        rest = pool.submit(_post_at_once, barrier, b.url, api_key, conversation_id, body)
        try:
            tab_a, tab_b = (f.result(timeout=STEP_TIMEOUT * 2) for f in tabs)
            response = rest.result(timeout=STEP_TIMEOUT * 2)
        except Exception as exc:
            raise AssertionError(f"{exc!r}\n{_logs(web)}") from exc

    customer, bot = _rows(conversation_id)
    assert len(customer) == 1, [(m.pk, m.text) for m in customer]
    assert len(bot) == 1, [(m.pk, m.kind, m.state) for m in bot]
    message_id, reply_id = customer[0].pk, bot[0].pk
    assert bot[0].reply_to_id == message_id
    assert bot[0].state == Message.State.DELIVERED
    assert "taken_over_at" not in bot[0].meta, bot[0].meta  # one turn answered, none took over

    # Each sender got one acknowledgement of the same message; exactly one of them saved it.
    assert response.status_code in (200, 201), response.text
    duplicates = [response.json()["duplicate"]]
    assert response.json()["message"]["id"] == message_id
    assert response.json()["duplicate"] is (response.status_code == 200)
    for tab in (tab_a, tab_b):
        accepted = tab.of_type("message.accepted")
        assert len(accepted) == 1, tab.events
        assert accepted[0]["client_message_id"] == "tab-1"
        assert accepted[0]["message"]["id"] == message_id
        duplicates.append(accepted[0]["duplicate"])
        # The answer reached each tab, and it is the one saved answer.
        completed = tab.of_type("answer.completed")
        assert {e["message_id"] for e in completed} == {reply_id}, tab.events
        # It streamed once: one start per tab, never a second reply being reserved.
        assert [e["message_id"] for e in tab.of_type("answer.started")] in ([], [reply_id])
        pending = tab.of_type("answer.pending")
        assert all(e["reply_to"] == message_id for e in pending), tab.events
    assert sorted(duplicates) == [False, True, True], (duplicates, tab_a.events, tab_b.events)
    if response.json()["reply"] is not None:
        assert response.json()["reply"]["id"] == reply_id
