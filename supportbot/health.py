"""Liveness and readiness probes."""

from __future__ import annotations

import time

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse

from supportbot import warmup


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
    if warmup.state() != warmup.NOT_STARTED:
        checks["embeddings"] = warmup.state()
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse(
        {
            "status": "ok" if ok else "unavailable",
            "checks": checks,
            "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
        },
        status=200 if ok else 503,
    )
