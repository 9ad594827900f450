"""The whole product as `make run` starts it (scripts/run.sh: daphne, qcluster, order service),
on free loopback ports and a database of its own, for browser tests."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import redis

from demo.orders.testing import free_port
from supportbot import devservices

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stack:
    url: str
    database_url: str
    database_name: str
    process: subprocess.Popen
    env: dict
    log_dir: Path

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.database_url) as conn:
            return conn.execute(query, params).fetchall()

    @property
    def var_dir(self) -> Path:
        """The var dir of the stack's services (its own with `private_services`)."""
        return Path(self.env.get("SUPPORTBOT_VAR_DIR") or devservices.var_dir())

    def logins(self) -> dict[str, str]:
        return json.loads((self.var_dir / "demo-credentials.json").read_text())

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return result.stdout

    def restart(self, timeout: float = 120.0) -> None:
        """Stop every process of the stack and start run.sh again on the same ports and data."""
        self.stop()
        self._launch()
        self._wait_ready(timeout)

    def _launch(self) -> None:
        with open(self.log_dir / "run.log", "a") as log:
            self.process = subprocess.Popen(  # noqa: S603
                ["bash", "scripts/run.sh"],
                cwd=ROOT,
                env=self.env,
                start_new_session=True,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"run.sh exited; see {self.log_dir}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"stack not ready in {timeout}s; see {self.log_dir}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


_REDIS_DBS = itertools.cycle(range(2, 16))


@contextlib.contextmanager
def var_dir_of(path: Path):
    """Make `devservices` (which reads SUPPORTBOT_VAR_DIR on every call) act on `path`."""
    old = os.environ.get("SUPPORTBOT_VAR_DIR")
    os.environ["SUPPORTBOT_VAR_DIR"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SUPPORTBOT_VAR_DIR", None)
        else:
            os.environ["SUPPORTBOT_VAR_DIR"] = old


def start(
    *,
    wait_for_documents: int = 7,
    timeout: float = 300.0,
    private_services: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> Stack:
    """Migrate and seed a fresh database, start run.sh, wait until ready and indexed.

    `private_services`: a var dir of the stack's own, so it gets an embedded PostgreSQL and
    Valkey of its own that fault tests may stop, kill and restart without touching the
    services of the test process (or any other stack).
    """
    name = f"supportbot_e2e_{uuid.uuid4().hex[:8]}"
    redis_db = next(_REDIS_DBS)
    if private_services is None:
        # A fresh checkout (a benchmark before any `make run` or test) has no dev keys yet.
        devservices.dev_files_write()
        with psycopg.connect(devservices.postgres_url_for("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        database_url = devservices.postgres_url_for(name)
        # Nothing of an earlier stack (queued tasks naming its rows) may reach this one.
        redis.Redis.from_url(devservices.valkey_start(db=redis_db)).flushdb()
        log_dir = devservices.var_dir() / "log" / name
    else:
        private_services.mkdir(parents=True, exist_ok=True)
        with var_dir_of(private_services):
            devservices.postgres_start()
            devservices.dev_files_write()
            with psycopg.connect(devservices.postgres_url_for("postgres"), autocommit=True) as c:
                c.execute(f'CREATE DATABASE "{name}"')
            database_url = devservices.postgres_url_for(name)
            devservices.valkey_start()
        log_dir = private_services / "log" / name
    port, order_port = free_port(), free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        # A Redis database of its own: two stacks at once (the browser tests' and a
        # benchmark's) must not share a q2 queue, channel layer groups or cache keys.
        "SUPPORTBOT_REDIS_DB": str(redis_db),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "ORDER_SERVICE_PORT": str(order_port),
        "ORDER_SERVICE_URL": f"http://127.0.0.1:{order_port}",
        "ORDER_SERVICE_DB": str(log_dir / "orders.sqlite3"),
        "SUPPORTBOT_LOG_DIR": str(log_dir),
        "Q_WORKERS": "1",
        # No local vLLM engine here: its registry would be this database's and its ports the
        # dev stack's. The generative path is tested against real engines in inference tests.
        "INFERENCE_AUTOSTART": "0",
        # Browser tests and benchmarks open many chats from 127.0.0.1.
        "RATE_LIMIT_SESSION_ANONYMOUS": "100000/60",
        "RATE_LIMIT_MESSAGE_IP": "100000/60",
        "RATE_LIMIT_API_KEY": "100000/60",
        **(extra_env or {}),
    }
    if private_services is not None:
        env["SUPPORTBOT_VAR_DIR"] = str(private_services)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    stack = Stack(f"http://127.0.0.1:{port}", database_url, name, None, env, log_dir)  # type: ignore[arg-type]
    stack.manage("migrate", "--noinput")
    stack.manage("seed_demo")
    stack._launch()
    stack._wait_ready(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = stack.sql("SELECT count(*) FROM knowledge_document WHERE status = 'ready'")[0][0]
        if ready >= wait_for_documents:
            return stack
        time.sleep(1)
    stack.stop()
    raise RuntimeError(f"documents not indexed in {timeout}s; see {log_dir}")


def drop(stack: Stack) -> None:
    stack.stop()
    with psycopg.connect(devservices.postgres_url_for("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{stack.database_name}" WITH (FORCE)')
