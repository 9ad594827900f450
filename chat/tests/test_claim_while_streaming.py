"""An agent claiming a conversation while the bot's answer streams: no bot word reaches anyone
after the claim, and the stored reply is exactly what was shown before it."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from chat import orchestrator
from chat.tests.helpcenter import SHIPPING_MD, index_document
from conversations.models import Message
from handoffs import services as handoff_services
from handoffs.models import Handoff
from inference import gateway, yields

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = "Standard shipping takes 3-5 business days."
SECOND = "Express shipping takes 1-2 business days and costs $15."


class Timeline:
    """Every event the turn sends, in order, with the claim's commit marked among them."""

    def __init__(self):
        self.items = []
        self.lock = threading.Lock()

    async def __call__(self, event):
        with self.lock:
            self.items.append(("event", event))

    def mark(self, what):
        with self.lock:
            self.items.append(("mark", what))

    def deltas_after(self, what):
        seen, out = False, []
        for kind, item in self.items:
            if kind == "mark" and item == what:
                seen = True
            elif seen and kind == "event" and item["type"] == "answer.delta":
                out.append(item["text"])
        return out


@pytest.fixture
def gated_model(monkeypatch, settings):
    """A model that writes FIRST, then waits for `gate` before writing SECOND."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 60.0
    monkeypatch.setattr(gateway, "gateway_available", lambda: True)
    monkeypatch.setattr(yields, "should_generate", lambda model: (True, "policy_off"))
    state = {"gate": None, "first_sent": None}

    async def stream_chat(**_kwargs):
        yield gateway.ChatDelta(FIRST + " ")
        yield gateway.ChatDelta("Express")  # FIRST is complete now: it is checked and sent
        state["first_sent"].set()
        await state["gate"].wait()
        yield gateway.ChatDelta(SECOND[len("Express") :])
        yield gateway.ChatResult(
            text=f"{FIRST} {SECOND}",
            model="scripted",
            worker="scripted-1",
            prompt_tokens=50,
            completion_tokens=20,
            ttft_ms=5.0,
            total_ms=30.0,
            finish_reason="stop",
        )

    monkeypatch.setattr(gateway, "stream_chat", stream_chat)
    return state


async def _claim(conversation, agent) -> Handoff:
    def claim():
        handoff, _ = handoff_services.handoff_request(
            conversation=conversation, reason="customer_request"
        )
        return handoff_services.handoff_claim(
            tenant_id=conversation.tenant_id,
            handoff_id=handoff.pk,
            agent=agent,
            expected_version=handoff.version,
        )

    return await sync_to_async(claim, thread_sensitive=False)()


async def test_no_bot_words_reach_anyone_after_an_agent_claims_mid_answer(
    gated_model, tenant, conversation, agent
):
    await sync_to_async(index_document)(tenant, "Shipping", SHIPPING_MD)
    gated_model["gate"], gated_model["first_sent"] = asyncio.Event(), asyncio.Event()
    timeline = Timeline()
    turn = asyncio.create_task(
        orchestrator.handle_customer_message(
            conversation=conversation,
            client_message_id="claim-1",
            text="How long do standard and express shipping take?",
            emit=timeline,
        )
    )
    await asyncio.wait_for(gated_model["first_sent"].wait(), 120)
    await _claim(conversation, agent)
    timeline.mark("claimed")
    gated_model["gate"].set()
    outcome = await asyncio.wait_for(turn, 120)

    assert timeline.deltas_after("claimed") == []
    shown = "".join(
        e["text"] for k, e in timeline.items if k == "event" and e["type"] == "answer.delta"
    )
    assert FIRST in shown
    assert "Express" not in shown
    reply = await sync_to_async(Message.objects.get)(pk=outcome.reply.pk)
    assert reply.text.strip() == shown.strip()
    assert "Express" not in reply.text


async def test_a_claim_before_any_word_withdraws_the_reply_and_the_sweeper_leaves_it(
    gated_model, tenant, conversation, agent, monkeypatch
):
    await sync_to_async(index_document)(tenant, "Shipping", SHIPPING_MD)
    gated_model["gate"], gated_model["first_sent"] = asyncio.Event(), asyncio.Event()
    claimed = asyncio.Event()
    real_speak = orchestrator.base.TurnEvents.speak

    async def speak_after_claim(self, event):
        # The agent's claim commits just before the bot's first word would go out.
        if not claimed.is_set():
            await _claim(conversation, agent)
            claimed.set()
        return await real_speak(self, event)

    monkeypatch.setattr(orchestrator.base.TurnEvents, "speak", speak_after_claim)
    gated_model["gate"].set()
    timeline = Timeline()
    outcome = await orchestrator.handle_customer_message(
        conversation=conversation,
        client_message_id="claim-2",
        text="How long does shipping take?",
        emit=timeline,
    )
    types = [e["type"] for k, e in timeline.items if k == "event"]
    assert "answer.delta" not in types
    assert "answer.completed" not in types
    assert outcome.reply is None
    message = await sync_to_async(Message.objects.get)(pk=outcome.customer_message.pk)
    assert message.state == Message.State.HANDED_OFF
    bot_replies = await sync_to_async(
        lambda: Message.objects.filter(reply_to=message, role=Message.Role.BOT).count()
    )()
    assert bot_replies == 0
