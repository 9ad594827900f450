import asyncio

import httpx
import pytest
from asgiref.sync import sync_to_async

from inference.breaker import CircuitBreaker
from inference.config import InferenceConfig
from inference.models import ModelWorker
from inference.pool import Pool, WorkerState
from inference.tests.factories import ModelWorkerFactory

pytestmark = pytest.mark.django_db(transaction=True)


async def test_stop_always_ends_the_poller_even_while_it_is_being_woken(pool, replay):
    await sync_to_async(ModelWorkerFactory)(name="w-a", base_url=replay.url)
    for _ in range(10):
        await pool.ensure_running()
        task = pool._task

        async def spam():
            while True:
                pool.request_check()
                await asyncio.sleep(0)

        spammer = asyncio.create_task(spam())
        await asyncio.sleep(0.05)
        await pool.stop()
        spammer.cancel()
        assert task.done()


async def test_registry_changes_are_picked_up_each_round(pool, replay, replay2):
    await sync_to_async(ModelWorkerFactory)(name="w-a", base_url=replay.url)
    await pool.ensure_running()
    assert set(pool.workers) == {"w-a"}
    await sync_to_async(ModelWorkerFactory)(name="w-b", base_url=replay2.url, role="small")
    await sync_to_async(ModelWorker.objects.filter(name="w-a").update)(state="stopped")
    await pool.poll_once()
    assert set(pool.workers) == {"w-b"}
    assert pool.workers["w-b"].role == "small"
    assert pool.workers["w-b"].healthy


async def test_a_503_from_health_marks_the_worker_down_at_once(pool, replay):
    await sync_to_async(ModelWorkerFactory)(name="w-a", base_url=replay.url)
    await pool.ensure_running()
    ws = pool.workers["w-a"]
    replay.behaviour.health_status = 503
    await pool.poll_once()
    assert ws.healthy is False
    replay.behaviour.health_status = 200
    await pool.poll_once()
    assert ws.healthy is True


async def test_slow_health_answers_must_repeat_three_times_to_mark_down(replay):
    """Polled by hand (no background poller), with a 0.2 s health timeout."""
    pool = Pool(InferenceConfig(health_timeout_s=0.2))
    pool.http = httpx.AsyncClient()
    pool.limiter = object()  # not used by polling
    ws = WorkerState(
        id=1,
        name="w-a",
        base_url=replay.url,
        model_name="m",
        role="primary",
        state="ready",
        breaker=CircuitBreaker(),
        healthy=True,
    )
    # Far past the timeout: at 0.4 s a loaded CI machine once stalled the event loop long
    # enough that a slow answer was read before its timeout fired (one success, count reset).
    replay.behaviour.health_delay_s = 2.0
    try:
        await pool._poll_worker(ws)
        await pool._poll_worker(ws)
        assert ws.healthy is True, "two slow answers are not enough"
        await pool._poll_worker(ws)
        assert ws.healthy is False
        replay.behaviour.health_delay_s = 0.0
        await pool._poll_worker(ws)
        assert ws.healthy is True
    finally:
        await pool.http.aclose()


async def test_a_health_connection_reset_without_an_answer_marks_the_worker_down_at_once(
    pool, replay
):
    """The first poll after an engine is killed sees its socket reset, not refused."""
    await sync_to_async(ModelWorkerFactory)(name="w-a", base_url=replay.url)
    await pool.ensure_running()
    ws = pool.workers["w-a"]
    assert ws.healthy is True
    replay.behaviour.health_reset = True
    await pool.poll_once()
    assert ws.healthy is False
    assert "/health unreachable" in ws.last_error
    replay.behaviour.health_reset = False
    await pool.poll_once()
    assert ws.healthy is True


async def test_tokens_per_second_and_engine_window_come_from_successive_scrapes(pool, replay):
    await sync_to_async(ModelWorkerFactory)(name="w-a", base_url=replay.url)
    await pool.ensure_running()  # first scrape: the window is everything since engine start
    row = await sync_to_async(ModelWorker.objects.get)(name="w-a")
    first = row.last_metrics["engine_window"]
    assert 25.0 < first["itl_p50_ms"] <= 50.0  # the fixture: 28 of 42 gaps <= 50 ms
    assert row.last_metrics["prefix_cache_hit_rate"] == 0.0
    await pool.poll_once()
    row = await sync_to_async(ModelWorker.objects.get)(name="w-a")
    assert row.last_metrics["tokens_per_s"] == 0.0  # the replayed counters do not move
    later = row.last_metrics["engine_window"]
    assert later["itl_p50_ms"] is None, "no new observations inside the window"
