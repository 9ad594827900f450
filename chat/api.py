"""Partner REST API for conversations (API key). One view per operation."""

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
from actions import services as action_services
from chat import limits, orchestrator
from conversations import events, selectors, services
from conversations.models import Conversation
from handoffs import services as handoff_services
from supportbot.api import AUTH_ERRORS, ErrorSerializer
from supportbot.authentication import request_actor, request_tenant
from supportbot.idempotency import IdempotentPostMixin

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Retry safely: the same key with the same body returns the saved response "
        "(`Idempotent-Replayed: true`); with a different body 422; while the first request "
        "runs 409. Kept 24 hours."
    ),
)
IDEMPOTENCY_ERRORS = {
    422: OpenApiResponse(ErrorSerializer, description="Idempotency-Key reused with another body.")
}

NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="No such row for this tenant.")}
INVALID = {400: OpenApiResponse(ErrorSerializer, description="A field is invalid (named).")}


class CitationSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    document_id = serializers.IntegerField()
    document_version = serializers.IntegerField()
    title = serializers.CharField()
    heading = serializers.CharField()
    quote = serializers.CharField()
    url = serializers.CharField()
    chunk_id = serializers.IntegerField()
    span = serializers.ListField(child=serializers.IntegerField())


class MessageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    conversation_id = serializers.IntegerField()
    role = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    state = serializers.CharField()
    client_message_id = serializers.CharField(allow_null=True)
    reply_to = serializers.IntegerField(allow_null=True, source="reply_to_id")
    citations = CitationSerializer(many=True)
    created_at = serializers.DateTimeField()


class ConversationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    customer = serializers.SerializerMethodField()
    channel = serializers.CharField()
    owner = serializers.CharField()
    state = serializers.CharField()
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    def get_customer(self, obj) -> dict:
        return {
            "external_id": obj.customer.external_id,
            "name": obj.customer.name,
            "verified": obj.customer.verified,
        }


class ActionCardSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    tool = serializers.CharField()
    state = serializers.CharField()
    conversation_id = serializers.IntegerField()
    order_id = serializers.CharField(allow_null=True)
    amount = serializers.CharField(allow_null=True)
    currency = serializers.CharField(allow_null=True)
    needs_confirmation = serializers.BooleanField()
    expires_at = serializers.DateTimeField(allow_null=True)
    summary = serializers.CharField()
    next_step = serializers.CharField(allow_blank=True)
    text = serializers.CharField()
    provider_reference = serializers.CharField(allow_null=True)


