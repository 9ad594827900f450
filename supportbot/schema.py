"""OpenAPI generation (drf-spectacular): the partner API key scheme and component names."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer sb_<prefix>_<secret>` for `ApiKeyAuthentication`."""

    target_class = "supportbot.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "sb_<prefix>_<secret>"}


class AutoSchema(SpectacularAutoSchema):
    """Name a view's nested serializers after the view (`ConversationMessagesApi.InputSerializer`
    → `ConversationMessagesInput`, `SearchApi.OutputSerializer.PassageSerializer` →
    `SearchPassage`): every view has its own `InputSerializer`, and identical component names
    would make the schema describe one view's body with another's."""

    def get_serializer_name(self, serializer, direction) -> str:
        parts = type(serializer).__qualname__.split(".")
        if len(parts) > 1:
            return parts[0].removesuffix("Api") + parts[-1]
        return super().get_serializer_name(serializer, direction)
