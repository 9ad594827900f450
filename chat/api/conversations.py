"""POST /conversations: start a conversation for a partner's (verified) customer."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.openapi import IDEMPOTENCY_ERRORS, IDEMPOTENCY_HEADER, INVALID
from chat.api.serializers import ConversationSerializer
from conversations import services
from conversations.models import Conversation
from supportbot.api import AUTH_ERRORS
from supportbot.authentication import request_tenant
from supportbot.idempotency import IdempotentPostMixin


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
        # One transaction with the link of the Idempotency-Key: an erasure of this customer
        # sees the new conversation and its saved response together, or neither.
        with transaction.atomic():
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
            self.idempotency_attach(conversation.pk)
        return Response(ConversationSerializer(conversation).data, status=201)
