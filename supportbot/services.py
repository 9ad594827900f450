"""Writes of the tenancy core: tenants, memberships, API keys, audit events."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from supportbot.client_address import address_truncated
from supportbot.errors import ApplicationError, Conflict, NotFound
from supportbot.models import (
    SEGMENT_RE,
    SLUG_RE,
    ApiKey,
    AuditEvent,
    LoginFailure,
    Membership,
    Tenant,
)

logger = logging.getLogger(__name__)

KEY_PREFIX = "sb_"
_KEY_RE = re.compile(r"^sb_([A-Za-z0-9]{8})_([A-Za-z0-9_-]{32,64})$")


@dataclass(frozen=True)
class Actor:
    """Who is acting, for the audit trail."""

    type: str
    id: str = ""
    label: str = ""

    @classmethod
    def system(cls, label: str = "system") -> Actor:
        return cls(type=AuditEvent.ActorType.SYSTEM, label=label)

    @classmethod
    def for_user(cls, user) -> Actor:
        return cls(type=AuditEvent.ActorType.USER, id=str(user.pk), label=user.get_username())

    @classmethod
    def for_api_key(cls, key: ApiKey) -> Actor:
        return cls(type=AuditEvent.ActorType.API_KEY, id=str(key.pk), label=f"key:{key.prefix}")


_AUDIT_CODE_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def audit_code(value: object) -> str:
    """`value` if it is shaped like a code (letters, digits, `_.:-`, at most 64), else "other".

    For codes that come from outside (an order system's error code): audit rows hold ids and
    codes, never free text that could carry a customer's words (the trail outlives erasure).
    """
    text = str(value) if isinstance(value, str | int) else ""
    return text if _AUDIT_CODE_RE.match(text) else "other"


def audit_event_record(
    *,
    tenant: Tenant | None,
    actor: Actor,
    action: str,
    target_type: str = "",
    target_id: str | int = "",
    data: dict | None = None,
) -> AuditEvent:
    """Append one audit event (in the caller's transaction, so it commits with the change).

    `data` holds ids, counts and codes, never text a customer or agent wrote: the trail is
    append-only and outlives a customer's erasure (docs/data-protection.md "Audit trail")."""
    return AuditEvent.objects.create(
        tenant=tenant,
        actor_type=actor.type,
        actor_id=actor.id,
        actor_label=actor.label[:200],
        action=action,
        target_type=target_type,
        target_id=str(target_id),
        data=data or {},
    )


# --------------------------------------------------------------------------- tenants


@transaction.atomic
def tenant_create(*, slug: str, name: str, actor: Actor | None = None) -> Tenant:
    """Create a tenant; raise ApplicationError for a bad or taken slug (nothing is written)."""
    actor = actor or Actor.system()
    if not re.match(SLUG_RE, slug or ""):
        raise ApplicationError(
            f"Invalid slug {slug!r}: use 1-50 lowercase letters, digits or inner hyphens.",
            field="slug",
        )
    if not (name or "").strip():
        raise ApplicationError("Name must not be empty.", field="name")
    if Tenant.objects.filter(slug=slug).exists():
        raise Conflict(f"A tenant with slug {slug!r} already exists.", field="slug")
    tenant = Tenant(slug=slug, name=name.strip())
    try:
        tenant.full_clean()
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise ApplicationError(f"{field}: {messages[0]}", field=field) from exc
    try:
        with transaction.atomic():
            tenant.save()
    except IntegrityError as exc:  # a concurrent create won the race
        raise Conflict(f"A tenant with slug {slug!r} already exists.", field="slug") from exc
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="tenant.created",
        target_type="tenant",
        target_id=tenant.pk,
        data={"slug": slug},
    )
    return tenant


WIDGET_SECRET_MAX_OVERLAP_S = 7 * 24 * 3600


@transaction.atomic
def tenant_widget_secret_rotate(*, tenant: Tenant, actor: Actor, overlap_seconds: int) -> Tenant:
    """Give the tenant a new widget secret; the old one still verifies for `overlap_seconds`
    (0 to 7 days) so the tenant's backend can switch without a gap. Audited (no secret)."""
    if (
        not isinstance(overlap_seconds, int)
        or not 0 <= overlap_seconds <= WIDGET_SECRET_MAX_OVERLAP_S
    ):
        raise ApplicationError(
            f"overlap_seconds must be 0 to {WIDGET_SECRET_MAX_OVERLAP_S}.", field="overlap_seconds"
        )
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    tenant.widget_secret_previous = tenant.widget_secret
    tenant.widget_secret_previous_until = timezone.now() + timedelta(seconds=overlap_seconds)
    tenant.widget_secret = secrets.token_urlsafe(32)
    tenant.save(
        update_fields=["widget_secret", "widget_secret_previous", "widget_secret_previous_until"]
    )
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="tenant.widget_secret_rotated",
        target_type="tenant",
        target_id=tenant.pk,
        data={"overlap_seconds": overlap_seconds},
    )
    return tenant


