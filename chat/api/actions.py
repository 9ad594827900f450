"""The customer's answer (confirm or cancel) to a proposed action card."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from actions import services as action_services
from chat.api.openapi import IDEMPOTENCY_ERRORS, IDEMPOTENCY_HEADER, INVALID, NOT_FOUND
from chat.api.serializers import ActionCardSerializer
from conversations import selectors
from supportbot.api import AUTH_ERRORS, ErrorSerializer
from supportbot.authentication import request_tenant
from supportbot.idempotency import IdempotentPostMixin


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
        self.idempotency_attach(conversation.pk)
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
