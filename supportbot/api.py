"""API of the tenancy core: who am I, the tenant's audit trail (partner), the widget secret
(console, tenant admins)."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.response import Response
from rest_framework.views import APIView

from supportbot import selectors, services
from supportbot.authentication import request_tenant
from supportbot.errors import PermissionDenied
from supportbot.models import Membership
from supportbot.pagination import CreatedCursorPagination
from supportbot.services import WIDGET_SECRET_MAX_OVERLAP_S, Actor

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


# --------------------------------------------------------------------------- console: widget


class WidgetSecretOutputSerializer(serializers.Serializer):
    widget_secret = serializers.CharField()
    previous_valid_until = serializers.DateTimeField(allow_null=True)
    identity_token_max_lifetime_s = serializers.IntegerField()


def _widget_secret_body(tenant) -> dict:
    until = tenant.widget_secret_previous_until
    in_force = bool(tenant.widget_secret_previous) and until is not None and until > timezone.now()
    return {
        "widget_secret": tenant.widget_secret,
        "previous_valid_until": until if in_force else None,
        "identity_token_max_lifetime_s": tenant.identity_token_max_lifetime_s,
    }


class TenantAdminView(APIView):
    """Console endpoint for the admins of one tenant (session login); nobody else, not staff."""

    authentication_classes = [SessionAuthentication]

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.tenant = request_tenant(request)
        membership = selectors.membership_get(user=request.user, tenant=self.tenant)
        if membership is None or membership.role != Membership.Role.ADMIN:
            raise PermissionDenied("Only the tenant's admins see and rotate the widget secret.")


class WidgetSecretApi(TenantAdminView):
    @extend_schema(
        operation_id="console_widget_secret_get",
        summary="The tenant's widget secret (signs identity tokens); tenant admins only",
        responses={200: WidgetSecretOutputSerializer, **AUTH_ERRORS},
    )
    def get(self, request):
        return Response(WidgetSecretOutputSerializer(_widget_secret_body(self.tenant)).data)


class WidgetSecretRotateApi(TenantAdminView):
    class InputSerializer(serializers.Serializer):
        overlap_seconds = serializers.IntegerField(
            min_value=0,
            max_value=WIDGET_SECRET_MAX_OVERLAP_S,
            default=24 * 3600,
            help_text="How long the old secret still verifies identity tokens.",
        )

    @extend_schema(
        operation_id="console_widget_secret_rotate",
        summary="Make a new widget secret; the old one verifies until the overlap ends",
        request=InputSerializer,
        responses={
            200: WidgetSecretOutputSerializer,
            400: OpenApiResponse(ErrorSerializer),
            **AUTH_ERRORS,
        },
    )
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        tenant = services.tenant_widget_secret_rotate(
            tenant=self.tenant,
            actor=Actor.for_user(request.user),
            overlap_seconds=data.validated_data["overlap_seconds"],
        )
        return Response(WidgetSecretOutputSerializer(_widget_secret_body(tenant)).data)
