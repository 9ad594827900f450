"""Know it is healthy: one turn's log lines and spans share its request id from the socket to
the engine (a real loopback HTTP engine records the header), ids survive concurrency and
q2 tasks, bad incoming ids are replaced, and /metrics shows HTTP and task metrics."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django_q.signals import post_execute_in_worker, pre_enqueue, pre_execute
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis import Redis

from chat.consumers import ChatConsumer
from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from conftest import isolated_pool
from demo.orders.testing import free_port
from inference import services as inference_services
from inference.models import ModelWorker
from inference.tests.replay_server import ReplayServer
from supportbot.observability import context, logs, tasks, tracing

TURN_SPANS = {"chat.receive", "turn.route", "turn.search", "vllm.chat_completion", "turn.send"}
FAST = {
    "POLL_INTERVAL_S": 0.1,
    "STALE_AFTER_S": 2.0,
    "FIRST_BYTE_TIMEOUT_S": 2.0,
    "IDLE_TIMEOUT_S": 2.0,
    "WORKERS": "",
}


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.configure(exporter=exporter)
    yield exporter
    tracing.shutdown()


@pytest.fixture
def json_lines():
    """Every log line as the JSON handler writes it (our filter and formatter)."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(logs.Formatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines() if line]
    root.removeHandler(handler)
    root.setLevel(old_level)


@pytest.fixture
def engine():
    server = ReplayServer().start()
    yield server
    server.stop()


async def _turn(text: str, tenant) -> list[dict]:
    chat = WebsocketCommunicator(
        ChatConsumer.as_asgi(), "/ws/chat/", headers=[(b"origin", b"http://testserver")]
    )
    connected, _ = await chat.connect()
    assert connected
    try:
        await chat.send_json_to({"type": "session.start", "tenant": tenant.slug})
        events = [await chat.receive_json_from(timeout=20)]
        await chat.send_json_to({"type": "message.send", "client_message_id": "m1", "text": text})
        while events[-1]["type"] != "answer.completed":
            events.append(await chat.receive_json_from(timeout=30))
        return events
    finally:
        await chat.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_one_turns_logs_spans_and_engine_request_share_its_request_id(
    tenant, engine, settings, spans, json_lines
):
    # A fresh yield book warms up: the turn itself must call the model (not a background call).
    settings.INFERENCE = {**settings.INFERENCE, **FAST, "YIELD_WARMUP": "foreground"}
    settings.ANSWER_CACHE_ENABLED = False
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 5.0
    await sync_to_async(index_document)(tenant, "Returns and refunds", RETURNS_MD)
    await sync_to_async(index_document)(tenant, "Shipping", SHIPPING_MD)
    await sync_to_async(inference_services.worker_register)(
        name="replay",
        base_url=engine.url,
        model_name="smollm2-135m",
        role="primary",
        state=ModelWorker.State.READY,
        pid=None,
    )
    async with isolated_pool() as pool:
        await pool.ensure_running()
        # Two chats at once: each turn keeps its own ids however their work interleaves.
        results = await asyncio.gather(
            _turn("Can I return an opened item for a refund?", tenant),
            _turn("How long does standard shipping take?", tenant),
        )
    await sync_to_async(connections.close_all)()
    assert all(r[-1]["type"] == "answer.completed" for r in results)

    finished = spans.get_finished_spans()
    roots = [s for s in finished if s.name == "chat.receive"]
    assert len(roots) == 2
    request_ids = {r.attributes["supportbot.request_id"] for r in roots}
    assert len(request_ids) == 2
    sent = engine.state.chat_headers
    assert len(sent) == 2
    for root in roots:
        rid = root.attributes["supportbot.request_id"]
        trace_id = root.context.trace_id
        turn = [s for s in finished if s.context.trace_id == trace_id]
        assert {s.name for s in turn} >= TURN_SPANS, {s.name for s in turn}
        assert {s.attributes.get("supportbot.request_id") for s in turn} == {rid}
        conversation_ids = {s.attributes.get("supportbot.conversation_id") for s in turn}
        assert len(conversation_ids) == 1
        assert None not in conversation_ids
        # The engine got the same request id and a traceparent of the same trace.
        header = next(h for h in sent if h["x-request-id"] == rid)
        assert header["traceparent"].split("-")[1] == f"{trace_id:032x}"
        lines = [line for line in json_lines() if line["request_id"] == rid]
        messages = " | ".join(line["message"] for line in lines)
        assert "chat message m1 received" in messages
        assert "model call to" in messages
        assert "answered message" in messages
        assert {line["trace_id"] for line in lines if line["trace_id"]} == {f"{trace_id:032x}"}
        assert {line["conversation_id"] for line in lines} == conversation_ids


