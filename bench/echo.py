"""Echo reference for `bench.chat_load`: the same daphne, Channels and socket, no product work.

Routed at `/ws/bench-echo/` only by the benchmark's own ASGI app (bench/asgi.py); the product
never serves it. It speaks just enough of the chat protocol for the benchmark client:
`session.start` → `session.ready`, `ping` → `pong`, and each `message.send` → one
`answer.delta` echoing the text, then `answer.completed`. No database, channel layer or
model: what the benchmark measures here is the floor the chat path cannot go below.
"""

from __future__ import annotations

import json

from channels.generic.websocket import AsyncWebsocketConsumer
from django.urls import re_path


class EchoConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.replies = 0
        await self.accept()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            event = json.loads(text_data or "")
        except (json.JSONDecodeError, TypeError):
            event = {}
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "session.start":
            await self._send({"type": "session.ready", "conversation_id": 0, "history": []})
        elif kind == "ping":
            await self._send({"type": "pong"})
        elif kind == "message.send":
            self.replies += 1
            text = str(event.get("text", ""))
            await self._send({"type": "answer.delta", "message_id": self.replies, "text": text})
            await self._send(
                {
                    "type": "answer.completed",
                    "message_id": self.replies,
                    "reply_to": event.get("client_message_id"),
                    "kind": "echo",
                    "text": text,
                    "citations": [],
                }
            )
        else:
            await self._send({"type": "error", "code": "unknown_type", "detail": "echo"})

    async def _send(self, event: dict) -> None:
        await self.send(text_data=json.dumps(event))


websocket_urlpatterns = [re_path(r"^ws/bench-echo/$", EchoConsumer.as_asgi())]
