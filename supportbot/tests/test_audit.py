"""The audit trail: events admins can read (console page, CSV), and a table that refuses
UPDATE, DELETE and TRUNCATE even to a role holding every privilege on it."""

from __future__ import annotations

import csv
import io
import uuid

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client

from conversations import services as conversation_services
from handoffs import services as handoff_services
from supportbot.models import AuditEvent
from supportbot.services import Actor, audit_event_record
from supportbot.tests.factories import MembershipFactory, UserFactory


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def record(tenant, action: str, **data) -> AuditEvent:
    return audit_event_record(
        tenant=tenant, actor=Actor.system("test"), action=action, target_type="x", data=data
    )


# --------------------------------------------------------------------------- who sees it


def test_admin_sees_the_tenants_events_and_never_another_tenants(
    tenant_admin, tenant, other_tenant
):
    record(tenant, "handoff.claimed", n=1)
    record(other_tenant, "handoff.claimed", secret="GLOBEX-ONLY")
    r = login(tenant_admin).get("/console/audit/")
    assert r.status_code == 200
    body = r.content.decode()
    assert "handoff.claimed" in body
    assert "GLOBEX-ONLY" not in body


def test_agents_staff_without_admin_membership_and_anonymous_cannot_read_it(
    agent, tenant, other_tenant
):
    record(tenant, "handoff.claimed")
    staff = UserFactory(is_staff=True)
    foreign_admin = MembershipFactory(tenant=other_tenant, role="admin").user
    for user in (agent, staff):
        for path in ("/console/audit/", "/console/audit.csv", "/console/customers/"):
            assert login(user).get(path).status_code == 403, (user, path)
    # An admin of another tenant naming this tenant gets their own tenant's view only.
    r = login(foreign_admin).get(f"/console/audit.csv?tenant={tenant.slug}")
    assert r.status_code == 403 or "handoff.claimed" not in b"".join(r.streaming_content).decode()
    assert Client().get("/console/audit/").status_code == 302  # to the login page


def test_filters_by_action_prefix_actor_and_day(tenant_admin, tenant):
    record(tenant, "handoff.claimed")
    record(tenant, "customer.erased")
    audit_event_record(tenant=tenant, actor=Actor(type="user", label="dana"), action="login.failed")
    client = login(tenant_admin)
    body = client.get("/console/audit/?action=handoff.").content.decode()
    assert "handoff.claimed" in body
    assert "customer.erased" not in body
    body = client.get("/console/audit/?actor=dana").content.decode()
    assert "login.failed" in body
    assert "handoff.claimed" not in body
    assert "No events match" in client.get("/console/audit/?until=2000-01-01").content.decode()
    # Odd filter values are ignored or match nothing; never an error.
    for query in ("since=not-a-date", "action=%00", "page=-1", "page=99999", "actor=' OR 1=1"):
        assert client.get(f"/console/audit/?{query}").status_code == 200, query


def test_csv_export_has_every_matching_event_and_quotes_formulas(tenant_admin, tenant):
    record(tenant, '=HYPERLINK("http://evil")', note="+SUM(A1)")
    for i in range(3):
        record(tenant, "document.uploaded", i=i)
    r = login(tenant_admin).get("/console/audit.csv?action=document.")
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[0][:4] == ["created_at", "actor_type", "actor", "action"]
    assert [row[3] for row in rows[1:]] == ["document.uploaded"] * 3
    rows = list(
        csv.reader(
            io.StringIO(
                b"".join(login(tenant_admin).get("/console/audit.csv").streaming_content).decode()
            )
        )
    )
    evil = next(row for row in rows if "HYPERLINK" in row[3])
    assert evil[3].startswith("'=")


# --------------------------------------------------------------------------- what is recorded


def test_logins_are_audited_for_success_and_failure_without_the_password(agent, tenant):
    client = Client()
    r = client.post("/console/login/", {"username": agent.username, "password": "wrong-pw-1"})
    assert r.status_code == 200
    r = client.post("/console/login/", {"username": agent.username, "password": "pw-for-tests-1"})
    assert r.status_code == 302
    Client().post("/console/login/", {"username": "nobody-here", "password": "x"})
    actions = list(
        AuditEvent.objects.filter(action__startswith="login.").values_list(
            "tenant_id", "action", "actor_label"
        )
    )
    assert (tenant.pk, "login.failed", agent.username) in actions
    assert (tenant.pk, "login.succeeded", agent.username) in actions
    assert (None, "login.failed", "nobody-here") in actions
    assert "wrong-pw-1" not in str(list(AuditEvent.objects.values_list("data", flat=True)))


def test_agent_replies_are_audited_without_their_text(agent, tenant):
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v")
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    handoff, _ = handoff_services.handoff_request(
        conversation=conversation, reason="customer_request"
    )
    handoff = handoff_services.handoff_claim(
        tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, expected_version=handoff.version
    )
    message = handoff_services.agent_reply_post(
        tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, text="SECRET-REPLY-TEXT"
    )
    event = AuditEvent.objects.get(action="handoff.replied")
    assert event.data["message_id"] == message.pk
    assert "SECRET-REPLY-TEXT" not in str(event.data)


def test_tenant_settings_changed_in_the_admin_are_audited(tenant):
    superuser = UserFactory(is_staff=True, is_superuser=True)
    client = login(superuser)
    page = client.get(f"/admin/supportbot/tenant/{tenant.pk}/change/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {k: v for k, v in form.initial.items() if v is not None}
    data.update(
        {
            "slug": tenant.slug,
            "name": tenant.name,
            "retention_days": "30",
            "allowed_origins": "",
            "is_active": "on",
        }
    )
    r = client.post(f"/admin/supportbot/tenant/{tenant.pk}/change/", data)
    assert r.status_code == 302, r.content[:2000]
    event = AuditEvent.objects.get(action="tenant.settings_changed")
    assert event.data["changes"]["retention_days"] == "30"


# --------------------------------------------------------------------------- the table guard


def test_update_and_delete_are_refused_by_the_database(tenant):
    event = record(tenant, "x.y")
    for sql in (
        "UPDATE supportbot_auditevent SET action = 'forged' WHERE id = %s",
        "DELETE FROM supportbot_auditevent WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
            connection.cursor().execute(sql, [event.pk])


def test_a_non_superuser_role_with_every_privilege_cannot_truncate_or_disable_the_guard(tenant):
    record(tenant, "x.y")
    role = f"sb_test_app_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending trigger events left
        cursor.execute(f"CREATE ROLE {role} NOLOGIN NOSUPERUSER")
        cursor.execute(f"GRANT ALL ON supportbot_auditevent TO {role}")
        cursor.execute(f"SET ROLE {role}")
        try:
            for sql, message in (
                ("TRUNCATE supportbot_auditevent", "append-only"),
                ("DELETE FROM supportbot_auditevent", "append-only"),
                (
                    "ALTER TABLE supportbot_auditevent DISABLE TRIGGER ALL",
                    "must be owner",
                ),
                (
                    "DROP TRIGGER supportbot_auditevent_no_truncate ON supportbot_auditevent",
                    "must be owner",
                ),
                ("SET session_replication_role = replica", "permission denied"),
            ):
                with pytest.raises(DatabaseError, match=message), transaction.atomic():
                    cursor.execute(sql)
        finally:
            cursor.execute("RESET ROLE")
    assert AuditEvent.objects.filter(action="x.y").exists()
