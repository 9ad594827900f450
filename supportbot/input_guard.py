"""Refuse bad input on API paths before any view sees it, in the one JSON error shape.

Django and DRF already reject most malformed requests, but some reach PostgreSQL or Django's
HTML error pages: NUL characters (PostgreSQL text and jsonb cannot hold them), oversize bodies
(`RequestDataTooBig` is an HTML 400), too many query fields, absurd query strings and
malformed Content-Length headers. Each becomes a 4xx `{"error": {"code", "detail", "field"}}`.
"""

from __future__ import annotations

import re

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIX = "/api/"
CONSOLE_API_PREFIX = "/console/api/"
MAX_QUERY_STRING = 16 * 1024
# Room for the multipart envelope and the form fields around an upload of the maximum size.
MULTIPART_OVERHEAD = 256 * 1024
# A JSON \u0000 escape (an odd number of backslashes before "u0000" is an escape, not text).
_JSON_NUL = re.compile(rb"(?:^|[^\\])(?:\\\\)*\\u0000")


def is_api_request(request: HttpRequest) -> bool:
    """The partner API and the console's JSON API answer errors in the JSON shape."""
    return request.path_info.startswith((API_PREFIX, CONSOLE_API_PREFIX))


def error_response(
    status: int, code: str, detail: str, *, field: str | None = None
) -> JsonResponse:
    """The API's error body, for responses made outside DRF."""
    body: dict = {"code": code, "detail": detail}
    if field:
        body["field"] = field
    return JsonResponse(
        {"error": body}, status=status, json_dumps_params={"separators": (",", ":")}
    )


def too_large_response() -> JsonResponse:
    return error_response(
        413,
        "request_too_large",
        f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; "
        "upload files as multipart/form-data.",
    )


class BadInputMiddleware:
    """Check an API request's headers, query string and body (see the module docstring).

    Sync and async capable, so async views (SSE) are not pushed through a thread; the checks
    are CPU-only and the body is already buffered by the server."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):
        if self.is_async:
            return self.__acall__(request)
        refused = self._refusal(request) if is_api_request(request) else None
        return refused if refused is not None else self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        refused = self._refusal(request) if is_api_request(request) else None
        return refused if refused is not None else await self.get_response(request)

    def _refusal(self, request: HttpRequest) -> JsonResponse | None:
        for name, value in request.META.items():
            if name == "HTTP_AUTHORIZATION":
                continue  # a malformed credential is a 401 (supportbot.authentication)
            if name.startswith("HTTP_") and isinstance(value, str) and "\x00" in value:
                header = name[5:].replace("_", "-").title()
                return _nul_response(field=header, where=f"the {header} header")
        refused = self._query_refusal(request)
        if refused is not None:
            return refused
        return self._body_refusal(request)

    def _query_refusal(self, request: HttpRequest) -> JsonResponse | None:
        if len(request.META.get("QUERY_STRING", "")) > MAX_QUERY_STRING:
            return error_response(
                414, "uri_too_long", f"The query string is longer than {MAX_QUERY_STRING} bytes."
            )
        try:
            params = list(request.GET.lists())
        except SuspiciousOperation as exc:  # TooManyFieldsSent
            return error_response(400, "invalid", str(exc))
        for key, values in params:
            if "\x00" in key or any("\x00" in value for value in values):
                return _nul_response(field=key.replace("\x00", ""), where="query parameters")
        return None

    def _body_refusal(self, request: HttpRequest) -> JsonResponse | None:
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw_length)
        except ValueError:
            length = -1
        if length < 0:
            return error_response(
                400, "invalid", "The Content-Length header is not a byte count.", field="body"
            )
        content_type = request.META.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
        if content_type == "multipart/form-data":
            limit = settings.KNOWLEDGE_MAX_UPLOAD_BYTES + MULTIPART_OVERHEAD
            if length > limit:
                return error_response(
                    413,
                    "request_too_large",
                    f"The request body is larger than {limit} bytes; the file limit is "
                    f"{settings.KNOWLEDGE_MAX_UPLOAD_BYTES} bytes.",
                    field="file",
                )
            return None
        if length == 0:
            return None
        try:
            body = request.body
        except RequestDataTooBig:
            return too_large_response()
        if b"\x00" in body or _JSON_NUL.search(body):
            return _nul_response(field="body", where="the request body")
        return None


def _nul_response(*, field: str, where: str) -> JsonResponse:
    return error_response(
        400, "invalid", f"Null characters are not allowed in {where}.", field=field
    )
