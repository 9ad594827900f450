"""The demo tenant "acme": logins now; later parts add its help center and orders.

Idempotent: running it again changes nothing that exists. Demo passwords come from
`DEMO_PASSWORD` or are generated once and kept in `var/demo-credentials.json` (never in git).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from supportbot.models import Membership, Tenant
from supportbot.services import Actor, membership_set, tenant_create, user_ensure

DEMO_SLUG = "acme"
DEMO_NAME = "Acme Outdoor Gear"


@dataclass(frozen=True)
class DemoLogin:
    username: str
    password: str
    role: str


def _credentials() -> dict[str, str]:
    path = settings.VAR_DIR / "demo-credentials.json"
    if path.exists():
        return json.loads(path.read_text())
    shared = os.environ.get("DEMO_PASSWORD")
    creds = {
        "admin": shared or secrets.token_urlsafe(9),
        "agent": shared or secrets.token_urlsafe(9),
        "agent2": shared or secrets.token_urlsafe(9),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(creds, indent=2))
    path.chmod(0o600)
    return creds


@transaction.atomic
def seed_tenant_and_logins() -> tuple[Tenant, list[DemoLogin]]:
    actor = Actor.system("seed_demo")
    tenant = Tenant.objects.filter(slug=DEMO_SLUG).first() or tenant_create(
        slug=DEMO_SLUG, name=DEMO_NAME, actor=actor
    )
    creds = _credentials()
    logins = []
    for username, role, staff in [
        ("admin", Membership.Role.ADMIN, True),
        ("agent", Membership.Role.AGENT, False),
        ("agent2", Membership.Role.AGENT, False),
    ]:
        user = user_ensure(
            username=username,
            password=creds[username],
            email=f"{username}@acme.example",
            is_staff=staff,
        )
        if staff and not user.is_superuser:
            user.is_superuser = True
            user.save(update_fields=["is_superuser"])
        if not Membership.objects.filter(tenant=tenant, user=user).exists():
            membership_set(tenant=tenant, user=user, role=role, actor=actor)
        logins.append(DemoLogin(username=username, password=creds[username], role=role))
    return tenant, logins


def seed_all(stdout=None) -> list[DemoLogin]:
    """Seed everything the demo needs; return the logins to print."""
    _, logins = seed_tenant_and_logins()
    return logins
