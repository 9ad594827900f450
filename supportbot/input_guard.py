"""Refuse bad input on API paths before any view sees it, in the one JSON error shape.

Django and DRF already reject most malformed requests, but some reach PostgreSQL or Django's
HTML error pages: NUL characters (PostgreSQL text and jsonb cannot hold them), lone UTF-16
surrogates written as JSON escapes ("\ud800": valid JSON, but no UTF-8 text can hold them, so
saving one failed deep inside as an `internal` error), oversize bodies
(`RequestDataTooBig` is an HTML 400), too many query fields, absurd query strings and
malformed Content-Length headers. Each becomes a 4xx `{"error": {"code", "detail", "field"}}`.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
# A JSON escape of a UTF-16 surrogate: the body is parsed to see whether one stands alone.
_JSON_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# After JSON decoding a pair becomes one code point: a surrogate left in a string is alone.
_SURROGATE = re.compile("[\ud800-\udfff]")
UNSTORABLE_DETAIL = (
    "Text must be valid Unicode: null characters and unpaired surrogates (\\ud800-\\udfff) "
    "are not allowed."
)


def is_storable_text(value: str) -> bool:
    """True when PostgreSQL can store `value` as text (no NUL, no lone surrogate)."""
    return "\x00" not in value and _SURROGATE.search(value) is None


def unstorable_field(value: Any) -> str | None:
    """The dotted name of the first key or string in decoded JSON `value` that PostgreSQL
    cannot store as text (see `is_storable_text`): `text`, `customer.name`; `body` for the
    whole value; None when every string is storable."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        key, item = stack.pop()
        if isinstance(item, str) and not is_storable_text(item):
            return key or "body"
        if isinstance(item, dict):
            for k, v in item.items():
                name = _SURROGATE.sub("?", str(k).replace("\x00", ""))
                label = f"{key}.{name}" if key else name
                if not is_storable_text(str(k)):
                    return label
                stack.append((label, v))
        elif isinstance(item, list):
            stack.extend((key, v) for v in item)
    return None


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
        if _JSON_SURROGATE.search(body):
            return _surrogate_refusal(body)
        return None


def _nul_response(*, field: str, where: str) -> JsonResponse:
    return error_response(
        400, "invalid", f"Null characters are not allowed in {where}.", field=field
    )


def _surrogate_refusal(body: bytes) -> JsonResponse | None:
    """400 `invalid` naming the field when the JSON body holds a lone surrogate (a valid
    pair decodes to one character and passes); a body that is not JSON is left to the view."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    field = unstorable_field(decoded)
    if field is None:
        return None
    return error_response(400, "invalid", UNSTORABLE_DETAIL, field=field)
