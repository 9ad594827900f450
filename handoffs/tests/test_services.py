import threading

import pytest
from django.db import close_old_connections

from conversations import services as conversation_services
from conversations.models import Conversation
from handoffs import presence, services
from handoffs.models import Handoff, Team
from supportbot.errors import ApplicationError, Conflict
from supportbot.models import AuditEvent
from supportbot.tests.factories import MembershipFactory


@pytest.fixture
def conversation(tenant):
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="v1")
    return conversation_services.conversation_start(tenant=tenant, customer=customer)


@pytest.fixture
def handoff(conversation):
    handoff, created = services.handoff_request(
        conversation=conversation, reason="customer_request"
    )
    assert created
    return handoff


def test_request_is_idempotent_one_open_handoff_per_conversation(conversation, handoff):
    again, created = services.handoff_request(conversation=conversation, reason="high_risk")
    assert not created
    assert again.pk == handoff.pk
    assert Handoff.objects.filter(conversation=conversation).count() == 1
    assert handoff.state == "queued"


def test_claim_makes_the_agent_owner_and_the_conversation_human(handoff, agent):
    claimed = services.handoff_claim(
        tenant_id=handoff.tenant_id, handoff_id=handoff.pk, agent=agent, expected_version=1
    )
    assert (claimed.state, claimed.assigned_to, claimed.version) == ("assigned", agent, 2)
    assert Conversation.objects.get(pk=handoff.conversation_id).owner == "human"
    assert AuditEvent.objects.filter(action="handoff.claimed", target_id=str(handoff.pk)).exists()


def test_second_claim_with_stale_version_says_who_holds_it(handoff, agent, tenant):
    other = MembershipFactory(tenant=tenant, role="agent").user
    services.handoff_claim(
        tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, expected_version=1
    )
    with pytest.raises(Conflict, match=f"Already claimed by {agent.username}"):
        services.handoff_claim(
            tenant_id=tenant.pk, handoff_id=handoff.pk, agent=other, expected_version=1
        )
    handoff.refresh_from_db()
    assert handoff.assigned_to == agent


@pytest.mark.django_db(transaction=True)
def test_two_agents_claiming_at_the_same_moment_produce_exactly_one_owner(tenant):
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="x")
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    handoff, _ = services.handoff_request(conversation=conversation, reason="customer_request")
    agents = [MembershipFactory(tenant=tenant, role="agent").user for _ in range(2)]
    barrier = threading.Barrier(2)
    results: list = []

    def claim(agent):
        try:
            barrier.wait()
            services.handoff_claim(
                tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, expected_version=1
            )
            results.append(("won", agent.pk))
        except Conflict as exc:
            results.append(("lost", str(exc)))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=claim, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(r[0] for r in results) == ["lost", "won"]
    handoff.refresh_from_db()
    winner = next(r[1] for r in results if r[0] == "won")
    assert handoff.assigned_to_id == winner
    assert handoff.version == 2
    assert (
        AuditEvent.objects.filter(action="handoff.claimed", target_id=str(handoff.pk)).count() == 1
    )


def test_give_back_returns_ownership_to_the_bot(handoff, agent):
    claimed = services.handoff_claim(
        tenant_id=handoff.tenant_id, handoff_id=handoff.pk, agent=agent, expected_version=1
    )
    closed = services.handoff_close(
        tenant_id=handoff.tenant_id,
        handoff_id=handoff.pk,
        agent=agent,
        expected_version=claimed.version,
        outcome="returned_to_bot",
    )
    assert closed.state == "returned_to_bot"
    assert Conversation.objects.get(pk=handoff.conversation_id).owner == "bot"
    new, created = services.handoff_request(conversation=handoff.conversation, reason="high_risk")
    assert created
    assert new.pk != handoff.pk


def test_agent_must_hold_the_handoff_to_reply(handoff, agent, tenant):
    with pytest.raises(Conflict, match="Claim"):
        services.agent_reply_post(
            tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, text="hi"
        )
    services.handoff_claim(
        tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, expected_version=1
    )
    message = services.agent_reply_post(
        tenant_id=tenant.pk, handoff_id=handoff.pk, agent=agent, text="Hi, Sam here."
    )
    assert (message.role, message.text) == ("agent", "Hi, Sam here.")


def test_routing_offers_to_the_least_busy_online_agent_of_the_team(tenant, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    busy, free, outsider = (MembershipFactory(tenant=tenant).user for _ in range(3))
    team = Team.objects.create(tenant=tenant, name="returns", handles_reasons=["customer_request"])
    team.members.set([busy, free])
    for user in (busy, free, outsider):
        presence.agent_heartbeat(tenant_id=tenant.pk, user_id=user.pk)
    customer = conversation_services.customer_get_or_create_visitor(tenant=tenant, visitor_id="r")
    first = conversation_services.conversation_start(tenant=tenant, customer=customer)
    held, _ = services.handoff_request(conversation=first, reason="high_risk")
    services.handoff_claim(
        tenant_id=tenant.pk, handoff_id=held.pk, agent=busy, expected_version=held.version
    )
    second = conversation_services.conversation_start(tenant=tenant, customer=customer)
    waiting, _ = services.handoff_request(conversation=second, reason="customer_request")
    routed = services.handoff_route(handoff_id=waiting.pk)
    assert routed.routed_to == free
    assert routed.team == team
    for user in (busy, free, outsider):
        presence.agent_offline(tenant_id=tenant.pk, user_id=user.pk)


def test_unclaimed_handoffs_escalate_once(handoff):
    Handoff.objects.filter(pk=handoff.pk).update(
        created_at=handoff.created_at.replace(year=handoff.created_at.year - 1)
    )
    assert services.handoff_escalate_overdue(older_than_seconds=60) == [handoff.pk]
    handoff.refresh_from_db()
    assert handoff.priority == 1
    assert handoff.escalated_at is not None
    assert services.handoff_escalate_overdue(older_than_seconds=60) == []


def test_customer_can_leave_an_email_on_the_open_handoff(handoff):
    services.handoff_leave_contact(conversation=handoff.conversation, email="dana@example.com")
    handoff.refresh_from_db()
    assert handoff.customer_email == "dana@example.com"
    with pytest.raises(ApplicationError):
        services.handoff_leave_contact(conversation=handoff.conversation, email="not-an-email")
