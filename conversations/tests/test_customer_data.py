"""Erasure, export and retention of a customer's data, checked in the database directly."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from urllib.parse import quote

import psycopg
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.db import OperationalError, connection, connections
from django.test import Client
from django.utils import timezone
from django_q.models import Schedule
from rest_framework.test import APIClient

from actions.models import ActionRequest
from chat.identity import identity_token_make
from config.asgi import application
from conversations import customer_data, services, tasks
from conversations.models import Conversation, Customer, Feedback, Message
from handoffs import services as handoff_services
from handoffs.models import InternalNote
from supportbot import encryption
from supportbot.errors import NotFound
from supportbot.models import AuditEvent, IdempotencyKey
from supportbot.services import Actor, api_key_create
from supportbot.tests.factories import MembershipFactory


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def tables_holding(text: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        found = []
        for (table,) in cursor.fetchall():
            cursor.execute(
                f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s',  # noqa: S608
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                found.append(table)
    return sorted(found)


def rows_of(conversation_ids: list[int]) -> dict[str, int]:
    """Rows anywhere that point at these conversations (raw SQL)."""
    out = {}
    with connection.cursor() as cursor:
        for table in (
            "conversations_message",
            "handoffs_handoff",
            "handoffs_internalnote",
            "actions_actionrequest",
        ):
            cursor.execute(
                f"SELECT count(*) FROM {table} WHERE conversation_id = ANY(%s)",  # noqa: S608
                [conversation_ids],
            )
            out[table] = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM conversations_feedback f LEFT JOIN conversations_message m "
            "ON m.id = f.message_id WHERE m.id IS NULL OR m.conversation_id = ANY(%s)",
            [conversation_ids],
        )
        out["conversations_feedback"] = cursor.fetchone()[0]
    return out


def fill_customer(tenant, external_id: str, marker: str) -> Conversation:
    """A customer with every kind of row erasure must remove, each holding `marker`."""
    customer = services.customer_get_or_create_verified(
        tenant=tenant, external_id=external_id, name=f"Name {marker}", email="c@example.com"
    )
    conversation = services.conversation_start(tenant=tenant, customer=customer)
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="c1", text=f"my problem {marker}"
    )
    Feedback.objects.create(tenant=tenant, message=message, rating="helpful", comment=marker)
    services.conversation_set_summary(
        conversation_id=conversation.pk, summary=marker, through_message_id=message.pk
    )
    handoff, _ = handoff_services.handoff_request(
        conversation=conversation, reason="customer_request"
    )
    handoff_services.handoff_set_summary(handoff_id=handoff.pk, summary=marker, source="test")
    handoff_services.handoff_leave_contact(
        conversation=conversation, email=f"{marker.lower()}@example.com"
    )
    InternalNote.objects.create(tenant=tenant, conversation=conversation, text=marker)
    ActionRequest.objects.create(
        tenant=tenant,
        conversation=conversation,
        customer=customer,
        tool="check_order",
        arguments={"order_id": marker},
        result={"note": marker},
        retry_key=uuid.uuid4().hex,
        dedupe_key=uuid.uuid4().hex,
        risk="read",
        proposed_by="intent",
    )
    customer_data.answer_cache_remember(customer_id=customer.pk, key="answer:test-entry")
    cache.set("answer:test-entry", "sealed", 60)
    return conversation


def marker() -> str:
    return f"MARK{uuid.uuid4().hex}"


@pytest.fixture
def other_client(other_tenant):
    _, raw = api_key_create(tenant=other_tenant, name="other")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


# --------------------------------------------------------------------------- erasure


def test_delete_erases_every_row_of_the_customer_and_audits_counts_only(
    api_client, api_key, tenant, django_capture_on_commit_callbacks
):
    m = marker()
    conversation = fill_customer(tenant, "crm-erase", m)
    assert tables_holding(m) == []  # every row of the customer holds it only sealed

    with django_capture_on_commit_callbacks(execute=True):
        r = api_client.delete("/api/v1/customers/crm-erase")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["already_erased"] is False
    erased = body["erased"]
    assert erased["customers"] == 1
    assert erased["conversations"] == 1
    assert erased["messages"] == 1
    assert (erased["feedback"], erased["handoffs"], erased["notes"]) == (1, 1, 1)
    assert (erased["actions"], erased["cached_answers"]) == (1, 1)

    assert rows_of([conversation.pk]) == dict.fromkeys(
        [
            "conversations_message",
            "handoffs_handoff",
            "handoffs_internalnote",
            "actions_actionrequest",
            "conversations_feedback",
        ],
        0,
    )
    assert not Customer.objects.filter(tenant=tenant, external_id="crm-erase").exists()
    assert tables_holding(m) == []
    assert tables_holding("crm-erase") == []  # not even the id: the audit keeps a keyed hash
    assert cache.get("answer:test-entry") is None
    event = AuditEvent.objects.get(tenant=tenant, action="customer.erased")
    assert event.actor_type == "api_key"
    assert event.actor_id == str(api_key.pk)
    assert event.data["counts"]["messages"] == erased["messages"]


def test_repeated_delete_is_idempotent_and_says_so(api_client, tenant):
    fill_customer(tenant, "crm-twice", marker())
    assert api_client.delete("/api/v1/customers/crm-twice").status_code == 200
    r = api_client.delete("/api/v1/customers/crm-twice")
    assert r.status_code == 200, r.content
    assert r.json() == {"external_id": "crm-twice", "already_erased": True, "erased": {}}
    assert AuditEvent.objects.filter(tenant=tenant, action="customer.erased").count() == 1


def test_another_tenants_customer_is_a_404_and_stays_intact(other_client, tenant, other_tenant):
    m = marker()
    conversation = fill_customer(tenant, "crm-shared", m)
    for path in ("/api/v1/customers/crm-shared", "/api/v1/customers/crm-shared/export"):
        r = other_client.delete(path) if not path.endswith("export") else other_client.get(path)
        assert r.status_code == 404, r.content
        assert r.json()["error"]["code"] == "not_found"
    assert Message.objects.filter(conversation=conversation).exists()
    assert not AuditEvent.objects.filter(action__startswith="customer.").exists()


@pytest.mark.parametrize(
    "external_id",
    ["%00", "..%2F..%2Fetc", "' OR 1=1 --", "%E2%80%AE", "x" * 300, "crm-erase%20"],
)
def test_odd_external_ids_are_a_clean_404(api_client, tenant, external_id):
    fill_customer(tenant, "crm-erase", marker())
    r = api_client.delete(f"/api/v1/customers/{external_id}")
    assert r.status_code == 404, r.content
    assert r.json()["error"]["code"] == "not_found"
    assert Customer.objects.filter(external_id="crm-erase").exists()


def test_an_agents_session_cannot_erase_or_export_through_the_partner_api(agent, tenant):
    fill_customer(tenant, "crm-agent", marker())
    client = Client()
    client.force_login(agent)
    assert client.delete("/api/v1/customers/crm-agent").status_code == 401
    assert client.get("/api/v1/customers/crm-agent/export").status_code == 401
    assert Customer.objects.filter(external_id="crm-agent").exists()


def test_erasure_interrupted_by_a_failure_leaves_everything_in_place(tenant, monkeypatch):
    m = marker()
    conversation = fill_customer(tenant, "crm-fault", m)
    before = rows_of([conversation.pk])

    def fail(**kwargs):
        raise RuntimeError("audit write failed")

    monkeypatch.setattr(customer_data, "audit_event_record", fail)
    with pytest.raises(RuntimeError):
        customer_data.customer_erase(
            tenant=tenant, external_id="crm-fault", actor=Actor.system("test")
        )
    assert rows_of([conversation.pk]) == before
    assert Customer.objects.filter(external_id="crm-fault").exists()
    assert cache.get("answer:test-entry") == "sealed"  # dropped only on commit


@pytest.mark.django_db(transaction=True)
def test_erasure_whose_connection_is_killed_midway_deletes_nothing(tenant, monkeypatch):
    conversation = fill_customer(tenant, "crm-killed", marker())
    before = rows_of([conversation.pk])
    dsn = connection.get_connection_params()
    real = customer_data._erase

    def erase_then_die(tenant, customers, conversations):
        counts = real(tenant, customers, conversations)  # rows deleted in the transaction …
        pid = connection.cursor().connection.info.backend_pid
        with psycopg.connect(**dsn, autocommit=True) as admin:  # … then the backend dies
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        return counts

    monkeypatch.setattr(customer_data, "_erase", erase_then_die)
    with pytest.raises(OperationalError):
        customer_data.customer_erase(
            tenant=tenant, external_id="crm-killed", actor=Actor.system("test")
        )
    connection.close()
    assert rows_of([conversation.pk]) == before
    assert not AuditEvent.objects.filter(action="customer.erased").exists()


@pytest.fixture
def fresh_pool():
    """A new connection pool: threads below need connections even if earlier tests of the
    session left some of the process's pool checked out."""
    connection.close()
    if getattr(connection, "pool", None) is not None:
        connection.close_pool()


