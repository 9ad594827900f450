"""Login throttling per user name and per IP, with exponential backoff.

Every failed login counts against the user name (`login_user`) and the client IP
(`login_ip`, settings.RATE_LIMITS). Past the limit the name (or IP) is locked for
`LOGIN_LOCKOUT_BASE_S`, doubling with each further failure up to `LOGIN_LOCKOUT_MAX_S`; a
locked login is answered 429 with `Retry-After` before the password is even checked. A
successful login clears the name's lock. Counters live in Redis (supportbot.ratelimit) with the
in-process fallback.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.http import HttpResponse

from supportbot import ratelimit


def _keys(*, username: str, ip: str) -> list[tuple[str, tuple]]:
    return [("login_user", (username.strip().lower(),)), ("login_ip", (ip,))]


def login_locked_for(*, username: str, ip: str) -> int:
    """Seconds before `username` may try again from `ip` (0: now)."""
    if not settings.RATE_LIMITS_ENABLED:
        return 0
    return max(
        ratelimit.lockout_remaining(name=n, key=k) for n, k in _keys(username=username, ip=ip)
    )


def login_failure_record(*, username: str, ip: str) -> None:
    """Count a failed login; lock the name or IP once past its limit (doubling each time)."""
    if not settings.RATE_LIMITS_ENABLED:
        return
    for name, key in _keys(username=username, ip=ip):
        limit = ratelimit.limit_get(name)
        decision = ratelimit.rate_limit_hit(limit=limit, key=key, keep_refused=True)
        if decision.allowed:
            continue
        over = decision.hits - limit.count
        seconds = min(settings.LOGIN_LOCKOUT_MAX_S, settings.LOGIN_LOCKOUT_BASE_S * 2 ** (over - 1))
        ratelimit.lockout_set(name=name, key=key, seconds=seconds)


def login_success_record(*, username: str) -> None:
    ratelimit.lockout_clear(name="login_user", key=(username.strip().lower(),))


def throttled_login(view):
    """Wrap a login view: 429 + Retry-After while locked; failures and successes recorded.

    A POST answered with a redirect logged in; one answered 200 re-rendered the form with an
    error, which is a failure (Django's, the console's and the admin's login views all do so).
    """

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            return view(request, *args, **kwargs)
        username = str(request.POST.get("username", ""))[:150]
        ip = request.META.get("REMOTE_ADDR", "")
        wait = login_locked_for(username=username, ip=ip)
        if wait:
            response = HttpResponse(
                f"Too many failed logins. Try again in {wait} seconds.\n",
                status=429,
                content_type="text/plain; charset=utf-8",
            )
            response["Retry-After"] = str(wait)
            return response
        response = view(request, *args, **kwargs)
        if response.status_code in (301, 302, 303) and request.user.is_authenticated:
            login_success_record(username=username)
        elif response.status_code == 200:
            login_failure_record(username=username, ip=ip)
        return response

    return wrapped
