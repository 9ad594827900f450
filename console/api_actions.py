"""Console JSON endpoints of the action ledger (session login, members of the tenant).

An agent may propose an action on the customer's behalf (the customer still confirms the
card) and decide approvals — never of an action they proposed.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from actions import selectors, services
from console.access import ConsoleApiView
from conversations import selectors as conversation_selectors
from supportbot.api import ErrorSerializer

ERRORS = {
    403: OpenApiResponse(ErrorSerializer, description="Not allowed (e.g. your own proposal)."),
    404: OpenApiResponse(ErrorSerializer),
    409: OpenApiResponse(ErrorSerializer),
}


class ConsoleActionView(ConsoleApiView):
    """Agents of the tenant act on its ledger; staff without a membership never do."""


class ActionCardOutput(serializers.Serializer):
    id = serializers.IntegerField()
    version = serializers.IntegerField()
    tool = serializers.CharField()
    state = serializers.CharField()
    summary = serializers.CharField()
    text = serializers.CharField()


class ConsoleActionProposeApi(ConsoleActionView):
    class InputSerializer(serializers.Serializer):
        tool = serializers.ChoiceField(choices=["request_refund", "check_order"])
        order_id = serializers.CharField(max_length=20)
        amount = serializers.DecimalField(
            max_digits=10, decimal_places=2, required=False, min_value=0
        )
        reason = serializers.CharField(max_length=500, required=False, default="Agent proposal.")

    @extend_schema(
        operation_id="console_action_propose",
        summary="Propose an action on the customer's behalf (the customer confirms the card)",
        request=InputSerializer,
        responses={201: ActionCardOutput, 400: OpenApiResponse(ErrorSerializer), **ERRORS},
    )
    def post(self, request, conversation_id: int):
        conversation = conversation_selectors.conversation_get(
            tenant=self.tenant, conversation_id=conversation_id
        )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        arguments = {"order_id": data.validated_data["order_id"]}
        if data.validated_data["tool"] == "request_refund":
            arguments["amount"] = float(data.validated_data.get("amount") or 0)
            arguments["reason"] = data.validated_data["reason"]
        action = services.action_propose(
            conversation=conversation,
            customer=conversation_selectors.customer_of(conversation=conversation),
            tool=data.validated_data["tool"],
            arguments=arguments,
            source="agent",
            initiated_by=request.user,
        )
        action = services.action_run(action_id=action.pk)
        if action.state == "awaiting_confirmation":
            services.action_show_card(action=action)
        return Response(selectors.action_card(action), status=201)


class ConsoleActionDecideApi(ConsoleActionView):
    class InputSerializer(serializers.Serializer):
        decision = serializers.ChoiceField(choices=["approve", "deny"])
        reason = serializers.CharField(max_length=2000, required=False, allow_blank=True)
        expected_version = serializers.IntegerField()

    @extend_schema(
        operation_id="console_action_decide",
        summary="Approve or deny an action waiting for approval",
        request=InputSerializer,
        responses={200: ActionCardOutput, 400: OpenApiResponse(ErrorSerializer), **ERRORS},
    )
    def post(self, request, action_id: int):
        selectors.action_get(tenant=self.tenant, action_id=action_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        action = services.action_decide(
            action_id=action_id,
            agent=request.user,
            approve=data.validated_data["decision"] == "approve",
            reason=data.validated_data.get("reason", ""),
            expected_version=data.validated_data["expected_version"],
        )
        return Response(selectors.action_card(action))
