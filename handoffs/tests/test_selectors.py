"""The console queue snapshot: its content, and a cost that does not grow with the queue."""

import time

import pytest
import redis
from redis.connection import AbstractConnection

from conversations import services as conversation_services
from conversations.models import Conversation
from handoffs import presence, selectors, services
from handoffs.models import Handoff
from supportbot.errors import NotFound
from supportbot.tests.factories import MembershipFactory, UserFactory

SNAPSHOT_QUERIES = 3  # the handoffs (with conversation, customer, last message), names, bot chats


@pytest.fixture(autouse=True)
def _no_presence_left_over(settings, tenant, other_tenant):
    """Tenant ids restart with each test database: forget presence an earlier run left."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for t in (tenant, other_tenant):
        for key in client.scan_iter(f"sb:presence:{t.pk}:*"):
            client.delete(key)
    yield
    for t in (tenant, other_tenant):
        for key in client.scan_iter(f"sb:presence:{t.pk}:*"):
            client.delete(key)


@pytest.fixture
def redis_round_trips(monkeypatch):
    """Count requests sent to Redis (a pipeline is one) while the test runs."""
    sent = []
    real = AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):
        sent.append(command)
        return real(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    return sent


def _waiting(tenant, visitor: str, *texts: str) -> Handoff:
    customer = conversation_services.customer_get_or_create_visitor(
        tenant=tenant, visitor_id=visitor
    )
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    for n, text in enumerate(texts):
        conversation_services.message_receive(
            conversation=conversation, client_message_id=f"{visitor}-{n}", text=text
        )
    return services.handoff_request(conversation=conversation, reason="customer_request")[0]


def _claim(handoff: Handoff, agent) -> Handoff:
    return services.handoff_claim(
        tenant_id=handoff.tenant_id,
        handoff_id=handoff.pk,
        agent=agent,
        expected_version=handoff.version,
    )


@pytest.mark.parametrize("waiting", [5, 50])
def test_queue_snapshot_costs_the_same_queries_and_one_redis_round_trip_at_any_length(
    tenant, waiting, django_assert_max_num_queries, redis_round_trips
):
    agents = [MembershipFactory(tenant=tenant).user for _ in range(3)]
    for n in range(waiting):
        handoff = _waiting(tenant, f"v{n}", f"question {n}")
        agent = agents[n % len(agents)]
        presence.viewing_set(
            tenant_id=tenant.pk, handoff_id=handoff.pk, user_id=agent.pk, viewing=True
        )
        if n % 2:
            _claim(handoff, agent)
    for agent in agents:
        presence.agent_heartbeat(tenant_id=tenant.pk, user_id=agent.pk)
    redis_round_trips.clear()

    with django_assert_max_num_queries(SNAPSHOT_QUERIES):
        snapshot = selectors.handoff_queue_snapshot(tenant=tenant)

    assert len(redis_round_trips) == 1
    assert len(snapshot.handoffs) == waiting
    assert {row.last_message for row in snapshot.handoffs} == {
        f"question {n}" for n in range(waiting)
    }
    assert all(len(row.viewers) == 1 for row in snapshot.handoffs)
    assert len(snapshot.agents_online) == len(agents)


def test_queue_snapshot_lists_only_the_tenants_open_handoffs_with_their_related_rows(
    tenant, other_tenant
):
    ada = MembershipFactory(tenant=tenant, user=UserFactory(first_name="Ada", last_name="Lo")).user
    bo = MembershipFactory(tenant=tenant, user=UserFactory(username="bo")).user
    gone = MembershipFactory(tenant=tenant).user
    foreign_agent = MembershipFactory(tenant=other_tenant).user

    asked_twice = _waiting(tenant, "twice", "first question", "x" * 200)
    claimed = _claim(_waiting(tenant, "claimed", "please help"), ada)
    services.agent_reply_post(
        tenant_id=tenant.pk, handoff_id=claimed.pk, agent=ada, text="On it (agent, not customer)"
    )
    silent = _waiting(tenant, "silent")  # a customer who never wrote
    routed = _waiting(tenant, "routed", "anyone?")
    Handoff.objects.filter(pk=routed.pk).update(routed_to=bo)
    urgent = _waiting(tenant, "urgent", "card stolen")
    Handoff.objects.filter(pk=urgent.pk).update(priority=1)
    closed = _claim(_waiting(tenant, "closed", "solved already"), ada)
    services.handoff_close(
        tenant_id=tenant.pk,
        handoff_id=closed.pk,
        agent=ada,
        expected_version=closed.version,
        outcome="resolved",
    )
    foreign = _waiting(other_tenant, "foreign", "other tenant's secret")
    bot_chat = Conversation.objects.get(pk=closed.conversation_id)

    presence.agent_heartbeat(tenant_id=tenant.pk, user_id=ada.pk)
    presence.agent_heartbeat(tenant_id=other_tenant.pk, user_id=foreign_agent.pk)
    presence.viewing_set(tenant_id=tenant.pk, handoff_id=claimed.pk, user_id=ada.pk, viewing=True)
    presence.viewing_set(tenant_id=tenant.pk, handoff_id=claimed.pk, user_id=bo.pk, viewing=True)
    presence.viewing_set(
        tenant_id=other_tenant.pk, handoff_id=asked_twice.pk, user_id=foreign_agent.pk, viewing=True
    )
    stale = time.time() - presence.ONLINE_SECONDS - 5  # a console that stopped beating
    client = presence._redis()
    client.zadd(f"sb:presence:{tenant.pk}:online", {str(gone.pk): stale})
    client.zadd(f"sb:presence:{tenant.pk}:viewing:{silent.pk}", {str(gone.pk): stale})

    snapshot = selectors.handoff_queue_snapshot(tenant=tenant)

    rows = {row.id: row for row in snapshot.handoffs}
    assert [row.id for row in snapshot.handoffs] == [
        urgent.pk,
        asked_twice.pk,
        claimed.pk,
        silent.pk,
        routed.pk,
    ]
    assert closed.pk not in rows
    assert foreign.pk not in rows
    assert rows[asked_twice.pk].last_message == "x" * 160
    assert rows[claimed.pk].last_message == "please help"
    assert rows[silent.pk].last_message == ""
    assert rows[claimed.pk].assigned_to == "Ada Lo"
    assert rows[claimed.pk].state == "assigned"
    assert rows[routed.pk].routed_to == "bo"
    assert rows[routed.pk].assigned_to is None
    assert rows[claimed.pk].viewers == ["Ada Lo", "bo"]
    assert rows[asked_twice.pk].viewers == []  # the other tenant's viewer of the same id
    assert rows[silent.pk].viewers == []  # only a stale viewer
    assert rows[silent.pk].customer == "Visitor " + str(silent.conversation.customer_id)
    assert [(a.id, a.name) for a in snapshot.agents_online] == [(ada.pk, "Ada Lo")]
    assert [c.conversation_id for c in snapshot.active] == [bot_chat.pk]


def test_queue_row_of_a_closed_handoff_is_found_and_of_another_tenant_is_not(tenant, other_tenant):
    agent = MembershipFactory(tenant=tenant).user
    closed = _claim(_waiting(tenant, "closed", "done"), agent)
    services.handoff_close(
        tenant_id=tenant.pk,
        handoff_id=closed.pk,
        agent=agent,
        expected_version=closed.version,
        outcome="returned_to_bot",
    )
    row = selectors.handoff_queue_row(tenant=tenant, handoff_id=closed.pk)
    assert (row.state, row.last_message) == ("returned_to_bot", "done")
    with pytest.raises(NotFound):
        selectors.handoff_queue_row(tenant=other_tenant, handoff_id=closed.pk)
