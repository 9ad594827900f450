"""Shared fixtures. Settings have already started the embedded services when no URLs are set."""

import os

import pytest
from rest_framework.test import APIClient

from supportbot.services import api_key_create
from supportbot.tests.factories import MembershipFactory, TenantFactory


def require_or_skip(available: bool, reason: str) -> None:
    """Skip when a heavy dependency is missing, except in CI where that is a failure."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a required dependency is missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _media_root(settings, tmp_path):
    """Uploaded files go to a temporary media root, not the developer's var/media."""
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def tenant(db):
    return TenantFactory(slug="acme-test", name="Acme Test")


@pytest.fixture
def other_tenant(db):
    return TenantFactory(slug="globex-test", name="Globex Test")


@pytest.fixture
def api_key(tenant):
    key, raw = api_key_create(tenant=tenant, name="partner")
    key.raw = raw
    return key


@pytest.fixture
def api_client(api_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key.raw}")
    return client


@pytest.fixture
def agent(tenant):
    return MembershipFactory(tenant=tenant, role="agent").user


@pytest.fixture
def tenant_admin(tenant):
    return MembershipFactory(tenant=tenant, role="admin").user
