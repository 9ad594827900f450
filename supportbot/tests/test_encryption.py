"""Encryption at rest, checked by reading the database directly (raw SQL)."""

from __future__ import annotations

import base64
import os
import threading
import uuid

import psycopg
import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.core.exceptions import FieldError
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction

from actions.models import ActionRequest
from chat.orchestrator import answer_cache
from chat.orchestrator.base import Draft
from chat.tests.helpcenter import RETURNS_MD, index_document
from config.asgi import application
from conversations import services as conversation_services
from conversations.models import Conversation, Feedback, Message
from handoffs import services as handoff_services
from handoffs.models import Handoff, InternalNote
from knowledge import selectors as knowledge
from supportbot import encryption
from supportbot.models import DataKey


@pytest.fixture(autouse=True)
def _fresh_key_cache():
    encryption.clear_cache()
    yield
    encryption.clear_cache()


@pytest.fixture
def local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def marker() -> str:
    return f"PLAINTEXT-MARKER-{uuid.uuid4().hex}"


def tables_holding(text: str) -> list[str]:
    """Every table of the database (app, auth, q2, sessions …) with a row containing `text`."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        tables = [r[0] for r in cursor.fetchall()]
        found = []
        for table in tables:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE %s',  # noqa: S608
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                found.append(table)
    return found


def raw(sql: str, params=()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def new_master_key() -> str:
    return f"k{uuid.uuid4().hex[:6]}=" + base64.urlsafe_b64encode(os.urandom(32)).decode()


# --------------------------------------------------------------------------- the fields


def test_every_protected_column_holds_only_sealed_text(tenant, customer_conversation):
    conversation = customer_conversation
    m = marker()
    message, _ = conversation_services.message_receive(
        conversation=conversation, client_message_id="c1", text=f"my order {m}"
    )
    Feedback.objects.create(tenant=tenant, message=message, rating="helpful", comment=m)
    conversation_services.conversation_set_summary(
        conversation_id=conversation.pk, summary=m, through_message_id=message.pk
    )
    handoff = Handoff.objects.create(
        tenant=tenant, conversation=conversation, reason="customer_request", summary=m
    )
    handoff_services.handoff_set_summary(handoff_id=handoff.pk, summary=f"{m}!", source="test")
    handoff_services.handoff_leave_contact(conversation=conversation, email=f"{m}@example.com")
    InternalNote.objects.create(tenant=tenant, conversation=conversation, text=m)
    ActionRequest.objects.create(
        tenant=tenant,
        conversation=conversation,
        customer=conversation.customer,
        tool="check_order",
        arguments={"order_id": m},
        result={"status": m},
        order_snapshot={"id": m},
        retry_key=uuid.uuid4().hex,
        risk="read",
        proposed_by="intent",
    )

    assert tables_holding(m) == []
    for table, column in [
        ("conversations_message", "text"),
        ("conversations_feedback", "comment"),
        ("conversations_conversation", "summary"),
        ("handoffs_handoff", "summary"),
        ("handoffs_handoff", "customer_email"),
        ("handoffs_internalnote", "text"),
        ("actions_actionrequest", "arguments"),
        ("actions_actionrequest", "result"),
        ("actions_actionrequest", "order_snapshot"),
        ("conversations_customer", "name"),
        ("conversations_customer", "email"),
    ]:
        values = [v for (v,) in raw(f'SELECT "{column}" FROM "{table}"') if v]  # noqa: S608
        assert values, (table, column)
        assert all(v.startswith("sb1:") for v in values), (table, column, values)
    # …and the model layer reads plaintext back.
    assert Message.objects.get(pk=message.pk).text == f"my order {m}"
    assert Handoff.objects.get(pk=handoff.pk).customer_email == f"{m}@example.com"
    assert Handoff.objects.get(pk=handoff.pk).summary == f"{m}!"
    assert ActionRequest.objects.get().arguments == {"order_id": m}
    assert Conversation.objects.get(pk=conversation.pk).summary == m


@pytest.fixture
def customer_conversation(tenant):
    customer = conversation_services.customer_get_or_create_verified(
        tenant=tenant, external_id="crm-enc", name="Dana Example", email="dana@example.com"
    )
    return conversation_services.conversation_start(tenant=tenant, customer=customer)


def test_sealed_value_moved_to_another_column_or_tampered_does_not_open(
    tenant, customer_conversation
):
    message, _ = conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="c1", text="secret words"
    )
    (sealed,) = raw("SELECT text FROM conversations_message WHERE id = %s", [message.pk])[0]
    with pytest.raises(encryption.DecryptionError):
        encryption.unseal(sealed, context="handoffs_internalnote.text")
    flipped = sealed[:-3] + ("A" if sealed[-3] != "A" else "B") + sealed[-2:]
    with pytest.raises(encryption.DecryptionError):
        encryption.unseal(flipped, context="conversations_message.text")
    with pytest.raises(encryption.DecryptionError):
        encryption.unseal("sb1:" + "0" * 32 + ":AAAA", context="conversations_message.text")


def test_two_tenants_get_different_data_keys_and_one_cannot_open_the_other(tenant, other_tenant):
    a = encryption.seal(tenant_id=tenant.pk, plaintext="x", context="t.c")
    b = encryption.seal(tenant_id=other_tenant.pk, plaintext="x", context="t.c")
    assert encryption.key_id_of(a) != encryption.key_id_of(b)
    forged = f"sb1:{encryption.key_id_of(b)}:{a.split(':', 2)[2]}"
    with pytest.raises(encryption.DecryptionError):
        encryption.unseal(forged, context="t.c")


def test_encrypted_columns_refuse_sql_searches(tenant):
    with pytest.raises(FieldError):
        list(Message.objects.filter(text__icontains="refund"))
    with pytest.raises(FieldError):
        list(Message.objects.filter(text="refund"))
    with pytest.raises(FieldError):
        list(ActionRequest.objects.filter(arguments__order_id="A-1"))
    assert list(Message.objects.filter(text="")) == []  # the one value stored as it is


def test_update_without_sealing_is_refused(tenant, customer_conversation):
    with pytest.raises(ValueError, match="encrypted"):
        Conversation.objects.filter(pk=customer_conversation.pk).update(summary="plain")


def test_odd_text_round_trips(tenant, customer_conversation):
    odd = "naïve ☃ \u202e rtl \x01 ' \" ; DROP TABLE x; -- sb1:fake:AAAA 🚀" * 20
    message, _ = conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="odd", text=odd
    )
    assert Message.objects.get(pk=message.pk).text == odd.strip()


# --------------------------------------------------------------------------- the real paths


def test_message_posted_through_rest_leaves_no_plaintext_in_the_database(
    api_client, tenant, local_cache
):
    index_document(tenant, "Returns and refunds", RETURNS_MD)
    m = marker()
    r = api_client.post(
        "/api/v1/conversations",
        {"customer": {"external_id": "crm-rest", "name": "Dana"}},
        format="json",
        HTTP_IDEMPOTENCY_KEY="conv-1",
    )
    assert r.status_code == 201, r.content
    r = api_client.post(
        f"/api/v1/conversations/{r.json()['id']}/messages",
        {"client_message_id": "m1", "text": f"How long do refunds take? {m}"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="msg-1",
    )
    assert r.status_code == 201, r.content
    assert m in r.json()["message"]["text"]
    assert tables_holding(m) == []
    # The answer's text is sealed too (its citations quote the tenant's public documents).
    reply = r.json()["reply"]
    assert "5-10 business days" in reply["text"]
    ((stored,),) = raw("SELECT text FROM conversations_message WHERE id = %s", [reply["id"]])
    assert stored.startswith("sb1:")


@pytest.mark.django_db(transaction=True)
async def test_message_sent_over_the_websocket_leaves_no_plaintext_in_the_database(
    tenant, local_cache
):
    m = marker()
    comm = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1:8000")]
    )
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "session.start", "tenant": tenant.slug})
    while (await comm.receive_json_from(timeout=30))["type"] != "session.ready":
        pass
    await comm.send_json_to({"type": "message.send", "client_message_id": "w1", "text": m})
    while (await comm.receive_json_from(timeout=60))["type"] not in (
        "answer.completed",
        "handoff.started",
    ):
        pass
    await comm.disconnect()
    assert await database_sync_to_async(tables_holding)(m) == []
    text = await database_sync_to_async(
        lambda: Message.objects.filter(client_message_id="w1").get().text
    )()
    assert text == m


def test_answer_cache_entries_are_sealed_and_keyed_by_a_keyed_hash(tenant, settings):
    settings.ANSWER_CACHE_ENABLED = True
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    customer = conversation_services.customer_get_or_create_verified(
        tenant=tenant, external_id="crm-cache"
    )
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    audience = knowledge.Audience(kind="customer", segments=())
    key = answer_cache.cache_key(
        conversation=conversation, text="How long do refunds take?", audience=audience
    )
    answer_cache.cache_put(
        key=key, draft=Draft("Refunds take 5-10 days.", "answer"), conversation=conversation
    )
    stored = cache.get(key)
    assert stored.startswith("sb1:")
    assert "Refunds" not in stored
    assert answer_cache.cached_draft(conversation=conversation, key=key).text == (
        "Refunds take 5-10 days."
    )
    # Another deployment's blind-index key: another cache key for the same text.
    settings.BLIND_INDEX_KEYS = {"other": os.urandom(32)}
    assert key != answer_cache.cache_key(
        conversation=conversation, text="How long do refunds take?", audience=audience
    )


# --------------------------------------------------------------------------- keys


def test_plaintext_rows_from_before_encryption_are_sealed_by_the_migration_step(
    tenant, customer_conversation
):
    message, _ = conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="old", text="placeholder"
    )
    m = marker()
    raw("UPDATE conversations_message SET text = %s WHERE id = %s RETURNING id", [m, message.pk])
    assert Message.objects.get(pk=message.pk).text == m  # still readable meanwhile
    changed = encryption.seal_existing_rows(
        connection, table="conversations_message", columns=["text"]
    )
    assert changed == 1
    assert tables_holding(m) == []
    assert Message.objects.get(pk=message.pk).text == m
    assert (
        encryption.open_existing_rows(connection, table="conversations_message", columns=["text"])
        == 1
    )
    assert raw("SELECT text FROM conversations_message WHERE id = %s", [message.pk]) == [(m,)]


def test_rotate_keys_rewraps_under_a_new_master_and_the_old_master_can_leave(
    tenant, customer_conversation, settings
):
    message, _ = conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="r1", text="before rotation"
    )
    old_ring = dict(settings.ENCRYPTION_MASTER_KEYS)
    new_id, _, new_b64 = new_master_key().partition("=")
    new_key = base64.urlsafe_b64decode(new_b64)
    settings.ENCRYPTION_MASTER_KEYS = {new_id: new_key, **old_ring}  # the overlap
    call_command("rotate_keys")
    assert set(DataKey.objects.values_list("master_key_id", flat=True)) == {new_id}
    settings.ENCRYPTION_MASTER_KEYS = {new_id: new_key}  # the old master is gone
    encryption.clear_cache()
    assert Message.objects.get(pk=message.pk).text == "before rotation"
    settings.ENCRYPTION_MASTER_KEYS = old_ring  # a process still on the old keyring only
    encryption.clear_cache()
    with pytest.raises(encryption.DecryptionError):
        Message.objects.get(pk=message.pk)


def test_rotate_keys_with_new_data_keys_reseals_rows_and_old_values_still_open(
    tenant, customer_conversation
):
    message, _ = conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="r2", text="reseal me"
    )
    old_key = DataKey.objects.get(tenant=tenant, state="active").key_id
    call_command("rotate_keys", "--new-data-keys", "--tenant", tenant.slug, "--batch-size", "1")
    new_key = DataKey.objects.get(tenant=tenant, state="active").key_id
    assert new_key != old_key
    ((stored,),) = raw("SELECT text FROM conversations_message WHERE id = %s", [message.pk])
    assert encryption.key_id_of(stored) == new_key
    encryption.clear_cache()
    assert Message.objects.get(pk=message.pk).text == "reseal me"
    assert DataKey.objects.get(key_id=old_key).state == "retired"


def test_a_missing_master_key_fails_loudly_with_its_id(tenant, customer_conversation, settings):
    message, _ = conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="m", text="hello"
    )
    settings.ENCRYPTION_MASTER_KEYS = {"other": os.urandom(32)}
    encryption.clear_cache()
    with pytest.raises(encryption.DecryptionError, match="not in ENCRYPTION_MASTER_KEYS"):
        Message.objects.get(pk=message.pk)


@pytest.fixture
def fresh_pool():
    """A new connection pool: threads below need connections even if earlier tests of the
    session left some of the process's pool checked out."""
    connection.close()
    if getattr(connection, "pool", None) is not None:
        connection.close_pool()


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_writes_of_a_new_tenant_share_one_data_key(tenant, fresh_pool):
    errors, key_ids = [], []

    def write():
        try:
            key_ids.append(
                encryption.key_id_of(
                    encryption.seal(tenant_id=tenant.pk, plaintext="x", context="t.c")
                )
            )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(key_ids)) == 1
    assert DataKey.objects.filter(tenant=tenant).count() == 1


