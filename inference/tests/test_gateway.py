"""The gateway end to end against real HTTP servers replaying captured vLLM output."""

import asyncio
import dataclasses
import time

import pytest
from asgiref.sync import sync_to_async
from redis.asyncio import Redis

from inference.admission import TenantLimiter
from inference.breaker import BreakerState
from inference.gateway import (
    ChatDelta,
    ChatResult,
    InputTooLarge,
    PoolUnavailable,
    StreamBroken,
    TenantRateLimited,
    complete,
    gateway_available,
    stream_chat,
)
from inference.models import InferenceUsage, ModelWorker
from inference.router import rendezvous_home
from inference.tests.factories import ModelWorkerFactory
from inference.tests.replay_server import fixture_text
from supportbot.tests.factories import TenantFactory

MESSAGES = [
    {"role": "system", "content": "Answer from the passages."},
    {"role": "user", "content": "Can I return opened headphones?"},
]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tenant_id(transactional_db):
    return TenantFactory(slug="gw-test").id


@pytest.fixture
def one_worker(transactional_db, replay):
    return ModelWorkerFactory(name="w-a", base_url=replay.url)


@pytest.fixture
def two_workers(transactional_db, replay, replay2):
    return (
        ModelWorkerFactory(name="w-a", base_url=replay.url),
        ModelWorkerFactory(name="w-b", base_url=replay2.url),
    )


async def run(**kw):
    kw.setdefault("messages", MESSAGES)
    items = [item async for item in stream_chat(**kw)]
    return items[:-1], items[-1]


def usage_rows():
    return list(InferenceUsage.objects.order_by("id").values())


