"""The console's one access rule (console/access.py) through real URLs: members act with their
role, staff without a membership read but never act, everyone else is refused."""

import pytest
from django.test import Client

from conversations import services as conversation_services
from handoffs.models import InternalNote
from knowledge.models import Document
from supportbot.tests.factories import MembershipFactory, TenantFactory, UserFactory

AGENT_PAGES = ["/console/", "/console/handoffs/1/", "/console/actions/"]
ADMIN_PAGES = ["/console/gaps/", "/console/audit/", "/console/audit.csv", "/console/customers/"]
EVERY_PAGE = [*AGENT_PAGES, *ADMIN_PAGES, "/console/widget/", "/console/ops/"]


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def conversation(tenant):
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v")
    return conversation_services.conversation_start(tenant=tenant, customer=customer)


@pytest.fixture
def staff(db):
    return UserFactory(username="operator", is_staff=True)


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def note(client: Client, conversation, query: str = ""):
    return client.post(
        f"/console/api/conversations/{conversation.pk}/notes{query}",
        {"text": "seen"},
        content_type="application/json",
    )


def test_an_agent_reads_and_acts_on_the_queue_but_not_on_admin_pages(agent, conversation):
    client = login(agent)
    for url in AGENT_PAGES:
        assert client.get(url).status_code == 200, url
    for url in [*ADMIN_PAGES, "/console/widget/"]:
        page = client.get(url)
        assert page.status_code == 403, url
        assert b"Only admins of" in page.content
    assert client.get("/console/api/queue").status_code == 200
    assert note(client, conversation).status_code == 201
    assert client.get("/console/api/widget-secret").status_code == 403


def test_an_admin_reads_every_tenant_page_and_acts(tenant_admin, tenant, conversation):
    client = login(tenant_admin)
    for url in [*AGENT_PAGES, *ADMIN_PAGES, "/console/widget/"]:
        assert client.get(url).status_code == 200, url
    assert client.get("/console/api/widget-secret").json()["widget_secret"] == tenant.widget_secret
    export = client.get("/console/customers/export", {"external_id": "nobody"})
    assert export.status_code == 302  # allowed; "no such customer" is a flash message
    assert note(client, conversation).status_code == 201


def test_staff_without_a_membership_read_every_page_of_a_tenant_but_never_act(
    staff, tenant, conversation
):
    client = login(staff)
    q = f"?tenant={tenant.slug}"
    for url in [*AGENT_PAGES, *ADMIN_PAGES]:
        page = client.get(url + q)
        assert page.status_code == 200, url
    assert b"Read-only" in client.get("/console/audit/" + q).content
    assert client.get("/console/api/queue" + q).status_code == 200

    refused = note(client, conversation, q)
    assert refused.status_code == 403, refused.content
    assert refused.json()["error"]["code"] == "permission_denied"
    assert "read-only" in refused.json()["error"]["detail"]
    assert not InternalNote.objects.exists()

    publish = client.post("/console/gaps/" + q, {"title": "Poles", "body": "# Poles\n\nFree."})
    assert publish.status_code == 403
    assert b"read-only access" in publish.content
    assert not Document.objects.exists()
    export = client.get("/console/customers/export" + q + "&external_id=x")
    assert export.status_code == 403
    erase = client.post("/console/customers/erase" + q, {"external_id": "x", "confirm": "x"})
    assert erase.status_code == 403
    decide = client.post(
        "/console/api/actions/1/decide" + q,
        {"decision": "approve", "expected_version": 1},
        content_type="application/json",
    )
    assert decide.status_code == 403
    assert decide.json()["error"]["code"] == "permission_denied"


def test_staff_never_read_the_widget_secret_without_an_admin_membership(staff, tenant):
    client = login(staff)
    page = client.get(f"/console/widget/?tenant={tenant.slug}")
    assert page.status_code == 403
    assert tenant.widget_secret.encode() not in page.content
    api = client.get(f"/console/api/widget-secret?tenant={tenant.slug}")
    assert api.status_code == 403


def test_staff_with_a_membership_act_with_its_role(staff, tenant, conversation):
    MembershipFactory(tenant=tenant, user=staff, role="agent")
    client = login(staff)
    assert note(client, conversation, f"?tenant={tenant.slug}").status_code == 201
    assert client.get(f"/console/audit/?tenant={tenant.slug}").status_code == 403


def test_another_tenants_member_is_refused_everything(tenant, other_tenant, conversation):
    outsider = login(MembershipFactory(tenant=other_tenant, role="admin").user)
    q = f"?tenant={tenant.slug}"
    for url in [*AGENT_PAGES, *ADMIN_PAGES, "/console/widget/"]:
        page = outsider.get(url + q)
        assert page.status_code == 403, url
        assert b"You are not a member of tenant" in page.content
        assert tenant.name.encode() not in page.content
    api = outsider.get("/console/api/queue" + q)
    assert api.status_code == 403
    assert api.json()["error"]["code"] == "permission_denied"
    assert note(outsider, conversation, q).status_code == 403


def test_an_inactive_tenant_is_closed_to_its_members_and_to_staff(staff, db):
    asleep = TenantFactory(slug="asleep", is_active=False)
    member = login(MembershipFactory(tenant=asleep, role="admin").user)
    assert member.get("/console/").status_code == 403
    assert member.get("/console/api/queue").status_code == 403
    assert login(staff).get("/console/?tenant=asleep").status_code == 403
    assert login(staff).get("/console/api/queue?tenant=asleep").status_code == 403


@pytest.mark.parametrize("url", EVERY_PAGE)
def test_anonymous_pages_send_to_the_one_login(url, db):
    r = Client().get(url)
    assert r.status_code == 302
    assert r["Location"].startswith("/console/login/?next=")


def test_anonymous_apis_answer_403_in_the_json_error_shape(db):
    for url in ("/console/api/queue", "/console/api/widget-secret", "/console/ops/data.json"):
        r = Client().get(url)
        assert r.status_code == 403, url
        assert "detail" in r.json()["error"]


def test_ops_is_for_staff_only_whatever_their_memberships(staff, tenant_admin):
    assert login(staff).get("/console/ops/").status_code == 200
    assert login(staff).get("/console/ops/data.json").status_code == 200
    admin = login(tenant_admin)
    page = admin.get("/console/ops/")
    assert page.status_code == 403
    assert b"Staff only." in page.content
    assert admin.get("/console/ops/data.json").json()["error"]["code"] == "permission_denied"
