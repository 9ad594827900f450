"""Envelope encryption at rest: per-tenant data keys wrapped by a master key.

Each tenant has one active AES-256-GCM data key (`DataKey`), stored only wrapped (AES-GCM)
by a master key from `settings.ENCRYPTION_MASTER_KEYS`. A sealed value is the text
`sb1:<key id>:<urlsafe base64 of nonce + ciphertext + tag>`; the associated data binds it to
its key id and its column (`<table>.<column>`), so a value copied into another column or
another key's name does not open. Unwrapped keys are cached per process: sealing or opening a
value costs one AES-GCM call and no query once a key is known.

Rotation (`manage.py rotate_keys`): re-wrapping a data key under a new master key changes
nothing in the rows; a new data key becomes the tenant's active key and older rows keep
opening with theirs until they are re-sealed.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import os
import threading
import time
import uuid
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from supportbot import keys

PREFIX = "sb1:"
ACTIVE, RETIRED = "active", "retired"
_NONCE = 12


class Sealed(str):
    """A value already sealed for storage (the fields store it as it is)."""


class DecryptionError(Exception):
    """A stored value does not open: unknown key, missing master key or tampered bytes."""


_lock = threading.Lock()
_by_id: dict[str, tuple[int, AESGCM]] = {}
_active: dict[int, tuple[str, AESGCM, float]] = {}


def clear_cache() -> None:
    """Forget every unwrapped key of this process (tests, after a rotation)."""
    with _lock:
        _by_id.clear()
        _active.clear()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _data_keys():
    """`DataKey.objects` (looked up in the app registry: the model module uses our fields)."""
    return apps.get_model("supportbot", "DataKey").objects


def _wrap_aad(tenant_id: int, key_id: str) -> bytes:
    return f"supportbot:datakey:{tenant_id}:{key_id}".encode()


def current_master() -> tuple[str, bytes]:
    """The (id, key) that wraps new data keys: the first of the keyring."""
    ring: dict[str, bytes] = settings.ENCRYPTION_MASTER_KEYS
    if not ring:
        raise ImproperlyConfigured(
            "No master key: set ENCRYPTION_MASTER_KEYS, or in development run "
            "`manage.py services start` (make run does) to write var/master-keys."
        )
    master_id = next(iter(ring))
    return master_id, ring[master_id]


def wrap_key(*, raw: bytes, tenant_id: int, key_id: str, master_key: bytes) -> str:
    """`raw` sealed by `master_key` (AES-GCM, bound to tenant and key id)."""
    nonce = os.urandom(_NONCE)
    return _b64(nonce + AESGCM(master_key).encrypt(nonce, raw, _wrap_aad(tenant_id, key_id)))


def unwrap_key(row) -> bytes:
    """The raw data key of `row`; raise DecryptionError if its master key is not configured."""
    master = settings.ENCRYPTION_MASTER_KEYS.get(row.master_key_id)
    if master is None:
        raise DecryptionError(
            f"Data key {row.key_id} is wrapped by master key {row.master_key_id!r}, which is "
            "not in ENCRYPTION_MASTER_KEYS."
        )
    blob = _unb64(row.wrapped)
    try:
        return AESGCM(master).decrypt(
            blob[:_NONCE], blob[_NONCE:], _wrap_aad(row.tenant_id, row.key_id)
        )
    except InvalidTag as exc:
        raise DecryptionError(f"Data key {row.key_id} does not unwrap.") from exc


def data_key_create(*, tenant_id: int, retire_current: bool = False) -> Any:
    """Create the tenant's active data key (random, wrapped by the current master key).

    With `retire_current`, the active key is retired first (rotation); otherwise a concurrent
    creator that won returns its key.
    """
    master_id, master = current_master()
    key_id = uuid.uuid4().hex
    raw = AESGCM.generate_key(bit_length=256)
    with transaction.atomic():
        if retire_current:
            _data_keys().filter(tenant_id=tenant_id, state=ACTIVE).update(state=RETIRED)
        try:
            with transaction.atomic():
                row = _data_keys().create(
                    key_id=key_id,
                    tenant_id=tenant_id,
                    master_key_id=master_id,
                    wrapped=wrap_key(
                        raw=raw, tenant_id=tenant_id, key_id=key_id, master_key=master
                    ),
                )
        except IntegrityError:
            row = _data_keys().get(tenant_id=tenant_id, state=ACTIVE)
    return row


def _remember(row, raw: bytes | None = None) -> AESGCM:
    aead = AESGCM(raw if raw is not None else unwrap_key(row))
    with _lock:
        _by_id[row.key_id] = (row.tenant_id, aead)
    return aead


def _active_key(tenant_id: int) -> tuple[str, AESGCM]:
    now = time.monotonic()
    with _lock:
        hit = _active.get(tenant_id)
    if hit and hit[2] > now:
        return hit[0], hit[1]
    row = _data_keys().filter(tenant_id=tenant_id, state=ACTIVE).first()
    if row is None:
        row = data_key_create(tenant_id=tenant_id)
    aead = _remember(row)
    entry = (row.key_id, aead, now + settings.ENCRYPTION_ACTIVE_KEY_TTL_S)
    conn = transaction.get_connection()
    if conn.in_atomic_block:
        # The key may have been created in this (uncommitted) transaction: trust it for other
        # work only once it committed, so a rollback never leaves a cached key that is gone.
        transaction.on_commit(lambda: _set_active(tenant_id, entry))
    else:
        _set_active(tenant_id, entry)
    return row.key_id, aead


def _set_active(tenant_id: int, entry: tuple[str, AESGCM, float]) -> None:
    with _lock:
        _active[tenant_id] = entry


def _key_by_id(key_id: str) -> AESGCM:
    with _lock:
        hit = _by_id.get(key_id)
    if hit:
        return hit[1]
    row = _data_keys().filter(key_id=key_id).first()
    if row is None:
        raise DecryptionError(f"Unknown data key {key_id}.")
    return _remember(row)


def seal(*, tenant_id: int, plaintext: str, context: str) -> Sealed:
    """`plaintext` encrypted with the tenant's active data key for column `context`."""
    key_id, aead = _active_key(tenant_id)
    nonce = os.urandom(_NONCE)
    body = aead.encrypt(nonce, plaintext.encode("utf-8"), f"{key_id}|{context}".encode())
    return Sealed(f"{PREFIX}{key_id}:{_b64(nonce + body)}")


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def unseal(value: str, *, context: str) -> str:
    """The plaintext of a sealed `value`; a value without the prefix (a row written before
    encryption, not yet migrated) is returned as it is."""
    if not is_sealed(value):
        return value
    try:
        _, key_id, body = value.split(":", 2)
        blob = _unb64(body)
    except ValueError as exc:
        raise DecryptionError("Malformed sealed value.") from exc
    aead = _key_by_id(key_id)
    try:
        return aead.decrypt(blob[:_NONCE], blob[_NONCE:], f"{key_id}|{context}".encode()).decode(
            "utf-8"
        )
    except InvalidTag as exc:
        raise DecryptionError(f"A value sealed with key {key_id} does not open.") from exc


