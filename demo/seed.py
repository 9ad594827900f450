"""The demo tenant "acme": logins, its help center (demo/helpcenter) and its order system
(demo/orders: the provider config points at the reference service; customers cust-1001/1002).

Idempotent: running it again changes nothing that exists. Demo passwords come from
`DEMO_PASSWORD` or are generated once and kept in `var/demo-credentials.json` (never in git).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction

from actions import crypto
from actions import selectors as action_selectors
from actions import services as action_services
from conversations import services as conversation_services
from demo.orders import config as order_service_config
from knowledge import selectors as knowledge_selectors
from knowledge import services as knowledge_services
from supportbot.errors import ApplicationError
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


HELPCENTER_DIR = Path(__file__).resolve().parent / "helpcenter"


def seed_helpcenter(tenant: Tenant) -> tuple[int, int]:
    """Upload the help-center documents through the normal upload path (indexed by qcluster).

    Matches documents by title; the same bytes make no new version. Returns (new, changed).
    """
    actor = Actor.system("seed_demo")
    manifest = json.loads((HELPCENTER_DIR / "manifest.json").read_text())
    created = changed = 0
    for entry in manifest["documents"]:
        upload = ContentFile((HELPCENTER_DIR / entry["file"]).read_bytes(), name=entry["file"])
        existing = knowledge_selectors.document_find_by_title(tenant=tenant, title=entry["title"])
        if existing is None:
            knowledge_services.document_upload(
                tenant=tenant,
                file=upload,
                title=entry["title"],
                audience=entry["audience"],
                segments=entry.get("segments", []),
                actor=actor,
            )
            created += 1
        else:
            _, new_version = knowledge_services.document_replace_file(
                tenant=tenant, document_id=existing.pk, file=upload, actor=actor
            )
            changed += new_version
    return created, changed


DEMO_CUSTOMERS = [
    ("cust-1001", "Alex Rivera", "alex@example.com"),
    ("cust-1002", "Sam Chen", "sam@example.com"),
]


def _credentials_readable(config) -> bool:
    """False when the stored token was encrypted under another key (the key derivation
    changed, or var/secret-key was regenerated): seeding then stores it again."""
    try:
        crypto.decrypt(config.credentials_encrypted)
    except ApplicationError:
        return False
    return True


def seed_orders_provider(tenant: Tenant) -> str:
    """Point the tenant at the reference order service (URL and token from its env/var)."""
    cfg = order_service_config.load()
    base_url = settings.ORDER_SERVICE_URL or cfg.base_url
    current = action_selectors.provider_config_get(tenant=tenant)
    if (
        current is None
        or current.base_url != base_url.rstrip("/")
        or not _credentials_readable(current)
    ):
        action_services.provider_config_set(
            tenant=tenant, base_url=base_url, token=cfg.token, actor=Actor.system("seed_demo")
        )
    for external_id, name, email in DEMO_CUSTOMERS:
        conversation_services.customer_get_or_create_verified(
            tenant=tenant, external_id=external_id, name=name, email=email
        )
    return base_url


def seed_all(stdout=None) -> list[DemoLogin]:
    """Seed everything the demo needs; return the logins to print."""
    tenant, logins = seed_tenant_and_logins()
    orders_url = seed_orders_provider(tenant)
    if stdout is not None:
        stdout.write(f"Order system: {orders_url} (customers cust-1001, cust-1002).")
    seed_helpcenter(tenant)
    if stdout is not None:
        count = knowledge_selectors.document_list(tenant=tenant).count()
        stdout.write(
            f"Help center: {count} documents (qcluster indexes new ones; status at "
            "/admin/knowledge/document/)."
        )
    return logins
