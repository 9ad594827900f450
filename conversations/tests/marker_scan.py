"""Look for marker strings everywhere the product writes: every table (sealed values opened),
every Redis key and value, log records and log files. Used by test_erasure_scan.py.

A finding is `(where, needle)`. The scan decodes what the product stores encoded — sealed
values (every encrypted column's context is tried), Django signed values (sessions), django-q2
packages (broker and task table), pickled cache values, msgpack channel-layer messages — and
counts the sealed values it opened, so a test can show it was not blind.
"""

from __future__ import annotations

import base64
import logging
import pickle
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgpack
import redis
from django.apps import apps
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django_q.signing import SignedPackage

from chat.orchestrator.answer_cache import CACHE_CONTEXT
from supportbot import encryption

SEALED = re.compile(r"sb1:[0-9A-Za-z]+:[0-9A-Za-z_\-]+")
TEXT_TYPES = ("text", "character varying", "character", "json", "jsonb", "tsvector", "ARRAY")
SCHEMAS_SKIPPED = ("pg_catalog", "information_schema", "pg_toast")


@dataclass
class Scan:
    needles: list[str]
    findings: list[tuple[str, str]] = field(default_factory=list)
    opened: int = 0  # sealed values opened and searched
    unopened: list[str] = field(default_factory=list)  # this database's keys, yet no context opens
    foreign: int = 0  # sealed under a key this database never had (another test run's Redis)
    tables: set[str] = field(default_factory=set)

    def look(self, where: str, text: str) -> None:
        """Record every needle in `text`, and look inside every sealed value it holds."""
        lowered = text.lower()
        self.findings += [(where, n) for n in self.needles if n.lower() in lowered]
        for sealed in SEALED.findall(text):
            if not _key_known(sealed):
                self.foreign += 1
                continue
            plain = _open(sealed)
            if plain is None:
                self.unopened.append(f"{where}: {sealed[:40]}…")
                continue
            self.opened += 1
            self.look(f"{where} (decrypted)", plain)

    def look_bytes(self, where: str, raw: bytes) -> None:
        """`raw` as text, and as whatever it decodes to (pickle, msgpack, a q2 package)."""
        self.look(where, raw.decode("utf-8", "replace"))
        for decoded in _decodings(raw):
            self.look(f"{where} (decoded)", decoded)


def _contexts() -> list[str]:
    columns = encryption.encrypted_columns()
    return [f"{table}.{column}" for table, cols in columns for column in cols] + [CACHE_CONTEXT]


def _key_known(sealed: str) -> bool:
    key_id = encryption.key_id_of(sealed)
    return apps.get_model("supportbot", "DataKey").objects.filter(key_id=key_id).exists()


def _open(sealed: str) -> str | None:
    for context in _contexts():
        try:
            return encryption.unseal(sealed, context=context)
        except encryption.DecryptionError:
            continue
    return None


def _decodings(raw: bytes) -> Iterable[str]:
    """What `raw` decodes to, as text (nothing when it is none of these formats)."""
    for loads in (pickle.loads, _msgpack, _q2_package):
        try:
            yield repr(loads(raw))
        except Exception:  # noqa: BLE001, S112 - not this format
            continue


def _msgpack(raw: bytes):
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def _q2_package(raw: bytes):
    return SignedPackage.loads(raw.decode("ascii"))


def _signed_payload(value: str) -> str:
    """The payload of a `django.core.signing` value (base64 JSON, maybe zlib-compressed)."""
    payload = value.split(":", 1)[0]
    compressed = payload.startswith(".")
    payload = payload.lstrip(".")
    data = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    return (zlib.decompress(data) if compressed else data).decode("utf-8", "replace")


# ----------------------------------------------------------------------------- database


def model_tables() -> set[str]:
    return {
        m._meta.db_table
        for m in apps.get_models(include_auto_created=True)
        if not m._meta.proxy and m._meta.managed
    }


