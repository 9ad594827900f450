from inference.breaker import BreakerState, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_threshold_consecutive_failures():
    b = CircuitBreaker(failure_threshold=3, reset_timeout_s=10, clock=Clock())
    b.record_failure()
    b.record_failure()
    assert b.state is BreakerState.CLOSED
    assert b.can_attempt()
    b.record_failure()
    assert b.state is BreakerState.OPEN
    assert not b.can_attempt()
    assert not b.begin_attempt()


def test_success_resets_the_failure_count():
    b = CircuitBreaker(failure_threshold=2, reset_timeout_s=10, clock=Clock())
    b.record_failure()
    b.record_success()
    b.record_failure()
    assert b.state is BreakerState.CLOSED
    assert b.consecutive_failures == 1


def test_half_opens_after_timeout_and_admits_one_probe():
    clock = Clock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout_s=10, clock=clock)
    b.record_failure()
    clock.now += 9.9
    assert b.state is BreakerState.OPEN
    clock.now += 0.2
    assert b.state is BreakerState.HALF_OPEN
    assert b.begin_attempt()
    assert not b.begin_attempt(), "a second concurrent probe must be refused"


def test_probe_success_closes():
    clock = Clock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout_s=5, clock=clock)
    b.record_failure()
    clock.now += 5
    assert b.begin_attempt()
    b.record_success()
    assert b.state is BreakerState.CLOSED
    assert b.begin_attempt()
    assert b.begin_attempt()


def test_probe_failure_reopens_for_another_timeout():
    clock = Clock()
    b = CircuitBreaker(failure_threshold=3, reset_timeout_s=5, clock=clock)
    for _ in range(3):
        b.record_failure()
    clock.now += 5
    assert b.begin_attempt()
    b.record_failure()
    assert b.state is BreakerState.OPEN
    clock.now += 4.9
    assert not b.can_attempt()
    clock.now += 0.1
    assert b.state is BreakerState.HALF_OPEN


def test_released_probe_lets_another_probe_through():
    clock = Clock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout_s=1, clock=clock)
    b.record_failure()
    clock.now += 1
    assert b.begin_attempt()
    b.release_probe()
    assert b.begin_attempt()
