"""The console's live channel forwards only the conversation the agent is viewing."""

import json

from console.consumers import ConsoleConsumer
from conversations import events


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
        {"type": "conversation.message", "message": message, "conversation_id": 7},
        {"type": "answer.delta", "message_id": 9, "text": "Refunds take", "conversation_id": 7},
        {"type": "conversation.owner", "owner": "human", "conversation_id": 7},
    ]