def scan_database(scan: Scan) -> None:
    """Every text-like and bytea column of every table (models or not), cast to text."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema, table_name, column_name, data_type "
            "FROM information_schema.columns c JOIN information_schema.tables t "
            "USING (table_schema, table_name) "
            "WHERE t.table_type = 'BASE TABLE' AND table_schema <> ALL(%s)",
            [list(SCHEMAS_SKIPPED)],
        )
        columns = cursor.fetchall()
        for schema, table, column, data_type in columns:
            scan.tables.add(table)
            where = f"{schema}.{table}.{column}"
            if data_type == "bytea":
                expr = f"encode(\"{column}\", 'escape')"
            elif data_type in TEXT_TYPES or data_type == "USER-DEFINED":
                expr = f'"{column}"::text'
            else:
                continue
            cursor.execute(
                f'SELECT {expr} FROM "{schema}"."{table}" '  # noqa: S608 - catalog names
                f"WHERE {expr} ILIKE ANY(%s) OR {expr} LIKE '%%sb1:%%'",
                [[f"%{n}%" for n in scan.needles]],
            )
            for (value,) in cursor.fetchall():
                scan.look(where, value)
    _scan_encoded_columns(scan)


def _scan_encoded_columns(scan: Scan) -> None:
    """Columns whose text is an encoding: signed sessions, pickled django-q2 fields."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT session_key, session_data FROM django_session")
        for key, data in cursor.fetchall():
            scan.look(f"django_session {key}", repr(SessionStore().decode(data)))
            scan.look(f"django_session {key} (payload)", _signed_payload(data))
    for name in ("Task", "OrmQ", "Schedule", "Success", "Failure"):
        model = apps.get_model("django_q", name)
        for row in model.objects.all():
            values = {f.name: getattr(row, f.name) for f in model._meta.concrete_fields}
            scan.look(f"django_q.{name} {row.pk}", repr(values))


# ----------------------------------------------------------------------------- redis


def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def scan_redis(scan: Scan, client: redis.Redis) -> int:
    """Every key of the test's Redis database and every value in it; return the key count."""
    keys = 0
    for key in client.scan_iter(count=1000):
        keys += 1
        name = key.decode("utf-8", "replace")
        scan.look(f"redis key {name}", name)
        for n, raw in enumerate(_redis_values(client, key)):
            scan.look_bytes(f"redis {name} [{n}]", raw)
    return keys


def _redis_values(client: redis.Redis, key: bytes) -> list[bytes]:
    kind = client.type(key).decode()
    if kind == "string":
        value = client.get(key)
        return [] if value is None else [value]
    if kind == "hash":
        return [b for pair in client.hgetall(key).items() for b in pair]
    if kind == "list":
        return client.lrange(key, 0, -1)
    if kind == "set":
        return list(client.smembers(key))
    if kind == "zset":
        return [member for member, _ in client.zrange(key, 0, -1, withscores=True)]
    if kind == "stream":
        return [b for _, entry in client.xrange(key) for pair in entry.items() for b in pair]
    return []  # "none": expired between SCAN and TYPE


# ----------------------------------------------------------------------------- logs


def scan_log_records(scan: Scan, records: Iterable[logging.LogRecord]) -> int:
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    count = 0
    for record in records:
        count += 1
        scan.look(f"log {record.name}", formatter.format(record))
        scan.look(f"log {record.name} (record)", repr(vars(record)))
    return count


def log_files() -> list[Path]:
    """The log files of this worktree's embedded services and live stacks under var/."""
    var = Path(settings.BASE_DIR) / "var"
    found = [var / "pg" / "log", var / "valkey" / "valkey.log"]
    found += sorted((var / "log").rglob("*.log")) if (var / "log").is_dir() else []
    return [p for p in found if p.is_file()]


def log_offsets() -> dict[Path, int]:
    return {path: path.stat().st_size for path in log_files()}


def scan_log_files(scan: Scan, offsets: dict[Path, int]) -> None:
    """What each log file gained since `offsets` (files created since are read whole)."""
    for path in log_files():
        with path.open("rb") as f:
            f.seek(offsets.get(path, 0))
            scan.look_bytes(f"log file {path}", f.read())
