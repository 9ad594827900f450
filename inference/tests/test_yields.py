"""The verified-sentence yield book: estimates, the generate-or-skip policy (deterministic
clock and RNG), sharing through Redis, answer-path metrics."""

import dataclasses
import uuid

import pytest
from prometheus_client import REGISTRY

from inference import yields
from inference.config import InferenceConfig
from inference.yields import YieldBook

CFG = InferenceConfig(
    yield_window=50,
    yield_min_samples=10,
    yield_threshold=0.2,
    yield_recovery_samples=3,
    yield_probe_fraction=0.1,
    yield_probe_interval_s=30.0,
    yield_max_age_s=3600.0,
    yield_flush_interval_s=60.0,
)


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


class Dice:
    """Returns the queued values, then `default`."""

    def __init__(self, *values, default=0.99):
        self.values = list(values)
        self.default = default

    def __call__(self):
        return self.values.pop(0) if self.values else self.default


def book(clock=None, rng=None, **cfg):
    return YieldBook(
        config=dataclasses.replace(CFG, **cfg),
        clock=clock or Clock(),
        rng=rng or Dice(),
        prefix=f"sb:test:{uuid.uuid4().hex[:8]}",
    )


def feed(b, n, *, kept, dropped, model="m", worker="w1", waited_ms=800.0, step=1.0):
    for _ in range(n):
        b.clock.t += step
        b.record(model=model, worker=worker, kept=kept, dropped=dropped, waited_ms=waited_ms)


def test_estimate_counts_sentences_and_treats_an_empty_answer_as_one_dropped():
    b = book()
    feed(b, 2, kept=3, dropped=1, waited_ms=500.0)
    feed(b, 2, kept=0, dropped=0, waited_ms=1500.0)
    est = b.estimate("m")
    assert est.samples == 4
    assert est.yield_rate == pytest.approx(6 / 10)
    assert est.answer_yield == 0.5
    assert est.p50_wait_ms == 500.0
    assert est.p95_wait_ms == 1500.0
    assert b.estimate("other").samples == 0
    assert b.estimate("other").yield_rate is None


def test_estimate_uses_only_the_last_window_and_forgets_old_samples():
    b = book(yield_window=5, yield_max_age_s=100.0)
    feed(b, 10, kept=0, dropped=4)
    feed(b, 5, kept=2, dropped=0)
    assert b.estimate("m").yield_rate == 1.0
    b.clock.t += 101
    assert b.estimate("m").samples == 0


def test_estimate_per_worker():
    b = book()
    feed(b, 3, kept=1, dropped=0, worker="good")
    feed(b, 3, kept=0, dropped=2, worker="bad")
    assert b.estimate("m", worker="good").yield_rate == 1.0
    assert b.estimate("m", worker="bad").yield_rate == 0.0
    assert b.estimate("m").yield_rate == pytest.approx(3 / 9)


def test_generates_while_warming_up_and_while_the_yield_is_fine():
    b = book()
    feed(b, 9, kept=0, dropped=3)
    assert b.should_generate("m") == (True, "warming_up")
    b2 = book()
    feed(b2, 20, kept=1, dropped=3)
    assert b2.should_generate("m") == (True, "yield_ok")


def test_near_zero_yield_skips_generation_but_probes_every_interval():
    clock = Clock()
    b = book(clock=clock)
    feed(b, 50, kept=0, dropped=3)
    assert b.should_generate("m") == (True, "probe_interval"), "the first decision probes"
    decisions = [b.should_generate("m") for _ in range(20)]
    assert decisions == [(False, "low_yield")] * 20
    clock.t += 29.9
    assert b.should_generate("m") == (False, "low_yield")
    clock.t += 0.2
    assert b.should_generate("m") == (True, "probe_interval")
    assert b.should_generate("m") == (False, "low_yield")


def test_random_probes_take_the_configured_fraction():
    b = book(rng=Dice(0.5, 0.05, 0.5, 0.09, 0.1))
    feed(b, 50, kept=0, dropped=3)
    assert b.should_generate("m")[1] == "probe_interval"
    got = [b.should_generate("m") for _ in range(5)]
    assert got == [
        (False, "low_yield"),
        (True, "probe_random"),
        (False, "low_yield"),
        (True, "probe_random"),
        (False, "low_yield"),
    ]


def test_a_better_model_is_noticed_after_a_few_good_probes():
    b = book()
    feed(b, 50, kept=0, dropped=3)
    b.should_generate("m")  # the interval probe
    assert b.should_generate("m") == (False, "low_yield")
    feed(b, 2, kept=2, dropped=1)
    assert b.should_generate("m") == (False, "low_yield"), "two good probes are not enough"
    feed(b, 1, kept=2, dropped=1)
    assert b.should_generate("m") == (True, "recovering")
    feed(b, 1, kept=0, dropped=3)
    assert b.should_generate("m") == (False, "low_yield"), "a fluke does not hold"


def test_a_model_whose_sentences_sometimes_verify_but_rarely_start_an_answer_is_skipped():
    """Policy on answers, not sentences: one answer in ten with two verified sentences is a
    sentence yield of 17%, yet nine customers in ten would wait on the model for nothing."""
    b = book()
    for _ in range(5):
        feed(b, 1, kept=2, dropped=1)
        feed(b, 9, kept=0, dropped=1)
    est = b.estimate("m")
    assert est.yield_rate == pytest.approx(10 / 60)
    assert est.answer_yield == pytest.approx(0.1)
    assert b.should_generate("m") == (True, "probe_interval")
    assert b.should_generate("m") == (False, "low_yield")


