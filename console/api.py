"""Agent console JSON endpoints (session login, agent or admin of the tenant)."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from actions import selectors as action_selectors
from console.access import ConsoleApiView
from conversations import events
from conversations import selectors as conversation_selectors
from conversations import services as conversation_services
from conversations.models import Message
from handoffs import selectors, services
from handoffs.models import Handoff
from supportbot.api import ErrorSerializer

CONSOLE_ERRORS = {
    status: OpenApiResponse(ErrorSerializer) for status in (400, 401, 403, 404, 409, 429)
}


def console_schema(operation_id: str, summary: str, *, request=None, status: int = 200):
    """Document a console endpoint (session login; bodies are the console's JSON objects)."""
    return extend_schema(
        operation_id=operation_id,
        summary=summary,
        request=request,
        responses={status: OpenApiTypes.OBJECT, **CONSOLE_ERRORS},
        tags=["console"],
    )


class ConsoleView(ConsoleApiView):
    """Console endpoint of the queue: agents of the tenant act; staff without a membership
    read (GET) but never act (console/access.py)."""


def queue_row_json(row: selectors.QueueRow) -> dict:
    """A queue row as the console's JSON (static/console/console.js reads these keys)."""
    return {**asdict(row), "created_at": row.created_at.isoformat()}


def queue_snapshot_json(snapshot: selectors.QueueSnapshot) -> dict:
    return {
        "handoffs": [queue_row_json(row) for row in snapshot.handoffs],
        "agents_online": [{"id": a.id, "name": a.name} for a in snapshot.agents_online],
        "active": [
            {
                "conversation_id": c.conversation_id,
                "customer": c.customer,
                "last_message_at": c.last_message_at.isoformat() if c.last_message_at else None,
            }
            for c in snapshot.active
        ],
    }


class QueueApi(ConsoleView):
    @console_schema("console_queue", "The live handoff queue of the tenant", status=200)
    def get(self, request):
        return Response(queue_snapshot_json(selectors.handoff_queue_snapshot(tenant=self.tenant)))


class HandoffDetailApi(ConsoleView):
    @console_schema(
        "console_handoff_retrieve", "A handoff with its transcript, summary and sources", status=200
    )
    def get(self, request, handoff_id: int):
        handoff = selectors.handoff_get(tenant=self.tenant, handoff_id=handoff_id)
        messages = conversation_selectors.message_list(
            tenant=self.tenant, conversation_id=handoff.conversation_id
        ).exclude(state=Message.State.STREAMING)
        notes = selectors.notes_for(tenant=self.tenant, conversation_id=handoff.conversation_id)
        row = selectors.handoff_queue_row(tenant=self.tenant, handoff_id=handoff.pk)
        return Response(
            {
                "handoff": queue_row_json(row),
                "summary": handoff.summary,
                "summary_source": handoff.summary_source,
                "owner": handoff.conversation.owner,
                "messages": [
                    {**conversation_services.message_as_event(m), "meta": _public_meta(m)}
                    for m in messages
                ],
                "notes": [
                    {
                        "id": n.pk,
                        "author": n.author.get_username() if n.author else "",
                        "text": n.text,
                        "created_at": n.created_at.isoformat(),
                    }
                    for n in notes
                ],
                "actions": [
                    {
                        "id": a.pk,
                        "tool": a.tool,
                        "state": a.state,
                        "arguments": a.arguments,
                        "url": f"/console/actions/{a.pk}/?tenant={self.tenant.slug}",
                    }
                    for a in action_selectors.actions_for_conversation(
                        tenant=self.tenant, conversation_id=handoff.conversation_id
                    )
                ],
                "canned": [
                    {"title": c.title, "text": c.text}
                    for c in selectors.canned_responses(tenant=self.tenant)
                ],
                "me": request.user.pk,
            }
        )


def _public_meta(message: Message) -> dict:
    meta = message.meta or {}
    keep = (
        "handoff_id",
        "reason",
        "fallback",
        "strength",
        "cached",
        "action_id",
        "dropped_sentences",
    )
    return {k: meta[k] for k in keep if k in meta}


class VersionSerializer(serializers.Serializer):
    expected_version = serializers.IntegerField(min_value=1)


class ClaimApi(ConsoleView):
    @console_schema(
        "console_handoff_claim",
        "Claim the handoff (one owner; version must match)",
        request=VersionSerializer,
        status=200,
    )
    def post(self, request, handoff_id: int):
        data = VersionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        handoff = services.handoff_claim(
            tenant_id=self.tenant.pk,
            handoff_id=handoff_id,
            agent=request.user,
            expected_version=data.validated_data["expected_version"],
        )
        return Response({"id": handoff.pk, "state": handoff.state, "version": handoff.version})


class CloseApi(ConsoleView):
    class InputSerializer(VersionSerializer):
        outcome = serializers.ChoiceField(choices=["resolved", "returned_to_bot"])

    @console_schema(
        "console_handoff_close",
        "Resolve the handoff or give it back to the bot",
        request=InputSerializer,
        status=200,
    )
    def post(self, request, handoff_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        handoff = services.handoff_close(
            tenant_id=self.tenant.pk,
            handoff_id=handoff_id,
            agent=request.user,
            expected_version=data.validated_data["expected_version"],
            outcome=data.validated_data["outcome"],
        )
        return Response({"id": handoff.pk, "state": handoff.state, "version": handoff.version})


class ReplyApi(ConsoleView):
    class InputSerializer(serializers.Serializer):
        text = serializers.CharField(max_length=4000)

    @console_schema(
        "console_handoff_reply",
        "Reply to the customer as the handoff's owner",
        request=InputSerializer,
        status=201,
    )
    def post(self, request, handoff_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        message = services.agent_reply_post(
            tenant_id=self.tenant.pk,
            handoff_id=handoff_id,
            agent=request.user,
            text=data.validated_data["text"],
        )
        return Response(conversation_services.message_as_event(message), status=201)


class NoteApi(ConsoleView):
    class InputSerializer(serializers.Serializer):
        text = serializers.CharField(max_length=4000)

    @console_schema(
        "console_notes_create",
        "Add an internal note (never shown to the customer)",
        request=InputSerializer,
        status=201,
    )
    def post(self, request, conversation_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        note = services.note_add(
            tenant_id=self.tenant.pk,
            conversation_id=conversation_id,
            agent=request.user,
            text=data.validated_data["text"],
        )
        return Response({"id": note.pk, "text": note.text}, status=201)


class TakeoverApi(ConsoleView):
    """An agent takes a bot conversation over: opens (or reuses) a handoff and claims it."""

    @console_schema(
        "console_takeover",
        "Take a bot conversation over (open or reuse a handoff and claim it)",
        status=200,
    )
    def post(self, request, conversation_id: int):
        conversation = conversation_selectors.conversation_get(
            tenant=self.tenant, conversation_id=conversation_id
        )
        handoff, _, position = services.handoff_open_with_notice(
            conversation=conversation,
            reason=Handoff.Reason.AGENT_TAKEOVER,
            detail=f"taken over by {request.user.get_username()}",
        )
        events.publish_on_commit(
            conversation.pk, events.handoff_started(handoff=handoff, position=position)
        )
        handoff = services.handoff_claim(
            tenant_id=self.tenant.pk,
            handoff_id=handoff.pk,
            agent=request.user,
            expected_version=handoff.version,
        )
        return Response({"id": handoff.pk, "state": handoff.state, "version": handoff.version})