@pytest.mark.django_db(transaction=True)
def test_erasure_racing_new_messages_leaves_no_orphans_and_no_server_error(tenant, fresh_pool):
    conversation = fill_customer(tenant, "crm-race", marker())
    errors: list[BaseException] = []
    outcomes: list[str] = []
    start = threading.Barrier(5)

    def post(n: int) -> None:
        try:
            start.wait()
            for i in range(15):
                try:
                    services.message_receive(
                        conversation=conversation,
                        client_message_id=f"race-{n}-{i}",
                        text=f"still here {n}-{i}",
                    )
                    outcomes.append("saved")
                except NotFound:
                    outcomes.append("gone")
        except BaseException as exc:  # noqa: BLE001 - any other error fails the test
            errors.append(exc)
        finally:
            connections.close_all()

    def erase() -> None:
        try:
            start.wait()
            customer_data.customer_erase(
                tenant=tenant, external_id="crm-race", actor=Actor.system("test")
            )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post, args=(n,)) for n in range(4)]
    threads.append(threading.Thread(target=erase))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert "gone" in outcomes  # some posts came after the erasure and were refused cleanly
    assert set(rows_of([conversation.pk]).values()) == {0}
    assert not Customer.objects.filter(external_id="crm-race").exists()


def test_a_message_for_an_erased_conversation_is_a_404_over_rest(api_client, tenant):
    r = api_client.post(
        "/api/v1/conversations", {"customer": {"external_id": "crm-late"}}, format="json"
    )
    conv_id = r.json()["id"]
    assert api_client.delete("/api/v1/customers/crm-late").status_code == 200
    r = api_client.post(
        f"/api/v1/conversations/{conv_id}/messages",
        {"client_message_id": "late", "text": "hello?"},
        format="json",
    )
    assert r.status_code == 404, r.content


