"""The widget secret in the console: shown to and rotated by the tenant's admins only."""

import threading

import pytest
from django.test import Client

from chat.identity import identity_token_make, identity_token_verify
from supportbot.models import AuditEvent, Tenant
from supportbot.tests.factories import MembershipFactory, UserFactory


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admin_sees_the_secret_on_the_page_and_in_the_api(tenant, tenant_admin):
    client = login(tenant_admin)
    page = client.get("/console/widget/")
    assert page.status_code == 200
    assert tenant.widget_secret in page.content.decode()
    assert "no-store" in page["Cache-Control"]
    body = client.get("/console/api/widget-secret").json()
    assert body["widget_secret"] == tenant.widget_secret
    assert body["previous_valid_until"] is None


def test_rotation_keeps_old_tokens_valid_for_the_overlap(tenant, tenant_admin):
    old_token = identity_token_make(tenant=tenant, external_id="c-1")
    response = login(tenant_admin).post(
        "/console/api/widget-secret/rotate",
        {"overlap_seconds": 600},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    tenant.refresh_from_db()
    assert response.json()["widget_secret"] == tenant.widget_secret != tenant.widget_secret_previous
    assert response.json()["previous_valid_until"] is not None
    assert identity_token_verify(tenant=tenant, token=old_token).external_id == "c-1"
    event = AuditEvent.objects.get(action="tenant.widget_secret_rotated")
    assert tenant.widget_secret not in str(event.data)
    assert tenant.widget_secret_previous not in str(event.data)


def test_rotation_from_the_page_form(tenant, tenant_admin):
    before = tenant.widget_secret
    response = login(tenant_admin).post("/console/widget/", {"overlap_hours": "1"})
    assert response.status_code == 302
    tenant.refresh_from_db()
    assert tenant.widget_secret != before
    assert tenant.widget_secret_previous == before


@pytest.mark.parametrize("overlap", [-1, 10**9, "soon", None])
def test_odd_overlaps_are_400_json(tenant, tenant_admin, overlap):
    response = login(tenant_admin).post(
        "/console/api/widget-secret/rotate",
        {"overlap_seconds": overlap},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid"


def test_agents_staff_and_other_tenants_admins_never_see_the_secret(tenant, other_tenant, agent):
    other_admin = MembershipFactory(tenant=other_tenant, role="admin").user
    staff = UserFactory(is_staff=True)
    for user in (agent, other_admin, staff):
        client = login(user)
        for url in ("/console/widget/", f"/console/widget/?tenant={tenant.slug}"):
            page = client.get(url)
            assert tenant.widget_secret not in page.content.decode()
        api = client.get("/console/api/widget-secret", HTTP_X_SUPPORTBOT_TENANT=tenant.slug)
        assert api.status_code == 403, (user, api.content)
        assert tenant.widget_secret not in api.content.decode()
        rotate = client.post(
            "/console/api/widget-secret/rotate",
            {},
            content_type="application/json",
            HTTP_X_SUPPORTBOT_TENANT=tenant.slug,
        )
        assert rotate.status_code == 403
    assert Tenant.objects.get(pk=tenant.pk).widget_secret == tenant.widget_secret


def test_anonymous_and_partner_keys_cannot_reach_the_secret(tenant, api_client):
    assert Client().get("/console/api/widget-secret").status_code == 403
    assert api_client.get("/console/api/widget-secret").status_code in (401, 403)


@pytest.mark.django_db(transaction=True)
def test_two_admins_rotating_at_once_leave_a_consistent_pair(tenant, tenant_admin):
    second_admin = MembershipFactory(tenant=tenant, role="admin").user
    original = tenant.widget_secret
    codes: list[int] = []

    def rotate(user) -> None:
        response = login(user).post(
            "/console/api/widget-secret/rotate",
            {"overlap_seconds": 60},
            content_type="application/json",
        )
        codes.append(response.status_code)

    threads = [threading.Thread(target=rotate, args=(u,)) for u in (tenant_admin, second_admin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [200, 200]
    tenant.refresh_from_db()
    # Rotations serialise (row lock): the previous secret is the one before the last rotation,
    # which itself replaced the original.
    assert tenant.widget_secret_previous != original
    assert AuditEvent.objects.filter(action="tenant.widget_secret_rotated").count() == 2
