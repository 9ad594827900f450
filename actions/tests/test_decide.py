"""Approving or denying an action that waits for a person (actions/services/decide.py), against
the real reference order service: the approval re-reads the order, a refusal found then ends the
action `rejected` with who and at which step, and a decision never reaches an action that is
not waiting for one."""

import pytest

from actions import services
from actions.models import ActionRequest
from actions.tests.conftest import propose_and_run
from supportbot.errors import ApplicationError, Conflict, NotFound, PermissionDenied
from supportbot.models import AuditEvent
from supportbot.services import Actor

State = ActionRequest.State


def _waiting(alice, amount):
    action = propose_and_run(alice, "request_refund", order_id="A-1043", amount=amount, reason="x")
    assert action.state == State.AWAITING_APPROVAL
    return action


def _decide(action, agent, *, approve=True, reason="ok", version=None):
    return services.action_decide(
        action_id=action.pk,
        agent=agent,
        approve=approve,
        reason=reason,
        expected_version=action.version if version is None else version,
    )


def test_an_approval_after_the_policy_tightened_is_rejected_with_who_and_where(
    shop, tenant, alice, agent
):
    action = _waiting(alice, 120)
    tenant.refund_window_days = 0  # the order is now outside the window
    tenant.save(update_fields=["refund_window_days"])

    decided = _decide(action, agent)

    assert decided.state == State.REJECTED
    assert decided.error_code == "outside_refund_window"
    assert shop.refund_posts() == 0
    event = AuditEvent.objects.get(action="action.rejected", target_id=str(action.pk))
    assert event.data["by"] == agent.get_username()
    assert event.data["step"] == "approval"


def test_the_whole_refundable_amount_can_be_approved(shop, alice, agent):
    action = _waiting(alice, 249)  # A-1043 is 249.00, nothing refunded yet

    decided = _decide(action, agent)

    assert decided.state == State.SUCCEEDED
    assert shop.refund_posts() == 1


def test_order_system_down_at_approval_refuses_the_decision_and_keeps_it_waiting(
    shop, alice, agent
):
    action = _waiting(alice, 120)
    shop.set_faults(fail_count=5, fail_status=502, fail_method="GET")

    with pytest.raises(ApplicationError) as raised:
        _decide(action, agent)

    assert raised.value.code == "provider_unavailable"
    assert raised.value.detail == (
        "The order system cannot be reached to re-check this refund; try again shortly."
    )
    action.refresh_from_db()
    assert action.state == State.AWAITING_APPROVAL
    assert shop.refund_posts() == 0


def test_a_denial_is_never_turned_into_a_rejection_by_a_provider_read(shop, tenant, alice, agent):
    action = _waiting(alice, 120)
    tenant.refund_window_days = 0
    tenant.save(update_fields=["refund_window_days"])
    shop.set_faults(fail_count=5, fail_status=502, fail_method="GET")

    decided = _decide(action, agent, approve=False, reason="Item was used")

    assert decided.state == State.DENIED  # no provider read for a denial, no rejection
    assert not shop.calls("GET", "/orders/A-1043")[1:]  # only the proposal's read


def test_approving_again_after_the_refund_ran_changes_nothing(shop, alice, agent):
    action = _waiting(alice, 249)
    done = _decide(action, agent)
    assert done.state == State.SUCCEEDED

    with pytest.raises(Conflict) as raised:
        _decide(done, agent)  # the current version: only the state says no

    assert raised.value.code == "already_decided"
    done.refresh_from_db()
    assert done.state == State.SUCCEEDED
    assert shop.refund_posts() == 1


def test_a_denial_needs_a_reason_even_when_none_is_given(shop, alice, agent):
    action = _waiting(alice, 120)
    for reason in (None, "", "   "):
        with pytest.raises(ApplicationError) as raised:
            _decide(action, agent, approve=False, reason=reason)
        assert raised.value.field == "reason"
        assert raised.value.detail == "Say why the action is denied."
    action.refresh_from_db()
    assert action.state == State.AWAITING_APPROVAL


def test_an_unknown_action_is_not_found(shop, agent):
    with pytest.raises(NotFound) as raised:
        services.action_decide(
            action_id=987654, agent=agent, approve=True, reason="", expected_version=1
        )
    assert raised.value.detail == "No such action."


def test_a_refused_decision_says_why(shop, tenant, alice, agent):
    services.action_policy_set(
        tenant=tenant, actor=Actor.system("test"), approver_roles={"high": ["admin"]}
    )
    action = _waiting(alice, 120)

    with pytest.raises(PermissionDenied) as raised:
        _decide(action, agent)

    assert raised.value.code == "role_not_allowed"
    assert raised.value.detail
