"""Background probes of a skipped model: verified and recorded, never shown, and bounded per
process so a busy hour of skipped answers cannot pile generations onto the worker."""

import asyncio
import time
from types import SimpleNamespace

import numpy as np
import pytest

from chat.orchestrator import generate
from inference import gateway, yields

QUESTION = "How long do I have to return items, and is return shipping free?"
PASSAGE = "You can return most items within 30 days of delivery. Return shipping is free."


def _embed(texts):
    """One unit vector for every text: meaning is equal, words decide (overlap, recall)."""
    v = np.ones(384, dtype=np.float32)
    return [v / np.linalg.norm(v) for _ in texts]


class _Nowhere:
    """A probe's turn events: anything it published would fail the test."""

    async def publish(self, event):
        raise AssertionError(f"a probe published {event}")


def _turn(n: int):
    return SimpleNamespace(
        conversation=SimpleNamespace(tenant_id=1, pk=n),
        message=SimpleNamespace(pk=n, text=QUESTION),
        reply=SimpleNamespace(pk=1000 + n),
        events=_Nowhere(),
        embedder=_embed,
        started=time.monotonic(),
    )


@pytest.fixture
def held_stream(monkeypatch):
    """Every probe's model stream waits until the test releases it, then says the passage."""
    release = asyncio.Event()
    started = []

    async def stream_chat(**kwargs):
        started.append(kwargs["affinity_key"])
        await release.wait()
        yield gateway.ChatDelta(PASSAGE)
        yield gateway.ChatResult(PASSAGE, "smollm2-135m", "w1", 600, 20, 50.0, 400.0)

    monkeypatch.setattr(gateway, "stream_chat", stream_chat)
    recorded = []
    monkeypatch.setattr(yields, "record", lambda **kw: recorded.append(kw))
    return SimpleNamespace(release=release, started=started, recorded=recorded)


def _probes_limit(settings, n: int) -> None:
    settings.INFERENCE = {**settings.INFERENCE, "YIELD_PROBES_IN_FLIGHT": n}
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0  # the first words are never late here


async def _until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def _settle():
    await asyncio.gather(*[t for running in generate._probes.values() for t in running])


async def test_a_probe_due_while_the_last_one_runs_is_skipped(settings, held_stream):
    _probes_limit(settings, 1)
    ordered = [SimpleNamespace(text=PASSAGE)]

    assert generate.shadow_probe(_turn(1), [], ordered) is True
    assert generate.shadow_probe_free() is False
    assert generate.shadow_probe(_turn(2), [], ordered) is False
    await _until(lambda: held_stream.started)
    await asyncio.sleep(0.05)
    assert held_stream.started == ["conv:1"]

    held_stream.release.set()
    await _settle()
    assert generate.shadow_probe_free() is True
    assert len(held_stream.recorded) == 1
    # The first verbatim sentence verifies: measured, the probe stops there.
    assert held_stream.recorded[0]["kept"] == 1
    assert held_stream.recorded[0]["model"] == "smollm2-135m"


async def test_probes_in_flight_follow_the_setting(settings, held_stream):
    _probes_limit(settings, 3)
    ordered = [SimpleNamespace(text=PASSAGE)]

    started = [generate.shadow_probe(_turn(n), [], ordered) for n in range(5)]

    assert started == [True, True, True, False, False]
    held_stream.release.set()
    await _settle()
    assert len(held_stream.recorded) == 3


async def test_zero_probes_in_flight_turns_probing_off(settings, held_stream):
    _probes_limit(settings, 0)

    assert generate.shadow_probe(_turn(1), [], [SimpleNamespace(text=PASSAGE)]) is False
    await asyncio.sleep(0.05)
    assert held_stream.started == []