def test_saved_idempotent_responses_of_the_customer_are_erased(api_client, tenant):
    m = marker()
    r = api_client.post(
        "/api/v1/conversations",
        {"customer": {"external_id": "crm-idem", "name": m}},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-conv",
    )
    assert r.status_code == 201, r.content
    r = api_client.post(
        f"/api/v1/conversations/{r.json()['id']}/messages",
        {"client_message_id": "i1", "text": f"order {m}"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="k-msg",
    )
    assert r.status_code == 201, r.content
    erased = api_client.delete("/api/v1/customers/crm-idem").json()["erased"]
    assert erased["saved_responses"] == 2
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM supportbot_idempotencykey")
        assert cursor.fetchone()[0] == 0


# --------------------------------------------------------------------------- export


def test_export_returns_the_customers_data_decrypted_and_is_audited(api_client, tenant):
    m = marker()
    fill_customer(tenant, "crm-export", m)
    r = api_client.get("/api/v1/customers/crm-export/export")
    assert r.status_code == 200, r.content
    data = r.json()
    assert data["customer"]["external_id"] == "crm-export"
    (conversation,) = data["conversations"]
    assert any(m in msg["text"] for msg in conversation["messages"])
    assert conversation["summary"] == m
    assert conversation["feedback"][0]["comment"] == m
    assert conversation["handoffs"][0]["contact_email"] == f"{m.lower()}@example.com"
    assert conversation["notes"][0]["text"] == m
    assert conversation["actions"][0]["arguments"] == {"order_id": m}
    event = AuditEvent.objects.get(tenant=tenant, action="customer.exported")
    assert event.data["counts"]["messages"] == len(conversation["messages"])
    assert m not in str(event.data)


# --------------------------------------------------------------------------- retention


def test_retention_erases_idle_conversations_only_for_tenants_that_set_it(tenant, other_tenant):
    tenant.retention_days = 30
    tenant.save(update_fields=["retention_days"])
    old = fill_customer(tenant, "crm-old", marker())
    recent = fill_customer(tenant, "crm-recent", marker())
    untouched = fill_customer(other_tenant, "crm-other", marker())
    long_ago = timezone.now() - timedelta(days=31)
    Conversation.objects.filter(pk__in=[old.pk, untouched.pk]).update(
        last_message_at=long_ago, created_at=long_ago
    )

    report = tasks.retention_sweep_task()
    assert report[tenant.slug]["conversations"] == 1
    assert other_tenant.slug not in report
    assert set(rows_of([old.pk]).values()) == {0}
    assert rows_of([recent.pk])["conversations_message"] > 0
    assert rows_of([untouched.pk])["conversations_message"] > 0
    event = AuditEvent.objects.get(tenant=tenant, action="retention.erased")
    assert event.actor_type == "system"
    assert event.data["counts"]["conversations"] == 1
    assert tasks.retention_sweep_task() == {}  # safe to run twice


def test_retention_is_scheduled_in_django_q(db):
    schedule = Schedule.objects.get(func="conversations.tasks.retention_sweep_task")
    assert schedule.repeats == -1


@pytest.mark.django_db(transaction=True)
async def test_a_socket_of_an_erased_customer_gets_not_found_and_stays_open(tenant):
    token = await database_sync_to_async(identity_token_make)(tenant=tenant, external_id="crm-ws")
    comm = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1:8000")]
    )
    assert (await comm.connect())[0]
    await comm.send_json_to(
        {"type": "session.start", "tenant": tenant.slug, "identity_token": token}
    )
    while (await comm.receive_json_from(timeout=30))["type"] != "session.ready":
        pass
    await database_sync_to_async(customer_data.customer_erase)(
        tenant=tenant, external_id="crm-ws", actor=Actor.system("test")
    )
    await comm.send_json_to({"type": "message.send", "client_message_id": "x1", "text": "hi"})
    event = await comm.receive_json_from(timeout=30)
    while event["type"] != "error":
        event = await comm.receive_json_from(timeout=30)
    assert event["code"] == "not_found"
    await comm.send_json_to({"type": "ping"})
    assert (await comm.receive_json_from(timeout=10))["type"] == "pong"
    await comm.disconnect()
    assert not await database_sync_to_async(Message.objects.filter(client_message_id="x1").exists)()


