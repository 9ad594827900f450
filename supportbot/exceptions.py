"""Map every API error to one JSON shape: {"error": {"code", "detail", "field"?, "fields"?}}.

`api_exception_handler` covers DRF views; the `handler*` views (installed in
config/urls.py) cover what happens outside them on API paths — unknown URLs, non-integer
ids, Django's SuspiciousOperation family, uncaught errors — and keep Django's HTML pages for
the rest of the site.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404
from django.views import defaults
from rest_framework import exceptions as drf_exceptions
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler

from supportbot.errors import ApplicationError
from supportbot.input_guard import error_response, is_api_request, too_large_response


def _first_message(detail) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        return f"{key}: {_first_message(value)}"
    return str(detail)


def _flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
    elif isinstance(detail, list) and detail and isinstance(detail[0], dict | list):
        for i, value in enumerate(detail):
            out.update(_flatten(value, f"{prefix}[{i}]"))
    else:
        items = detail if isinstance(detail, list) else [detail]
        out[prefix or "non_field_errors"] = [str(i) for i in items]
    return out


def api_exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):
        return too_large_response()
    if isinstance(exc, SuspiciousOperation):
        return error_response(400, "invalid", str(exc) or "The request is malformed.")
    if isinstance(exc, ApplicationError):
        response = Response({"error": exc.as_dict()}, status=exc.status)
        retry_after = exc.extra.get("retry_after")
        if retry_after is not None:
            response["Retry-After"] = str(int(retry_after))
        return response
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exceptions.PermissionDenied()

    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        fields = _flatten(exc.detail)
        field = next(iter(fields))
        body = {
            "code": "invalid",
            "detail": f"{field}: {fields[field][0]}",
            "field": field,
            "fields": fields,
        }
    else:
        code = getattr(exc, "default_code", "error")
        if isinstance(exc.detail, dict | list):
            detail = _first_message(exc.detail)
        else:
            detail = str(exc.detail)
            code = getattr(exc.detail, "code", code) or code
        body = {"code": code, "detail": detail}
    response.data = {"error": body}
    return response


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, with nesting too deep for Python's parser as a 400, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            detail = "JSON parse error - the body nests too deeply."
            raise drf_exceptions.ParseError(detail) from exc


# --------------------------------------------------------------------------- Django handlers


def bad_request(request, exception, template_name=defaults.ERROR_400_TEMPLATE_NAME):
    if not is_api_request(request):
        return defaults.bad_request(request, exception, template_name)
    if isinstance(exception, RequestDataTooBig):
        return too_large_response()
    return error_response(400, "invalid", str(exception) or "The request is malformed.")


def permission_denied(request, exception, template_name=defaults.ERROR_403_TEMPLATE_NAME):
    if not is_api_request(request):
        return defaults.permission_denied(request, exception, template_name)
    return error_response(403, "permission_denied", "You may not do this.")


def page_not_found(request, exception, template_name=defaults.ERROR_404_TEMPLATE_NAME):
    if not is_api_request(request):
        return defaults.page_not_found(request, exception, template_name)
    return error_response(404, "not_found", "No such API resource.")


def server_error(request, template_name=defaults.ERROR_500_TEMPLATE_NAME):
    if not is_api_request(request):
        return defaults.server_error(request, template_name)
    return error_response(500, "server_error", "Something went wrong on our side.")
