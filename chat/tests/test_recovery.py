"""Races and recovery of the one official answer: two processes taking over one stale reply,
a web process killed mid-answer, the sweeper re-driving acknowledged messages."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from actions import services as action_services
from chat import tasks
from conversations import services
from conversations.models import Message
from supportbot import devservices
from supportbot.services import api_key_create
from supportbot.tests.webprocs import start_web

pytestmark = [pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def _stale_reply(conversation, text="Is standard shipping free?"):
    """A customer message acknowledged, its reply reserved by a worker that then died."""
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="m1", text=text
    )
    reply = services.reply_reserve(customer_message=message)
    past = timezone.now() - timedelta(minutes=10)
    Message.objects.filter(pk__in=[message.pk, reply.pk]).update(updated_at=past)
    return message, reply


@pytest.mark.process
def test_two_processes_taking_over_one_stale_reply_give_one_answer(
    conversation, help_center, tmp_path, settings
):
    message, reply = _stale_reply(conversation)
    go = tmp_path / "go"
    env = {
        **os.environ,
        "DATABASE_URL": devservices.postgres_url_for(connection.settings_dict["NAME"]),
        "INFERENCE_AUTOSTART": "0",
        "ANSWER_CACHE_ENABLED": "0",
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    procs = [
        subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "chat.tests.race_takeover", str(message.pk), str(go)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    time.sleep(8)  # both processes loaded Django and wait for the go file
    go.write_text("go")
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1])["answered"])
    assert sorted(results) == [False, True]  # the database picked one winner
    replies = Message.objects.filter(reply_to=message, role="bot")
    assert replies.count() == 1
    assert replies.get().pk == reply.pk
    assert replies.get().state == "delivered"


def test_sweeper_answers_an_acknowledged_message_left_without_a_reply(
    conversation, help_center, settings
):
    settings.ANSWER_STALE_AFTER_S = 1
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="m1", text="Is standard shipping free?"
    )
    Message.objects.filter(pk=message.pk).update(updated_at=timezone.now() - timedelta(seconds=5))
    assert tasks.unanswered_messages_sweep_task() == [message.pk]
    assert tasks.unanswered_messages_sweep_task() == []  # twice: still one answer
    replies = Message.objects.filter(reply_to=message, role="bot")
    assert [r.state for r in replies] == ["delivered"]


def test_sweeper_leaves_a_fresh_reply_and_a_human_owned_conversation_alone(
    conversation, help_center, settings
):
    settings.ANSWER_STALE_AFTER_S = 60
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="m1", text="Is standard shipping free?"
    )
    services.reply_reserve(customer_message=message)  # a live worker is answering
    assert tasks.unanswered_messages_sweep_task() == []
    assert Message.objects.get(reply_to=message).state == "streaming"


def test_web_process_killed_mid_answer_then_restarted_answers_the_message_exactly_once(
    tenant, help_center, orders, tmp_path, settings
):
    tenant.refund_auto_limit = 50
    tenant.save()
    action_services.provider_config_set(
        tenant=tenant, base_url=orders.url, token=orders.token, timeout_seconds=10.0
    )
    _, raw = api_key_create(tenant=tenant, name="crm")
    headers = {"Authorization": f"Bearer {raw}"}
    (web,) = start_web(tmp_path, count=1)
    try:
        r = httpx.post(
            f"{web.url}/api/v1/conversations",
            json={"customer": {"external_id": "cust-1001"}},
            headers=headers,
            timeout=30,
        )
        conversation_id = r.json()["id"]
        orders.set_faults(latency_ms=8000)  # the order system is slow: the turn is mid-tool
        # Acknowledged and being answered when the process dies (the client gives up first).
        with contextlib.suppress(httpx.ReadTimeout):
            httpx.post(
                f"{web.url}/api/v1/conversations/{conversation_id}/messages",
                json={"client_message_id": "k1", "text": "where is my order A-1042?"},
                headers=headers,
                timeout=2,
            )
        message = Message.objects.get(conversation_id=conversation_id, role="customer")
        assert message.state in ("calling_tool", "received", "searching")
        web.process.send_signal(signal.SIGKILL)
        web.process.wait(10)
    finally:
        web.stop()
    orders.set_faults(latency_ms=0)
    (again,) = start_web(tmp_path, count=1)  # restarted on the same database
    try:
        settings.ANSWER_STALE_AFTER_S = 0.5
        time.sleep(1)
        assert tasks.unanswered_messages_sweep_task() == [message.pk]
        assert tasks.unanswered_messages_sweep_task() == []
        history = httpx.get(
            f"{again.url}/api/v1/conversations/{conversation_id}/messages",
            headers=headers,
            timeout=30,
        ).json()["results"]
    finally:
        again.stop()
    bots = [m for m in history if m["role"] == "bot"]
    assert len(bots) == 1
    assert bots[0]["reply_to"] == message.pk
    assert "A-1042" in bots[0]["text"]
    assert Message.objects.filter(reply_to=message, role="bot").count() == 1


def test_the_scheduled_redrive_moves_to_a_task_that_imports():
    import importlib

    from django.apps import apps as django_apps
    from django.utils.module_loading import import_string
    from django_q.models import Schedule

    migration = importlib.import_module("chat.migrations.0001_redrive_schedule_owner")
    Schedule.objects.update_or_create(
        name=migration.NAME, defaults={"func": migration.OLD, "schedule_type": "I", "minutes": 1}
    )

    migration.point_to_chat(django_apps, None)

    schedule = Schedule.objects.get(name=migration.NAME)
    assert schedule.func == "chat.tasks.unanswered_messages_sweep_task"
    assert import_string(schedule.func) is tasks.unanswered_messages_sweep_task