async def test_a_probe_whose_first_words_come_after_the_budget_counts_as_nothing_kept(
    settings, held_stream
):
    """The real path would have answered extractively: a late model has no usable yield."""
    _probes_limit(settings, 1)
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 0.1

    assert generate.shadow_probe(_turn(1), [], [SimpleNamespace(text=PASSAGE)]) is True
    await _until(lambda: held_stream.started)
    await asyncio.sleep(0.2)
    held_stream.release.set()
    await _settle()

    assert held_stream.recorded[0]["kept"] == 0


async def test_warm_up_calls_have_their_own_bound_and_leave_probes_free(settings, held_stream):
    """A model not measured yet is measured by background calls (at most
    INFERENCE_YIELD_WARMUP_IN_FLIGHT); they never take the probes' place."""
    settings.INFERENCE = {
        **settings.INFERENCE,
        "YIELD_WARMUP_IN_FLIGHT": 2,
        "YIELD_PROBES_IN_FLIGHT": 1,
    }
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0
    ordered = [SimpleNamespace(text=PASSAGE)]

    started = [generate.shadow_probe(_turn(n), [], ordered, kind=generate.WARMUP) for n in range(3)]

    assert started == [True, True, False]
    assert generate.shadow_probe_free(generate.PROBE) is True
    held_stream.release.set()
    await _settle()
    assert [r["kept"] for r in held_stream.recorded] == [1, 1]


def test_warming_up_runs_in_the_background_unless_configured_to_wait(settings):
    assert generate.probe_kind("warming_up") == generate.WARMUP
    assert generate.probe_kind("probe_interval") == generate.PROBE
    assert generate.probe_kind("yield_ok") is None
    settings.INFERENCE = {**settings.INFERENCE, "YIELD_WARMUP": "foreground"}
    assert generate.probe_kind("warming_up") is None
    settings.INFERENCE = {**settings.INFERENCE, "YIELD_WARMUP": "sometimes"}
    with pytest.raises(ValueError, match="INFERENCE_YIELD_WARMUP"):
        generate.probe_kind("warming_up")


async def test_a_probe_stops_the_model_at_its_first_kept_sentence(settings, monkeypatch):
    """A probe costs the worker no more than the answer would have: once a sentence is kept
    (all the yield policy needs) the stream is closed, not read to its end."""
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0
    read, closed = [], []

    async def stream_chat(**kwargs):
        try:
            for sentence in PASSAGE.split(". "):
                read.append(sentence)
                yield gateway.ChatDelta(sentence.rstrip(".") + ". ")
            for n in range(50):
                read.append(n)
                yield gateway.ChatDelta(f"Filler sentence number {n}. ")
        finally:
            closed.append(True)

    monkeypatch.setattr(gateway, "stream_chat", stream_chat)
    recorded = []
    monkeypatch.setattr(yields, "record", lambda **kw: recorded.append(kw))

    assert generate.shadow_probe(_turn(1), [], [SimpleNamespace(text=PASSAGE)]) is True
    await _settle()

    assert recorded[0]["kept"] == 1
    assert closed == [True]
    assert len(read) < 5, read


async def test_an_answer_waiting_on_a_warming_model_holds_a_place_of_the_one_warm_up_bound(
    settings, held_stream
):
    """Foreground warm-up (an answer waits on the unmeasured model) and background warm-up
    calls are bounded by one registry: while the answer waits, no background call starts,
    and the place is free again once it is done."""
    settings.INFERENCE = {**settings.INFERENCE, "YIELD_WARMUP_IN_FLIGHT": 1}
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0
    ordered = [SimpleNamespace(text=PASSAGE)]

    with generate.warmup_slot(generate.WARMING_UP) as admitted:
        assert admitted is True
        assert generate.shadow_probe_free(generate.WARMUP) is False
        assert generate.shadow_probe(_turn(1), [], ordered, kind=generate.WARMUP) is False
        with generate.warmup_slot(generate.WARMING_UP) as second:
            assert second is False
    assert generate.shadow_probe_free(generate.WARMUP) is True
    with generate.warmup_slot("probe_interval") as other_reason:
        assert other_reason is True  # only warm-up is bounded here