def test_tracing_is_off_by_default_and_then_costs_nothing(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert tracing.configure_from_env() is False
    assert not tracing.enabled()
    assert tracing.span("turn.search") is tracing.span("turn.route")  # one shared no-op
    assert tracing.start_span("x") is None
    assert tracing.inject({}) == {}


@pytest.mark.slow
def test_otlp_endpoint_turns_tracing_on_and_sdk_disabled_wins(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert tracing.configure_from_env() is False
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    try:
        assert tracing.configure_from_env() is True
        with tracing.span("probe"):
            assert tracing.inject({})["traceparent"]
    finally:
        tracing.shutdown()  # the collector is down: export fails quietly, nothing hangs


@pytest.mark.parametrize(
    ("incoming", "kept"),
    [
        ("crm-7f3a.1:retry", True),
        ("x" * 65, False),
        ("two words", False),
        ("ok\u00e9", False),
        ("", False),
    ],
)
@pytest.mark.django_db
def test_http_requests_get_a_request_id_and_bad_incoming_ids_are_replaced(client, incoming, kept):
    response = client.get("/healthz", headers={"X-Request-Id": incoming})
    assert response.status_code == 200
    rid = response["X-Request-Id"]
    if kept:
        assert rid == incoming
    else:
        assert rid != incoming
        assert len(rid) == 32
        int(rid, 16)


def test_a_task_runs_under_the_ids_of_whoever_enqueued_it():
    task = {"id": "t1", "func": "handoffs.tasks.handoff_summarize_task", "args": (), "kwargs": {}}
    with context.bound(request_id="req-1", conversation_id=42):
        pre_enqueue.send(sender="django_q", task=task)
    assert task["kwargs"] == {}  # the task's own arguments are untouched
    seen = {}

    def worker() -> None:  # a worker process: a context of its own
        pre_execute.send(sender="django_q", func=None, task=task)
        seen["ids"] = (context.request_id(), context.conversation_id())
        task["success"] = True
        post_execute_in_worker.send(sender="django_q", func=None, task=task)
        seen["after"] = (context.request_id(), context.conversation_id())

    contextvars.copy_context().run(worker)
    assert seen["ids"] == ("req-1", 42)
    assert seen["after"] == (None, None)


def test_forged_task_context_is_not_trusted_as_ids():
    task = {
        "id": "t2",
        "func": "x.y",
        "args": (),
        "kwargs": {},
        "sb_context": {"request_id": "bad id\n{}", "conversation_id": "7; DROP"},
    }
    seen = {}

    def worker() -> None:
        pre_execute.send(sender="django_q", func=None, task=task)
        seen["ids"] = (context.request_id(), context.conversation_id())
        post_execute_in_worker.send(sender="django_q", func=None, task=task)

    contextvars.copy_context().run(worker)
    assert seen["ids"][0] != "bad id\n{}"
    assert len(seen["ids"][0]) == 32
    assert seen["ids"][1] is None


@pytest.mark.slow
def test_task_signals_survive_a_dead_metrics_store(monkeypatch):
    monkeypatch.setattr(tasks, "_redis", Redis(host="127.0.0.1", port=free_port()))
    task = {"id": "t3", "func": "x.y", "args": (), "kwargs": {}, "success": True}

    def worker() -> None:
        pre_execute.send(sender="django_q", func=None, task=task)
        post_execute_in_worker.send(sender="django_q", func=None, task=task)

    contextvars.copy_context().run(worker)  # no exception: the task itself is what matters
    assert list(tasks.TaskCollector().collect()) == []


@pytest.mark.django_db
def test_metrics_show_http_and_task_metrics_behind_the_token(client, settings):
    settings.INFERENCE = {**settings.INFERENCE, "METRICS_BEARER_TOKEN": "s3cret"}
    tasks._store().delete(tasks.KEY)
    task = {"id": "t4", "func": "knowledge.tasks.document_index_task", "args": (), "kwargs": {}}
    contextvars.copy_context().run(
        lambda: (
            pre_execute.send(sender="django_q", func=None, task=task),
            task.update(success=False),
            post_execute_in_worker.send(sender="django_q", func=None, task=task),
        )
    )
    assert client.get("/metrics").status_code in (401, 403)
    client.get("/healthz")
    body = client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).content.decode()
    assert "django_http_requests_total_by_view_transport_method_total" in body
    assert 'supportbot_tasks_total{outcome="failure",task="document_index_task"} 1.0' in body
    assert 'supportbot_task_duration_seconds_count{task="document_index_task"} 1.0' in body
    assert "supportbot_task_queue_depth" in body
    assert "supportbot_inference_" in body  # our own metrics are still there
