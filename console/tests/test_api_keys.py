"""The API keys page (console/views_keys.py): a tenant admin lists, creates (the secret shown
once) and revokes the tenant's partner keys; the API honours the scopes and the revocation."""

import contextlib
import hashlib
import json
import logging
import threading

import pytest
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from supportbot import services
from supportbot.models import ApiKey, AuditEvent
from supportbot.tests.factories import ApiKeyFactory, MembershipFactory, UserFactory


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def admin_client(tenant_admin) -> Client:
    client = Client()
    client.force_login(tenant_admin)
    return client


def create(client: Client, **fields):
    return client.post("/console/api-keys/new", {"name": "Help center sync", **fields})


def secret_of(response) -> str:
    html = response.content.decode()
    start = html.index('id="api-key-secret"')
    return html[html.index(">", start) + 1 : html.index("</code>", start)]


def partner(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_the_list_shows_the_tenants_own_keys_and_never_another_tenants(
    admin_client, tenant, other_tenant
):
    own = ApiKeyFactory(tenant=tenant, name="Our sync", search_segments=["vip"])
    foreign = ApiKeyFactory(tenant=other_tenant, name="Globex secret sync")
    page = admin_client.get("/console/api-keys/")
    html = page.content.decode()
    assert page.status_code == 200, html
    assert "Our sync" in html
    assert f"sb_{own.prefix}_" in html
    assert "segment <code>vip</code>" in html
    assert "active" in html
    assert "Globex secret sync" not in html
    assert foreign.prefix not in html
    assert own.raw not in html  # the list never holds a secret


def test_a_created_key_shows_its_secret_once_and_a_reload_does_not(admin_client, tenant):
    response = create(admin_client, may_search_agent_documents="on", search_segments="VIP, eu")
    assert response.status_code == 200, response.content
    assert "no-store" in response["Cache-Control"]
    secret = secret_of(response)
    key = ApiKey.objects.get(tenant=tenant)
    assert secret.startswith(f"sb_{key.prefix}_")
    assert key.name == "Help center sync"
    assert key.may_search_agent_documents is True
    assert key.search_segments == ["eu", "vip"]
    assert key.created_by.memberships.get().tenant == tenant
    stored = json.dumps(list(ApiKey.objects.filter(pk=key.pk).values().get().values()), default=str)
    assert secret.split("_", 2)[2] not in stored  # only the hash is kept
    assert key.secret_hash == hashlib.sha256(secret.split("_", 2)[2].encode()).hexdigest()

    reload = admin_client.get("/console/api-keys/")
    assert reload.status_code == 200
    assert secret not in reload.content.decode()
    assert f"sb_{key.prefix}_" in reload.content.decode()
    confirm = admin_client.get(f"/console/api-keys/{key.pk}/revoke/")
    assert secret not in confirm.content.decode()


def test_the_created_key_reaches_the_api_with_exactly_the_scopes_chosen(admin_client):
    scoped = secret_of(create(admin_client, may_search_agent_documents="on", search_segments="vip"))
    plain = secret_of(create(admin_client, name="Public only"))

    assert partner(scoped).get("/api/v1/tenant").status_code == 200
    ok = partner(scoped).get("/api/v1/search", {"q": "refund", "audience": "agent"})
    assert ok.status_code == 200, ok.content
    ok = partner(scoped).get("/api/v1/search", {"q": "refund", "segments": "vip"})
    assert ok.status_code == 200, ok.content
    refused = partner(scoped).get("/api/v1/search", {"q": "refund", "segments": "eu"})
    assert refused.status_code == 403, refused.content

    assert partner(plain).get("/api/v1/search", {"q": "refund"}).status_code == 200
    refused = partner(plain).get("/api/v1/search", {"q": "refund", "audience": "agent"})
    assert refused.status_code == 403, refused.content
    refused = partner(plain).get("/api/v1/search", {"q": "refund", "segments": "vip"})
    assert refused.status_code == 403, refused.content
    assert ApiKey.objects.filter(last_used_at__isnull=False).count() == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, "This field is required."),
        ({"name": "   "}, "This field is required."),
        ({"name": "x" * 101}, "at most 100 characters"),
        ({"search_segments": "vip, Bad Segment!"}, "Invalid segment"),
    ],
)
def test_a_bad_form_comes_back_with_its_error_and_makes_no_key(admin_client, fields, message):
    response = create(admin_client, **fields)
    assert response.status_code == 400, response.content
    html = response.content.decode()
    assert message in html
    assert 'id="api-key-form"' in html
    assert not ApiKey.objects.exists()
    assert not AuditEvent.objects.filter(action="api_key.created").exists()


def test_a_revoked_key_is_refused_by_the_api_at_once(admin_client, tenant):
    key = ApiKeyFactory(tenant=tenant)
    assert partner(key.raw).get("/api/v1/tenant").status_code == 200
    confirm = admin_client.get(f"/console/api-keys/{key.pk}/revoke/")
    assert confirm.status_code == 200
    assert "Revoke this key" in confirm.content.decode()
    assert partner(key.raw).get("/api/v1/tenant").status_code == 200

    revoked = admin_client.post(f"/console/api-keys/{key.pk}/revoke/")
    assert revoked.status_code == 302, revoked.content
    assert revoked["Location"] == f"/console/api-keys/?tenant={tenant.slug}"
    refused = partner(key.raw).get("/api/v1/tenant")
    assert refused.status_code == 401, refused.content
    assert "revoked" in refused.json()["error"]["detail"]
    listed = admin_client.get("/console/api-keys/").content.decode()
    assert "revoked " in listed