# --------------------------------------------------------------------------- console


def test_console_admin_exports_and_erases_a_customer_and_is_the_audited_actor(tenant_admin, tenant):
    m = marker()
    fill_customer(tenant, "crm-console", m)
    client = Client()
    client.force_login(tenant_admin)
    r = client.get("/console/customers/export?external_id=crm-console")
    assert r.status_code == 200
    assert r["Content-Disposition"].startswith("attachment")
    assert m in r.content.decode()

    r = client.post(
        "/console/customers/erase", {"external_id": "crm-console", "confirm": "crm-consol"}
    )
    assert r.status_code == 302
    assert Customer.objects.filter(external_id="crm-console").exists()  # not confirmed

    r = client.post(
        "/console/customers/erase",
        {"external_id": "crm-console", "confirm": "crm-console"},
        follow=True,
    )
    assert "Erased:" in r.content.decode()
    assert not Customer.objects.filter(external_id="crm-console").exists()
    assert tables_holding(m) == []
    actors = set(
        AuditEvent.objects.filter(action__startswith="customer.").values_list(
            "action", "actor_label"
        )
    )
    name = tenant_admin.get_username()
    assert actors == {("customer.exported", name), ("customer.erased", name)}


def test_console_agents_and_other_tenants_admins_cannot_export_or_erase(
    agent, tenant, other_tenant
):
    fill_customer(tenant, "crm-guarded", marker())
    foreign_admin = MembershipFactory(tenant=other_tenant, role="admin").user
    for user in (agent, foreign_admin):
        client = Client()
        client.force_login(user)
        r = client.get("/console/customers/export?external_id=crm-guarded")
        assert r.status_code in (302, 403)
        assert b"crm-guarded" not in r.content
        r = client.post(
            "/console/customers/erase", {"external_id": "crm-guarded", "confirm": "crm-guarded"}
        )
        assert r.status_code in (302, 403)
    assert Customer.objects.filter(external_id="crm-guarded").exists()
    assert not AuditEvent.objects.filter(action__startswith="customer.").exists()


