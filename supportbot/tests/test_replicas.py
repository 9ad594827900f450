"""Read replicas against a real streaming standby (pg_basebackup -R of the embedded primary):
stale-tolerant reads are served there, nothing else is, no write is ever sent there, and a
standby that is down or behind sends reads back to the primary."""

from __future__ import annotations

import re
import threading

import httpx
import psycopg
import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from conversations import selectors as conversation_selectors
from conversations import services as conversation_services
from handoffs import selectors as handoff_selectors
from inference import selectors as inference_selectors
from knowledge import selectors as knowledge_selectors
from supportbot import devservices, replicas
from supportbot.errors import NotFound
from supportbot.services import api_key_create
from supportbot.tests.factories import MembershipFactory, TenantFactory
from supportbot.tests.replica import Standby, standby_create
from supportbot.tests.webprocs import start_web

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, replicas.REPLICA]),
    pytest.mark.slow,
]

# What a read may send: never a statement that writes, locks or takes a sequence value.
WRITES = re.compile(
    r"\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|CREATE|ALTER|DROP|LOCK|NEXTVAL|SETVAL|"
    r"FOR\s+UPDATE|FOR\s+SHARE|FOR\s+NO\s+KEY\s+UPDATE|COPY)\b",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def standby(django_db_setup, django_db_blocker) -> Standby:
    """A physical standby of the primary, made after the test database exists, and this
    process's `replica` alias pointed at the standby's copy of the test database (a test
    mirror: nothing flushes it, the primary's flush reaches it by replication)."""
    with django_db_blocker.unblock():
        made = standby_create()
    connections.settings[replicas.REPLICA] = {
        **connections.settings[DEFAULT_DB_ALIAS],
        "HOST": str(made.root),
        "OPTIONS": {"options": "-c default_transaction_read_only=on", "connect_timeout": 2},
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"MIRROR": DEFAULT_DB_ALIAS},
    }
    yield made
    connections[replicas.REPLICA].close()
    del connections[replicas.REPLICA]
    del connections.settings[replicas.REPLICA]
    made.remove()


@pytest.fixture
def customer(tenant):
    return conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v-1")


@pytest.fixture
def conversation(tenant, customer):
    return conversation_services.conversation_start(tenant=tenant, customer=customer)


@pytest.fixture
def help_center(tenant):
    return [
        index_document(tenant, "Returns and refunds", RETURNS_MD),
        index_document(tenant, "Shipping", SHIPPING_MD),
    ]


@pytest.fixture
def primary_url() -> str:
    return devservices.postgres_url_for(connection.settings_dict["NAME"])


@pytest.fixture
def replica_db(standby, settings, primary_url):
    """The standby, caught up, with the replica counted as up."""
    settings.DATABASE_REPLICA_RETRY_S = 30.0
    replicas._down_until = 0.0
    standby.catch_up(primary_url)
    yield standby
    connections[replicas.REPLICA].close()
    replicas._down_until = 0.0


def psycopg_connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


@replicas.stale_tolerant
def _where_am_i() -> tuple[str, bool]:
    alias = replicas.read_alias()
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        return alias, cursor.fetchone()[0]


def _history(conversation) -> list[int]:
    return [
        m.pk
        for m in conversation_selectors.message_history_page(
            tenant=conversation.tenant, conversation_id=conversation.pk, paginate=list
        )
    ]


def test_stale_tolerant_reads_are_served_by_the_standby(replica_db, conversation, primary_url):
    message, _ = conversation_services.message_receive(
        conversation=conversation, client_message_id="m1", text="hello"
    )
    replica_db.catch_up(primary_url)
    offset = replica_db.log_offset()

    assert _where_am_i() == (replicas.REPLICA, True)  # the standby answers
    assert _history(conversation) == [message.pk]
    sent = replica_db.statements(connection.settings_dict["NAME"], offset)
    assert any('FROM "conversations_message"' in s for s in sent), sent
    assert not [s for s in sent if WRITES.search(s)]
    # Outside a stale-tolerant call every read is the primary's.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        assert cursor.fetchone()[0] is False
    assert replicas.read_alias() == DEFAULT_DB_ALIAS


def test_reads_inside_a_transaction_stay_on_the_primary(replica_db):
    with transaction.atomic():
        assert _where_am_i() == (DEFAULT_DB_ALIAS, False)
    assert _where_am_i() == (replicas.REPLICA, True)


def test_a_conversation_not_yet_replayed_is_read_from_the_primary(
    replica_db, tenant, customer, primary_url
):
    with psycopg_connect(replica_db.url("postgres")) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    try:
        fresh = conversation_services.conversation_start(tenant=tenant, customer=customer)
        message, _ = conversation_services.message_receive(
            conversation=fresh, client_message_id="m1", text="just now"
        )
        # The standby has not replayed it: the history falls back to the primary, no 404.
        assert _history(fresh) == [message.pk]
    finally:
        with psycopg_connect(replica_db.url("postgres")) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
    # Another tenant's conversation is a 404 on the replica and on the primary alike.
    other = TenantFactory(slug="globex-replica")
    with pytest.raises(NotFound):
        conversation_selectors.message_history_page(
            tenant=other, conversation_id=fresh.pk, paginate=list
        )


def test_parallel_stale_tolerant_reads_each_use_the_standby(replica_db, conversation, primary_url):
    conversation_services.message_receive(
        conversation=conversation, client_message_id="m1", text="hello"
    )
    replica_db.catch_up(primary_url)
    results, errors = [], []

    def read() -> None:
        try:
            results.append((_where_am_i(), len(_history(conversation))))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert results == [((replicas.REPLICA, True), 1)] * 8


