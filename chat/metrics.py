"""Chat metrics of this process (exported on `/metrics` with the inference metrics).

`supportbot_chat_turns_in_flight` is what the web HPA scales on (deploy/k8s): turns this
process is answering or holding for a slot. `supportbot_chat_turns_total{outcome}` feeds the
availability SLO and `supportbot_answer_first_words_seconds` the first-words target.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge, Histogram

_FIRST_WORDS_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.8, 1, 1.5, 2, 3, 5, 10, 30)
PATHS = frozenset({"generated", "extractive", "skipped", "cached", "tool", "weak_evidence"})

TURNS_IN_FLIGHT = Gauge(
    "supportbot_chat_turns_in_flight",
    "Customer turns this process is answering or waiting to answer (turn slots).",
)
TURNS = Counter(
    "supportbot_chat_turns",
    "Customer turns by how they ended: ok, or failed (an error escaped the turn).",
    ["outcome"],
)
TURNS_QUEUED = Counter(
    "supportbot_chat_turns_queued",
    "Customer turns that waited for a turn slot (the customer was told a place in line).",
)
FIRST_WORDS = Histogram(
    "supportbot_answer_first_words_seconds",
    "From the customer's message to the first words of the answer on the wire, by path.",
    ["path"],
    buckets=_FIRST_WORDS_BUCKETS,
)


@contextlib.asynccontextmanager
async def turn_tracked():
    """Count the turn in flight while it runs, and how it ended (a cancelled turn - its
    caller went away - is neither)."""
    TURNS_IN_FLIGHT.inc()
    try:
        yield
    except Exception:
        TURNS.labels(outcome="failed").inc()
        raise
    else:
        TURNS.labels(outcome="ok").inc()
    finally:
        TURNS_IN_FLIGHT.dec()


def first_words_observe(*, path: str | None, seconds: float) -> None:
    """Record one answer's time to first words (unknown paths are counted as `other`)."""
    FIRST_WORDS.labels(path=path if path in PATHS else "other").observe(max(0.0, seconds))
