"""Login throttling per (user name, address), per user name and per address, with backoff.

A stranger must not be able to lock a real user out, so the fast lock is per user name *and*
client address (`login_user`, 5 / 15 min): guessing from one address locks that address out
of that account only. Across all addresses one user name also has a slower limit
(`login_user_global`, 50 / hour: a spread-out guessing attack) and one address has a limit
over all names (`login_ip`). Past `login_user` or `login_ip` the key is locked for
`LOGIN_LOCKOUT_BASE_S`, doubling with each further failure up to `LOGIN_LOCKOUT_MAX_S`; past
`login_user_global` the name is locked until its window ends. A locked login is answered 429
with `Retry-After` before the password is checked. A successful login clears the lock of its
(name, address). The address is `supportbot.client_address` (TRUSTED_PROXIES honoured).
Counters live in Redis (supportbot.ratelimit) with the in-process fallback.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.http import HttpResponse

from supportbot import ratelimit
from supportbot.client_address import request_client_address

# Limits whose lock doubles with every further failure; `login_user_global` locks for the rest
# of its window instead (it is the slow, address-independent net).
BACKOFF_LIMITS = ("login_user", "login_ip")


def _name(username: str) -> str:
    return username.strip().lower()


def _keys(*, username: str, ip: str) -> list[tuple[str, tuple]]:
    name = _name(username)
    return [
        ("login_user", (name, ip)),
        ("login_user_global", (name,)),
        ("login_ip", (ip,)),
    ]


def login_locked_for(*, username: str, ip: str) -> int:
    """Seconds before `username` may try again from `ip` (0: now)."""
    if not settings.RATE_LIMITS_ENABLED:
        return 0
    return max(
        ratelimit.lockout_remaining(name=n, key=k) for n, k in _keys(username=username, ip=ip)
    )


def login_failure_record(*, username: str, ip: str) -> None:
    """Count a failed login; lock the (name, address), the name or the address once past its
    limit."""
    if not settings.RATE_LIMITS_ENABLED:
        return
    for name, key in _keys(username=username, ip=ip):
        limit = ratelimit.limit_get(name)
        decision = ratelimit.rate_limit_hit(limit=limit, key=key, keep_refused=True)
        if decision.allowed:
            continue
        if name in BACKOFF_LIMITS:
            over = decision.hits - limit.count
            seconds = min(
                settings.LOGIN_LOCKOUT_MAX_S, settings.LOGIN_LOCKOUT_BASE_S * 2 ** (over - 1)
            )
        else:
            # Until the window ends, never longer: the sliding estimate may take up to two
            # windows to fall under the limit, but a lock that outlives one window would let a
            # stranger keep the real user out with a few guesses an hour.
            seconds = max(1, min(decision.retry_after, limit.window))
        ratelimit.lockout_set(name=name, key=key, seconds=seconds)


def login_success_record(*, username: str, ip: str) -> None:
    """The right password from `ip`: that address's lock on the name ends."""
    ratelimit.lockout_clear(name="login_user", key=(_name(username), ip))


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
        ip = request_client_address(request)
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
            login_success_record(username=username, ip=ip)
        elif response.status_code == 200:
            login_failure_record(username=username, ip=ip)
        return response

    return wrapped
