import httpx
import pytest

from inference.client import (
    WorkerFailure,
    chat_payload,
    fetch_health,
    fetch_metrics,
    fetch_models,
    iter_sse_data,
    stream_chat_completion,
)
from inference.tests.replay_server import fixture_text

MESSAGES = [{"role": "user", "content": "Can I return opened headphones?"}]


def payload(**kw):
    return chat_payload(
        model="smollm2-135m", messages=MESSAGES, max_tokens=64, temperature=0.2, **kw
    )


async def collect(url, body=None, **timeouts):
    t = {"connect_timeout_s": 1.0, "first_byte_timeout_s": 1.0, "idle_timeout_s": 1.0}
    t.update(timeouts)
    async with httpx.AsyncClient() as client:
        return [e async for e in stream_chat_completion(client, url, body or payload(), **t)]


async def _lines(items):
    for item in items:
        yield item


async def test_sse_parser_joins_multiline_data_and_skips_comments():
    lines = [": keep-alive", "event: message", "data: a", "data: b", "", "data: [DONE]", ""]
    assert [d async for d in iter_sse_data(_lines(lines))] == ["a\nb", "[DONE]"]


async def test_sse_parser_dispatches_pending_data_at_end_of_body():
    assert [d async for d in iter_sse_data(_lines(["data: x"]))] == ["x"]


async def test_replayed_stream_yields_text_finish_and_usage(replay):
    events = await collect(replay.url)
    assert "".join(e.content for e in events) == fixture_text()
    assert fixture_text().startswith("Yes, you can return opened headphones")
    assert [e.finish_reason for e in events if e.finish_reason] == ["stop"]
    assert events[-1].usage == {"prompt_tokens": 86, "total_tokens": 100, "completion_tokens": 14}
    assert events[0].model == "smollm2-135m"


async def test_request_asks_for_streamed_usage_and_passes_response_format(replay):
    schema = {"type": "json_schema", "json_schema": {"name": "t", "schema": {"type": "object"}}}
    await collect(replay.url, payload(response_format=schema))
    sent = replay.state.chat_requests[-1]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["response_format"] == schema
    assert sent["max_tokens"] == 64


async def test_connection_refused_is_a_retryable_failure_before_start(replay):
    replay.stop()
    with pytest.raises(WorkerFailure) as err:
        await collect(replay.url)
    assert err.value.started is False
    assert err.value.retryable
    assert err.value.breaker


async def test_slow_first_byte_times_out_before_start(replay):
    replay.behaviour.first_byte_delay_s = 1.0
    with pytest.raises(WorkerFailure, match="first-byte") as err:
        await collect(replay.url, first_byte_timeout_s=0.2)
    assert err.value.started is False


async def test_connection_dropped_mid_stream_is_a_started_failure(replay):
    replay.behaviour.break_after = 5
    got = []

    async def consume():
        async with httpx.AsyncClient() as client:
            t = {"connect_timeout_s": 1, "first_byte_timeout_s": 1, "idle_timeout_s": 1}
            async for e in stream_chat_completion(client, replay.url, payload(), **t):
                got.append(e)

    with pytest.raises(WorkerFailure) as err:
        await consume()
    assert err.value.started is True
    assert len(got) == 5


async def test_error_event_mid_stream_raises(replay):
    replay.behaviour.error_after = 3
    with pytest.raises(WorkerFailure, match="engine died") as err:
        await collect(replay.url)
    assert err.value.started is True


async def test_body_without_done_is_not_a_complete_answer(replay):
    replay.behaviour.drop_done = True
    with pytest.raises(WorkerFailure, match=r"before \[DONE\]"):
        await collect(replay.url)


async def test_client_error_is_not_retryable_and_does_not_blame_the_worker(replay):
    replay.behaviour.chat_status = 400
    with pytest.raises(WorkerFailure) as err:
        await collect(replay.url)
    assert (err.value.status, err.value.retryable, err.value.breaker) == (400, False, False)


async def test_server_error_is_retryable_and_blames_the_worker(replay):
    replay.behaviour.chat_status = 503
    with pytest.raises(WorkerFailure) as err:
        await collect(replay.url)
    assert (err.value.status, err.value.retryable, err.value.breaker) == (503, True, True)


async def test_health_metrics_and_models(replay):
    async with httpx.AsyncClient() as client:
        await fetch_health(client, replay.url, timeout_s=1)
        metrics = await fetch_metrics(client, replay.url, timeout_s=1)
        models = await fetch_models(client, replay.url, timeout_s=1)
        replay.behaviour.health_status = 503
        with pytest.raises(WorkerFailure, match="503"):
            await fetch_health(client, replay.url, timeout_s=1)
    assert metrics.generation_tokens == 44.0
    assert models[0]["id"] == "smollm2-135m"
    assert models[0]["max_model_len"] == 4096