def test_replica_down_sends_reads_back_to_the_primary(replica_db, conversation):
    conversation_services.message_receive(
        conversation=conversation, client_message_id="m1", text="hello"
    )
    assert _where_am_i() == (replicas.REPLICA, True)
    replica_db.stop()
    try:
        # The pooled replica connection is dead: the call runs again on the primary.
        assert len(_history(conversation)) == 1
        assert not replicas.available()  # skipped for DATABASE_REPLICA_RETRY_S
        assert _where_am_i() == (DEFAULT_DB_ALIAS, False)
        assert (
            knowledge_selectors.search_passages(
                tenant=conversation.tenant,
                query="refunds",
                audience=knowledge_selectors.Audience.customer(),
            ).passages
            == []
        )
    finally:
        replica_db.start()


def test_web_flows_with_a_replica_read_there_and_write_only_to_the_primary(
    standby, tenant, help_center, tmp_path, primary_url
):
    agent = MembershipFactory(tenant=tenant, role="agent", user__password=PASSWORD).user
    """Daphne with DATABASE_REPLICA_URL: partner history and search, the console queue and a
    chat turn all work; the standby receives their reads and not one write."""
    database = connection.settings_dict["NAME"]
    _, raw = api_key_create(tenant=tenant, name="crm")
    headers = {"Authorization": f"Bearer {raw}"}
    standby.catch_up(primary_url)
    offset = standby.log_offset()
    (web,) = start_web(tmp_path, count=1, env={"DATABASE_REPLICA_URL": standby.url(database)})
    try:
        with httpx.Client(base_url=web.url, headers=headers, timeout=60) as client:
            r = client.post("/api/v1/conversations", json={"customer": {"external_id": "c-9"}})
            assert r.status_code == 201, r.text
            conversation_id = r.json()["id"]
            r = client.post(
                f"/api/v1/conversations/{conversation_id}/messages",
                json={"client_message_id": "k1", "text": "How long do refunds take?"},
            )
            assert r.status_code in (200, 201), r.text
            standby.catch_up(primary_url)
            r = client.get(f"/api/v1/conversations/{conversation_id}/messages")
            assert r.status_code == 200, r.text
            assert [m["role"] for m in r.json()["results"]] == ["customer", "bot"]
            r = client.get("/api/v1/search", params={"q": "refund window"})
            assert r.status_code == 200, r.text
            assert r.json()["passages"]
            r = client.post(f"/api/v1/conversations/{conversation_id}/handoffs", json={})
            assert r.status_code in (200, 201), r.text
            handoff_id = r.json()["id"]
        standby.catch_up(primary_url)
        console = _console(web.url, agent)
        try:
            r = console.get("/console/api/queue")
        finally:
            console.close()
        assert r.status_code == 200, r.text
        assert [h["id"] for h in r.json()["handoffs"]] == [handoff_id]
        sent = standby.statements(database, offset)
        assert any('FROM "conversations_message"' in s for s in sent), sent[-20:]
        assert any("knowledge_chunk" in s for s in sent), sent[-20:]
        assert any('FROM "handoffs_handoff"' in s for s in sent), sent[-20:]
        assert not [s for s in sent if WRITES.search(s)], [s for s in sent if WRITES.search(s)]
        # The writes all went to the primary.
        with psycopg_connect(primary_url) as conn:
            roles = [
                row[0]
                for row in conn.execute(
                    "SELECT role FROM conversations_message WHERE conversation_id = %s ORDER BY id",
                    [conversation_id],
                ).fetchall()
            ]
            handoffs = conn.execute(
                "SELECT count(*) FROM handoffs_handoff WHERE id = %s", [handoff_id]
            ).fetchone()[0]
        assert roles == ["customer", "bot", "system"]  # the handoff's notice is the third
        assert handoffs == 1

        # The standby goes down: the same pages still answer, from the primary.
        standby.stop()
        try:
            with httpx.Client(base_url=web.url, headers=headers, timeout=60) as client:
                r = client.get(f"/api/v1/conversations/{conversation_id}/messages")
                assert r.status_code == 200, r.text
                assert len(r.json()["results"]) == 3
                assert client.get("/api/v1/search", params={"q": "refund"}).status_code == 200
        finally:
            standby.start()
    finally:
        web.stop()
    assert "Traceback" not in web.log.read_text(), web.log.read_text()[-3000:]


PASSWORD = "pw-for-test-only"


def _console(base: str, user) -> httpx.Client:
    """An HTTP client logged in through the console's login page."""
    client = httpx.Client(base_url=base, timeout=60)
    page = client.get("/console/login/")
    marker = 'name="csrfmiddlewaretoken" value="'
    start = page.text.index(marker) + len(marker)
    token = page.text[start : page.text.index('"', start)]
    r = client.post(
        "/console/login/",
        data={"username": user.get_username(), "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Referer": f"{base}/console/login/"},
    )
    assert r.status_code in (302, 303), r.text[:500]
    return client


def test_console_queue_and_analytics_opt_in_to_the_replica():
    """The named stale-tolerant reads are the ones decorated (nothing else is)."""
    for fn in (
        handoff_selectors.handoff_queue_snapshot,
        inference_selectors.usage_by_tenant,
        inference_selectors.router_latency_percentiles,
        knowledge_selectors.search_passages,
        conversation_selectors.message_history_page,
    ):
        assert hasattr(fn, "__wrapped__"), fn