async def wait_for(predicate, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await sync_to_async(predicate)():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_stream_yields_deltas_then_final_record_and_records_usage(
    pool, one_worker, tenant_id
):
    deltas, result = await run(tenant_id=tenant_id, affinity_key="conv-1")
    assert all(isinstance(d, ChatDelta) for d in deltas)
    assert isinstance(result, ChatResult)
    assert "".join(d.text for d in deltas) == result.text == fixture_text()
    assert (result.prompt_tokens, result.completion_tokens) == (86, 14)
    assert result.model == "smollm2-135m"
    assert result.worker == "w-a"
    assert result.finish_reason == "stop"
    assert 0 < result.ttft_ms <= result.total_ms
    assert len(result.itl_ms) == len(deltas) - 1
    await pool.flush()
    rows = await sync_to_async(usage_rows)()
    assert len(rows) == 1
    assert rows[0]["tenant_id"] == tenant_id
    assert rows[0]["worker_name"] == "w-a"
    assert (rows[0]["prompt_tokens"], rows[0]["completion_tokens"]) == (86, 14)
    assert rows[0]["outcome"] == "ok"
    assert len(rows[0]["itl_ms"]) == len(deltas) - 1


async def test_complete_returns_the_result_and_frees_the_tenant_slot(pool, one_worker, tenant_id):
    result = await complete(tenant_id=tenant_id, messages=MESSAGES)
    assert result.text == fixture_text()
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0


async def test_caller_stopping_at_the_result_does_not_hold_the_slot(pool, one_worker, tenant_id):
    async for item in stream_chat(tenant_id=tenant_id, messages=MESSAGES):
        if isinstance(item, ChatResult):
            break
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0


async def test_one_conversation_stays_on_one_worker(pool, two_workers, tenant_id):
    seen = set()
    for _ in range(4):
        _, result = await run(tenant_id=tenant_id, affinity_key="conv-77")
        seen.add(result.worker)
    assert len(seen) == 1
    views = pool.views()
    assert seen == {rendezvous_home("conv-77", views).key}


async def test_requests_sharing_a_system_prompt_share_a_worker(pool, two_workers, tenant_id):
    seen = set()
    for question in ("refund?", "shipping?", "warranty?", "order?"):
        messages = [MESSAGES[0], {"role": "user", "content": question}]
        _, result = await run(tenant_id=tenant_id, messages=messages)
        seen.add(result.worker)
    assert len(seen) == 1


async def test_dead_home_worker_moves_the_conversation_and_is_reported_down(
    pool, two_workers, replay, replay2, tenant_id
):
    _, first = await run(tenant_id=tenant_id, affinity_key="conv-9")
    home, other = (replay, replay2) if first.worker == "w-a" else (replay2, replay)
    home.stop()
    _, second = await run(tenant_id=tenant_id, affinity_key="conv-9")
    assert second.worker != first.worker
    assert second.text == fixture_text(), "a failure before the first byte is retried"
    assert pool.workers[first.worker].healthy is False

    def reported_down():
        return not ModelWorker.objects.get(name=first.worker).healthy

    assert await wait_for(reported_down)
    _, third = await run(tenant_id=tenant_id, affinity_key="conv-9")
    assert third.worker == second.worker


async def test_server_error_before_first_byte_is_retried_on_another_worker(
    pool, two_workers, replay, replay2, tenant_id
):
    replay.behaviour.chat_status = 503
    replay2.behaviour.chat_status = 503
    with pytest.raises(PoolUnavailable) as err:
        await run(tenant_id=tenant_id)
    assert err.value.status == 503
    assert err.value.retry_after > 0
    assert len(replay.state.chat_requests) == 1
    assert len(replay2.state.chat_requests) == 1
    replay2.behaviour.chat_status = 200
    _, result = await run(tenant_id=tenant_id)
    assert result.worker == "w-b"


async def test_a_connection_closed_before_any_response_is_resent_to_the_same_worker_once(
    pool, one_worker, replay, tenant_id
):
    # The only healthy worker closes one connection unanswered (a reused idle connection the
    # server had just closed): the request goes to it again instead of failing with a 503.
    replay.behaviour.close_unanswered = 1
    _, result = await run(tenant_id=tenant_id)
    assert result.text == fixture_text()
    assert len(replay.state.chat_requests) == 2
    assert pool.workers["w-a"].healthy is True


async def test_a_worker_that_keeps_closing_unanswered_fails_with_the_reason_and_no_loop(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.close_unanswered = 100
    with pytest.raises(PoolUnavailable) as err:
        await run(tenant_id=tenant_id)
    assert len(replay.state.chat_requests) == 2, "resent once, then the worker counts as tried"
    assert "w-a: connection closed before a response" in err.value.detail
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0


async def test_break_mid_stream_raises_stream_broken_with_the_partial_text(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.break_after = 6
    got = []

    async def consume():
        async for item in stream_chat(tenant_id=tenant_id, messages=MESSAGES):
            got.append(item)

    with pytest.raises(StreamBroken) as err:
        await consume()
    assert all(isinstance(i, ChatDelta) for i in got), "no final record after a broken stream"
    assert err.value.partial_text == "".join(i.text for i in got)
    assert err.value.partial_text
    assert fixture_text().startswith(err.value.partial_text)
    assert err.value.partial_text != fixture_text()
    assert len(replay.state.chat_requests) == 1, "never retried after text was sent"
    await pool.flush()
    rows = await sync_to_async(usage_rows)()
    assert [r["outcome"] for r in rows] == ["stream_broken"]
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0


async def test_error_event_mid_stream_is_a_typed_error(pool, one_worker, replay, tenant_id):
    replay.behaviour.error_after = 4
    with pytest.raises(StreamBroken, match="engine died"):
        await run(tenant_id=tenant_id)


async def test_stream_without_done_is_never_a_silently_truncated_answer(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.drop_done = True
    with pytest.raises(StreamBroken):
        await run(tenant_id=tenant_id)


async def test_repeated_failures_open_the_breaker_then_half_open_recovers(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.error_after = 2
    for _ in range(2):
        with pytest.raises(StreamBroken):
            await run(tenant_id=tenant_id)
    assert pool.workers["w-a"].breaker.state is BreakerState.OPEN
    replay.behaviour.error_after = None
    with pytest.raises(PoolUnavailable):
        await run(tenant_id=tenant_id)
    await asyncio.sleep(0.55)  # BREAKER_RESET_S in the fast settings
    _, result = await run(tenant_id=tenant_id)
    assert result.text == fixture_text()
    assert pool.workers["w-a"].breaker.state is BreakerState.CLOSED


async def test_no_worker_fails_fast_with_retry_after(pool, transactional_db, tenant_id):
    pool.config = dataclasses.replace(pool.config, queue_deadline_s=5.0)
    started = time.monotonic()
    with pytest.raises(PoolUnavailable) as err:
        await run(tenant_id=tenant_id)
    assert time.monotonic() - started < 2.0, "no waiting for the 5 s queue deadline"
    assert err.value.extra["retry_after"] >= 1


async def test_saturated_pool_waits_for_the_queue_deadline_then_503(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.waiting = 20
    started = time.monotonic()
    with pytest.raises(PoolUnavailable, match="saturated") as err:
        await run(tenant_id=tenant_id)
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 3.0  # QUEUE_DEADLINE_S = 0.5, never unbounded
    assert err.value.retry_after >= 0.5
    assert replay.state.chat_requests == []


async def test_queue_drains_while_waiting_and_the_request_goes_through(
    pool, one_worker, replay, tenant_id, settings
):
    # A deadline well past the drain (0.2 s) plus a poll or two, even on a loaded machine.
    settings.INFERENCE = {**settings.INFERENCE, "QUEUE_DEADLINE_S": 5.0}
    pool.config = dataclasses.replace(pool.config, queue_deadline_s=5.0)
    replay.behaviour.waiting = 20

    async def drain_soon():
        await asyncio.sleep(0.2)
        replay.behaviour.waiting = 0

    drainer = asyncio.create_task(drain_soon())
    _, result = await run(tenant_id=tenant_id)
    await drainer
    assert result.text == fixture_text()


async def test_tenant_concurrency_cap_answers_429(pool, one_worker, replay, tenant_id, settings):
    settings.INFERENCE = {**settings.INFERENCE, "TENANT_MAX_CONCURRENCY": 1}
    pool.config = dataclasses.replace(pool.config, tenant_max_concurrency=1)
    await pool.stop()
    await pool.ensure_running()
    replay.behaviour.chunk_delay_s = 0.05
    first = stream_chat(tenant_id=tenant_id, messages=MESSAGES)
    assert isinstance(await anext(first), ChatDelta)
    with pytest.raises(TenantRateLimited) as err:
        await run(tenant_id=tenant_id)
    assert err.value.status == 429
    await first.aclose()
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0


async def test_hard_caps_refuse_before_any_work(pool, one_worker, replay, tenant_id):
    with pytest.raises(InputTooLarge):
        await run(tenant_id=tenant_id, max_tokens=100_000)
    with pytest.raises(InputTooLarge):
        await run(tenant_id=tenant_id, messages=[{"role": "user", "content": "x" * 50_000}])
    assert replay.state.chat_requests == []


async def test_small_role_goes_to_small_worker_primary_to_primary(
    pool, transactional_db, replay, replay2, tenant_id
):
    await sync_to_async(ModelWorkerFactory)(name="w-primary", base_url=replay.url)
    await sync_to_async(ModelWorkerFactory)(name="w-small", base_url=replay2.url, role="small")
    _, small = await run(tenant_id=tenant_id, role="small")
    _, primary = await run(tenant_id=tenant_id, role="primary")
    assert (small.worker, primary.worker) == ("w-small", "w-primary")


async def test_primary_down_falls_back_to_fallback_role(
    pool, transactional_db, replay, replay2, tenant_id
):
    await sync_to_async(ModelWorkerFactory)(name="w-primary", base_url=replay.url)
    await sync_to_async(ModelWorkerFactory)(name="w-fb", base_url=replay2.url, role="fallback")
    await pool.ensure_running()
    replay.behaviour.health_status = 503
    await pool.poll_once()
    _, result = await run(tenant_id=tenant_id, role="primary")
    assert result.worker == "w-fb"


async def test_draining_worker_gets_no_new_requests(pool, two_workers, tenant_id):
    await pool.ensure_running()
    await sync_to_async(ModelWorker.objects.filter(name="w-a").update)(state="draining")
    await pool.poll_once()
    workers = set()
    for key in ("k1", "k2", "k3", "k4", "k5"):
        _, result = await run(tenant_id=tenant_id, affinity_key=key)
        workers.add(result.worker)
    assert workers == {"w-b"}


async def test_overall_timeout_ends_a_slow_stream_with_a_typed_error(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.chunk_delay_s = 0.2
    with pytest.raises(StreamBroken, match="timeout"):
        await run(tenant_id=tenant_id, timeout_s=0.5)


async def test_gateway_available_follows_the_pool(pool, one_worker, replay, tenant_id):
    await pool.ensure_running()
    assert gateway_available() is True
    replay.behaviour.health_status = 503
    await pool.poll_once()
    assert gateway_available() is False


def test_gateway_available_without_a_poller_reads_the_registry(transactional_db, fast_settings):
    from django.utils import timezone

    from inference.pool import Pool, set_pool

    previous = set_pool(Pool())
    try:
        assert gateway_available() is False
        ModelWorkerFactory(healthy=True, last_health_at=timezone.now())
        assert gateway_available() is True
    finally:
        set_pool(previous)


async def test_admission_store_down_fails_closed_with_503(pool, one_worker, replay, tenant_id):
    await pool.ensure_running()
    pool.limiter = TenantLimiter(
        Redis.from_url("unix:///nonexistent/redis.sock"),
        tokens_per_minute=600,
        burst=10_000,
        max_concurrency=2,
    )
    with pytest.raises(PoolUnavailable, match="admission store"):
        await run(tenant_id=tenant_id)
    assert replay.state.chat_requests == []


# ------------------------------------------------------------------ metering of every call
async def bucket_tokens(pool, tenant_id):
    raw = await pool.limiter.redis.hget(f"{pool.redis_prefix}:tb:{tenant_id}", "tokens")
    return float(raw)


@pytest.fixture
async def slow_refill(pool, one_worker):
    """A pool (with `one_worker`) whose tenant bucket refills at 1 token/s, so charges can be
    read exactly."""
    pool.config = dataclasses.replace(pool.config, tenant_tokens_per_minute=60)
    await pool.stop()
    await pool.ensure_running()
    return pool


async def first_delta_then_break(tenant_id, **kw):
    stream = stream_chat(tenant_id=tenant_id, messages=MESSAGES, **kw)
    async for item in stream:
        assert isinstance(item, ChatDelta)
        break
    await stream.aclose()


async def test_cancel_after_first_delta_is_metered_and_charged_to_the_tenant(
    slow_refill, one_worker, replay, tenant_id, settings
):
    pool = slow_refill
    settings.INFERENCE = {**settings.INFERENCE, "CONTINUOUS_USAGE": False}
    pool.config = dataclasses.replace(pool.config, continuous_usage=False)
    replay.behaviour.chunk_delay_s = 0.05
    await first_delta_then_break(tenant_id, max_tokens=256)
    await pool.flush()
    rows = await sync_to_async(usage_rows)()
    assert [r["outcome"] for r in rows] == ["cancelled"]
    row = rows[0]
    assert row["completion_tokens"] >= 1
    assert row["estimated"] is True, "the engine reported no usage before the cancel"
    assert row["prompt_tokens"] > 0
    assert row["ttft_ms"] is not None
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0
    charged = pool.config.tenant_token_burst - await bucket_tokens(pool, tenant_id)
    used = row["prompt_tokens"] + row["completion_tokens"]
    assert used - 1 <= charged <= used + 0.5, "billed what was used, not the 256-token estimate"


async def test_cancel_with_running_usage_meters_the_engine_counts(
    slow_refill, one_worker, replay, tenant_id
):
    pool = slow_refill
    replay.behaviour.chunk_delay_s = 0.05
    await first_delta_then_break(tenant_id)
    assert replay.state.chat_requests[-1]["stream_options"] == {
        "include_usage": True,
        "continuous_usage_stats": True,
    }
    await pool.flush()
    [row] = await sync_to_async(usage_rows)()
    assert (row["outcome"], row["prompt_tokens"], row["estimated"]) == ("cancelled", 86, False)
    assert row["completion_tokens"] >= 1
    charged = pool.config.tenant_token_burst - await bucket_tokens(pool, tenant_id)
    assert 86 + row["completion_tokens"] - 1 <= charged <= 86 + row["completion_tokens"] + 0.5


async def test_cancelled_consumer_task_is_metered(pool, one_worker, replay, tenant_id):
    replay.behaviour.chunk_delay_s = 0.2
    got_first = asyncio.Event()

    async def consume():
        async for item in stream_chat(tenant_id=tenant_id, messages=MESSAGES):
            if isinstance(item, ChatDelta):
                got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await pool.flush()
    [row] = await sync_to_async(usage_rows)()
    assert row["outcome"] == "cancelled"
    assert row["completion_tokens"] >= 1
    assert await pool.limiter.in_flight(tenant_id=tenant_id) == 0


async def test_caller_timeout_is_metered_as_cancelled(pool, one_worker, replay, tenant_id):
    replay.behaviour.chunk_delay_s = 0.2

    async def consume_with_deadline():
        # The caller's own deadline fires while the next chunk is on its way, once text came
        # (independent of how slow a loaded machine delivers the first one).
        async with asyncio.timeout(30) as deadline:
            async for item in stream_chat(tenant_id=tenant_id, messages=MESSAGES):
                if getattr(item, "text", ""):
                    deadline.reschedule(asyncio.get_running_loop().time() + 0.05)

    with pytest.raises(TimeoutError):
        await consume_with_deadline()
    await pool.flush()
    rows = await sync_to_async(usage_rows)()
    assert [r["outcome"] for r in rows] == ["cancelled"]
    assert rows[0]["completion_tokens"] >= 1


async def test_failure_after_the_worker_took_the_call_is_metered_as_error(
    pool, one_worker, replay, tenant_id
):
    replay.behaviour.error_after = 1  # the role chunk, then an error event: no text
    with pytest.raises(PoolUnavailable):
        await run(tenant_id=tenant_id)
    await pool.flush()
    rows = await sync_to_async(usage_rows)()
    assert [(r["outcome"], r["completion_tokens"]) for r in rows] == [("error", 0)]
    assert rows[0]["prompt_tokens"] == 86, "the role chunk carried the engine's prompt count"


async def test_refused_connection_is_not_metered_and_costs_the_tenant_nothing(
    slow_refill, one_worker, replay, tenant_id
):
    pool = slow_refill
    replay.stop()
    with pytest.raises(PoolUnavailable):
        await run(tenant_id=tenant_id)
    await pool.flush()
    assert await sync_to_async(usage_rows)() == []
    assert await bucket_tokens(pool, tenant_id) == pytest.approx(
        pool.config.tenant_token_burst, abs=0.5
    )
