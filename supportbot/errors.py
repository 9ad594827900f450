"""The one domain error type. Services raise it; the API and consumers map it to 4xx bodies."""

from __future__ import annotations


class ApplicationError(Exception):
    """A rule was violated. `status` is the HTTP status the API answers with."""

    status = 400
    code = "invalid"

    def __init__(
        self,
        detail: str,
        *,
        code: str | None = None,
        field: str | None = None,
        status: int | None = None,
        extra: dict | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.field = field
        self.extra = extra or {}

    def as_dict(self) -> dict:
        body: dict = {"code": self.code, "detail": self.detail}
        if self.field:
            body["field"] = self.field
        body.update(self.extra)
        return body


class NotFound(ApplicationError):
    status = 404
    code = "not_found"


class Conflict(ApplicationError):
    status = 409
    code = "conflict"


class PermissionDenied(ApplicationError):
    status = 403
    code = "permission_denied"


class RateLimited(ApplicationError):
    status = 429
    code = "rate_limited"