class ConversationCreateApi(IdempotentPostMixin, APIView):
    class InputSerializer(serializers.Serializer):
        class CustomerSerializer(serializers.Serializer):
            external_id = serializers.CharField(max_length=200)
            name = serializers.CharField(max_length=200, required=False, allow_blank=True)
            email = serializers.EmailField(required=False, allow_blank=True)

        customer = CustomerSerializer()

    @extend_schema(
        operation_id="conversations_create",
        parameters=[IDEMPOTENCY_HEADER],
        request=InputSerializer,
        responses={201: ConversationSerializer, **INVALID, **AUTH_ERRORS, **IDEMPOTENCY_ERRORS},
    )
    def post(self, request):
        tenant = request_tenant(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        customer_data = data.validated_data["customer"]
        # The partner's key vouches for the customer (server to server): verified.
        customer = services.customer_get_or_create_verified(
            tenant=tenant,
            external_id=customer_data["external_id"],
            name=customer_data.get("name", ""),
            email=customer_data.get("email", ""),
        )
        conversation = services.conversation_start(
            tenant=tenant, customer=customer, channel=Conversation.Channel.API
        )
        return Response(ConversationSerializer(conversation).data, status=201)


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


class ActionAnswerApi(IdempotentPostMixin, APIView):
    """The customer's answer to a proposal card (the partner's key vouches for the customer)."""

    confirm = True

    class InputSerializer(serializers.Serializer):
        version = serializers.IntegerField(
            min_value=1, help_text="The card's `version`: only that exact proposal is answered."
        )

    def post(self, request, conversation_id: int, action_id: int):
        tenant = request_tenant(request)
        conversation = selectors.conversation_get(tenant=tenant, conversation_id=conversation_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        card = action_services.action_answer(
            conversation=conversation,
            action_id=action_id,
            version=data.validated_data["version"],
            confirm=self.confirm,
            via="api",
        )
        return Response(ActionCardSerializer(card).data)


ANSWER_RESPONSES = {
    200: ActionCardSerializer,
    **INVALID,
    **NOT_FOUND,
    **AUTH_ERRORS,
    **IDEMPOTENCY_ERRORS,
    409: OpenApiResponse(
        ErrorSerializer,
        description="Expired (`proposal_expired`), already answered (`invalid_state`) or a "
        "stale version (`stale_version`, with `current_version`).",
    ),
}


class ActionConfirmApi(ActionAnswerApi):
    confirm = True

    @extend_schema(
        operation_id="conversation_action_confirm",
        summary="Confirm a proposed action (executes within policy, or waits for approval)",
        parameters=[IDEMPOTENCY_HEADER],
        request=ActionAnswerApi.InputSerializer,
        responses=ANSWER_RESPONSES,
    )
    def post(self, request, conversation_id: int, action_id: int):
        return super().post(request, conversation_id, action_id)


class ActionCancelApi(ActionAnswerApi):
    confirm = False

    @extend_schema(
        operation_id="conversation_action_cancel",
        summary="Cancel a proposed action (nothing executes)",
        parameters=[IDEMPOTENCY_HEADER],
        request=ActionAnswerApi.InputSerializer,
        responses=ANSWER_RESPONSES,
    )
    def post(self, request, conversation_id: int, action_id: int):
        return super().post(request, conversation_id, action_id)


class HandoffCreateApi(IdempotentPostMixin, APIView):
    class InputSerializer(serializers.Serializer):
        detail = serializers.CharField(max_length=300, required=False, allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        state = serializers.CharField()
        reason = serializers.CharField()
        created = serializers.BooleanField()

    @extend_schema(
        operation_id="conversation_handoffs_create",
        summary="Hand the conversation to a person (idempotent: returns the open handoff)",
        parameters=[IDEMPOTENCY_HEADER],
        request=InputSerializer,
        responses={201: OutputSerializer, 200: OutputSerializer, **NOT_FOUND, **AUTH_ERRORS},
    )
    def post(self, request, conversation_id: int):
        tenant = request_tenant(request)
        conversation = selectors.conversation_get(tenant=tenant, conversation_id=conversation_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        limits.handoff_enforce(
            customer_id=conversation.customer_id, conversation_id=conversation.pk
        )
        handoff, created, position = handoff_services.handoff_open_with_notice(
            conversation=conversation,
            reason="partner_request",
            detail=data.validated_data.get("detail", ""),
            actor=request_actor(request),
        )
        events.publish_on_commit(
            conversation.pk, events.handoff_started(handoff=handoff, position=position)
        )
        body = {
            "id": handoff.pk,
            "state": handoff.state,
            "reason": handoff.reason,
            "created": created,
        }
        return Response(self.OutputSerializer(body).data, status=201 if created else 200)


class FeedbackCreateApi(IdempotentPostMixin, APIView):
    class InputSerializer(serializers.Serializer):
        rating = serializers.ChoiceField(choices=["helpful", "not_helpful"])
        comment = serializers.CharField(max_length=2000, required=False, allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        message_id = serializers.IntegerField()
        rating = serializers.CharField()
        comment = serializers.CharField()

    @extend_schema(
        operation_id="message_feedback_create",
        parameters=[IDEMPOTENCY_HEADER],
        request=InputSerializer,
        responses={200: OutputSerializer, **INVALID, **NOT_FOUND, **AUTH_ERRORS},
    )
    def post(self, request, message_id: int):
        tenant = request_tenant(request)
        message = selectors.message_get(tenant=tenant, message_id=message_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        feedback = services.feedback_set(
            message=message,
            rating=data.validated_data["rating"],
            comment=data.validated_data.get("comment", ""),
        )
        return Response(
            self.OutputSerializer(
                {"message_id": message.pk, "rating": feedback.rating, "comment": feedback.comment}
            ).data
        )
