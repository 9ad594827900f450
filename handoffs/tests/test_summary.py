"""Handoff summaries drafted by the model run on the worker process's one event loop."""

from __future__ import annotations

import asyncio

import pytest

from conversations import services as conversation_services
from handoffs import services, summary
from inference import gateway

pytestmark = pytest.mark.django_db


@pytest.fixture
def handoff(tenant):
    customer = conversation_services.customer_get_or_create_visitor(
        tenant=tenant, visitor_id="visitor-summary"
    )
    conversation = conversation_services.conversation_start(tenant=tenant, customer=customer)
    conversation_services.message_receive(
        conversation=conversation, client_message_id="c1", text="My parcel never arrived."
    )
    opened, _ = services.handoff_request(conversation=conversation, reason="customer_request")
    return opened


def test_two_summaries_share_one_loop_and_so_one_inference_pool(handoff, monkeypatch):
    loops = []

    async def complete(**kwargs):
        loops.append(asyncio.get_running_loop())
        raise gateway.InferenceError("no worker in this test")

    monkeypatch.setattr(gateway, "complete", complete)

    messages = summary._transcript(handoff)
    assert summary._model_summary(handoff, messages) is None
    assert summary._model_summary(handoff, messages) is None

    assert len(loops) == 2
    assert loops[0] is loops[1]
    assert loops[0].is_running()  # a long-lived loop, not one closed after each call
