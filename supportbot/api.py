"""API of the tenancy core: who am I, the tenant's audit trail (partner). The console's widget
secret endpoints live in console/api_widget.py."""

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from supportbot import selectors
from supportbot.authentication import request_tenant
from supportbot.pagination import CreatedCursorPagination

ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "error": inline_serializer(
            name="ErrorBody",
            fields={
                "code": serializers.CharField(),
                "detail": serializers.CharField(),
                "field": serializers.CharField(required=False),
            },
        )
    },
)
AUTH_ERRORS = {
    401: OpenApiResponse(ErrorSerializer, description="Missing, malformed or revoked key."),
    403: OpenApiResponse(ErrorSerializer, description="Not allowed for this tenant."),
    429: OpenApiResponse(
        ErrorSerializer, description="Over a rate limit (`Retry-After` says when to retry)."
    ),
}


BAD_CURSOR = {404: OpenApiResponse(ErrorSerializer, description="Unknown or malformed cursor.")}


class TenantApi(APIView):
    class OutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        name = serializers.CharField()

    @extend_schema(
        operation_id="tenant_retrieve",
        summary="The calling key's tenant",
        responses={200: OutputSerializer, **AUTH_ERRORS},
    )
    def get(self, request):
        tenant = request_tenant(request)
        return Response(self.OutputSerializer(tenant).data)


class AuditEventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    actor_type = serializers.CharField()
    actor_label = serializers.CharField()
    action = serializers.CharField()
    target_type = serializers.CharField()
    target_id = serializers.CharField()
    data = serializers.JSONField()
    created_at = serializers.DateTimeField()


class AuditEventListApi(APIView):
    pagination_class = CreatedCursorPagination  # the schema documents the page envelope

    @extend_schema(
        operation_id="audit_events_list",
        summary="The tenant's audit trail, newest first",
        parameters=[],
        responses={200: AuditEventOutputSerializer(many=True), **BAD_CURSOR, **AUTH_ERRORS},
    )
    def get(self, request):
        tenant = request_tenant(request)
        events = selectors.audit_event_list(tenant=tenant, action=request.GET.get("action"))
        paginator = CreatedCursorPagination()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response(AuditEventOutputSerializer(page, many=True).data)


class AuditEventDetailApi(APIView):
    @extend_schema(
        operation_id="audit_events_retrieve",
        responses={
            200: AuditEventOutputSerializer,
            404: OpenApiResponse(ErrorSerializer),
            **AUTH_ERRORS,
        },
    )
    def get(self, request, event_id: int):
        tenant = request_tenant(request)
        event = selectors.audit_event_get(tenant=tenant, event_id=event_id)
        return Response(AuditEventOutputSerializer(event).data)
