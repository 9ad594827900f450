"""Customer chat over WebSocket (`/ws/chat/`). Protocol: docs/chat-protocol.md.

The consumer parses, authorizes and hands work to services and the orchestrator; it holds no
ORM code. Conversation events (the answer stream, other tabs' messages, agents, actions)
reach it only through the conversation's channel-layer group (`conversations.events`), so
every tab and every agent watching sees the same stream, each event once; direct sends are
replies to this connection alone (`session.ready`, `message.accepted`, `error`, …).

Each inbound event and each answer runs in its own `ThreadSensitiveContext`: their database
and CPU work gets a thread of its own instead of the process's one shared thread, so a slow
order system or a long search in one chat never stalls another chat's handshake. Answers run
in a task of their own: a customer who disconnects mid-answer still gets it saved and sees it
on reconnect (`session.start` with `last_message_id` replays what was missed).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import close_old_connections

from chat import chat_sessions, limits, orchestrator
from chat.sockets import chat_sockets
from conversations import events, selectors, services
from handoffs import services as handoff_services
from supportbot import input_guard
from supportbot.client_address import UNKNOWN, scope_client_address
from supportbot.errors import ApplicationError, RateLimited
from supportbot.observability import context, tracing

logger = logging.getLogger(__name__)

# Close codes (docs/chat-protocol.md). Before accept they refuse the handshake (HTTP 403).
CLOSE_ORIGIN_NOT_ALLOWED = 4403
CLOSE_SESSION_TIMEOUT = 4408
CLOSE_TOO_MANY_SOCKETS = 4429


class ChatConsumer(AsyncWebsocketConsumer):
    # Inbound event type -> handler method (the isolation suite has a case for each).
    HANDLERS = {
        "session.start": "on_session_start",
        "message.send": "on_message_send",
        "feedback.send": "on_feedback_send",
        "handoff.request": "on_handoff_request",
        "handoff.contact": "on_handoff_contact",
        "action.confirm": "on_action_answer",
        "action.cancel": "on_action_answer",
        "ping": "on_ping",
    }

    async def connect(self) -> None:
        """Refuse the handshake (no socket opens) past the address's socket cap or from a page
        whose Origin no tenant allows; else accept and wait for a valid `session.start`."""
        self.tenant = None
        self.customer = None
        self.conversation = None
        self.group = None
        self.identity_expires_at: float | None = None
        self.identity_watch: asyncio.Task | None = None
        self.tasks: set[asyncio.Task] = set()
        self.address = scope_client_address(self.scope)
        self.counted = False
        self.session_started = False
        self.session_lock = asyncio.Lock()
        self.session_deadline: asyncio.Task | None = None
        if self.address != UNKNOWN:  # no address (a unix socket): nothing to count by
            if not chat_sockets.acquire(self.address):
                logger.info("chat socket refused: address holds CHAT_SOCKETS_PER_IP sockets")
                await self.close(code=CLOSE_TOO_MANY_SOCKETS)
                return
            self.counted = True
        origin = self._origin()
        try:
            allowed = await database_sync_to_async(chat_sessions.chat_origin_may_connect)(
                origin=origin
            )
        except BaseException:
            self._release()  # the database failed us: the handshake fails, its place is free
            raise
        if not allowed:
            logger.info("chat socket refused: origin %r is allowed by no tenant", origin)
            self._release()  # now: a refused handshake may never see a disconnect event
            await self.close(code=CLOSE_ORIGIN_NOT_ALLOWED)
            return
        await self.accept()
        self.session_deadline = asyncio.create_task(self._close_without_session())

    async def _close_without_session(self) -> None:
        """Close the socket unless a `session.start` succeeded within
        `CHAT_SESSION_START_TIMEOUT_S` (one being answered when it passes may still succeed)."""
        await asyncio.sleep(settings.CHAT_SESSION_START_TIMEOUT_S)
        async with self.session_lock:
            if self.session_started:
                return
        await self.send_error("session_timeout", "No session.start in time; reconnect.")
        await self.close(code=CLOSE_SESSION_TIMEOUT)

    def _release(self) -> None:
        """Give the socket's place in its address's count back (once)."""
        if self.counted:
            self.counted = False
            chat_sockets.release(self.address)

    async def disconnect(self, code: int) -> None:
        self._release()
        if self.session_deadline is not None:
            self.session_deadline.cancel()
        if self.identity_watch is not None:
            self.identity_watch.cancel()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        # Answer tasks keep running: the reply is saved and shown on reconnect.

    # ------------------------------------------------------------------ inbound

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            event = json.loads(text_data or "")
        except (ValueError, TypeError, RecursionError):  # RecursionError: nesting too deep
            await self.send_error("bad_json", "Events must be JSON objects.")
            return
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            await self.send_error("bad_event", "Events need a string 'type'.", field="type")
            return
        bad_field = input_guard.unstorable_field(event)
        if bad_field is not None:  # a NUL or a lone surrogate ("\ud800"): no text can hold it
            sent_id = event.get("client_message_id") if event["type"] == "message.send" else None
            await self.send_error(
                "invalid",
                input_guard.UNSTORABLE_DETAIL,
                field=bad_field,
                ref=event.get("ref"),
                client_message_id=sent_id if isinstance(sent_id, str) else None,
            )
            return
        name = self.HANDLERS.get(event["type"])
        handler = getattr(self, name) if name else None
        if handler is None:
            await self.send_error(
                "unknown_type", f"Unknown event type {event['type']!r}.", field="type"
            )
            return
        if handler not in (self.on_session_start, self.on_ping):
            if self.identity_expires_at is not None and time.time() >= self.identity_expires_at:
                await self.identity_expire()
            if self.conversation is None:
                await self.send_error("no_session", "Send session.start first.")
                return
        # Each inbound event is one request: its id (and the conversation's) reach every log
        # line, span, task and model call it causes, the answer task included. Events of one
        # socket run one after another in its task, so each simply replaces the last one's.
        context.request_id_var.set(context.new_request_id())
        context.set_conversation(self.conversation.pk if self.conversation else None)
        await self._handle(handler, event)

    async def _handle(self, handler, event: dict) -> None:
        try:
            async with ThreadSensitiveContext():  # this event's sync work: a thread of its own
                try:
                    await handler(event)
                finally:
                    # Give the thread's database connection back (to the pool) before the
                    # thread goes away: orchestrator calls do not close it themselves.
                    await database_sync_to_async(close_old_connections)()
        except RateLimited as exc:
            await self.send_rate_limited(
                exc,
                event_type=event["type"],
                ref=event.get("ref"),
                client_message_id=event.get("client_message_id")
                if event["type"] == "message.send"
                else None,
            )
        except ApplicationError as exc:
            extra = {k: exc.extra[k] for k in ("state", "current_version") if k in exc.extra}
            await self.send_error(
                exc.code,
                exc.detail,
                field=exc.field,
                ref=event.get("ref"),
                action_id=event.get("action_id") if event["type"].startswith("action.") else None,
                **extra,
            )
        except Exception:
            logger.exception("chat event %s failed", event.get("type"))
            await self.send_error("internal", "Something went wrong; please try again.")

    async def on_ping(self, event: dict) -> None:
        await self.send_json(events.pong())

    async def on_session_start(self, event: dict) -> None:
        async with self.session_lock:
            if await self._session_start(event):
                self.session_started = True

    async def _session_start(self, event: dict) -> bool:
        """Start (or restart) the socket's session; False when the socket was closed instead."""
        try:
            session = await database_sync_to_async(chat_sessions.chat_session_start)(
                event, origin=self._origin(), ip=self.client_ip
            )
        except chat_sessions.OriginNotAllowed as exc:
            await self.send_error(exc.code, exc.detail)
            await self.close(code=CLOSE_ORIGIN_NOT_ALLOWED)
            return False
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.tenant = session["tenant"]
        self.customer = session["customer"]
        self.conversation = session["conversation"]
        self.group = events.conversation_group(self.conversation.pk)
        context.set_conversation(self.conversation.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.identity_expires_at = session["identity_expires_at"]
        if self.identity_watch is not None:
            self.identity_watch.cancel()
            self.identity_watch = None
        if self.identity_expires_at is not None:
            self.identity_watch = asyncio.create_task(self._identity_expire_at())
        await self.send_json(session["ready"])
        return True

    async def _identity_expire_at(self) -> None:
        await asyncio.sleep(max(0.0, self.identity_expires_at - time.time()))
        await self.identity_expire()

    async def identity_expire(self) -> None:
        """The identity token behind this socket expired: leave the conversation (its events
        stop at once) and ask the page to re-identify (`identity.expired`)."""
        if self.identity_expires_at is None:
            return
        self.identity_expires_at = None
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.group = None
        self.tenant = self.customer = self.conversation = None
        await self.emit(events.identity_expired())

    @property
    def client_ip(self) -> str:
        """The client's address: TRUSTED_PROXIES honoured (supportbot.client_address)."""
        return self.address

    def _origin(self) -> str | None:
        for name, value in self.scope.get("headers", []):
            if name == b"origin":
                return value.decode("latin-1")
        return None

    async def on_message_send(self, event: dict) -> None:
        client_message_id = event.get("client_message_id")
        text = event.get("text")
        if not isinstance(client_message_id, str) or not client_message_id:
            raise ApplicationError("client_message_id is required.", field="client_message_id")
        if not isinstance(text, str) or not text.strip():
            raise ApplicationError("text must be a non-empty string.", field="text")
        await sync_to_async(limits.message_enforce, thread_sensitive=False)(
            tenant_id=self.tenant.pk,
            customer_id=self.customer.pk,
            conversation_id=self.conversation.pk,
            ip=self.client_ip,
            verified=self.customer.verified,
        )
        logger.info("chat message %s received", client_message_id)
        task = asyncio.create_task(self._answer(client_message_id, text))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, client_message_id: str, text: str) -> None:
        try:
            # The orchestrator runs the turn in a thread of its own (bounded per process).
            with tracing.span("chat.receive", **{"supportbot.channel": "websocket"}):
                await orchestrator.handle_customer_message(
                    conversation=self.conversation,
                    client_message_id=client_message_id,
                    text=text,
                    emit=self.emit,
                    origin=self.channel_name,
                    subscribed=True,
                )
        except ApplicationError as exc:
            await self.send_error(
                exc.code, exc.detail, field=exc.field, client_message_id=client_message_id
            )
        except Exception:
            logger.exception("answering %s failed", client_message_id)
            await self.send_error(
                "internal",
                "We could not answer that; please try again.",
                client_message_id=client_message_id,
            )

    async def on_feedback_send(self, event: dict) -> None:
        message_id = event.get("message_id")
        if not isinstance(message_id, int):
            raise ApplicationError("message_id must be an integer.", field="message_id")

        def save() -> None:
            message = selectors.message_in_conversation(
                conversation=self.conversation, message_id=message_id
            )
            services.feedback_set(
                message=message, rating=event.get("rating"), comment=event.get("comment") or ""
            )

        await database_sync_to_async(save)()
        await self.send_json(
            events.feedback_saved(message_id=message_id, rating=event.get("rating"))
        )

    async def on_handoff_request(self, event: dict) -> None:
        detail = event.get("detail") if isinstance(event.get("detail"), str) else ""
        await sync_to_async(limits.handoff_enforce, thread_sensitive=False)(
            customer_id=self.customer.pk, conversation_id=self.conversation.pk
        )
        await orchestrator.request_handoff(
            conversation=self.conversation,
            detail=detail[:300] or "handoff button",
            emit=self.emit,
            subscribed=True,
        )

    async def on_action_answer(self, event: dict) -> None:
        """The customer's Confirm / Cancel on a proposal card (that exact id and version)."""
        action_id, version = event.get("action_id"), event.get("version")
        if not isinstance(action_id, int) or isinstance(action_id, bool):
            raise ApplicationError("action_id must be an integer.", field="action_id")
        if not isinstance(version, int) or isinstance(version, bool):
            raise ApplicationError("version must be an integer.", field="version")
        await orchestrator.answer_action(
            conversation=self.conversation,
            action_id=action_id,
            version=version,
            confirm=event["type"] == "action.confirm",
            via="button",
            emit=self.emit,
            subscribed=True,
        )

    async def on_handoff_contact(self, event: dict) -> None:
        email = event.get("email")
        if not isinstance(email, str):
            raise ApplicationError("email must be a string.", field="email")
        await database_sync_to_async(handoff_services.handoff_leave_contact)(
            conversation=self.conversation, email=email.strip()
        )
        await self.send_json(events.handoff_contact_saved(email=email.strip()))

    # ------------------------------------------------------------------ outbound

    async def emit(self, event: dict[str, Any]) -> None:
        try:
            await self.send_json(event)
        except Exception:  # the socket closed; the saved reply is replayed on reconnect
            logger.debug("emit after close dropped: %s", event.get("type"))

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content))

    async def send_rate_limited(self, exc: RateLimited, **extra: Any) -> None:
        """`rate_limited`: which limit, and the seconds before the client may try again."""
        await self.emit(
            events.rate_limited(
                limit=exc.extra.get("limit"),
                retry_after=exc.extra.get("retry_after"),
                detail=exc.detail,
                **extra,
            )
        )

    async def send_error(self, code: str, detail: str, **extra: Any) -> None:
        await self.emit(events.error(code=code, detail=detail, **extra))

    # ------------------------------------------------------------------ group events

    async def conversation_event(self, group_message: dict) -> None:
        """An event of this conversation, from whichever process or connection caused it (the
        echo of this connection's own message is skipped: `events.for_customer`)."""
        event = events.for_customer(group_message, self.channel_name)
        if event is not None:
            await self.emit(event)
