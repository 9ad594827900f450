"""OpenAPI fragments the partner chat endpoints share (headers, error responses)."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from supportbot.api import ErrorSerializer

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Retry safely: keys belong to the API key that sends them. The same key with the same "
        "request (path, query string, body) returns the saved response "
        "(`Idempotent-Replayed: true`); with a different request 422; while the first request "
        "runs (a streamed reply: until its stream ends) 409. Kept 24 hours."
    ),
)
IDEMPOTENCY_ERRORS = {
    422: OpenApiResponse(
        ErrorSerializer, description="Idempotency-Key reused with another request."
    )
}

NOT_FOUND = {404: OpenApiResponse(ErrorSerializer, description="No such row for this tenant.")}
INVALID = {400: OpenApiResponse(ErrorSerializer, description="A field is invalid (named).")}
