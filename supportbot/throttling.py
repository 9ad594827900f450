"""DRF throttle: the per-key (partner) or per-user (console) request rate."""

from __future__ import annotations

from rest_framework.throttling import BaseThrottle

from supportbot import ratelimit
from supportbot.models import ApiKey


class RequestRateThrottle(BaseThrottle):
    """Count every authenticated API request; over the limit raise RateLimited (429 JSON).

    Raising (instead of DRF's `Throttled`) gives the one error shape with the limit's name.
    Anonymous requests are refused by authentication first and are not counted here.
    """

    def allow_request(self, request, view) -> bool:
        if isinstance(request.auth, ApiKey):
            ratelimit.rate_limit_enforce(name="api_key", key=(request.auth.pk,))
        elif getattr(request.user, "is_authenticated", False) and request.user.pk:
            ratelimit.rate_limit_enforce(name="api_user", key=(request.user.pk,))
        return True


def request_limit_enforce(request, *, name: str) -> None:
    """Count one hit of the named per-key limit (uploads, searches) for this request's key, or
    its console user."""
    if isinstance(request.auth, ApiKey):
        ratelimit.rate_limit_enforce(name=name, key=("key", request.auth.pk))
    elif getattr(request.user, "pk", None):
        ratelimit.rate_limit_enforce(name=name, key=("user", request.user.pk))
