"""The running django-q2 cluster recovers by itself after PostgreSQL restarts under it and its
processes die: the Sentinel's scheduler keeps running the sweeps, the workers it forks anew
index, sweep and answer, and nothing fails on a connection shared across the fork."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from django_q.models import Task

from conversations import services
from conversations.models import Message
from supportbot.tests import clusterprocs

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SWEEPS = (
    "chat.tasks.unanswered_messages_sweep_task",
    "actions.tasks.actions_sweep_task",
    "knowledge.tasks.documents_sweep_task",
    "handoffs.tasks.handoff_escalate_task",
)
# What a connection used by two processes at once produced in the field (issue 35).
SHARED_CONNECTION_ERRORS = (
    "INTRANS",
    "can't change 'autocommit'",
    "tuple index out of range",
    "didn't produce records",
    "generator raised StopIteration",
)


def _upload_ready(api_client, name: str, text: str, process) -> None:
    r = api_client.post(
        "/api/v1/knowledge-documents",
        {"file": SimpleUploadedFile(name, text.encode(), content_type="text/markdown")},
    )
    assert r.status_code == 202, r.content
    document_id = r.json()["id"]

    def finished():
        body = api_client.get(f"/api/v1/knowledge-documents/{document_id}").json()
        return body if body["status"] in ("ready", "failed") else None

    body = clusterprocs.wait_for(finished, f"{name} indexed", process, 150)
    assert body["status"] == "ready", body["error"]


def _sweeps_ran_since(moment) -> set[str]:
    return set(
        Task.objects.filter(func__in=SWEEPS, started__gte=moment, success=True).values_list(
            "func", flat=True
        )
    )


@pytest.mark.parametrize(
    "qcluster", [{"ANSWER_STALE_AFTER_S": "1", "Q_RECYCLE": "2"}], indirect=True
)
def test_after_postgres_restarts_the_cluster_indexes_sweeps_and_answers_in_forked_workers(
    api_client, conversation, help_center, qcluster
):
    """The worker is recycled every 2 tasks, so the cluster forks new workers from its parent
    all along, after that parent's own scheduler used the database (as a long-running cluster
    does every 200 tasks, and whenever a worker dies)."""
    started = timezone.now()
    clusterprocs.schedules_due_now(qcluster.cluster_name, SWEEPS)
    _upload_ready(api_client, "before.md", "# Gift cards\n\nGift cards never expire.\n", qcluster)
    clusterprocs.wait_for(
        lambda: _sweeps_ran_since(started) == set(SWEEPS), "the first sweeps", qcluster, 150
    )

    clusterprocs.pg_restart()
    clusterprocs.connections_drop()  # this test process's own connections were cut too
    restarted = timezone.now()

    # Work for every sweep, none of it done by the test.
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="after-restart", text="Is shipping free?"
    )
    Message.objects.filter(pk=message.pk).update(updated_at=timezone.now() - timedelta(seconds=5))
    clusterprocs.schedules_due_now(qcluster.cluster_name, SWEEPS)
    _upload_ready(api_client, "after.md", "# Store credit\n\nCredit lasts a year.\n", qcluster)

    def answered():
        return Message.objects.filter(reply_to=message, role="bot", state="delivered").exists()

    clusterprocs.wait_for(answered, "the acknowledged message answered by the sweep", qcluster, 150)
    clusterprocs.wait_for(
        lambda: _sweeps_ran_since(restarted) == set(SWEEPS), "the sweeps again", qcluster, 150
    )
    failed = Task.objects.filter(started__gte=started, success=False)
    assert not failed.exists(), [(t.func, str(t.result)[:300]) for t in failed]
    assert Message.objects.filter(reply_to=message, role="bot").count() == 1
    log = qcluster.log_path.read_text()
    assert log.count("recycled worker") >= 4  # the workers were forked again and again
    assert not [e for e in SHARED_CONNECTION_ERRORS if e in log], log[-3000:]
    assert qcluster.poll() is None
