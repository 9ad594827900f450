"""Fixtures of the inference tests: replay servers, fast pool settings, an isolated pool."""

import pytest

from conftest import isolated_pool
from inference.tests.replay_server import ReplayServer

FAST = {
    "POLL_INTERVAL_S": 0.1,
    "STALE_AFTER_S": 2.0,
    "QUEUE_DEADLINE_S": 0.5,
    "BREAKER_FAILURES": 2,
    "BREAKER_RESET_S": 0.5,
    "CONNECT_TIMEOUT_S": 1.0,
    "FIRST_BYTE_TIMEOUT_S": 1.0,
    "IDLE_TIMEOUT_S": 2.0,
    "WORKERS": "",
}


@pytest.fixture
def replay():
    server = ReplayServer().start()
    yield server
    server.stop()


@pytest.fixture
def replay2():
    server = ReplayServer().start()
    yield server
    server.stop()


@pytest.fixture
def fast_settings(settings):
    settings.INFERENCE = {**settings.INFERENCE, **FAST}
    return settings


@pytest.fixture
async def pool(fast_settings):
    """A fresh process pool on this test's loop, with its own Redis key space."""
    async with isolated_pool() as fresh:
        yield fresh


# vllm_engine, engine_settings and engine_pool live in the root conftest.py: conversation
# tests use the shared engine too.
