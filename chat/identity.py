"""Customer identity: signed visitor tokens (ours) and identity tokens (the tenant's).

A tenant's site proves who a customer is with an HMAC-SHA256 token made with the tenant's
widget secret (like Intercom's identity verification):

    payload = f"{external_id}|{expires_unix}|{nonce}"
    sig     = hex(hmac_sha256(widget_secret, payload))
    token   = "v2." + b64url(external_id) + "." + str(expires_unix) + "." + nonce + "." + sig

(`v1` is the same without the nonce.) A token may expire at most the tenant's maximum lifetime
ahead (24 h by default) and is accepted once (`identity_token_redeem`); the page then
reconnects with our `identity_session`, which ends when the token would have. After a rotation
the previous widget secret verifies until `widget_secret_previous_until`; an `identity_session`
names the secret that verified its token and ends when that secret stops verifying.

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
from django.utils import timezone

from supportbot import ratelimit
from supportbot.errors import ApplicationError
from supportbot.models import Tenant

VISITOR_SALT = "supportbot.visitor"
VISITOR_MAX_AGE = 60 * 60 * 24 * 90
IDENTITY_SESSION_SALT = "supportbot.identity-session"
CLOCK_SKEW_S = 60


class IdentityError(ApplicationError):
    status = 401
    code = "invalid_identity"


@dataclass(frozen=True)
class VerifiedIdentity:
    external_id: str
    expires_at: int
    secret_id: str = ""


def _secret_id(secret: str) -> str:
    """A short, public name for a widget secret (never the secret): which one verified."""
    return hashlib.sha256(b"supportbot.widget-secret-id:" + secret.encode()).hexdigest()[:16]


def _b64e(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _b64d(text: str) -> str:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()


def _signature(secret: str, payload: str) -> str:
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def identity_token_make(
    *, tenant: Tenant, external_id: str, ttl_seconds: int = 3600, nonce: str | None = None
) -> str:
    """Make a token as the tenant's backend would (documentation, demo page and tests).

    v2 (the default) carries a random nonce, so two tokens made in the same second differ.
    """
    expires = int(time.time()) + ttl_seconds
    if nonce == "":  # the v1 format: no nonce
        payload = f"{external_id}|{expires}"
        return f"v1.{_b64e(external_id)}.{expires}.{_signature(tenant.widget_secret, payload)}"
    nonce = nonce or secrets.token_urlsafe(12)
    payload = f"{external_id}|{expires}|{nonce}"
    sig = _signature(tenant.widget_secret, payload)
    return f"v2.{_b64e(external_id)}.{expires}.{nonce}.{sig}"


def _secrets_in_force(tenant: Tenant) -> list[str]:
    """The widget secret, and the previous one until its overlap ends."""
    found = [tenant.widget_secret]
    until = tenant.widget_secret_previous_until
    if tenant.widget_secret_previous and until is not None and until > timezone.now():
        found.append(tenant.widget_secret_previous)
    return found


def identity_token_verify(*, tenant: Tenant, token: str) -> VerifiedIdentity:
    """Return the identity in `token`; raise IdentityError if forged, malformed, expired or
    longer-lived than the tenant allows (`Tenant.identity_token_max_lifetime_s`)."""
    parts = token.split(".") if isinstance(token, str) else []
    if not ((len(parts) == 4 and parts[0] == "v1") or (len(parts) == 5 and parts[0] == "v2")):
        raise IdentityError("Malformed identity token.", field="identity")
    try:
        external_id = _b64d(parts[1])
        expires = int(parts[2])
    except (ValueError, UnicodeDecodeError) as exc:
        raise IdentityError("Malformed identity token.", field="identity") from exc
    payload = f"{external_id}|{expires}" + (f"|{parts[3]}" if parts[0] == "v2" else "")
    given = parts[-1]
    matched = [
        secret
        for secret in _secrets_in_force(tenant)
        if hmac.compare_digest(_signature(secret, payload), given)
    ]
    if not matched:
        raise IdentityError("Identity token signature does not match.", field="identity")
    now = time.time()
    if expires < now:
        raise IdentityError("Identity token has expired.", field="identity")
    if expires - now > tenant.identity_token_max_lifetime_s + CLOCK_SKEW_S:
        raise IdentityError(
            "Identity token lives too long: it may expire at most "
            f"{tenant.identity_token_max_lifetime_s} s after it is made.",
            field="identity",
        )
    if not external_id or len(external_id) > 200:
        raise IdentityError("Identity token names no valid customer id.", field="identity")
    return VerifiedIdentity(
        external_id=external_id, expires_at=expires, secret_id=_secret_id(matched[0])
    )


def identity_token_redeem(*, tenant: Tenant, token: str) -> VerifiedIdentity:
    """Verify `token` and mark it used: the same token is refused for the rest of its life.

    The mark is kept in Redis (every process sees it) with an in-process fallback.
    """
    verified = identity_token_verify(tenant=tenant, token=token)
    ttl = max(1, int(verified.expires_at - time.time()) + CLOCK_SKEW_S)
    digest = hashlib.sha256(token.encode()).hexdigest()
    if not ratelimit.mark_once(name="identity", key=(tenant.pk, digest), ttl_seconds=ttl):
        raise IdentityError(
            "Identity token was already used; get a fresh one from your site.",
            code="identity_replayed",
            field="identity",
        )
    return verified


def identity_session_make(*, tenant: Tenant, identity: VerifiedIdentity) -> str:
    """Our signed proof of a redeemed identity, for the page's reconnects (same expiry, same
    widget secret: it ends when the secret that verified the token is rotated out)."""
    return signing.dumps(
        {
            "t": tenant.pk,
            "x": identity.external_id,
            "e": identity.expires_at,
            "k": identity.secret_id,
        },
        salt=IDENTITY_SESSION_SALT,
    )


def identity_session_verify(*, tenant: Tenant, token: str) -> VerifiedIdentity:
    """The identity of an `identity_session`; raise IdentityError if forged, foreign or
    expired (the identity token it came from expired, or the widget secret that verified it
    was rotated out)."""
    try:
        data = signing.loads(token, salt=IDENTITY_SESSION_SALT)
    except signing.BadSignature as exc:
        raise IdentityError("Invalid identity session.", field="identity_session") from exc
    if not isinstance(data, dict) or data.get("t") != tenant.pk or not data.get("x"):
        raise IdentityError("Identity session belongs to another site.", field="identity_session")
    if not isinstance(data.get("e"), int) or data["e"] < time.time():
        raise IdentityError(
            "Identity expired; sign in again.", code="identity_expired", field="identity_session"
        )
    in_force = {_secret_id(secret) for secret in _secrets_in_force(tenant)}
    if data.get("k") not in in_force:
        raise IdentityError(
            "The site's widget secret changed; sign in again.",
            code="identity_expired",
            field="identity_session",
        )
    return VerifiedIdentity(external_id=str(data["x"]), expires_at=data["e"], secret_id=data["k"])


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
