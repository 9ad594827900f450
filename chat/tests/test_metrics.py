"""Chat metrics: turns in flight (the HPA's metric), turn outcomes, first words."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from prometheus_client import REGISTRY

from chat import metrics, orchestrator


def _value(name: str, labels: dict | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


async def test_turns_in_flight_counts_concurrent_turns_and_returns_to_zero():
    before = _value("supportbot_chat_turns_in_flight")
    ok_before = _value("supportbot_chat_turns_total", {"outcome": "ok"})
    release = asyncio.Event()
    started = 0

    async def turn():
        nonlocal started
        async with metrics.turn_tracked():
            started += 1
            await release.wait()

    tasks = [asyncio.create_task(turn()) for _ in range(5)]
    while started < 5:
        await asyncio.sleep(0)
    assert _value("supportbot_chat_turns_in_flight") == before + 5
    release.set()
    await asyncio.gather(*tasks)
    assert _value("supportbot_chat_turns_in_flight") == before
    assert _value("supportbot_chat_turns_total", {"outcome": "ok"}) == ok_before + 5


async def test_a_failed_turn_is_counted_and_a_cancelled_one_is_not():
    failed = _value("supportbot_chat_turns_total", {"outcome": "failed"})
    ok = _value("supportbot_chat_turns_total", {"outcome": "ok"})
    with pytest.raises(RuntimeError):
        async with metrics.turn_tracked():
            raise RuntimeError("engine exploded")

    async def hangs():
        async with metrics.turn_tracked():
            await asyncio.sleep(10)

    task = asyncio.create_task(hangs())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _value("supportbot_chat_turns_total", {"outcome": "failed"}) == failed + 1
    assert _value("supportbot_chat_turns_total", {"outcome": "ok"}) == ok
    assert _value("supportbot_chat_turns_in_flight") >= 0


def test_first_words_bounds_the_path_label():
    metrics.first_words_observe(path="generated", seconds=0.4)
    metrics.first_words_observe(path="<script>\x00", seconds=-3)
    assert _value("supportbot_answer_first_words_seconds_count", {"path": "generated"}) >= 1
    assert _value("supportbot_answer_first_words_seconds_count", {"path": "other"}) >= 1
    assert _value("supportbot_answer_first_words_seconds_count", {"path": "<script>\x00"}) == 0


def _first_words() -> tuple[float, float]:
    """(count, sum) of the first-words histogram over every path."""
    count = total = 0.0
    for family in REGISTRY.collect():
        if family.name != "supportbot_answer_first_words_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_count"):
                count += sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
    return count, total


def test_an_answered_turn_records_its_first_words_and_outcome(help_center, conversation):
    count, total = _first_words()
    ok = _value("supportbot_chat_turns_total", {"outcome": "ok"})
    in_flight = _value("supportbot_chat_turns_in_flight")
    outcome = async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation, client_message_id="m1", text="Can I return an opened item?"
    )
    assert outcome.reply is not None
    new_count, new_total = _first_words()
    assert new_count == count + 1
    assert 0 < new_total - total < 30
    path = outcome.reply.meta.get("path")
    assert _value("supportbot_answer_first_words_seconds_count", {"path": path}) >= 1
    assert _value("supportbot_chat_turns_total", {"outcome": "ok"}) == ok + 1
    assert _value("supportbot_chat_turns_in_flight") == in_flight
