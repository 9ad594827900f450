"""A message whose turn keeps failing (a poison message) is re-driven a bounded number of
times, then ends `failed` and the customer is told so honestly (`answer.completed`, kind
`failed`), instead of the reply sweeper retrying it forever."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from django.utils import timezone

from chat import orchestrator, tasks
from conversations import events, services
from conversations.models import Message

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def poisoned(monkeypatch):
    """Every turn of a message saying "poison" raises, wherever it runs."""
    calls: list[int] = []
    respond = orchestrator.respond

    async def raising(*, conversation_id, message, **kwargs):
        if "poison" in message.text:
            calls.append(message.pk)
            raise RuntimeError("this message breaks the turn")
        return await respond(conversation_id=conversation_id, message=message, **kwargs)

    monkeypatch.setattr(orchestrator, "respond", raising)
    return calls


def acknowledged(conversation, text: str, client_id: str = "m1") -> Message:
    """A message saved and acknowledged, whose first turn died without a reply."""
    message, _ = services.message_receive(
        conversation=conversation, client_message_id=client_id, text=text
    )
    return age(message)


def age(message: Message) -> Message:
    """Make the message (and a reply reserved for it) old enough for the sweeper."""
    past = timezone.now() - timedelta(minutes=10)
    Message.objects.filter(pk=message.pk).update(updated_at=past)
    Message.objects.filter(reply_to=message).update(updated_at=past)
    message.refresh_from_db()
    return message


def test_a_message_whose_turn_keeps_raising_ends_failed_after_the_attempts(
    conversation, settings, poisoned
):
    settings.ANSWER_MAX_REDRIVE_ATTEMPTS = 3
    message = acknowledged(conversation, "this poison message breaks every turn")
    for attempt in (1, 2, 3):
        assert tasks.unanswered_messages_sweep_task() == []
        message.refresh_from_db()
        assert message.redrive_attempts == attempt
        if attempt < 3:
            assert message.state == Message.State.RECEIVED
            age(message)
    assert message.state == Message.State.FAILED
    reply = Message.objects.get(reply_to=message, role=Message.Role.BOT)
    assert (reply.state, reply.kind) == ("delivered", Message.Kind.FAILED)
    assert reply.text == tasks.GAVE_UP_TEXT
    assert poisoned == [message.pk] * 3

    age(message)
    assert tasks.unanswered_messages_sweep_task() == []  # never again
    assert poisoned == [message.pk] * 3


def test_a_healthy_message_beside_a_poison_one_is_answered(
    conversation, help_center, settings, poisoned
):
    settings.ANSWER_MAX_REDRIVE_ATTEMPTS = 1
    bad = acknowledged(conversation, "poison", "m1")
    good = acknowledged(conversation, "Is standard shipping free?", "m2")
    assert tasks.unanswered_messages_sweep_task() == [good.pk]
    bad.refresh_from_db()
    assert bad.state == Message.State.FAILED
    assert Message.objects.get(reply_to=good, role="bot").kind != Message.Kind.FAILED


def test_a_message_whose_turn_killed_its_process_on_the_last_attempt_fails_without_running(
    conversation, settings, poisoned
):
    """The attempt is counted before the turn runs: a turn that takes its process down with
    it (no exception to catch) still counts."""
    settings.ANSWER_MAX_REDRIVE_ATTEMPTS = 2
    message = acknowledged(conversation, "poison that kills the process")
    services.reply_reserve(customer_message=message)
    Message.objects.filter(pk=message.pk).update(redrive_attempts=2)
    age(message)
    assert tasks.unanswered_messages_sweep_task() == []
    message.refresh_from_db()
    assert message.state == Message.State.FAILED
    assert poisoned == []  # not run a third time
    replies = Message.objects.filter(reply_to=message, role="bot")
    assert [(r.kind, r.state) for r in replies] == [(Message.Kind.FAILED, "delivered")]


def test_the_customer_is_told_in_an_answer_completed_event_of_kind_failed(
    conversation, settings, poisoned
):
    settings.ANSWER_MAX_REDRIVE_ATTEMPTS = 1
    message = acknowledged(conversation, "poison")

    async def sweep_while_listening() -> dict:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(events.conversation_group(conversation.pk), channel)
        try:
            await sync_to_async(_sweep_in_thread, thread_sensitive=False)()
            received = await asyncio.wait_for(layer.receive(channel), timeout=30)
        finally:
            await layer.group_discard(events.conversation_group(conversation.pk), channel)
        return events.for_customer(received, "another-connection")

    event = async_to_sync(sweep_while_listening)()
    assert event["type"] == "answer.completed"
    assert (event["kind"], event["reply_to"]) == ("failed", message.pk)
    assert event["text"] == tasks.GAVE_UP_TEXT
    assert event["message"]["state"] == "delivered"


def _sweep_in_thread() -> None:
    try:
        tasks.unanswered_messages_sweep_task()
    finally:
        connections.close_all()


def test_two_sweepers_count_one_attempt_once(conversation):
    message = acknowledged(conversation, "poison")
    barrier = threading.Barrier(2)
    counts: list[int | None] = []

    def sweeper() -> None:
        try:
            barrier.wait()
            counts.append(services.message_redrive_count(message=message))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(counts, key=str) == [1, None]
    message.refresh_from_db()
    assert message.redrive_attempts == 1


def test_failing_a_message_answered_meanwhile_changes_nothing(conversation, help_center):
    message = acknowledged(conversation, "Is standard shipping free?")
    assert tasks.unanswered_messages_sweep_task() == [message.pk]
    assert services.reply_fail(customer_message_id=message.pk, text="gave up") is None
    reply = Message.objects.get(reply_to=message, role="bot")
    assert reply.kind != Message.Kind.FAILED
    message.refresh_from_db()
    assert message.state != Message.State.FAILED
