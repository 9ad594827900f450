"""Customer identity: signed visitor tokens (ours) and identity tokens (the tenant's).

A tenant's site proves who a customer is with an HMAC-SHA256 token made with the tenant's
widget secret (like Intercom's identity verification):

    payload = f"{external_id}|{expires_unix}"
    sig     = hex(hmac_sha256(widget_secret, payload))
    token   = "v1." + b64url(external_id) + "." + str(expires_unix) + "." + sig

Only a verified customer reaches personal data and order tools. Anonymous visitors get a
visitor token signed by us, kept by the chat page; the server never trusts a raw id.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from django.core import signing

from supportbot.errors import ApplicationError
from supportbot.models import Tenant

VISITOR_SALT = "supportbot.visitor"
VISITOR_MAX_AGE = 60 * 60 * 24 * 90


class IdentityError(ApplicationError):
    status = 401
    code = "invalid_identity"


@dataclass(frozen=True)
class VerifiedIdentity:
    external_id: str
    expires_at: int


def _b64e(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _b64d(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


def identity_token_make(*, tenant: Tenant, external_id: str, ttl_seconds: int = 3600) -> str:
    """Make a token as the tenant's backend would (documentation, demo page and tests)."""
    expires = int(time.time()) + ttl_seconds
    sig = hmac.new(
        tenant.widget_secret.encode(), f"{external_id}|{expires}".encode(), hashlib.sha256
    ).hexdigest()
    return f"v1.{_b64e(external_id)}.{expires}.{sig}"


def identity_token_verify(*, tenant: Tenant, token: str) -> VerifiedIdentity:
    """Return the identity in `token`; raise IdentityError if forged, malformed or expired."""
    parts = (token or "").split(".")
    if len(parts) != 4 or parts[0] != "v1":
        raise IdentityError("Malformed identity token.", field="identity")
    try:
        external_id = _b64d(parts[1])
        expires = int(parts[2])
    except (ValueError, UnicodeDecodeError) as exc:
        raise IdentityError("Malformed identity token.", field="identity") from exc
    expected = hmac.new(
        tenant.widget_secret.encode(), f"{external_id}|{expires}".encode(), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, parts[3]):
        raise IdentityError("Identity token signature does not match.", field="identity")
    if expires < time.time():
        raise IdentityError("Identity token has expired.", field="identity")
    if not external_id or len(external_id) > 200:
        raise IdentityError("Identity token names no valid customer id.", field="identity")
    return VerifiedIdentity(external_id=external_id, expires_at=expires)


def visitor_token_make(*, tenant: Tenant, visitor_id: str | None = None) -> tuple[str, str]:
    """Return (visitor_id, signed token) for an anonymous visitor of `tenant`."""
    visitor_id = visitor_id or secrets.token_urlsafe(16)
    token = signing.dumps({"t": tenant.pk, "v": visitor_id}, salt=VISITOR_SALT)
    return visitor_id, token


def visitor_token_verify(*, tenant: Tenant, token: str) -> str:
    """Return the visitor id in `token`; raise IdentityError if forged, expired or foreign."""
    try:
        data = signing.loads(token, salt=VISITOR_SALT, max_age=VISITOR_MAX_AGE)
    except signing.BadSignature as exc:
        raise IdentityError("Invalid visitor token.", field="visitor") from exc
    if data.get("t") != tenant.pk or not data.get("v"):
        raise IdentityError("Visitor token belongs to another site.", field="visitor")
    return str(data["v"])
