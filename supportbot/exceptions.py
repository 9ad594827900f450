"""Map every API error to one JSON shape: {"error": {"code", "detail", "field"?, "fields"?}}."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from supportbot.errors import ApplicationError


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