# --------------------------------------------------------------------------- odd external ids


ODD_IDS = [
    "crm/42",
    "a b",
    "%2F",  # the literal text: its URL form is %252F
    "ü/日本/ö",
    "team/x/export",  # ends like the export route
    "trailing/",
    "line\nbreak",
    "semi;colon?query#frag",
]


@pytest.mark.parametrize("external_id", ODD_IDS)
def test_any_external_id_the_api_accepted_can_be_exported_and_erased(api_client, external_id):
    r = api_client.post(
        "/api/v1/conversations", {"customer": {"external_id": external_id}}, format="json"
    )
    assert r.status_code == 201, r.content
    assert r.json()["customer"]["external_id"] == external_id
    path = f"/api/v1/customers/{quote(external_id, safe='')}"

    r = api_client.get(f"{path}/export")
    assert r.status_code == 200, r.content
    assert r.json()["customer"]["external_id"] == external_id

    r = api_client.delete(path)
    assert r.status_code == 200, r.content
    assert r.json()["external_id"] == external_id
    assert r.json()["erased"]["customers"] == 1
    assert not Customer.objects.filter(external_id=external_id).exists()
    assert api_client.delete(path).json()["already_erased"] is True


def test_an_id_that_only_looks_like_another_ids_export_path_erases_the_right_customer(
    api_client,
):
    for external_id in ("team", "team/export"):
        r = api_client.post(
            "/api/v1/conversations", {"customer": {"external_id": external_id}}, format="json"
        )
        assert r.status_code == 201, r.content
    assert api_client.get("/api/v1/customers/team/export").json()["customer"]["external_id"] == (
        "team"
    )
    r = api_client.delete("/api/v1/customers/team/export")  # the customer "team/export"
    assert r.status_code == 200, r.content
    assert r.json()["external_id"] == "team/export"
    assert list(Customer.objects.values_list("external_id", flat=True)) == ["team"]


# --------------------------------------------------------------------------- saved responses


def _post_saved(api_client, external_id: str, text: str, key: str):
    r = api_client.post(
        "/api/v1/conversations",
        {"customer": {"external_id": external_id}},
        format="json",
        HTTP_IDEMPOTENCY_KEY=f"{key}-conv",
    )
    assert r.status_code == 201, r.content
    body = {"client_message_id": "s1", "text": text}
    path = f"/api/v1/conversations/{r.json()['id']}/messages"
    r = api_client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=f"{key}-msg")
    assert r.status_code == 201, r.content
    return path, body, r.json()


def test_erasure_opens_no_other_customers_saved_response_and_leaves_it_replayable(
    api_client, tenant, monkeypatch
):
    other_path, other_body, other_saved = _post_saved(api_client, "crm-keep", "keep me", "keep")
    _post_saved(api_client, "crm-gone", f"erase me {marker()}", "gone")
    opened = []
    real_unseal = encryption.unseal

    def counting_unseal(value, *, context):
        if context.startswith("supportbot_idempotencykey."):
            opened.append(context)
        return real_unseal(value, context=context)

    monkeypatch.setattr(encryption, "unseal", counting_unseal)
    erased = api_client.delete("/api/v1/customers/crm-gone").json()["erased"]
    monkeypatch.setattr(encryption, "unseal", real_unseal)

    assert erased["saved_responses"] == 2
    assert opened == []  # found by their conversation link, nothing decrypted
    replay = api_client.post(other_path, other_body, format="json", HTTP_IDEMPOTENCY_KEY="keep-msg")
    assert replay.status_code == 201, replay.content
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == other_saved
    assert IdempotencyKey.objects.filter(tenant=tenant).count() == 2