def test_another_tenants_key_id_is_a_404_and_the_key_stays_active(admin_client, other_tenant):
    foreign = ApiKeyFactory(tenant=other_tenant)
    assert admin_client.get(f"/console/api-keys/{foreign.pk}/revoke/").status_code == 404
    assert admin_client.post(f"/console/api-keys/{foreign.pk}/revoke/").status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None
    assert not AuditEvent.objects.filter(action="api_key.revoked").exists()
    assert partner(foreign.raw).get("/api/v1/tenant").status_code == 200


def test_an_agent_gets_the_denied_page_and_changes_nothing(agent, tenant):
    key = ApiKeyFactory(tenant=tenant, name="Admins only")
    client = Client()
    client.force_login(agent)
    for response in (
        client.get("/console/api-keys/"),
        create(client),
        client.get(f"/console/api-keys/{key.pk}/revoke/"),
        client.post(f"/console/api-keys/{key.pk}/revoke/"),
    ):
        assert response.status_code == 403, response.content
        html = response.content.decode()
        assert "Only admins of" in html
        assert "Admins only" not in html
        assert key.prefix not in html
    assert ApiKey.objects.filter(tenant=tenant).count() == 1
    key.refresh_from_db()
    assert key.revoked_at is None


def test_staff_without_a_membership_do_not_see_the_keys(tenant):
    key = ApiKeyFactory(tenant=tenant, name="Credentials")
    client = Client()
    client.force_login(UserFactory(username="operator", is_staff=True))
    response = client.get(f"/console/api-keys/?tenant={tenant.slug}")
    assert response.status_code == 403
    assert key.prefix not in response.content.decode()


def test_a_post_without_the_csrf_token_is_refused(tenant_admin, tenant):
    key = ApiKeyFactory(tenant=tenant)
    client = Client(enforce_csrf_checks=True)
    client.force_login(tenant_admin)
    assert client.get("/console/api-keys/").status_code == 200
    assert create(client).status_code == 403
    assert client.post(f"/console/api-keys/{key.pk}/revoke/").status_code == 403
    assert ApiKey.objects.filter(tenant=tenant).count() == 1
    key.refresh_from_db()
    assert key.revoked_at is None


def test_create_and_revoke_write_audit_rows_that_never_hold_the_secret(
    admin_client, tenant, tenant_admin, caplog
):
    caplog.set_level(logging.DEBUG)
    secret = secret_of(create(admin_client, search_segments="vip"))
    key = ApiKey.objects.get(tenant=tenant)
    admin_client.post(f"/console/api-keys/{key.pk}/revoke/")

    created = AuditEvent.objects.get(action="api_key.created")
    revoked = AuditEvent.objects.get(action="api_key.revoked")
    for event in (created, revoked):
        assert event.tenant == tenant
        assert event.actor_type == "user"
        assert event.actor_id == str(tenant_admin.pk)
        assert event.actor_label == tenant_admin.username
        assert (event.target_type, event.target_id) == ("api_key", str(key.pk))
        assert event.data["prefix"] == key.prefix
    assert created.data["search_segments"] == ["vip"]
    assert created.data["name"] == "Help center sync"
    secret_part = secret.split("_", 2)[2]
    rows = json.dumps(list(AuditEvent.objects.values()), default=str)
    assert secret_part not in rows
    assert secret_part not in caplog.text
    logged = [r.getMessage() for r in caplog.records if key.prefix in r.getMessage()]
    assert len(logged) == 2, logged  # created and revoked were logged, by prefix only


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_revokes_of_one_key_write_one_audit_row(tenant, tenant_admin, monkeypatch):
    key = ApiKeyFactory(tenant=tenant)
    clients = []
    for _ in range(2):
        client = Client()
        client.force_login(tenant_admin)
        clients.append(client)
    start = threading.Barrier(2)
    # Both revokes meet again just before writing the audit row, if both get there: without
    # the row lock both would (and both would write one). With it the second waits for the
    # first's commit, so the first waits here in vain for a second and goes on alone.
    both_inside = threading.Barrier(2)
    record = services.audit_event_record

    def record_when_both_inside(**kwargs):
        with contextlib.suppress(threading.BrokenBarrierError):
            both_inside.wait(timeout=2)
        return record(**kwargs)

    monkeypatch.setattr(services, "audit_event_record", record_when_both_inside)
    statuses = []

    def revoke(client):
        try:
            start.wait()
            statuses.append(client.post(f"/console/api-keys/{key.pk}/revoke/").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=revoke, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [302, 302]
    assert AuditEvent.objects.filter(action="api_key.revoked", target_id=str(key.pk)).count() == 1
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_a_second_admin_sees_a_key_another_admin_made_and_who_made_it(
    tenant, tenant_admin, admin_client
):
    create(admin_client, name="Made by the first")
    other = Client()
    other.force_login(MembershipFactory(tenant=tenant, role="admin").user)
    html = other.get("/console/api-keys/").content.decode()
    assert "Made by the first" in html
    assert f"by {tenant_admin.username}" in html
