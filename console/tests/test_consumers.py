"""The console's live channel forwards only the conversation the agent is viewing."""

import json

import pytest

from console.consumers import ConsoleConsumer
from conversations import events
from handoffs import events as queue_events


def _console_viewing(conversation_id: int | None) -> tuple[ConsoleConsumer, list[dict]]:
    consumer = ConsoleConsumer()
    consumer.viewing = None if conversation_id is None else (1, conversation_id)
    sent: list[dict] = []

    async def send(text_data: str) -> None:
        sent.append(json.loads(text_data))

    consumer.send = send
    return consumer, sent


def _group_message(event: dict, conversation_id: int) -> dict:
    return events._group_message(event, None, conversation_id)


async def test_events_still_in_flight_from_a_conversation_the_agent_left_are_dropped():
    consumer, sent = _console_viewing(8)
    for event in (
        events.answer_delta(message_id=5, text="Refunds take"),
        events.message_created({"id": 6, "conversation_id": 7, "text": "hello"}),
        events.owner_changed(owner="human", version=2),
    ):
        await consumer.conversation_event(_group_message(event, 7))
    assert sent == []


async def test_a_console_viewing_nothing_forwards_nothing():
    consumer, sent = _console_viewing(None)
    await consumer.conversation_event(
        _group_message(events.answer_delta(message_id=5, text="Refunds take"), 7)
    )
    assert sent == []


async def test_the_viewed_conversations_events_carry_its_id():
    consumer, sent = _console_viewing(7)
    message = {"id": 6, "conversation_id": 7, "text": "hello"}
    await consumer.conversation_event(_group_message(events.message_created(message), 7))
    await consumer.conversation_event(
        _group_message(events.answer_delta(message_id=9, text="Refunds take"), 7)
    )
    await consumer.conversation_event(
        _group_message(events.owner_changed(owner="human", version=2), 7)
    )
    assert sent == [
        {"type": "message.created", "message": message, "conversation_id": 7},
        {"type": "answer.delta", "message_id": 9, "text": "Refunds take", "conversation_id": 7},
        {"type": "conversation.owner", "owner": "human", "version": 2, "conversation_id": 7},
    ]


@pytest.mark.parametrize(
    ("group_message", "client_event"),
    [
        (queue_events.handoff_closed(handoff_id=4, outcome="resolved"), ("resolved", 4)),
        (queue_events.note_added(conversation_id=7), ("note", None)),
        (queue_events.agents_presence_changed(), ("presence", None)),
        (queue_events.viewers_changed(handoff_id=5), ("viewers", 5)),
    ],
)
async def test_the_console_receives_each_group_message_as_queue_changed(
    group_message, client_event
):
    consumer, sent = _console_viewing(None)
    await consumer.handoff_changed(group_message)
    event, handoff_id = client_event
    assert sent == [{"type": "queue.changed", "event": event, "handoff_id": handoff_id}]


async def test_saved_messages_reach_the_console_under_the_customers_names():
    consumer, sent = _console_viewing(7)
    agent_message = {"id": 6, "conversation_id": 7, "role": "agent", "text": "Hi, Dana here."}
    answer = {
        "id": 8,
        "conversation_id": 7,
        "role": "bot",
        "kind": "answer",
        "text": "Refunds take 5-10 business days.",
        "reply_to": 7,
        "citations": [],
    }
    for event in (events.message_saved(agent_message), events.answer_completed(answer)):
        await consumer.conversation_event(_group_message(event, 7))
    assert [(e["type"], e["message"]["id"]) for e in sent] == [
        ("agent.message", 6),
        ("answer.completed", 8),
    ]
