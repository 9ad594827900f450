"""A circuit breaker per worker: closed -> open after repeated failures -> half-open later.

Closed: requests flow; `failure_threshold` consecutive failures open it. Open: no request is
sent until `reset_timeout_s` has passed; then it is half-open and admits exactly one probe at a
time. A probe's success closes it; its failure opens it again for another `reset_timeout_s`.
The breaker lives in the process that sends the requests (it judges that process's own
attempts); its state is copied onto the registry row for the ops page.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        *,
        failure_threshold: int = 3,
        reset_timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.failure_threshold = failure_threshold
        self.reset_timeout_s = reset_timeout_s
        self._clock = clock
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        """The current state; an open breaker whose timeout passed reads as half-open."""
        if (
            self._state is BreakerState.OPEN
            and self._clock() - self._opened_at >= self.reset_timeout_s
        ):
            self._state = BreakerState.HALF_OPEN
            self._probe_in_flight = False
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def can_attempt(self) -> bool:
        """Whether a request may be routed here now (does not reserve the half-open probe)."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN:
            return not self._probe_in_flight
        return False

    def begin_attempt(self) -> bool:
        """Reserve the right to send one request; False if the breaker refuses it."""
        if not self.can_attempt():
            return False
        if self._state is BreakerState.HALF_OPEN:
            self._probe_in_flight = True
        return True

    def record_success(self) -> None:
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._probe_in_flight = False

    def record_failure(self) -> None:
        """Count a failure; open at the threshold, or at once when the half-open probe fails."""
        self._failures += 1
        if self._state is BreakerState.HALF_OPEN or self._failures >= self.failure_threshold:
            self._state = BreakerState.OPEN
            self._opened_at = self._clock()
            self._probe_in_flight = False

    def release_probe(self) -> None:
        """End a half-open probe that finished neither way (e.g. the caller cancelled it)."""
        self._probe_in_flight = False