def test_a_lucky_start_of_a_weak_model_does_not_switch_generation_on():
    """Two answers of ten is 20% observed, but ten samples vouch only for 7% (Wilson lower
    bound): a model that keeps a sentence in one answer of ten shows 2/10 a quarter of the
    time, and would then make every customer wait."""
    b = book()
    feed(b, 2, kept=1, dropped=2)
    feed(b, 8, kept=0, dropped=1)
    est = b.estimate("m")
    assert est.answer_yield == pytest.approx(0.2)
    assert est.answer_yield_low == pytest.approx(0.069, abs=0.002)
    assert b.should_generate("m")[0] is True  # the interval probe
    assert b.should_generate("m") == (False, "low_yield")
    feed(b, 20, kept=1, dropped=1)  # then it shows it is good: 22 of 30
    assert b.should_generate("m") == (True, "yield_ok")


def test_wilson_lower_bound():
    assert yields.wilson_lower(0, 0) is None
    assert yields.wilson_lower(0, 10) == 0.0
    assert yields.wilson_lower(10, 10) == pytest.approx(0.787, abs=0.001)
    assert yields.wilson_lower(5, 10) == pytest.approx(0.269, abs=0.001)


def test_a_model_that_starts_every_third_answer_is_still_used():
    b = book()
    for _ in range(10):
        feed(b, 1, kept=1, dropped=4)
        feed(b, 2, kept=0, dropped=2)
    assert b.should_generate("m") == (True, "yield_ok")


def test_every_decision_is_counted_by_reason():
    def count(reason):
        value = REGISTRY.get_sample_value("supportbot_generate_decisions_total", {"reason": reason})
        return value or 0.0

    b = book()
    warming, skipped = count("warming_up"), count("low_yield")
    b.should_generate("m")
    feed(b, 50, kept=0, dropped=1)
    b.should_generate("m")  # the interval probe
    b.should_generate("m")
    b.should_generate("m")
    assert count("warming_up") == warming + 1
    assert count("low_yield") == skipped + 2


def test_policy_off_always_generates():
    b = book(yield_policy=False)
    feed(b, 50, kept=0, dropped=3)
    assert b.should_generate("m") == (True, "policy_off")


def test_answer_path_counts_by_path_and_reason_and_rejects_unknown_paths():
    b = book()

    def count(path, reason):
        return (
            REGISTRY.get_sample_value("supportbot_answers_total", {"path": path, "reason": reason})
            or 0.0
        )

    def waits(path):
        return (
            REGISTRY.get_sample_value("supportbot_answer_model_wait_seconds_count", {"path": path})
            or 0.0
        )

    before, before_wait = count("skipped", "low_yield"), waits("skipped")
    b.answer_path(path="skipped", reason="low_yield", waited_ms=0.0, model="m")
    assert count("skipped", "low_yield") == before + 1
    assert waits("skipped") == before_wait + 1
    with pytest.raises(ValueError, match="path"):
        b.answer_path(path="guessed", reason="x", waited_ms=0.0)


async def test_processes_share_samples_through_redis():
    a, b = book(), book()
    b.prefix = a.prefix
    b.clock = a.clock
    feed(a, 12, kept=0, dropped=2)
    a.answer_path(path="skipped", reason="low_yield", waited_ms=0.0, model="m")
    a.answer_path(path="generated", reason="yield_ok", waited_ms=900.0, model="m")
    await a.flush()
    assert b.estimate("m").samples == 0
    await b.flush()
    assert b.estimate("m").samples == 12
    assert b.estimate("m").yield_rate == 0.0
    assert a.estimate("m").samples == 12, "own samples are not counted twice after a flush"
    [snap] = b.shared_snapshot()
    assert snap["model"] == "m"
    assert (snap["samples"], snap["answers"], snap["skip_rate"]) == (12, 2, 0.5)
    assert snap["skipping"] is True
    await a.aclose()
    await b.aclose()


async def test_redis_down_keeps_samples_in_the_process():
    b = book()
    b.redis_url = "unix:///nonexistent/redis.sock"
    feed(b, 3, kept=1, dropped=1)
    await b.flush()
    assert b.estimate("m").samples == 3
    assert b.shared_snapshot() == []


async def test_record_schedules_a_background_flush(settings):
    b = book(yield_flush_interval_s=0.05)
    feed(b, 1, kept=1, dropped=0)
    task = b._flush_task
    assert task is not None
    await task
    assert b._pending == []
    assert b._shared["m"][0].kept == 1
    await b.aclose()


def test_module_functions_use_the_process_book():
    previous = yields.set_book(book())
    try:
        yields.record(model="x", worker="w", kept=1, dropped=0, waited_ms=10.0)
        assert yields.estimate("x").samples == 1
        assert yields.should_generate("x") == (True, "warming_up")
        yields.answer_path_record(path="generated", reason="warming_up", waited_ms=10.0)
    finally:
        yields.set_book(previous)
