"""Conversation messages: send (JSON or streamed as server-sent events) and page history."""

from __future__ import annotations

import asyncio
import json

from asgiref.sync import async_to_sync
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.pagination import CursorPagination
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from actions import selectors as action_selectors
from chat import limits, orchestrator
from chat.api.openapi import IDEMPOTENCY_ERRORS, IDEMPOTENCY_HEADER, INVALID, NOT_FOUND
from chat.api.serializers import ActionCardSerializer, MessageSerializer
from conversations import events, selectors, services
from supportbot.api import AUTH_ERRORS, ErrorSerializer
from supportbot.authentication import request_tenant
from supportbot.idempotency import IdempotentPostMixin


class MessagePagination(CursorPagination):
    ordering = ("id",)
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200


class EventStreamRenderer(BaseRenderer):
    """Lets `Accept: text/event-stream` through content negotiation (the view streams)."""

    media_type = "text/event-stream"
    format = "sse"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return json.dumps(data).encode()


class ConversationMessagesApi(IdempotentPostMixin, APIView):
    """POST sends a customer message; GET pages through the history (cursor)."""

    pagination_class = MessagePagination  # the schema documents the page envelope
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, EventStreamRenderer]

    class InputSerializer(serializers.Serializer):
        client_message_id = serializers.CharField(max_length=100)
        text = serializers.CharField(max_length=services.MAX_MESSAGE_CHARS)

    class OutputSerializer(serializers.Serializer):
        message = MessageSerializer()
        reply = MessageSerializer(allow_null=True)
        duplicate = serializers.BooleanField()
        action = ActionCardSerializer(allow_null=True)

    @extend_schema(
        operation_id="conversation_messages_create",
        summary="Send a customer message and get the bot's reply",
        description=(
            "Idempotent on `client_message_id`: a repeat returns the saved message and reply "
            "(200) and never produces a second answer. A handoff or refusal says so in "
            "`reply.kind`/`reply.state` and carries no citations. With `Accept: "
            "text/event-stream` the reply streams as server-sent events (the same event types "
            "as the WebSocket protocol). A refund is never executed from a message: the reply "
            "carries an `action` card (`needs_confirmation: true`) that the customer confirms "
            "with `POST …/actions/{id}/confirm`."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            200: OutputSerializer,
            **INVALID,
            **NOT_FOUND,
            **AUTH_ERRORS,
            **IDEMPOTENCY_ERRORS,
            409: OpenApiResponse(ErrorSerializer),
        },
    )
    def post(self, request, conversation_id: int):
        tenant = request_tenant(request)
        conversation = selectors.conversation_get(tenant=tenant, conversation_id=conversation_id)
        self.idempotency_attach(conversation.pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        limits.message_enforce(
            tenant_id=tenant.pk,
            customer_id=conversation.customer_id,
            conversation_id=conversation.pk,
            ip=None,  # a partner's server: its key's request rate covers it
            verified=True,
        )
        kwargs = {
            "conversation": conversation,
            "client_message_id": data.validated_data["client_message_id"],
            "text": data.validated_data["text"],
        }
        if "text/event-stream" in request.headers.get("Accept", ""):
            return _sse_response(kwargs)
        outcome = async_to_sync(orchestrator.handle_customer_message)(**kwargs)
        card = outcome.action
        if card is None and outcome.reply is not None and outcome.reply.meta.get("action_id"):
            card = action_selectors.action_card_get(
                tenant=tenant, action_id=outcome.reply.meta["action_id"]
            )
        body = self.OutputSerializer(
            {
                "message": outcome.customer_message,
                "reply": outcome.reply,
                "duplicate": outcome.duplicate,
                "action": card,
            }
        ).data
        return Response(body, status=200 if outcome.duplicate else 201)

    @extend_schema(
        operation_id="conversation_messages_list",
        parameters=[
            OpenApiParameter("cursor", str, description="Opaque cursor from `next`."),
            OpenApiParameter("limit", int, description="Page size (max 200)."),
        ],
        responses={200: MessageSerializer(many=True), **NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, conversation_id: int):
        tenant = request_tenant(request)
        paginator = MessagePagination()
        page = selectors.message_history_page(
            tenant=tenant,
            conversation_id=conversation_id,
            paginate=lambda messages: paginator.paginate_queryset(messages, request, view=self),
        )
        return paginator.get_paginated_response(MessageSerializer(page, many=True).data)


def _sse_response(kwargs: dict) -> StreamingHttpResponse:
    """Stream orchestrator events as SSE; the answer is saved even if the client goes away."""

    async def stream():
        queue: asyncio.Queue = asyncio.Queue()

        async def emit(event: dict) -> None:
            await queue.put(event)

        async def run() -> None:
            try:
                await orchestrator.handle_customer_message(**kwargs, emit=emit)
            except Exception as exc:  # noqa: BLE001 - reported to the client as an event
                code = getattr(exc, "code", "internal")
                detail = getattr(exc, "detail", "We could not answer that; please try again.")
                await queue.put(events.error(code=code, detail=detail))
            finally:
                await queue.put(None)

        task = asyncio.create_task(run())
        try:
            while True:
                event = await queue.get()
                if event is None:
                    break
                yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
        finally:
            if not task.done():
                await asyncio.shield(task)

    response = StreamingHttpResponse(stream(), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
