"""Several web processes on one channel layer: two real daphne processes and one q2 cluster
on the same PostgreSQL and Redis. A customer on process A and an agent on process B see the
same conversation live (the answer streams to both, each event once), two agents on different
processes race for one handoff and exactly one owns it, and the q2 cluster does the
background work the web processes enqueued."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from handoffs.models import Handoff
from supportbot.tests.factories import MembershipFactory
from supportbot.tests.webprocs import WebProcess, start_qcluster, start_web

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PASSWORD = "pw-for-test-only"
# Generous: the first turn of a process loads the embedding model on a busy 2-core machine.
STEP_TIMEOUT = 90.0


@pytest.fixture
def cluster(tmp_path):
    """Two daphne processes and one q2 cluster sharing a private queue."""
    name = f"sbtest-{uuid.uuid4().hex[:8]}"
    env = {"Q_CLUSTER_NAME": name, "ANSWER_CACHE_ENABLED": "0"}
    web = start_web(tmp_path, count=2, env=env)
    worker = start_qcluster(tmp_path, name=name, env={"ANSWER_CACHE_ENABLED": "0"})
    yield web, worker
    for proc in [*web, worker]:
        proc.stop()


async def _login(base: str, user) -> httpx.AsyncClient:
    """An HTTP client of `base` logged in as `user` through the console's login page."""
    client = httpx.AsyncClient(base_url=base, timeout=30, follow_redirects=False)
    page = await client.get("/console/login/")
    marker = 'name="csrfmiddlewaretoken" value="'
    start = page.text.index(marker) + len(marker)
    token = page.text[start : page.text.index('"', start)]
    r = await client.post(
        "/console/login/",
        data={"username": user.get_username(), "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/console/login/"},
    )
    assert r.status_code in (302, 303), r.text[:500]
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    client.headers["Referer"] = f"{base}/console/"
    return client


class Socket:
    """A WebSocket client that keeps every event it received, in order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.events: list[dict] = []

    async def send(self, event: dict) -> None:
        await self.ws.send(json.dumps(event))

    async def until(self, match: Callable[[dict], bool], timeout: float = STEP_TIMEOUT) -> dict:
        """Read events until one matches (earlier ones are kept); fail past the deadline."""
        for event in self.events:
            if match(event) and not event.get("_seen"):
                event["_seen"] = True
                return event
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching event in {timeout}s; got {self.events}")
            try:
                raw = await asyncio.wait_for(self.ws.recv(), left)
            except TimeoutError:
                continue
            event = json.loads(raw)
            self.events.append(event)
            if match(event):
                event["_seen"] = True
                return event

    async def drain(self, seconds: float) -> None:
        """Collect whatever else arrives within `seconds` (to show nothing is duplicated)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.events.append(json.loads(await asyncio.wait_for(self.ws.recv(), left)))
            except TimeoutError:
                return

    def of_type(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]


def _ws_url(proc: WebProcess, path: str) -> str:
    return proc.url.replace("http://", "ws://") + path


