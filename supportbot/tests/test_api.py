import pytest
from django.db import DatabaseError, transaction

from supportbot.errors import NotFound
from supportbot.models import AuditEvent
from supportbot.services import Actor, api_key_create, api_key_revoke, audit_event_record


@pytest.fixture
def foreign_events(other_tenant):
    api_key_create(tenant=other_tenant, name="theirs")
    return [
        audit_event_record(
            tenant=other_tenant, actor=Actor.system(), action="secret.thing", data={"n": i}
        )
        for i in range(30)
    ]


def test_audit_list_shows_only_own_tenant_rows(api_client, tenant, foreign_events):
    audit_event_record(tenant=tenant, actor=Actor.system(), action="own.thing")
    r = api_client.get("/api/v1/audit-events?limit=200")
    assert r.status_code == 200, r.content
    actions = {e["action"] for e in r.json()["results"]}
    assert "own.thing" in actions
    assert "api_key.created" in actions  # the fixture key of this tenant
    assert "secret.thing" not in actions
    ids = {e["id"] for e in r.json()["results"]}
    assert ids.isdisjoint({e.pk for e in foreign_events})


def test_other_tenants_audit_event_is_404_without_detail(api_client, foreign_events):
    r = api_client.get(f"/api/v1/audit-events/{foreign_events[0].pk}")
    assert r.status_code == 404, r.content
    assert "secret" not in r.content.decode()


def test_audit_list_paginates_with_cursor(api_client, tenant):
    for i in range(7):
        audit_event_record(tenant=tenant, actor=Actor.system(), action="page.item", data={"i": i})
    seen = []
    url = "/api/v1/audit-events?action=page.item&limit=3"
    while url:
        r = api_client.get(url)
        assert r.status_code == 200, r.content
        seen += [e["data"]["i"] for e in r.json()["results"]]
        url = r.json()["next"]
    assert seen == [6, 5, 4, 3, 2, 1, 0]


def test_key_creation_and_revocation_are_audited(tenant, tenant_admin):
    key, _ = api_key_create(tenant=tenant, name="ci", created_by=tenant_admin)
    api_key_revoke(tenant=tenant, key_id=key.pk, actor=Actor.for_user(tenant_admin))
    api_key_revoke(tenant=tenant, key_id=key.pk)  # idempotent: no second event
    events = AuditEvent.objects.filter(tenant=tenant, target_type="api_key", target_id=str(key.pk))
    assert sorted(e.action for e in events) == ["api_key.created", "api_key.revoked"]
    assert {e.actor_label for e in events} == {tenant_admin.username}
    assert key.created_by == tenant_admin


def test_revoking_another_tenants_key_is_not_found(tenant, other_tenant):
    key, _ = api_key_create(tenant=other_tenant, name="theirs")
    with pytest.raises(NotFound):
        api_key_revoke(tenant=tenant, key_id=key.pk)
    key.refresh_from_db()
    assert key.revoked_at is None


def test_audit_events_cannot_be_updated_or_deleted_even_in_sql(tenant):
    event = audit_event_record(tenant=tenant, actor=Actor.system(), action="x")
    with pytest.raises(PermissionError):
        event.save()
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).update(action="tampered")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditEvent.objects.filter(pk=event.pk).delete()
    assert AuditEvent.objects.get(pk=event.pk).action == "x"


def test_openapi_schema_and_docs_are_served(client, db):
    r = client.get("/api/schema/")
    assert r.status_code == 200
    assert b"/api/v1/tenant" in r.content
    assert client.get("/api/docs/").status_code == 200


def test_admin_login_page_is_served(client, db):
    assert client.get("/admin/login/").status_code == 200
