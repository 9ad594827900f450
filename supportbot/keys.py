"""The secret key and the keys derived from it.

`DJANGO_SECRET_KEY` is the one root secret. Without it, development (`make run`, tests) uses a
random key generated once into `<var>/secret-key` (mode 0600); settings refuse to load in
production. Other keys are derived from the root with HKDF-SHA256 under a purpose label, so
one leaked derived key reveals neither the root nor its siblings. This module imports no
Django code: settings call it before Django is configured.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SECRET_FILE_NAME = "secret-key"  # noqa: S105 - a file name, not a secret


def dev_secret_key(var_dir: Path) -> str:
    """The development secret in `var_dir/secret-key`, created (random, 0600) on first use.

    Several processes start at once under `make run`, so the file is written to a private
    temporary name and linked into place: exactly one writer wins and everyone reads its key.
    """
    var_dir.mkdir(parents=True, exist_ok=True)
    path = var_dir / SECRET_FILE_NAME
    if not path.exists():
        tmp = var_dir / f".{SECRET_FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(secrets.token_urlsafe(64) + "\n")
            with contextlib.suppress(FileExistsError):  # another process won: use its key
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o600)
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 50:
        raise ValueError(f"{path} holds no usable key; delete it to generate a new one.")
    return key


def dev_secret_key_read(var_dir: Path) -> str:
    """The development secret in `var_dir/secret-key`, or "" when it was never written.

    Reads only: settings call this, and `manage.py services start` writes the file."""
    path = var_dir / SECRET_FILE_NAME
    try:
        key = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return ""
    if len(key) < 50:
        raise ValueError(f"{path} holds no usable key; delete it to generate a new one.")
    return key


def derive_key(secret: str | bytes, purpose: str, length: int = 32) -> bytes:
    """`length` bytes for `purpose` derived from `secret` (HKDF-SHA256, no salt)."""
    return HKDF(
        algorithm=hashes.SHA256(),
        length=length,
        salt=None,
        info=f"supportbot:{purpose}".encode(),
    ).derive(secret.encode() if isinstance(secret, str) else secret)


def derive_fernet_key(secret: str, purpose: str) -> str:
    """A Fernet key (urlsafe base64 of 32 bytes) derived from `secret` for `purpose`."""
    return base64.urlsafe_b64encode(derive_key(secret, purpose)).decode("ascii")


MASTER_KEY_FILE_NAME = "master-keys"
BLIND_INDEX_KEY_FILE_NAME = "blind-index-keys"


def _dev_keyring(var_dir: Path, file_name: str, id_prefix: str) -> str:
    """The development keyring in `var_dir/file_name`, created on first use.

    One entry `<id>=<urlsafe base64 of 32 random bytes>`; like the secret key it is written to
    a private temporary name and linked into place so concurrent starts agree on one key.
    """
    var_dir.mkdir(parents=True, exist_ok=True)
    path = var_dir / file_name
    if not path.exists():
        entry = f"{id_prefix}-{secrets.token_hex(4)}=" + base64.urlsafe_b64encode(
            secrets.token_bytes(32)
        ).decode("ascii")
        tmp = var_dir / f".{file_name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(entry + "\n")
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o600)
    return path.read_text(encoding="ascii").strip()


def _dev_keyring_read(var_dir: Path, file_name: str) -> list[str]:
    try:
        text = (var_dir / file_name).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return []
    return [text] if text else []


def dev_master_keyring(var_dir: Path) -> str:
    """The development master keyring in `var_dir/master-keys`, created (random) on first use."""
    return _dev_keyring(var_dir, MASTER_KEY_FILE_NAME, "dev")


def dev_master_keyring_read(var_dir: Path) -> list[str]:
    """The development keyring entries in `var_dir/master-keys`, or [] when never written."""
    return _dev_keyring_read(var_dir, MASTER_KEY_FILE_NAME)


def dev_blind_index_keyring(var_dir: Path) -> str:
    """The development blind-index keyring in `var_dir/blind-index-keys`, created (random,
    0600) on first use, like the master keyring."""
    return _dev_keyring(var_dir, BLIND_INDEX_KEY_FILE_NAME, "dev-bi")


def dev_blind_index_keyring_read(var_dir: Path) -> list[str]:
    """The development blind-index keyring entries, or [] when never written."""
    return _dev_keyring_read(var_dir, BLIND_INDEX_KEY_FILE_NAME)


def parse_keyring(entries: list[str], *, what: str = "master key") -> dict[str, bytes]:
    """`["id=base64", ...]` as an ordered {id: 32-byte key}; the first entry is the current key.

    Raise ValueError for a malformed entry, a duplicate id or a key that is not 32 bytes.
    """
    ring: dict[str, bytes] = {}
    label = what[0].upper() + what[1:]
    for entry in entries:
        key_id, sep, encoded = entry.strip().partition("=")
        if not sep or not key_id or len(key_id) > 32 or not key_id.replace("-", "").isalnum():
            raise ValueError(f"A {what} entry is `<id>=<urlsafe base64 of 32 bytes>`.")
        try:
            key = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except ValueError as exc:
            raise ValueError(f"{label} {key_id!r} is not base64.") from exc
        if len(key) != 32:
            raise ValueError(f"{label} {key_id!r} must be 32 bytes.")
        if key_id in ring:
            raise ValueError(f"{label} id {key_id!r} appears twice.")
        ring[key_id] = key
    if not ring:
        raise ValueError(f"The {what} keyring is empty.")
    return ring


def parse_master_keyring(entries: list[str]) -> dict[str, bytes]:
    """The master keyring (AES-256 keys that wrap data keys); see `parse_keyring`."""
    return parse_keyring(entries, what="master key")
