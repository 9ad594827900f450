"""Fernet encryption of provider credentials. The key is `ACTIONS_ENCRYPTION_KEY` (a Fernet
key); without it a development key is derived from SECRET_KEY."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from supportbot.errors import ApplicationError


def _fernet() -> Fernet:
    key = getattr(settings, "ACTIONS_ENCRYPTION_KEY", "")
    if not key:
        digest = hashlib.sha256(f"actions-credentials:{settings.SECRET_KEY}".encode()).digest()
        key = base64.urlsafe_b64encode(digest).decode()
    return Fernet(key)


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode() if plaintext else ""


def decrypt(token: str) -> str:
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ApplicationError(
            "Provider credentials cannot be decrypted (was ACTIONS_ENCRYPTION_KEY changed?).",
            code="credentials_unreadable",
        ) from exc
