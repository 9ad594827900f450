"""The policies page (console/views_policies.py): tenant admins edit refund limits, approver
roles, proposal lifetime, retention and handoff capacity; each save is one audit row with the
old and new values; bad values come back on the form and change nothing."""

from decimal import Decimal

import pytest
from django.test import Client

from actions.models import ActionPolicy
from supportbot.models import AuditEvent, Tenant
from supportbot.tests.factories import UserFactory

VALID = {
    "refund_auto_limit": "50.00",
    "refund_per_customer_daily_limit": "200.00",
    "approvers_low": ["agent", "admin"],
    "approvers_high": ["agent", "admin"],
    "proposal_ttl_seconds": "600",
    "retention_days": "",
    "handoff_capacity": "20",
}


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def admin_client(tenant_admin) -> Client:
    client = Client()
    client.force_login(tenant_admin)
    return client


def save(client: Client, **changed):
    return client.post("/console/policies/", {**VALID, **changed})


def test_the_page_shows_the_tenants_current_policies(admin_client, tenant):
    Tenant.objects.filter(pk=tenant.pk).update(refund_auto_limit=Decimal("75.50"))
    html = admin_client.get("/console/policies/").content.decode()
    assert 'value="75.50"' in html
    assert 'name="handoff_capacity" value="20"' in html


def test_a_save_changes_the_policies_and_audits_old_and_new_values(
    admin_client, tenant, tenant_admin
):
    response = save(
        admin_client,
        refund_auto_limit="80",
        approvers_high=["admin"],
        proposal_ttl_seconds="900",
        retention_days="365",
    )
    assert response.status_code == 302, response.content
    tenant.refresh_from_db()
    assert tenant.refund_auto_limit == Decimal("80.00")
    assert tenant.retention_days == 365
    policy = ActionPolicy.objects.get(tenant=tenant)
    assert policy.proposal_ttl_seconds == 900
    assert policy.approver_roles == {"low": ["admin", "agent"], "high": ["admin"]}
    event = AuditEvent.objects.get(action="policies.changed")
    assert event.tenant == tenant
    assert event.actor_label == tenant_admin.username
    assert event.data["changes"] == {
        "refund_auto_limit": {"old": "50.00", "new": "80.00"},
        "retention_days": {"old": None, "new": 365},
        "proposal_ttl_seconds": {"old": 600, "new": 900},
        "approver_roles": {
            "old": {"low": ["admin", "agent"], "high": ["admin", "agent"]},
            "new": {"low": ["admin", "agent"], "high": ["admin"]},
        },
    }


def test_a_save_that_changes_nothing_writes_no_audit_row(admin_client):
    assert save(admin_client).status_code == 302
    assert not AuditEvent.objects.filter(action="policies.changed").exists()


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"refund_auto_limit": "-1"}, "Use an amount from 0"),
        ({"refund_per_customer_daily_limit": "abc"}, "Enter a number."),
        ({"handoff_capacity": "0"}, "Use 1 to 1000 open handoffs"),
        ({"retention_days": "0"}, "Use 1 to 3650 days"),
        ({"proposal_ttl_seconds": "5"}, "proposal_ttl_seconds must be 30..86400"),
        ({"approvers_high": []}, "This field is required."),
        ({"approvers_low": ["owner"]}, "Select a valid choice."),
    ],
)
def test_a_bad_value_comes_back_on_the_form_and_changes_nothing(
    admin_client, tenant, changed, message
):
    response = save(admin_client, **changed)
    assert response.status_code == 400, response.content
    assert message in response.content.decode()
    tenant.refresh_from_db()
    assert tenant.refund_auto_limit == Decimal("50.00")
    assert tenant.handoff_capacity == 20
    assert not ActionPolicy.objects.filter(tenant=tenant).exists()
    assert not AuditEvent.objects.filter(action="policies.changed").exists()


def test_an_agent_gets_the_denied_page_and_changes_nothing(agent, tenant):
    client = Client()
    client.force_login(agent)
    for response in (client.get("/console/policies/"), save(client, handoff_capacity="5")):
        assert response.status_code == 403
        assert "Only admins of" in response.content.decode()
    tenant.refresh_from_db()
    assert tenant.handoff_capacity == 20


def test_staff_without_a_membership_read_the_policies_but_cannot_save(tenant):
    client = Client()
    client.force_login(UserFactory(username="operator", is_staff=True))
    assert client.get(f"/console/policies/?tenant={tenant.slug}").status_code == 200
    refused = client.post(
        f"/console/policies/?tenant={tenant.slug}", {**VALID, "handoff_capacity": "5"}
    )
    assert refused.status_code == 403
    tenant.refresh_from_db()
    assert tenant.handoff_capacity == 20


def test_a_save_without_the_csrf_token_is_refused(tenant_admin, tenant):
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenant_admin)
    assert save(client, handoff_capacity="5").status_code == 403
    tenant.refresh_from_db()
    assert tenant.handoff_capacity == 20
