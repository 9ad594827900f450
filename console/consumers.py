"""Agent console live channel (`/ws/console/?tenant=<slug>`): queue changes, presence and the
transcript of the conversation the agent is viewing. State lives in PostgreSQL; this only
tells the page when to refetch and streams new messages."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from console.access import console_access_resolve
from conversations import events
from conversations.events import conversation_group
from handoffs import events as queue_events
from handoffs import presence, selectors


class ConsoleConsumer(AsyncWebsocketConsumer):
    # Inbound event types (the isolation suite has a case for each).
    EVENTS = ("presence.ping", "view", "unview")

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        slug = parse_qs(self.scope.get("query_string", b"").decode()).get("tenant", [None])[0]
        access = await database_sync_to_async(console_access_resolve)(user=self.user, slug=slug)
        # Reading the live queue is what staff may do without a membership (console/access.py).
        self.tenant, self.is_member = access.tenant, access.membership is not None
        if self.tenant is None:
            await self.close(code=4403)
            return
        self.queue_group = queue_events.queue_group(self.tenant.pk)
        self.viewing: tuple[int, int] | None = None  # (handoff id, conversation id)
        await self.channel_layer.group_add(self.queue_group, self.channel_name)
        await self.accept()
        await self._presence(online=True)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "tenant", None) is None:
            return
        await self._unview()
        await self.channel_layer.group_discard(self.queue_group, self.channel_name)
        await self._presence(online=False)

    async def _presence(self, *, online: bool) -> None:
        if not self.is_member:
            return  # a watching operator is nobody's agent: never online, never routed to
        if online:
            await database_sync_to_async(presence.agent_heartbeat)(
                tenant_id=self.tenant.pk, user_id=self.user.pk
            )
        else:
            await database_sync_to_async(presence.agent_offline)(
                tenant_id=self.tenant.pk, user_id=self.user.pk
            )
        await self.channel_layer.group_send(
            self.queue_group, queue_events.agents_presence_changed()
        )

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None):
        try:
            event = json.loads(text_data or "")
            kind = event["type"]
        except (ValueError, TypeError, KeyError, RecursionError):
            await self._send(events.error(code="bad_event", detail="Events are JSON with a type."))
            return
        if kind not in self.EVENTS:
            kind = None
        if kind == "presence.ping":
            if self.is_member:
                await database_sync_to_async(presence.agent_heartbeat)(
                    tenant_id=self.tenant.pk, user_id=self.user.pk
                )
            if self.viewing:
                await database_sync_to_async(presence.viewing_set)(
                    tenant_id=self.tenant.pk,
                    handoff_id=self.viewing[0],
                    user_id=self.user.pk,
                    viewing=True,
                )
            await self._send(events.pong())
        elif kind == "view" and isinstance(event.get("handoff_id"), int):
            await self._view(event["handoff_id"])
        elif kind == "unview":
            await self._unview()
        else:
            await self._send(
                events.error(code="unknown_type", detail=f"Unknown event {event['type']!r}.")
            )

    async def _view(self, handoff_id: int) -> None:
        await self._unview()
        conversation_id = await database_sync_to_async(selectors.handoff_conversation_id)(
            tenant=self.tenant, handoff_id=handoff_id
        )
        if conversation_id is None:
            await self._send(events.error(code="not_found", detail="No such handoff."))
            return
        self.viewing = (handoff_id, conversation_id)
        await self.channel_layer.group_add(conversation_group(conversation_id), self.channel_name)
        await database_sync_to_async(presence.viewing_set)(
            tenant_id=self.tenant.pk, handoff_id=handoff_id, user_id=self.user.pk, viewing=True
        )
        await self.channel_layer.group_send(
            self.queue_group, queue_events.viewers_changed(handoff_id=handoff_id)
        )

    async def _unview(self) -> None:
        if not self.viewing:
            return
        handoff_id, conversation_id = self.viewing
        self.viewing = None
        await self.channel_layer.group_discard(
            conversation_group(conversation_id), self.channel_name
        )
        await database_sync_to_async(presence.viewing_set)(
            tenant_id=self.tenant.pk, handoff_id=handoff_id, user_id=self.user.pk, viewing=False
        )
        await self.channel_layer.group_send(
            self.queue_group, queue_events.viewers_changed(handoff_id=handoff_id)
        )

    # group events
    async def handoff_changed(self, group_message: dict) -> None:
        await self._send(queue_events.queue_changed(group_message))

    async def conversation_event(self, group_message: dict) -> None:
        """The watched conversation's events: the customer's stream, live, under the same names
        (`answer.*`, `message.created`, `agent.message`, owner, actions, handoff), each with its
        `conversation_id`. Events of a conversation the agent has left are dropped."""
        event = events.for_console(
            group_message, viewing_conversation_id=self.viewing[1] if self.viewing else None
        )
        if event is not None:
            await self._send(event)

    async def _send(self, event: dict) -> None:
        await self.send(text_data=json.dumps(event))
