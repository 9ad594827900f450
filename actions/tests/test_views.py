"""The console pages: ledger, audit trail, approve/deny with expected versions."""

import pytest
from django.test import Client

from actions.models import ActionRequest
from actions.tests.conftest import propose_and_run
from supportbot.errors import ApplicationError
from supportbot.tests.factories import MembershipFactory


@pytest.fixture
def console(agent):
    client = Client()
    client.force_login(agent)
    return client


def test_console_requires_a_login(db):
    r = Client().get("/console/actions/")
    assert r.status_code == 302
    assert r["Location"].startswith("/console/login/")


def test_the_console_login_sends_an_agent_on_to_the_ledger(agent):
    r = Client().post(
        "/console/login/",
        {"username": agent.username, "password": "pw-for-tests-1", "next": "/console/actions/"},
    )
    assert r.status_code == 302, r.content
    assert r["Location"] == "/console/actions/"


def test_ledger_lists_actions_pending_approvals_and_rejected_proposals(shop, alice, console):
    propose_and_run(alice, "request_refund", order_id="A-1042", amount=40, reason="x")
    propose_and_run(alice, "request_refund", order_id="A-1043", amount=120, reason="x")
    with pytest.raises(ApplicationError):
        propose_and_run(alice, "wire_money", source="model", to="me")

    r = console.get("/console/actions/")

    assert r.status_code == 200
    page = r.content.decode()
    assert "Waiting for approval (1)" in page
    assert "succeeded" in page
    assert "awaiting_approval" in page
    assert "unknown_tool" in page


def test_detail_shows_arguments_order_audit_trail_and_conversation(shop, alice, console):
    action = propose_and_run(alice, "request_refund", order_id="A-1043", amount=120, reason="x")

    r = console.get(f"/console/actions/{action.pk}/")

    page = r.content.decode()
    assert r.status_code == 200
    for expected in ("A-1043", "249.00", "action.proposed", "action.awaiting_approval"):
        assert expected in page
    assert "Approve and execute" in page


def test_approve_then_a_stale_second_approval_shows_who_decided(
    shop, tenant, alice, agent, console
):
    action = propose_and_run(alice, "request_refund", order_id="A-1043", amount=120, reason="x")
    other = Client()
    other.force_login(MembershipFactory(tenant=tenant, role="agent").user)
    form = {"decision": "approve", "reason": "ok", "expected_version": action.version}

    first = console.post(f"/console/actions/{action.pk}/decide", form, follow=True)
    second = other.post(f"/console/actions/{action.pk}/decide", form, follow=True)

    assert "The action is now succeeded" in first.content.decode()
    assert f"Already approved by {agent.username}." in second.content.decode()
    action.refresh_from_db()
    assert action.state == ActionRequest.State.SUCCEEDED
    assert shop.refund_posts() == 1


def test_agent_of_another_tenant_gets_404(shop, alice, other_tenant):
    action = propose_and_run(alice, "request_refund", order_id="A-1043", amount=120, reason="x")
    client = Client()
    client.force_login(MembershipFactory(tenant=other_tenant, role="admin").user)

    assert client.get(f"/console/actions/{action.pk}/").status_code == 404
    r = client.post(
        f"/console/actions/{action.pk}/decide",
        {"decision": "approve", "reason": "", "expected_version": action.version},
    )
    assert r.status_code == 404
    action.refresh_from_db()
    assert action.state == ActionRequest.State.AWAITING_APPROVAL
