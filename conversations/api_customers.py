"""Partner REST API for one customer's data: erase it, export it (access requests)."""

from __future__ import annotations

from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import customer_data
from supportbot.api import AUTH_ERRORS, ErrorSerializer
from supportbot.authentication import request_actor, request_tenant

NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="This tenant has no such customer.")}
EXTERNAL_ID = OpenApiParameter(
    "external_id",
    str,
    OpenApiParameter.PATH,
    description="The id the customer was created with, percent-encoded (`a/b` as `a%2Fb`); "
    "any id the API accepted works, `/`, spaces and unicode included.",
)


def _erase(request, external_id: str) -> Response:
    result = customer_data.customer_erase(
        tenant=request_tenant(request), external_id=external_id, actor=request_actor(request)
    )
    return Response(CustomerEraseApi.OutputSerializer(result).data)


class CustomerEraseApi(APIView):
    class OutputSerializer(serializers.Serializer):
        external_id = serializers.CharField()
        already_erased = serializers.BooleanField()
        erased = serializers.DictField(
            child=serializers.IntegerField(),
            help_text="Rows erased by kind: customers, conversations, messages, feedback, "
            "handoffs, notes, actions, outcomes, cached_answers.",
        )

    @extend_schema(
        operation_id="customers_erase",
        summary="Erase a customer and everything stored about them",
        description="Deletes the customer's conversations, messages, feedback, summaries, "
        "handoffs with contact emails, internal notes, action requests and cached answers "
        "derived from their conversations, in one transaction. The audit trail records the "
        "erasure with the counts (never content). Idempotent: repeating it returns "
        "`already_erased: true`.",
        parameters=[EXTERNAL_ID],
        responses={200: OutputSerializer, **NOT_FOUND, **AUTH_ERRORS},
    )
    def delete(self, request, external_id: str):
        return _erase(request, external_id)


@method_decorator(never_cache, name="dispatch")  # personal data: no cache may keep a copy
class CustomerExportApi(APIView):
    class OutputSerializer(serializers.Serializer):
        customer = serializers.DictField()
        conversations = serializers.ListField(
            child=serializers.DictField(),
            help_text="Each with its messages, feedback, summary, handoffs (with contact "
            "email), notes and actions (arguments and results), decrypted.",
        )
        exported_at = serializers.DateTimeField()

    @extend_schema(
        operation_id="customers_export",
        summary="Everything stored about a customer, as JSON (access requests)",
        description="The export is recorded in the audit trail (counts only).",
        parameters=[EXTERNAL_ID],
        responses={200: OutputSerializer, **NOT_FOUND, **AUTH_ERRORS},
    )
    def get(self, request, external_id: str):
        data = customer_data.customer_export(
            tenant=request_tenant(request), external_id=external_id, actor=request_actor(request)
        )
        return Response(data)

    @extend_schema(exclude=True)  # documented as DELETE /customers/{external_id}
    def delete(self, request, external_id: str):
        """Erase the customer whose id ends in `/export` (this route matched their path)."""
        return _erase(request, f"{external_id}/export")