@transaction.atomic
def membership_set(*, tenant: Tenant, user, role: str, actor: Actor | None = None) -> Membership:
    """Give `user` `role` in `tenant` (creating or changing the membership)."""
    if role not in Membership.Role.values:
        raise ApplicationError(f"Unknown role {role!r}.", field="role")
    membership, created = Membership.objects.update_or_create(
        tenant=tenant, user=user, defaults={"role": role}
    )
    audit_event_record(
        tenant=tenant,
        actor=actor or Actor.system(),
        action="membership.set",
        target_type="user",
        target_id=user.pk,
        data={"role": role, "created": created},
    )
    return membership


def user_ensure(*, username: str, password: str, email: str = "", is_staff: bool = False):
    """Create the user if missing (password set only on creation); return it."""
    User = get_user_model()
    user, created = User.objects.get_or_create(
        username=username, defaults={"email": email, "is_staff": is_staff}
    )
    if created:
        user.set_password(password)
        user.save(update_fields=["password"])
    return user


# --------------------------------------------------------------------------- API keys


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _api_key_name_checked(name: str) -> str:
    cleaned = (name or "").strip()
    if not cleaned:
        raise ApplicationError("Name must not be empty.", field="name")
    if len(cleaned) > ApiKey.NAME_MAX_LENGTH:
        raise ApplicationError(
            f"Name must be at most {ApiKey.NAME_MAX_LENGTH} characters.", field="name"
        )
    return cleaned


def _api_key_segments_checked(segments: list[str] | None) -> list[str]:
    cleaned = sorted({s.strip().lower() for s in segments or [] if s and s.strip()})
    for segment in cleaned:
        if not SEGMENT_RE.match(segment):
            raise ApplicationError(
                f"Invalid segment {segment!r}: use lowercase letters, digits, '-' or '_'.",
                field="search_segments",
            )
    return cleaned


