"""The tenant's widget secret in the console: read and rotate, tenant admins only."""

from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from console.access import ADMIN, ConsoleApiView
from supportbot import services
from supportbot.api import AUTH_ERRORS, ErrorSerializer
from supportbot.services import WIDGET_SECRET_MAX_OVERLAP_S, Actor


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


@method_decorator(never_cache, name="dispatch")  # the secret must not stay in any cache
class TenantAdminView(ConsoleApiView):
    """For the admins of one tenant; staff never read the secret (a credential)."""

    console_role = ADMIN
    console_staff_read = False


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
