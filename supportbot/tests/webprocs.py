"""Real daphne processes serving the product on the test database (loopback, free ports).

Tests that need real HTTP between clients and several web processes use `start_web`: each
process is `python -m daphne config.asgi:application` with `DATABASE_URL` naming the
pytest database, so rows committed by a `transaction=True` test are what it serves.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.db import connection

from demo.orders.testing import free_port
from supportbot import devservices

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class WebProcess:
    url: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_web(
    log_dir: Path, *, count: int = 2, timeout: float = 60.0, env: dict[str, str] | None = None
) -> list[WebProcess]:
    """Start `count` daphne processes on the current (test) database; wait until ready.

    `env` adds variables (a private q2 queue name, a replica URL, OTEL_* settings).
    """
    database_url = devservices.postgres_url_for(connection.settings_dict["NAME"])
    procs = []
    extra = env
    for n in range(count):
        port = free_port()
        log = log_dir / f"daphne-{n}.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "SUPPORTBOT_REDIS_DB": os.environ.get("SUPPORTBOT_REDIS_DB", "1"),
            "INFERENCE_AUTOSTART": "0",
            **(extra or {}),
        }
        env.pop("DJANGO_SETTINGS_MODULE", None)
        with open(log, "wb") as out:
            process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "config.asgi:application",
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        procs.append(WebProcess(f"http://127.0.0.1:{port}", process, log))
    deadline = time.monotonic() + timeout
    for proc in procs:
        while True:
            if proc.process.poll() is not None:
                raise RuntimeError(f"daphne exited: {proc.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{proc.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                for p in procs:
                    p.stop()
                raise RuntimeError(f"daphne not ready: {proc.log.read_text()[-2000:]}")
            time.sleep(0.2)
    return procs


def start_qcluster(log_dir: Path, *, name: str, env: dict[str, str] | None = None) -> WebProcess:
    """Start a one-worker django-q2 cluster on the private queue `name` (test database).

    Web processes started with `Q_CLUSTER_NAME=name` enqueue to it. The returned handle's
    `url` is empty: a cluster serves no HTTP.
    """
    log = log_dir / f"qcluster-{name}.log"
    full_env = {
        **os.environ,
        "DATABASE_URL": devservices.postgres_url_for(connection.settings_dict["NAME"]),
        "SUPPORTBOT_REDIS_DB": os.environ.get("SUPPORTBOT_REDIS_DB", "1"),
        "INFERENCE_AUTOSTART": "0",
        "Q_CLUSTER_NAME": name,
        "Q_WORKERS": "1",
        **(env or {}),
    }
    full_env.pop("DJANGO_SETTINGS_MODULE", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and manage.py
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return WebProcess("", process, log)
