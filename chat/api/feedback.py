"""POST /messages/{id}/feedback: the customer's rating of a reply."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.openapi import IDEMPOTENCY_ERRORS, IDEMPOTENCY_HEADER, INVALID, NOT_FOUND
from conversations import selectors, services
from supportbot.api import AUTH_ERRORS
from supportbot.authentication import request_tenant
from supportbot.idempotency import IdempotentPostMixin


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
        responses={
            200: OutputSerializer,
            **INVALID,
            **NOT_FOUND,
            **AUTH_ERRORS,
            **IDEMPOTENCY_ERRORS,
        },
    )
    def post(self, request, message_id: int):
        tenant = request_tenant(request)
        message = selectors.message_get(tenant=tenant, message_id=message_id)
        self.idempotency_attach(message.conversation_id)
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
