"""A q2 worker killed while it sends a refund: the running schedule settles the action by
itself (lookup or resend under the same retry key), and the customer is refunded exactly once."""

from __future__ import annotations

from datetime import timedelta

import psutil
import pytest
from django.utils import timezone

from actions.models import ActionRequest
from actions.tests.conftest import propose_and_run
from actions.tests.shop import shop_connect
from supportbot.tests import clusterprocs

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SWEEP = "actions.tasks.actions_sweep_task"


def _worker_calling(cluster, port: int) -> psutil.Process | None:
    """The cluster's process with a connection open to the order service: the busy worker."""
    for child in psutil.Process(cluster.pid).children(recursive=True):
        try:
            if any(c.raddr and c.raddr.port == port for c in child.net_connections("tcp")):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.mark.parametrize(
    "qcluster",
    [{"ACTIONS_STALE_APPROVED_S": "1", "ACTIONS_STALE_EXECUTING_S": "3"}],
    indirect=True,
)
def test_a_worker_killed_mid_refund_is_settled_by_the_schedule_exactly_once(
    tenant, orders, alice, qcluster
):
    shop_connect(tenant, orders, timeout_seconds=15)
    # The row a web process that died after the customer confirmed leaves: approved, never sent.
    action = propose_and_run(
        alice, "request_refund", confirm=False, order_id="A-1042", amount=20, reason="broken"
    )
    assert action.state == "awaiting_confirmation", action.state
    ActionRequest.objects.filter(pk=action.pk).update(
        state="approved",
        confirmed_at=timezone.now(),
        updated_at=timezone.now() - timedelta(seconds=5),
    )
    # The provider commits the refund, then answers only after 10 s: the worker waits on it.
    orders.set_faults(commit_then_timeout_count=1, timeout_sleep_s=10)
    port = int(orders.url.rsplit(":", 1)[1].split("/")[0])
    clusterprocs.schedules_due_now(qcluster.cluster_name, [SWEEP])

    worker = clusterprocs.wait_for(
        lambda: _worker_calling(qcluster, port), "a worker calling", qcluster, 90
    )
    clusterprocs.wait_for(orders.refunds, "the refund committed at the provider", qcluster, 10)
    assert ActionRequest.objects.get(pk=action.pk).state == "executing"
    worker.kill()  # SIGKILL: it never hears that the refund went through
    worker.wait(10)

    def settled():
        return ActionRequest.objects.get(pk=action.pk).state in ("succeeded", "failed")

    # The next sweep (every minute) finds the stale `executing` row and settles it.
    clusterprocs.wait_for(settled, "the action settled by the schedule", qcluster, 150)
    action.refresh_from_db()
    assert action.state == "succeeded", (action.state, action.error_code, action.error)
    refunds = [r for r in orders.refunds() if r["order_id"] == "A-1042"]
    assert len(refunds) == 1, refunds  # found by its retry key, never sent twice
    assert qcluster.poll() is None
    assert "reincarnated" in qcluster.log_path.read_text().lower()
