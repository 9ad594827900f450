"""Customer chat over WebSocket (`/ws/chat/`). Protocol: docs/chat-protocol.md.

The consumer parses, authorizes and hands work to services/the orchestrator. Answers run in a
task of their own, so a customer who disconnects mid-answer still gets it saved and sees it
on reconnect (`session.start` with `last_message_id` replays what was missed).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.cache import cache

from actions import selectors as action_selectors
from conversations import orchestrator, selectors, services
from conversations.identity import (
    identity_token_verify,
    visitor_token_make,
    visitor_token_verify,
)
from conversations.models import Conversation, Message
from handoffs import selectors as handoff_selectors
from handoffs import services as handoff_services
from supportbot import selectors as tenancy
from supportbot.errors import ApplicationError

logger = logging.getLogger(__name__)

RATE_LIMIT_PER_MINUTE = 20
HISTORY_LIMIT = 200


class OriginNotAllowed(ApplicationError):
    status = 403
    code = "origin_not_allowed"


def _start_session(payload: dict[str, Any], *, origin: str | None) -> dict[str, Any]:
    """Resolve tenant, customer and conversation for a `session.start` event.

    The page's Origin must be one of the tenant's allowed origins or this product's own host,
    so another site cannot drive a customer's chat from the customer's browser.
    """
    slug = payload.get("tenant")
    if not isinstance(slug, str) or not slug:
        raise ApplicationError("tenant is required.", field="tenant")
    tenant = tenancy.tenant_get(slug=slug)
    if not tenancy.tenant_origin_allowed(tenant=tenant, origin=origin):
        raise OriginNotAllowed(
            f"Origin {origin or '(none)'} may not open a chat of {tenant.slug}: "
            "add it to the tenant's allowed origins."
        )
    identity = payload.get("identity_token")
    if identity:
        verified = identity_token_verify(tenant=tenant, token=identity)
        customer = services.customer_get_or_create_verified(
            tenant=tenant, external_id=verified.external_id
        )
        visitor_token = None
    else:
        token = payload.get("visitor_token")
        visitor_id = visitor_token_verify(tenant=tenant, token=token) if token else None
        visitor_id, visitor_token = visitor_token_make(tenant=tenant, visitor_id=visitor_id)
        customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id=visitor_id)

    conversation = None
    wanted = payload.get("conversation_id")
    if isinstance(wanted, int):
        conversation = Conversation.objects.filter(
            tenant=tenant, customer=customer, pk=wanted, state=Conversation.State.OPEN
        ).first()
    if conversation is None:
        conversation = selectors.conversation_latest_open(tenant=tenant, customer=customer)
    if conversation is None:
        channel = payload.get("channel") if payload.get("channel") in ("web", "widget") else "web"
        conversation = services.conversation_start(
            tenant=tenant, customer=customer, channel=channel
        )
    after = payload.get("last_message_id")
    after = after if isinstance(after, int) and after > 0 else None
    history = list(
        selectors.message_list(
            tenant=tenant, conversation_id=conversation.pk, after_id=after
        ).exclude(state=Message.State.STREAMING)[:HISTORY_LIMIT]
    )
    feedback = dict(
        Message.objects.filter(
            conversation=conversation, role=Message.Role.BOT, feedback__isnull=False
        ).values_list("pk", "feedback__rating")
    )
    handoff = handoff_selectors.handoff_open_for(conversation_id=conversation.pk)
    handoff_info = None
    if handoff is not None:
        position = handoff_selectors.handoff_queue_position(handoff=handoff)
        handoff_info = {
            "handoff_id": handoff.pk,
            "state": handoff.state,
            "position": position.position,
            "estimated_wait_minutes": position.estimated_wait_minutes,
            "agents_online": position.agents_online,
            "ask_for_email": position.ask_for_email and not handoff.customer_email,
        }
    return {
        "tenant": tenant,
        "customer": customer,
        "conversation": conversation,
        "ready": {
            "actions": action_selectors.action_cards_for_conversation(
                conversation_id=conversation.pk
            ),
            "type": "session.ready",
            "tenant": {"slug": tenant.slug, "name": tenant.name},
            "conversation_id": conversation.pk,
            "visitor_token": visitor_token,
            "customer": {"verified": customer.verified, "name": customer.name},
            "owner": conversation.owner,
            "handoff": handoff_info,
            "history": [
                {**services.message_as_event(m), "feedback": feedback.get(m.pk)} for m in history
            ],
        },
    }


def _rate_limited(customer_id: int) -> bool:
    key = f"rl:chat:{customer_id}"
    added = cache.add(key, 1, timeout=60)
    if added:
        return False
    try:
        count = cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=60)
        return False
    return count > RATE_LIMIT_PER_MINUTE


class ChatConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.tenant = None
        self.customer = None
        self.conversation = None
        self.group = None
        self.tasks: set[asyncio.Task] = set()
        await self.accept()

    async def disconnect(self, code: int) -> None:
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
        nul_field = _nul_field(event)
        if nul_field is not None:
            await self.send_error("invalid", "Null characters are not allowed.", field=nul_field)
            return
        handler = {
            "session.start": self.on_session_start,
            "message.send": self.on_message_send,
            "feedback.send": self.on_feedback_send,
            "handoff.request": self.on_handoff_request,
            "handoff.contact": self.on_handoff_contact,
            "action.confirm": self.on_action_answer,
            "action.cancel": self.on_action_answer,
            "ping": self.on_ping,
        }.get(event["type"])
        if handler is None:
            await self.send_error(
                "unknown_type", f"Unknown event type {event['type']!r}.", field="type"
            )
            return
        if handler not in (self.on_session_start, self.on_ping) and self.conversation is None:
            await self.send_error("no_session", "Send session.start first.")
            return
        try:
            await handler(event)
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
        await self.send_json({"type": "pong"})

    async def on_session_start(self, event: dict) -> None:
        try:
            session = await database_sync_to_async(_start_session)(event, origin=self._origin())
        except OriginNotAllowed as exc:
            await self.send_error(exc.code, exc.detail)
            await self.close(code=4403)
            return
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        self.tenant = session["tenant"]
        self.customer = session["customer"]
        self.conversation = session["conversation"]
        self.group = services.conversation_group(self.conversation.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.send_json(session["ready"])

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
        if await database_sync_to_async(_rate_limited)(self.customer.pk):
            raise ApplicationError(
                "Too many messages; wait a minute.", code="rate_limited", field="text"
            )
        task = asyncio.create_task(self._answer(client_message_id, text))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, client_message_id: str, text: str) -> None:
        try:
            await orchestrator.handle_customer_message(
                conversation=self.conversation,
                client_message_id=client_message_id,
                text=text,
                emit=self.emit,
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
            {"type": "feedback.saved", "message_id": message_id, "rating": event.get("rating")}
        )

    async def on_handoff_request(self, event: dict) -> None:
        detail = event.get("detail") if isinstance(event.get("detail"), str) else ""
        await orchestrator.request_handoff(
            conversation=self.conversation, detail=detail[:300] or "handoff button", emit=self.emit
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
        )

    async def on_handoff_contact(self, event: dict) -> None:
        email = event.get("email")
        if not isinstance(email, str):
            raise ApplicationError("email must be a string.", field="email")
        await database_sync_to_async(handoff_services.handoff_leave_contact)(
            conversation=self.conversation, email=email.strip()
        )
        await self.send_json({"type": "handoff.contact_saved", "email": email.strip()})

    # ------------------------------------------------------------------ outbound

    async def emit(self, event: dict[str, Any]) -> None:
        try:
            await self.send_json(event)
        except Exception:  # the socket closed; the saved reply is replayed on reconnect
            logger.debug("emit after close dropped: %s", event.get("type"))

    async def send_json(self, content: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(content))

    async def send_error(self, code: str, detail: str, **extra: Any) -> None:
        body = {"type": "error", "code": code, "detail": detail}
        body.update({k: v for k, v in extra.items() if v is not None})
        await self.emit(body)

    # ------------------------------------------------------------------ group events

    async def conversation_message(self, event: dict) -> None:
        message = event["message"]
        kind = "agent.message" if message["role"] == Message.Role.AGENT else "message.created"
        await self.emit({"type": kind, "message": message})

    async def conversation_owner(self, event: dict) -> None:
        await self.emit({"type": "conversation.owner", "owner": event["owner"]})

    async def conversation_activity(self, event: dict) -> None:  # tenant-wide; not joined here
        return None

    async def conversation_action(self, event: dict) -> None:
        await self.emit({"type": "action.updated", "action": event["action"]})


def _nul_field(event: dict) -> str | None:
    """The first key whose value holds a NUL character (PostgreSQL text cannot store one)."""
    stack: list[tuple[str, object]] = list(event.items())
    while stack:
        key, value = stack.pop()
        if "\x00" in key or (isinstance(value, str) and "\x00" in value):
            return key.replace("\x00", "")
        if isinstance(value, dict):
            stack.extend((f"{key}.{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, v) for v in value)
    return None