async def _scenario(a: WebProcess, b: WebProcess, tenant, agent_b, agent_a) -> dict:
    console_b = await _login(b.url, agent_b)
    console_a = await _login(a.url, agent_a)
    cookie = "; ".join(f"{k}={v}" for k, v in console_b.cookies.items())
    async with (
        connect(_ws_url(a, "/ws/chat/"), origin=a.url, open_timeout=15) as chat_ws,
        connect(
            _ws_url(b, f"/ws/console/?tenant={tenant.slug}"),
            origin=b.url,
            additional_headers={"Cookie": cookie},
            open_timeout=15,
        ) as console_ws,
    ):
        customer, agent = Socket(chat_ws), Socket(console_ws)
        await customer.send({"type": "session.start", "tenant": tenant.slug})
        ready = await customer.until(lambda e: e["type"] == "session.ready")
        conversation_id = ready["conversation_id"]

        # The customer (process A) asks for a person; the agent's queue (process B) hears it.
        await customer.send({"type": "handoff.request", "detail": "please, a person"})
        started = await customer.until(lambda e: e["type"] == "handoff.started")
        handoff_id = started["handoff_id"]
        await agent.until(lambda e: e["type"] == "queue.changed")
        queue = (await console_b.get("/console/api/queue")).json()
        assert handoff_id in [h["id"] for h in queue["handoffs"]]

        # The agent watches the conversation; the bot still answers until someone claims it,
        # and its answer streams to the customer on A and the agent on B.
        await agent.send({"type": "view", "handoff_id": handoff_id})
        await agent.until(
            lambda e: (
                e["type"] == "queue.changed"
                and e["event"] == "viewers"
                and e["handoff_id"] == handoff_id
            )
        )
        await customer.send(
            {"type": "message.send", "client_message_id": "c1", "text": "How long do refunds take?"}
        )
        completed = await customer.until(lambda e: e["type"] == "answer.completed")
        reply_id = completed["message_id"]
        await agent.until(
            lambda e: e["type"] == "answer.completed" and e["message"]["id"] == reply_id
        )

        # Two agents on two processes claim the same handoff at once: one owner.
        version = next(
            h["version"]
            for h in (await console_b.get("/console/api/queue")).json()["handoffs"]
            if h["id"] == handoff_id
        )
        claims = await asyncio.gather(
            console_b.post(
                f"/console/api/handoffs/{handoff_id}/claim", json={"expected_version": version}
            ),
            console_a.post(
                f"/console/api/handoffs/{handoff_id}/claim", json={"expected_version": version}
            ),
        )
        owner_event = await customer.until(lambda e: e["type"] == "conversation.owner")
        winner = console_b if claims[0].status_code == 200 else console_a

        # The owner replies from its process; the customer on A sees it live.
        r = await winner.post(
            f"/console/api/handoffs/{handoff_id}/reply", json={"text": "Hi, Dana here."}
        )
        assert r.status_code == 201, r.text
        agent_message = await customer.until(lambda e: e["type"] == "agent.message")
        await agent.until(
            lambda e: (
                e["type"] == "agent.message"
                and e["message"]["id"] == agent_message["message"]["id"]
            )
        )
        # The customer answers; the agent on B sees it, and the bot stays silent.
        await customer.send(
            {"type": "message.send", "client_message_id": "c2", "text": "Thanks Dana, order A-1"}
        )
        accepted = await customer.until(
            lambda e: e["type"] == "message.accepted" and e["client_message_id"] == "c2"
        )
        await agent.until(
            lambda e: (
                e["type"] == "message.created" and e["message"]["id"] == accepted["message"]["id"]
            )
        )
        await asyncio.gather(customer.drain(1.5), agent.drain(1.5))
        await console_a.aclose()
        await console_b.aclose()
        return {
            "conversation_id": conversation_id,
            "visitor_token": ready["visitor_token"],
            "handoff_id": handoff_id,
            "reply_id": reply_id,
            "completed": completed,
            "claims": claims,
            "owner_event": owner_event,
            "agent_message": agent_message,
            "customer": customer.events,
            "agent": agent.events,
        }


