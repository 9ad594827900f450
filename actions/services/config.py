"""A tenant's order-system connection and action policy."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from actions import crypto, selectors
from actions.models import ActionPolicy, ActionRequest, ProviderConfig
from actions.providers import OrderProvider, ProviderError, ProviderSettings
from supportbot.errors import ApplicationError
from supportbot.models import Membership, Tenant
from supportbot.services import Actor, audit_event_record


class ProviderNotConfigured(ProviderError):
    code = "provider_not_configured"


@transaction.atomic
def provider_config_set(
    *,
    tenant: Tenant,
    base_url: str,
    token: str,
    timeout_seconds: float | None = None,
    actor: Actor | None = None,
) -> ProviderConfig:
    """Point `tenant` at its order API; the token is stored encrypted (never logged)."""
    if not base_url.startswith(("http://", "https://")):
        raise ApplicationError("base_url must be an http(s) URL.", field="base_url")
    defaults: dict[str, Any] = {
        "base_url": base_url.rstrip("/"),
        "credentials_encrypted": crypto.encrypt(token),
        "enabled": True,
    }
    if timeout_seconds is not None:
        defaults["timeout_seconds"] = timeout_seconds
    config, created = ProviderConfig.objects.update_or_create(tenant=tenant, defaults=defaults)
    audit_event_record(
        tenant=tenant,
        actor=actor or Actor.system(),
        action="provider_config.set",
        target_type="provider_config",
        target_id=config.pk,
        data={"base_url": config.base_url, "created": created},
    )
    return config


def provider_for(tenant: Tenant) -> OrderProvider:
    """A client of `tenant`'s order API (raise ProviderNotConfigured when there is none)."""
    config = selectors.provider_config_get(tenant=tenant)
    if config is None:
        raise ProviderNotConfigured("This tenant has no order system configured.")
    return OrderProvider(
        ProviderSettings(
            base_url=config.base_url,
            token=crypto.decrypt(config.credentials_encrypted),
            timeout_seconds=config.timeout_seconds or settings.ACTIONS["PROVIDER_TIMEOUT_S"],
        )
    )


def action_policy_get(*, tenant: Tenant) -> ActionPolicy:
    """The tenant's action policy (the defaults when it never set one; nothing is written)."""
    policy = ActionPolicy.objects.filter(tenant=tenant).first()
    return policy or ActionPolicy(tenant=tenant)


ROLES = set(Membership.Role.values)
RISKS = (ActionRequest.Risk.LOW, ActionRequest.Risk.HIGH)


def proposal_ttl_checked(value: int) -> int:
    """`value` if it is a proposal lifetime we allow (30 s to 24 h), else ApplicationError."""
    if not 30 <= value <= 24 * 3600:
        raise ApplicationError(
            "proposal_ttl_seconds must be 30..86400.", field="proposal_ttl_seconds"
        )
    return value


def approver_roles_checked(
    approver_roles: dict[str, list[str]], *, current: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Roles per risk class (a class left out keeps `current`); every class keeps at least one
    known role, else ApplicationError."""
    cleaned = {}
    for risk in RISKS:
        roles = approver_roles.get(risk, current.get(risk, []))
        if not roles or not set(roles) <= ROLES:
            raise ApplicationError(
                f"approver_roles.{risk} must name at least one of {sorted(ROLES)}.",
                field="approver_roles",
            )
        cleaned[risk] = sorted(set(roles))
    return cleaned


@transaction.atomic
def action_policy_set(
    *,
    tenant: Tenant,
    actor: Actor,
    proposal_ttl_seconds: int | None = None,
    dedupe_window_hours: int | None = None,
    approver_roles: dict[str, list[str]] | None = None,
) -> ActionPolicy:
    """Change the tenant's action policy (audited). Every risk class keeps at least one role."""
    policy, _ = ActionPolicy.objects.select_for_update().get_or_create(tenant=tenant)
    if proposal_ttl_seconds is not None:
        policy.proposal_ttl_seconds = proposal_ttl_checked(proposal_ttl_seconds)
    if dedupe_window_hours is not None:
        if not 1 <= dedupe_window_hours <= 24 * 90:
            raise ApplicationError(
                "dedupe_window_hours must be 1..2160.", field="dedupe_window_hours"
            )
        policy.dedupe_window_hours = dedupe_window_hours
    if approver_roles is not None:
        policy.approver_roles = approver_roles_checked(
            approver_roles, current=policy.approver_roles
        )
    policy.save()
    audit_event_record(
        tenant=tenant,
        actor=actor,
        action="action_policy.set",
        target_type="action_policy",
        target_id=policy.pk,
        data={
            "proposal_ttl_seconds": policy.proposal_ttl_seconds,
            "dedupe_window_hours": policy.dedupe_window_hours,
            "approver_roles": policy.approver_roles,
        },
    )
    return policy