@transaction.atomic
def api_key_create(
    *,
    tenant: Tenant,
    name: str,
    actor: Actor | None = None,
    created_by=None,
    may_search_agent_documents: bool = False,
    search_segments: list[str] | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; return it and the full key text, which is never retrievable again (only
    its SHA-256 is stored, and the audit row names the key by its prefix).

    It searches public documents only, plus agents-only ones and the customer segments it is
    granted here. Raise ApplicationError (with `field`) for an empty or too long name or a
    malformed segment; nothing is written then."""
    name = _api_key_name_checked(name)
    segments = _api_key_segments_checked(search_segments)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    for _ in range(5):
        prefix = "".join(secrets.choice(alphabet) for _ in range(8))
        if not ApiKey.objects.filter(prefix=prefix).exists():
            break
    secret = secrets.token_urlsafe(32)
    key = ApiKey.objects.create(
        tenant=tenant,
        name=name,
        prefix=prefix,
        secret_hash=_hash_secret(secret),
        created_by=created_by,
        may_search_agent_documents=may_search_agent_documents,
        search_segments=segments,
    )
    key_actor = actor or (Actor.for_user(created_by) if created_by else Actor.system())
    audit_event_record(
        tenant=tenant,
        actor=key_actor,
        action="api_key.created",
        target_type="api_key",
        target_id=key.pk,
        data={
            "name": key.name,
            "prefix": prefix,
            "may_search_agent_documents": may_search_agent_documents,
            "search_segments": key.search_segments,
        },
    )
    logger.info("API key %s of tenant %s created by %s", prefix, tenant.slug, key_actor.label)
    return key, f"{KEY_PREFIX}{prefix}_{secret}"


@transaction.atomic
def api_key_revoke(*, tenant: Tenant, key_id: int, actor: Actor | None = None) -> ApiKey:
    """Revoke a key of `tenant` (idempotent: a second revoke, even a concurrent one, changes
    nothing and writes no second audit row: the row lock orders them); raise NotFound for
    another tenant's key. The API refuses the key from the commit on."""
    key = ApiKey.objects.select_for_update().filter(tenant=tenant, pk=key_id).first()
    if key is None:
        raise NotFound("No such API key.")
    if key.revoked_at is None:
        actor = actor or Actor.system()
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
        audit_event_record(
            tenant=tenant,
            actor=actor,
            action="api_key.revoked",
            target_type="api_key",
            target_id=key.pk,
            data={"name": key.name, "prefix": key.prefix},
        )
        logger.info("API key %s of tenant %s revoked by %s", key.prefix, tenant.slug, actor.label)
    return key


class InvalidApiKey(Exception):
    """The presented key is malformed, unknown or revoked (the message says which)."""


def api_key_authenticate(*, raw_key: str) -> ApiKey:
    """Return the active key for `raw_key`, refreshing `last_used_at` at most once a minute."""
    match = _KEY_RE.match(raw_key or "")
    if not match:
        raise InvalidApiKey("Malformed API key: expected 'sb_<prefix>_<secret>'.")
    prefix, secret = match.groups()
    key = ApiKey.objects.select_related("tenant").filter(prefix=prefix).first()
    if key is None or not hmac.compare_digest(key.secret_hash, _hash_secret(secret)):
        raise InvalidApiKey("Unknown API key.")
    if key.revoked_at is not None:
        raise InvalidApiKey("This API key has been revoked.")
    if not key.tenant.is_active:
        raise InvalidApiKey("This API key's tenant is disabled.")
    now = timezone.now()
    resolution = timedelta(seconds=settings.API_KEY_LAST_USED_RESOLUTION_SECONDS)
    if key.last_used_at is None or now - key.last_used_at >= resolution:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


# --------------------------------------------------------------------------- logins


def login_record(*, username: str, succeeded: bool, ip: str = "", user=None) -> int:
    """Audit a console login attempt once per tenant the account works for (without tenant
    when the username is unknown); return the events written. Never records the password."""
    if user is None:
        user = get_user_model().objects.filter(username=username).first()
    tenants = (
        [m.tenant for m in Membership.objects.filter(user=user).select_related("tenant")]
        if user is not None
        else []
    )
    actor = (
        Actor.for_user(user)
        if user is not None
        else Actor(type=AuditEvent.ActorType.USER, label=username[:200])
    )
    action = "login.succeeded" if succeeded else "login.failed"
    data = {"ip": ip[:64], "username": username[:150]}
    with transaction.atomic():
        if user is not None and not succeeded:
            login_failure_create(user=user, address=ip)
        for tenant in tenants or [None]:
            audit_event_record(
                tenant=tenant,
                actor=actor,
                action=action,
                target_type="user",
                target_id=user.pk if user is not None else "",
                data=data,
            )
    return len(tenants) or 1


@transaction.atomic
def tenant_settings_record(*, tenant: Tenant, changed: dict, actor: Actor) -> None:
    """Audit a change of tenant settings: the fields and their new values (settings, never
    secrets: the widget secret is named, not shown)."""
    values = {
        field: ("(changed)" if field == "widget_secret" else str(value)[:200])
        for field, value in changed.items()
    }
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="tenant.settings_changed",
        target_type="tenant",
        target_id=tenant.pk,
        data={"changes": values},
    )


@transaction.atomic
def login_failure_create(*, user, address: str) -> LoginFailure:
    """Remember a wrong password for `user` from `address` (kept truncated) so the console can
    show it to them; forget their failures older than `LOGIN_FAILURE_RETENTION_DAYS`."""
    cutoff = timezone.now() - timedelta(days=settings.LOGIN_FAILURE_RETENTION_DAYS)
    LoginFailure.objects.filter(user=user, created_at__lt=cutoff).delete()
    return LoginFailure.objects.create(user=user, network=address_truncated(address))