def test_customer_and_agent_on_different_processes_share_one_live_conversation(
    cluster, tenant, help_center
):
    (a, b), worker = cluster
    agent_b = MembershipFactory(tenant=tenant, role="agent", user__password=PASSWORD).user
    agent_a = MembershipFactory(tenant=tenant, role="agent", user__password=PASSWORD).user
    try:
        result = asyncio.run(asyncio.wait_for(_scenario(a, b, tenant, agent_b, agent_a), 300))
    except (AssertionError, TimeoutError) as exc:
        logs = "\n".join(f"--- {p.log.name}\n{p.log.read_text()[-3000:]}" for p in (a, b, worker))
        raise AssertionError(f"{exc}\n{logs}") from exc
    customer, agent = result["customer"], result["agent"]
    reply_id = result["reply_id"]

    # The answer streamed to both connections, each piece exactly once, in the same order.
    deltas = [e["text"] for e in customer if e["type"] == "answer.delta"]
    agent_deltas = [e["text"] for e in agent if e["type"] == "answer.delta"]
    assert deltas, customer
    assert agent_deltas == deltas
    assert "".join(deltas).strip() == result["completed"]["text"].strip()
    assert [e["message_id"] for e in customer if e["type"] == "answer.completed"] == [reply_id]
    agent_copies = [
        e for e in agent if e["type"] == "answer.completed" and e["message"]["id"] == reply_id
    ]
    assert len(agent_copies) == 1
    assert [e["message"]["id"] for e in customer if e["type"] == "agent.message"] == [
        result["agent_message"]["message"]["id"]
    ]
    # The customer's own message is acknowledged, never echoed back to the sending tab.
    echoes = [
        e for e in customer if e["type"] == "message.created" and e["message"]["role"] == "customer"
    ]
    assert echoes == []

    # One claim won, the other got the one JSON error shape with a clear conflict.
    statuses = sorted(r.status_code for r in result["claims"])
    assert statuses == [200, 409], [r.text for r in result["claims"]]
    loser = next(r for r in result["claims"] if r.status_code == 409).json()
    assert loser["error"]["code"] in ("stale_version", "invalid_state"), loser
    assert loser["error"]["detail"]
    assert result["owner_event"]["owner"] == "human"
    handoff = Handoff.objects.get(pk=result["handoff_id"])
    assert handoff.state == "assigned"
    assert handoff.assigned_to_id in (agent_a.pk, agent_b.pk)
    assert handoff.conversation.owner == "human"
    # The bot stayed silent after the claim: one bot reply in the conversation.
    assert handoff.conversation.messages.filter(role="bot", kind="answer").count() <= 1

    # The q2 cluster took the summary task a web process enqueued, on the same database.
    deadline = time.monotonic() + 90
    while not Handoff.objects.get(pk=handoff.pk).summary:
        assert worker.process.poll() is None, worker.log.read_text()[-2000:]
        assert time.monotonic() < deadline, worker.log.read_text()[-2000:]
        time.sleep(0.5)

    # Its JSON log line carries the conversation and the request id of the socket event that
    # enqueued it, which the web process's own lines carry too.
    task_lines = [
        line
        for line in _json_lines(worker)
        if line["message"].startswith("task handoff_summarize_task started")
    ]
    assert task_lines, worker.log.read_text()[-2000:]
    assert task_lines[0]["conversation_id"] == result["conversation_id"]
    request_id = task_lines[0]["request_id"]
    assert any(line["request_id"] == request_id for line in _json_lines(a) + _json_lines(b))


async def _reconnect(proc: WebProcess, tenant, *, visitor_token: str, conversation_id: int):
    """The customer's tab reconnects to `proc` (its first process died) and sends again."""
    async with connect(_ws_url(proc, "/ws/chat/"), origin=proc.url, open_timeout=15) as ws:
        customer = Socket(ws)
        await customer.send(
            {
                "type": "session.start",
                "tenant": tenant.slug,
                "visitor_token": visitor_token,
                "conversation_id": conversation_id,
            }
        )
        ready = await customer.until(lambda e: e["type"] == "session.ready")
        await customer.send(
            {"type": "message.send", "client_message_id": "c3", "text": "Still there?"}
        )
        accepted = await customer.until(lambda e: e["type"] == "message.accepted")
        return ready, accepted


def test_customer_whose_process_dies_reconnects_to_the_other_and_loses_nothing(
    cluster, tenant, help_center
):
    (a, b), _ = cluster
    agent_b = MembershipFactory(tenant=tenant, role="agent", user__password=PASSWORD).user
    agent_a = MembershipFactory(tenant=tenant, role="agent", user__password=PASSWORD).user
    result = asyncio.run(asyncio.wait_for(_scenario(a, b, tenant, agent_b, agent_a), 300))
    a.process.kill()  # process A dies without a goodbye
    a.process.wait(10)
    ready, accepted = asyncio.run(
        asyncio.wait_for(
            _reconnect(
                b,
                tenant,
                visitor_token=result["visitor_token"],
                conversation_id=result["conversation_id"],
            ),
            120,
        )
    )
    assert ready["conversation_id"] == result["conversation_id"]
    assert ready["owner"] == "human"
    history = [(m["role"], m["text"]) for m in ready["history"]]
    assert ("customer", "How long do refunds take?") in history
    assert ("agent", "Hi, Dana here.") in history
    assert [m["id"] for m in ready["history"]].count(result["reply_id"]) == 1
    assert accepted["duplicate"] is False


def _json_lines(proc: WebProcess) -> list[dict]:
    return [
        json.loads(line)
        for line in proc.log.read_text(errors="replace").splitlines()
        if line.startswith("{")
    ]
