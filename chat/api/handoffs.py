"""POST /conversations/{id}/handoffs: the partner hands the conversation to a person."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import limits
from chat.api.openapi import IDEMPOTENCY_ERRORS, IDEMPOTENCY_HEADER, INVALID, NOT_FOUND
from conversations import events, selectors
from handoffs import services as handoff_services
from supportbot.api import AUTH_ERRORS
from supportbot.authentication import request_actor, request_tenant
from supportbot.idempotency import IdempotentPostMixin


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
        responses={
            201: OutputSerializer,
            200: OutputSerializer,
            **INVALID,
            **NOT_FOUND,
            **AUTH_ERRORS,
            **IDEMPOTENCY_ERRORS,
        },
    )
    def post(self, request, conversation_id: int):
        tenant = request_tenant(request)
        conversation = selectors.conversation_get(tenant=tenant, conversation_id=conversation_id)
        self.idempotency_attach(conversation.pk)
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
