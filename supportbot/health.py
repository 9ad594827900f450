"""Liveness and readiness probes."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse

# Readiness checks of other apps, by name: each returns "ok", a failure text, or None when it
# does not apply to this process. Apps register theirs in `AppConfig.ready`, so this tenancy
# core never imports them.
_readiness_checks: dict[str, Callable[[], str | None]] = {}


def readiness_check_register(name: str, check: Callable[[], str | None]) -> None:
    """Report `check()` under `name` in `/readyz` (None: not reported)."""
    _readiness_checks[name] = check


def healthz(request):
    return JsonResponse({"status": "ok"})


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the probe reports any failure
        return f"error: {exc.__class__.__name__}: {exc}"[:300]


def _check_redis() -> str:
    try:
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1
        )
        try:
            client.ping()
        finally:
            client.close()
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"error: {exc.__class__.__name__}: {exc}"[:300]


def readyz(request):
    """200 when PostgreSQL and Redis answer and (in a web process that warms up) the
    embedding model is loaded; 503 naming the failing check otherwise."""
    started = time.monotonic()
    checks = {"database": _check_database(), "redis": _check_redis()}
    for name, check in _readiness_checks.items():
        result = check()
        if result is not None:
            checks[name] = result
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {
            "status": "ok" if ok else "unavailable",
            "checks": checks,
            "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
        },
        status=200 if ok else 503,
    )