def test_a_key_created_in_a_rolled_back_transaction_is_not_kept(tenant):
    class Boom(Exception):
        pass

    def seal_then_fail():
        with transaction.atomic():
            encryption.seal(tenant_id=tenant.pk, plaintext="x", context="t.c")
            raise Boom

    with pytest.raises(Boom):
        seal_then_fail()
    sealed = encryption.seal(tenant_id=tenant.pk, plaintext="y", context="t.c")
    assert encryption.unseal(sealed, context="t.c") == "y"
    assert DataKey.objects.filter(key_id=encryption.key_id_of(sealed)).exists()


def test_rotate_keys_without_the_old_master_key_fails_and_changes_nothing(
    tenant, customer_conversation, settings
):
    conversation_services.message_receive(
        conversation=customer_conversation, client_message_id="f1", text="keep me"
    )
    before = list(DataKey.objects.values_list("key_id", "master_key_id", "wrapped"))
    new_id, _, new_b64 = new_master_key().partition("=")
    settings.ENCRYPTION_MASTER_KEYS = {new_id: base64.urlsafe_b64decode(new_b64)}  # old dropped
    with pytest.raises(CommandError, match="not in ENCRYPTION_MASTER_KEYS"):
        call_command("rotate_keys")
    assert list(DataKey.objects.values_list("key_id", "master_key_id", "wrapped")) == before


