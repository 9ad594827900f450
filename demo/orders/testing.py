"""Run the reference order service as a real subprocess for tests (one per test session)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class OrderService:
    url: str
    token: str
    process: subprocess.Popen

    def _client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )

    def reset(self) -> None:
        with self._client() as c:
            c.post("/admin/reset").raise_for_status()

    def set_faults(self, **faults) -> None:
        with self._client() as c:
            c.put("/admin/faults", json=faults).raise_for_status()

    def log(self) -> dict:
        with self._client() as c:
            response = c.get("/admin/requests")
            response.raise_for_status()
            return response.json()

    def calls(self, method: str, path: str) -> list[dict]:
        """Requests the service received with this method and path."""
        return [r for r in self.log()["requests"] if r["method"] == method and r["path"] == path]

    def refund_posts(self) -> int:
        return len(self.calls("POST", "/refunds"))

    def refunds(self) -> list[dict]:
        return self.log()["refunds"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def start(db_dir: Path, *, token: str = "", timeout: float = 20.0) -> OrderService:
    """Start `python -m demo.orders` on a free loopback port; wait until it answers."""
    port = free_port()
    token = token or secrets.token_urlsafe(16)
    env = {
        **os.environ,
        "ORDER_SERVICE_HOST": "127.0.0.1",
        "ORDER_SERVICE_PORT": str(port),
        "ORDER_SERVICE_DB": str(db_dir / "orders.sqlite3"),
        "ORDER_SERVICE_TOKEN": token,
    }
    log = open(db_dir / "orders.log", "wb")  # noqa: SIM115 - the child keeps writing to it
    process = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "demo.orders"], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    service = OrderService(url=f"http://127.0.0.1:{port}", token=token, process=process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"order service exited: {(db_dir / 'orders.log').read_text()}")
        try:
            if httpx.get(f"{service.url}/healthz", timeout=0.5).status_code == 200:
                return service
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    service.stop()
    raise RuntimeError("order service did not start in time")
