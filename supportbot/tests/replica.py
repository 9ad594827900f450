"""A real streaming replica of the embedded PostgreSQL for tests: a physical standby made with
`pg_basebackup -R` from the running primary, started on a unix socket of its own with every
statement logged (`log_statement=all`), so a test can read exactly what was sent to it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from supportbot import devservices

_USER = "embedded_postgres" if os.geteuid() == 0 else None  # postgres never runs as root


def _run(args: list[str], timeout: float = 120) -> None:
    subprocess.run(  # noqa: S603 - PostgreSQL's own programs
        args, check=True, capture_output=True, text=True, timeout=timeout, user=_USER
    )


@dataclass
class Standby:
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "standby.log"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.root}"

    def start(self, timeout: float = 60) -> None:
        _run(
            [
                devservices.pg_bin("pg_ctl"),
                "-D",
                str(self.data),
                "-w",
                "-t",
                str(int(timeout)),
                "-l",
                str(self.log),
                "-o",
                f"-h '' -k {self.root} -c log_statement=all -c hot_standby=on "
                "-c log_line_prefix=@%d@",
                "start",
            ],
            timeout=timeout + 10,
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            _run([devservices.pg_bin("pg_ctl"), "-D", str(self.data), "-w", "-m", "fast", "stop"])

    def in_recovery(self, database: str) -> bool:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            return conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]

    def catch_up(self, primary_url: str, timeout: float = 30) -> None:
        """Wait until the standby replayed everything the primary has written so far."""
        with psycopg.connect(primary_url, autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            while True:
                caught_up = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]
                ).fetchone()[0]
                if caught_up:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"standby did not reach {target} in {timeout}s")
                time.sleep(0.05)

    def statements(self, database: str, since: int = 0) -> list[str]:
        """Statements the standby received for `database` after log offset `since`."""
        text = self.log.read_text(errors="replace")[since:]
        pattern = re.compile(rf"^@{re.escape(database)}@.*?statement: (.*)$")
        return [m.group(1) for line in text.splitlines() if (m := pattern.match(line))]

    def log_offset(self) -> int:
        return len(self.log.read_text(errors="replace")) if self.log.exists() else 0

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def standby_create() -> Standby:
    """Base-backup the running embedded primary into a fresh standby and start it."""
    primary = devservices.postgres_url_for("postgres")
    root = Path(tempfile.mkdtemp(prefix="sb-standby-"))  # short: a unix socket lives here
    root.chmod(0o700)
    if _USER:
        shutil.chown(root, _USER, _USER)
    standby = Standby(root)
    _run(
        [
            devservices.pg_bin("pg_basebackup"),
            "-d",
            primary,
            "-D",
            str(standby.data),
            "-R",  # standby.signal + primary_conninfo: a streaming physical standby
            "-X",
            "stream",
            "-c",
            "fast",
        ]
    )
    standby.start()
    return standby
