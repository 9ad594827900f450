"""Reads of the tenancy core. Every tenant-owned read filters by tenant here."""

from __future__ import annotations

from django.db.models import QuerySet

from supportbot.errors import NotFound
from supportbot.models import ApiKey, AuditEvent, Membership, Tenant


def tenant_get(*, slug: str) -> Tenant:
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    if tenant is None:
        raise NotFound(f"No tenant {slug!r}.")
    return tenant


def api_key_list(*, tenant: Tenant) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(tenant=tenant)


def audit_event_list(*, tenant: Tenant, action: str | None = None) -> QuerySet[AuditEvent]:
    qs = AuditEvent.objects.filter(tenant=tenant)
    if action:
        qs = qs.filter(action=action)
    return qs


def audit_event_get(*, tenant: Tenant, event_id: int) -> AuditEvent:
    event = AuditEvent.objects.filter(tenant=tenant, pk=event_id).first()
    if event is None:
        raise NotFound("No such audit event.")
    return event


def membership_list_for_user(*, user) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user, tenant__is_active=True).select_related("tenant")


def membership_get(*, user, tenant: Tenant) -> Membership | None:
    return Membership.objects.filter(user=user, tenant=tenant).first()