def key_id_of(value: str) -> str | None:
    """The data key id a sealed value names (None for plaintext)."""
    return value.split(":", 2)[1] if is_sealed(value) else None


def seal_fields(model: type, *, tenant_id: int, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` for `QuerySet.update` with the encrypted ones sealed (update skips pre_save)."""
    out = dict(fields)
    for field in model._meta.concrete_fields:
        if field.name in out and hasattr(field, "seal_for"):
            out[field.name] = field.seal_for(tenant_id, out[field.name])
    return out


def _blind_keyring() -> dict[str, bytes]:
    ring: dict[str, bytes] = settings.BLIND_INDEX_KEYS
    if not ring:
        raise ImproperlyConfigured(
            "No blind-index key: set BLIND_INDEX_KEYS, or in development run "
            "`manage.py services start` (make run does) to write var/blind-index-keys."
        )
    return ring


@functools.lru_cache(maxsize=4096)
def _blind_key(root: bytes, tenant_id: int, purpose: str) -> bytes:
    return keys.derive_key(root, f"blind-index:{tenant_id}:{purpose}")


def _blind_index_under(root: bytes, *, tenant_id: int, purpose: str, value: str) -> str:
    key = _blind_key(root, tenant_id, purpose)
    return hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest()


def blind_index(*, tenant_id: int, purpose: str, value: str) -> str:
    """A keyed hash of `value` that equality lookups use instead of the encrypted column:
    HMAC-SHA256 under a per-tenant key derived from the newest key of `BLIND_INDEX_KEYS`
    (its own keyring: rotating `DJANGO_SECRET_KEY` changes no blind index). Store this."""
    root = next(iter(_blind_keyring().values()))
    return _blind_index_under(root, tenant_id=tenant_id, purpose=purpose, value=value)


def blind_index_candidates(*, tenant_id: int, purpose: str, value: str) -> list[str]:
    """`value`'s blind index under every key of the ring, newest first. Look rows up with
    all of them: rows written before a key rotation match until `blind_index_rekey` ran."""
    return [
        _blind_index_under(root, tenant_id=tenant_id, purpose=purpose, value=value)
        for root in _blind_keyring().values()
    ]


def blind_index_rekey(
    queryset, *, field: str, purpose: str, value_of, batch_size: int = 500
) -> int:
    """Recompute `field` (a stored blind index of `purpose`) of the rows of `queryset` under
    the newest key; return the rows changed. `value_of(row)` is the indexed plaintext (None:
    leave the row). Batches commit on their own; a row whose index changed meanwhile is left
    to its writer (who used the newest key). Running it again changes nothing."""
    changed, last = 0, 0
    while True:
        with transaction.atomic():
            rows = list(queryset.filter(pk__gt=last).order_by("pk")[:batch_size])
            for row in rows:
                last = row.pk
                value = value_of(row)
                if value is None:
                    continue
                fresh = blind_index(tenant_id=row.tenant_id, purpose=purpose, value=value)
                old = getattr(row, field)
                if fresh != old:
                    changed += queryset.model.objects.filter(pk=row.pk, **{field: old}).update(
                        **{field: fresh}
                    )
        if len(rows) < batch_size:
            return changed


def data_keys_rewrap(*, batch_size: int = 500) -> int:
    """Re-wrap every data key not wrapped by the current master key; return how many.

    Rows need no change (they name the data key, not the master key); a process that cached
    a key keeps using it, one that did not unwraps the new wrapping (or the old, until the
    old master key leaves the keyring).
    """
    master_id, master = current_master()
    done = 0
    while True:
        with transaction.atomic():
            rows = list(
                _data_keys()
                .select_for_update(skip_locked=True)
                .exclude(master_key_id=master_id)
                .order_by("pk")[:batch_size]
            )
            if not rows:
                return done
            for row in rows:
                raw = unwrap_key(row)
                row.wrapped = wrap_key(
                    raw=raw, tenant_id=row.tenant_id, key_id=row.key_id, master_key=master
                )
                row.master_key_id = master_id
                row.rewrapped_at = timezone.now()
                row.save(update_fields=["wrapped", "master_key_id", "rewrapped_at"])
            done += len(rows)


def seal_existing_rows(connection, *, table: str, columns: list[str], batch_size: int = 500) -> int:
    """Seal the plaintext values left in `table.columns` (a migration converting old rows);
    return the rows changed. Values already sealed, NULL or empty stay as they are."""
    return _convert_rows(
        connection, table=table, columns=columns, batch_size=batch_size, seal_=True
    )


def open_existing_rows(connection, *, table: str, columns: list[str], batch_size: int = 500) -> int:
    """Turn sealed values of `table.columns` back into plaintext (a migration's reverse)."""
    return _convert_rows(
        connection, table=table, columns=columns, batch_size=batch_size, seal_=False
    )


def _convert_rows(connection, *, table, columns, batch_size, seal_: bool) -> int:
    qn = connection.ops.quote_name
    wanted = " OR ".join(
        f"({qn(c)} <> '' AND {qn(c)} NOT LIKE 'sb1:%%')" if seal_ else f"{qn(c)} LIKE 'sb1:%%'"
        for c in columns
    )
    select = (
        f"SELECT id, tenant_id, {', '.join(qn(c) for c in columns)} FROM {qn(table)} "  # noqa: S608 - names are our own
        f"WHERE id > %s AND ({wanted}) ORDER BY id LIMIT %s"
    )
    changed, last = 0, 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(select, [last, batch_size])
            rows = cursor.fetchall()
            for row_id, tenant_id, *values in rows:
                new = []
                for column, value in zip(columns, values, strict=True):
                    context = f"{table}.{column}"
                    if value in (None, "") or is_sealed(value) == seal_:
                        new.append(value)
                    elif seal_:
                        new.append(str(seal(tenant_id=tenant_id, plaintext=value, context=context)))
                    else:
                        new.append(unseal(value, context=context))
                sets = ", ".join(f"{qn(c)} = %s" for c in columns)
                cursor.execute(
                    f"UPDATE {qn(table)} SET {sets} WHERE id = %s",  # noqa: S608 - our names
                    [*new, row_id],
                )
                last = row_id
        changed += len(rows)
        if len(rows) < batch_size:
            settle_deferred_checks(connection)
            return changed


def settle_deferred_checks(connection) -> None:
    """Run the deferred foreign-key checks the UPDATEs queued, now.

    A migration that rewrites rows and then alters or indexes the table in the same
    transaction fails otherwise ("cannot ALTER TABLE … because it has pending trigger events").
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def encrypted_columns() -> list[tuple[str, list[str]]]:
    """(table, encrypted columns) of every installed model that has some."""
    out = []
    for model in apps.get_models():
        columns = [f.column for f in model._meta.concrete_fields if hasattr(f, "seal_for")]
        if columns:
            out.append((model._meta.db_table, columns))
    return out


def rows_reseal(*, tenant_id: int, batch_size: int = 500) -> dict[str, int]:
    """Re-seal the tenant's values that name another data key than its active one; return
    the rows changed per table. Each batch commits on its own, and a row is written only if
    it still holds what was read (a concurrent write wins; it is sealed with a live key)."""
    key_id, _ = _active_key(tenant_id)
    qn = connection.ops.quote_name
    report: dict[str, int] = {}
    for table, columns in encrypted_columns():
        stale = " OR ".join(f"({qn(c)} LIKE 'sb1:%%' AND {qn(c)} NOT LIKE %s)" for c in columns)
        select = (
            f"SELECT id, {', '.join(qn(c) for c in columns)} FROM {qn(table)} "  # noqa: S608
            f"WHERE tenant_id = %s AND id > %s AND ({stale}) ORDER BY id LIMIT %s"
        )
        current = f"{PREFIX}{key_id}:%"
        last, changed = 0, 0
        while True:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(select, [tenant_id, last, *[current] * len(columns), batch_size])
                rows = cursor.fetchall()
                for row_id, *values in rows:
                    last = row_id
                    new = [
                        str(
                            seal(tenant_id=tenant_id, plaintext=unseal(v, context=ctx), context=ctx)
                        )
                        if is_sealed(v) and key_id_of(v) != key_id
                        else v
                        for v, ctx in (
                            (v, f"{table}.{c}") for v, c in zip(values, columns, strict=True)
                        )
                    ]
                    sets = ", ".join(f"{qn(c)} = %s" for c in columns)
                    same = " AND ".join(f"{qn(c)} IS NOT DISTINCT FROM %s" for c in columns)
                    cursor.execute(
                        f"UPDATE {qn(table)} SET {sets} WHERE id = %s AND {same}",  # noqa: S608
                        [*new, row_id, *values],
                    )
                    changed += cursor.rowcount
            if len(rows) < batch_size:
                break
        report[table] = changed
    return report