@pytest.mark.django_db(transaction=True)
def test_resealing_never_overwrites_a_value_written_meanwhile(tenant, monkeypatch):
    customer = conversation_services.customer_get_or_create_verified(
        tenant=tenant, external_id="crm-race-key"
    )
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    message, _ = conversation_services.message_receive(
        conversation=conversation, client_message_id="k1", text="old text"
    )
    encryption.data_key_create(tenant_id=tenant.pk, retire_current=True)
    encryption.clear_cache()
    newer = encryption.seal(
        tenant_id=tenant.pk, plaintext="written meanwhile", context="conversations_message.text"
    )
    real_unseal = encryption.unseal
    dsn = connection.get_connection_params()

    def unseal_while_the_app_writes(value, *, context):
        if context == "conversations_message.text":
            with psycopg.connect(**dsn, autocommit=True) as app:
                app.execute(
                    "UPDATE conversations_message SET text = %s WHERE id = %s",
                    [str(newer), message.pk],
                )
        return real_unseal(value, context=context)

    monkeypatch.setattr(encryption, "unseal", unseal_while_the_app_writes)
    encryption.rows_reseal(tenant_id=tenant.pk)
    monkeypatch.setattr(encryption, "unseal", real_unseal)
    assert Message.objects.get(pk=message.pk).text == "written meanwhile"
