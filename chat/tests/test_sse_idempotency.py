"""An `Idempotency-Key` on a streamed (SSE) message is held `in_progress` until the stream
ends — also when the client disconnects mid-stream — and released then (`docs/actions.md`).

The request runs through the real ASGI application (`config.asgi`), as daphne would call it,
with a client that disconnects after the first event.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from chat import orchestrator
from config.asgi import application
from conversations import events
from conversations.models import Message
from supportbot.models import IdempotencyKey

pytestmark = [pytest.mark.django_db(transaction=True)]


class Client:
    """An HTTP client at the ASGI level: sends one request, disconnects on demand."""

    def __init__(self, *, path: str, headers: dict[str, str], body: bytes) -> None:
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]
            + [(b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        self.body = body
        self.sent: list[dict] = []
        self.first_chunk = asyncio.Event()
        self.hang_up = asyncio.Event()
        self._body_sent = False

    async def receive(self) -> dict:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            self.first_chunk.set()

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")


def _key_states(key: str) -> list[str]:
    return list(IdempotencyKey.objects.filter(key=key).values_list("state", flat=True))


@pytest.fixture
def started_conversation(api_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key.raw}")
    created = client.post(
        "/api/v1/conversations", {"customer": {"external_id": "cust-sse"}}, format="json"
    )
    assert created.status_code == 201, created.content
    return client, created.json()["id"]


async def test_a_client_disconnecting_mid_stream_leaves_the_key_held_until_the_stream_ends(
    api_key, started_conversation, help_center, settings, monkeypatch
):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    partner, conversation_id = started_conversation
    turn = orchestrator.handle_customer_message
    let_turn_finish = asyncio.Event()

    async def slow_turn(**kwargs):
        await kwargs["emit"](events.answer_pending(reply_to=0))  # the stream has begun
        await let_turn_finish.wait()  # the model is still writing
        return await turn(**kwargs)

    monkeypatch.setattr(orchestrator, "handle_customer_message", slow_turn)
    body = {"client_message_id": "sse-1", "text": "Is standard shipping free?"}
    client = Client(
        path=f"/api/v1/conversations/{conversation_id}/messages",
        headers={
            "Authorization": f"Bearer {api_key.raw}",
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "Idempotency-Key": "sse-key",
            "Host": "testserver",
        },
        body=json.dumps(body).encode(),
    )
    served = asyncio.create_task(application(client.scope, client.receive, client.send))
    await asyncio.wait_for(client.first_chunk.wait(), timeout=60)
    assert client.status == 200
    assert await sync_to_async(_key_states)("sse-key") == ["in_progress"]

    # A retry while the stream runs is told so (a 409), not run a second time.
    busy = await sync_to_async(partner.post, thread_sensitive=False)(
        f"/api/v1/conversations/{conversation_id}/messages",
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY="sse-key",
    )
    assert busy.status_code == 409, busy.content
    assert busy.json()["error"]["code"] == "idempotency_in_progress"

    client.hang_up.set()  # the partner's client goes away mid-answer
    for _ in range(20):
        await asyncio.sleep(0)
    assert not served.done()  # the answer is still being written for the saved message
    assert await sync_to_async(_key_states)("sse-key") == ["in_progress"]

    let_turn_finish.set()
    await asyncio.wait_for(served, timeout=120)
    assert await sync_to_async(_key_states)("sse-key") == []  # released when the stream ended
    replies = await sync_to_async(list)(
        Message.objects.filter(conversation_id=conversation_id, role="bot").values_list(
            "state", flat=True
        )
    )
    assert replies == ["delivered"]  # the answer was saved although nobody listened

    monkeypatch.setattr(orchestrator, "handle_customer_message", turn)
    retry = await sync_to_async(partner.post, thread_sensitive=False)(
        f"/api/v1/conversations/{conversation_id}/messages",
        body,
        format="json",
        HTTP_IDEMPOTENCY_KEY="sse-key",
    )
    assert retry.status_code == 200, retry.content  # ran again: the saved answer, once
    assert retry.json()["duplicate"] is True
    assert retry.json()["reply"]["state"] == "delivered"


async def test_a_stream_that_ends_releases_the_key(
    api_key, started_conversation, help_center, settings
):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    _, conversation_id = started_conversation
    client = Client(
        path=f"/api/v1/conversations/{conversation_id}/messages",
        headers={
            "Authorization": f"Bearer {api_key.raw}",
            "Accept": "text/event-stream",
            "Content-Type": "application/json",
            "Idempotency-Key": "sse-done",
            "Host": "testserver",
        },
        body=json.dumps(
            {"client_message_id": "sse-2", "text": "How long do refunds take?"}
        ).encode(),
    )
    await asyncio.wait_for(application(client.scope, client.receive, client.send), timeout=120)
    streamed = b"".join(
        m.get("body", b"") for m in client.sent if m["type"] == "http.response.body"
    )
    assert b"event: answer.completed" in streamed
    assert await sync_to_async(_key_states)("sse-done") == []
