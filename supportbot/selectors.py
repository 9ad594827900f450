"""Reads of the tenancy core. Every tenant-owned read filters by tenant here."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import QuerySet
from django.http.request import validate_host
from django.utils import timezone

from supportbot.errors import NotFound
from supportbot.models import ApiKey, AuditEvent, LoginFailure, Membership, Tenant


def tenant_get(*, slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    if tenant is None:
        raise NotFound(f"No tenant {slug!r}.")
    return tenant


def api_key_list(*, tenant: Tenant) -> QuerySet[ApiKey]:
    """The tenant's keys, newest first, with who created them (one query)."""
    return ApiKey.objects.filter(tenant=tenant).select_related("created_by")


def api_key_get(*, tenant: Tenant, key_id: int) -> ApiKey:
    """The tenant's key `key_id`; raise NotFound for another tenant's (or no) key."""
    key = api_key_list(tenant=tenant).filter(pk=key_id).first()
    if key is None:
        raise NotFound("No such API key.")
    return key


def audit_event_list(*, tenant: Tenant, action: str | None = None) -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.filter(tenant=tenant)
    if action:
        qs = qs.filter(action=action)
    return qs


def audit_event_filter(
    *,
    tenant: Tenant,
    action: str = "",
    actor: str = "",
    target_type: str = "",
    since=None,
    until=None,
) -> QuerySet[AuditEvent]:
    """The tenant's audit events, newest first: `action` matches a prefix (`handoff.` or
    `handoff.claimed`), `actor` a part of the actor's label; `since`/`until` are datetimes."""
    qs = AuditEvent.objects.filter(tenant=tenant)
    if action:
        qs = qs.filter(action__startswith=action)
    if actor:
        qs = qs.filter(actor_label__icontains=actor)
    if target_type:
        qs = qs.filter(target_type=target_type)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    return qs.order_by("-created_at", "-id")


def audit_event_get(*, tenant: Tenant, event_id: int) -> AuditEvent:
    event = AuditEvent.objects.filter(tenant=tenant, pk=event_id).first()
    if event is None:
        raise NotFound("No such audit event.")
    return event


def membership_list_for_user(*, user) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, tenant__is_active=True).select_related("tenant")


def membership_get(*, user, tenant: Tenant) -> Membership | None:
    return Membership.objects.filter(user=user, tenant=tenant).first()


def tenant_frame_ancestors(*, tenant: Tenant) -> list[str]:
    """CSP `frame-ancestors` sources for the tenant's chat page: us and its allowed origins."""
    return ["'self'", *tenant.allowed_origins]


def tenant_origin_allowed(*, tenant: Tenant, origin: str | None) -> bool:
    """May a browser page at `origin` talk to the tenant's chat? Its allowed origins, or a page
    of this product (the origin's host is one of ALLOWED_HOSTS, like Channels'
    AllowedHostsOriginValidator). No Origin at all is refused: browsers always send one."""
    if not origin:
        return False
    if origin.strip().lower() in tenant.allowed_origins:
        return True
    return origin_is_own(origin=origin)


def origin_is_own(*, origin: str) -> bool:
    """Is `origin` a page of this product (its host one of ALLOWED_HOSTS)?"""
    origin = origin.strip().lower()
    try:
        parts = urlsplit(origin)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host:
        return False
    return validate_host(host, settings.ALLOWED_HOSTS)


def login_failures_recent(*, user, limit: int = 10) -> list[LoginFailure]:
    """`user`'s latest failed logins within `LOGIN_FAILURE_RETENTION_DAYS`, newest first."""
    since = timezone.now() - timedelta(days=settings.LOGIN_FAILURE_RETENTION_DAYS)
    return list(LoginFailure.objects.filter(user=user, created_at__gte=since)[:limit])


def origin_allowed_by_any_tenant(*, origin: str | None) -> bool:
    """May a page at `origin` open the chat socket at all? A page of this product, or one of
    some active tenant's allowed origins (`session.start` then checks the tenant it names)."""
    if not origin or len(origin) > 200 or "\x00" in origin:
        return False
    if origin_is_own(origin=origin):
        return True
    return Tenant.objects.filter(
        is_active=True, allowed_origins__contains=[origin.strip().lower()]
    ).exists()
