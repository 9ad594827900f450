"""The orchestrator end to end against real PostgreSQL search (no model worker registered, so
answers are extractive; the generative path is tested against vLLM in test_generation.py)."""

import dataclasses
import re
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

from chat import orchestrator
from chat.tests.helpcenter import SHIPPING_MD, index_document
from conversations import services
from conversations.models import Message
from handoffs import services as handoff_services
from handoffs.models import Handoff


class Recorder:
    def __init__(self):
        self.events = []

    async def __call__(self, event):
        self.events.append(event)

    def types(self):
        return [e["type"] for e in self.events]


def ask(conversation, text, client_id, emit=None):
    return async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation,
        client_message_id=client_id,
        text=text,
        emit=emit or Recorder(),
    )


@pytest.fixture(autouse=True)
def _no_answer_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def test_help_center_question_gets_an_answer_citing_the_right_document(help_center, conversation):
    events = Recorder()
    outcome = ask(conversation, "Can I return an opened item?", "c1", events)
    reply = outcome.reply
    assert reply.kind == Message.Kind.EXTRACTIVE
    assert reply.state == Message.State.DELIVERED
    assert "store credit" in reply.text
    assert reply.citations[0]["document_id"] == help_center["returns"].pk
    assert reply.text.startswith("“")  # the quote itself, no opener before it
    card = reply.citations[0]["quote"]
    assert card == "" or (card not in reply.text)  # never the reply's quote a second time
    outcome.customer_message.refresh_from_db()
    assert outcome.customer_message.state == Message.State.ANSWERED
    assert events.types() == [
        "message.accepted",
        "answer.started",
        "answer.delta",
        "answer.completed",
    ]


def test_a_turn_reads_its_passages_sentence_vectors_instead_of_embedding_them(
    help_center, conversation, customer, settings
):
    from chat.orchestrator.base import SENTENCE_VECTORS
    from knowledge.models import Chunk

    settings.ANSWER_CACHE_ENABLED = False
    question = "Can I return an opened item?"
    SENTENCE_VECTORS.clear()  # a process that never embedded these passages' sentences
    stored = ask(conversation, question, "s1").reply
    Chunk.objects.filter(tenant=conversation.tenant).update(sentence_vectors=b"")
    SENTENCE_VECTORS.clear()
    other = services.conversation_start(tenant=conversation.tenant, customer=customer)
    embedded = ask(other, question, "s2").reply
    assert stored.text == embedded.text
    assert stored.meta["embedded_texts"] <= 4  # the question and the headings
    # without stored vectors the turn embeds its first passages' sentences as well
    assert embedded.meta["embedded_texts"] >= stored.meta["embedded_texts"] + 5


def test_a_turn_embeds_the_question_once_for_search_and_composition(
    help_center, conversation, settings, monkeypatch
):
    from chat.orchestrator.base import SENTENCE_VECTORS
    from knowledge import embeddings

    settings.ANSWER_CACHE_ENABLED = False
    question = "Could I send back an item I already opened?"
    SENTENCE_VECTORS.clear()
    embeddings._embed_query_cached.cache_clear()
    encoded: list[str] = []
    encode = embeddings._local_encode

    def counting(texts):
        encoded.extend(texts)
        return encode(texts)

    monkeypatch.setattr(embeddings, "_local_encode", counting)
    reply = ask(conversation, question, "q1").reply
    assert reply.kind == Message.Kind.EXTRACTIVE
    assert encoded.count(question) == 1  # the search's vector scores the sentences too
    assert reply.meta["embedded_texts"] == len(encoded) - 1


def test_repeated_client_message_id_returns_the_saved_reply_and_never_a_second(
    help_center, conversation
):
    first = ask(conversation, "How long does standard shipping take?", "same")
    events = Recorder()
    again = ask(conversation, "How long does standard shipping take?", "same", events)
    assert again.duplicate
    assert again.reply.pk == first.reply.pk
    assert events.types() == ["message.accepted", "answer.completed"]
    assert Message.objects.filter(conversation=conversation, role="customer").count() == 1
    assert Message.objects.filter(conversation=conversation, role="bot").count() == 1


def test_restricted_documents_never_reach_customers(help_center, conversation):
    outcome = ask(
        conversation, "How much goodwill credit can agents grant for late delivery?", "c1"
    )
    assert all(c["document_id"] != help_center["internal"].pk for c in outcome.reply.citations)
    assert "$25" not in outcome.reply.text


def test_other_tenants_documents_are_never_cited(help_center, other_help_center, conversation):
    outcome = ask(conversation, "Do you accept returns within 365 days no questions asked?", "c1")
    assert all(c["document_id"] != other_help_center.pk for c in outcome.reply.citations)
    assert "365" not in outcome.reply.text


def test_out_of_scope_question_is_refused_then_handed_off_when_weak_again(
    help_center, conversation
):
    first = ask(conversation, "What is the capital of Mongolia?", "c1")
    assert first.reply.kind in (Message.Kind.REFUSAL, Message.Kind.CLARIFY)
    assert first.reply.citations == []
    second = ask(conversation, "Who won the football world cup in 1998?", "c2")
    assert second.reply.kind == Message.Kind.HANDOFF
    assert second.handoff.reason == Handoff.Reason.WEAK_EVIDENCE


def test_a_refusal_names_the_tenant_and_no_scope_the_tenant_did_not_write(
    help_center, conversation
):
    outcome = ask(conversation, "What is the capital of Mongolia?", "c1")
    assert outcome.reply.kind == Message.Kind.REFUSAL
    assert conversation.tenant.name in outcome.reply.text
    assert "person from our team" in outcome.reply.text
    # a software project's users were told it sells "products, orders, shipping, returns"
    assert not re.search(r"products|orders|shipping|returns", outcome.reply.text)


def _weakened(monkeypatch, evidence: float):
    """Run the real search, then report its passages as weak evidence of `evidence` each."""
    from knowledge import selectors as knowledge

    real = knowledge.search_passages

    def weak_search(**kwargs):
        result = real(**kwargs)
        passages = [dataclasses.replace(p, evidence=evidence) for p in result.passages]
        return dataclasses.replace(result, passages=passages, strength="weak")

    monkeypatch.setattr(knowledge, "search_passages", weak_search)


def test_weak_evidence_asks_back_quoting_the_two_closest_sections(
    help_center, conversation, monkeypatch
):
    _weakened(monkeypatch, evidence=0.4)
    outcome = ask(conversation, "What happens if my order arrives damaged?", "c1")
    reply = outcome.reply
    assert reply.kind == Message.Kind.CLARIFY
    assert "The closest things in our help center are:" in reply.text
    assert re.findall(r"” \[(\d)\]", reply.text) == ["1", "2"]
    assert len({(c["document_id"], c["heading"]) for c in reply.citations}) == 2
    assert reply.text.rstrip().endswith("a person from our team.")


def test_a_question_the_pages_only_touch_is_hedged_not_answered_from_unrelated_sections(
    tenant, conversation
):
    """Every passage of a page of print options is about printing; none is about watermarks.
    The search finds a dozen about equally close: the reply says it is not sure and quotes
    the two closest, instead of answering from whatever ranked first."""
    page = Path(__file__).resolve().parents[2] / "demo" / "dev_cups_help" / "pages"
    index_document(tenant, "Printing options", (page / "options.html").read_text(), ext="html")
    reply = ask(conversation, "how do i print a DRAFT watermark across every page", "c1").reply
    assert reply.kind == Message.Kind.CLARIFY
    assert reply.meta["path_reason"] == "ambiguous"
    assert reply.text.startswith("I'm not sure I found exactly what you're asking about.")
    assert len(reply.citations) == 2
    answered = ask(conversation, "how do i print on both sides of the paper?", "c2").reply
    assert answered.kind == Message.Kind.EXTRACTIVE
    assert "sides=two-sided-long-edge" in answered.text


def test_a_question_naming_what_no_page_mentions_is_hedged_not_answered_with_confidence(
    help_center, conversation
):
    """The shipping page answers "do you ship to Canada" strongly; a carrier it never names
    makes the same passages no answer: the reply says what it could not find, quotes the
    closest as a possibility and offers a person."""
    reply = ask(conversation, "Do you ship to Canada with FedEx?", "c1").reply
    assert reply.kind == Message.Kind.CLARIFY
    assert reply.meta["strength"] == "strong"
    assert reply.meta["path_reason"] == "unknown_names"
    assert reply.meta["unknown_names"] == ["fedex"]
    assert reply.text.startswith('I couldn\'t find "fedex" mentioned in our help center')
    assert reply.text.rstrip().endswith("a person from our team.")


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("Do you ship to Canada?", "Canada and the United Kingdom"),
        ("can i send back an opened thing for money back?", "store credit"),  # not the words
        ("Can I send back an OPENED item to Acme?", "store credit"),
    ],
)
def test_in_scope_questions_in_other_words_are_still_answered(
    help_center, conversation, question, fact
):
    reply = ask(conversation, question, "c1").reply
    assert reply.kind == Message.Kind.EXTRACTIVE, reply.text
    assert fact in reply.text


def test_a_misspelt_name_the_pages_mention_is_no_unknown_name(help_center, conversation):
    reply = ask(conversation, "Do you ship to Canada and the Unitd Kingdom?", "c1").reply
    assert reply.kind == Message.Kind.EXTRACTIVE, reply.text
    assert reply.meta["path_reason"] != "unknown_names"
    assert "Canada" in reply.text


def test_a_second_weak_turn_hands_off_and_still_quotes_the_closest_sections(
    help_center, conversation, monkeypatch
):
    _weakened(monkeypatch, evidence=0.4)
    first = ask(conversation, "What happens if my order arrives damaged?", "c1")
    assert first.reply.kind == Message.Kind.CLARIFY
    second = ask(conversation, "and if the box is only dented?", "c2")
    reply = second.reply
    assert reply.kind == Message.Kind.HANDOFF
    assert second.handoff.reason == Handoff.Reason.WEAK_EVIDENCE
    queue, _, closest = reply.text.partition(" Meanwhile: ")
    assert queue.startswith("I'm connecting you with a person from our team.")
    assert closest.startswith("The closest thing")
    cited = [int(n) for n in re.findall(r"” \[(\d)\]", closest)]
    assert cited
    assert len(reply.citations) == len(set(cited))
    public = {help_center[k].pk for k in ("returns", "shipping", "warranty")}
    assert {c["document_id"] for c in reply.citations} <= public


def test_a_second_turn_with_no_evidence_hands_off_with_the_queue_alone(help_center, conversation):
    ask(conversation, "What is the capital of Mongolia?", "c1")
    second = ask(conversation, "Who won the football world cup in 1998?", "c2")
    assert second.reply.kind == Message.Kind.HANDOFF
    assert "Meanwhile" not in second.reply.text
    assert second.reply.citations == []


def test_asking_for_a_human_opens_one_handoff_and_says_so(help_center, conversation):
    events = Recorder()
    outcome = ask(conversation, "I want to talk to a human", "c1", events)
    assert outcome.reply.kind == Message.Kind.HANDOFF
    assert "queue" in outcome.reply.text
    assert "handoff.started" in events.types()
    assert outcome.handoff.reason == Handoff.Reason.CUSTOMER_REQUEST
    again = ask(conversation, "hello? can I speak to a person", "c2")
    assert again.handoff.pk == outcome.handoff.pk
    assert Handoff.objects.filter(conversation=conversation).count() == 1


def test_bot_stays_silent_while_a_human_owns_the_conversation(help_center, conversation, agent):
    handoff, _ = handoff_services.handoff_request(
        conversation=conversation, reason="agent_takeover"
    )
    handoff_services.handoff_claim(
        tenant_id=conversation.tenant_id,
        handoff_id=handoff.pk,
        agent=agent,
        expected_version=handoff.version,
    )
    events = Recorder()
    outcome = ask(conversation, "How long does standard shipping take?", "c1", events)
    assert outcome.reply is None
    assert events.types() == ["message.accepted"]
    assert not Message.objects.filter(conversation=conversation, role="bot").exists()

    handoff.refresh_from_db()
    handoff_services.handoff_close(
        tenant_id=conversation.tenant_id,
        handoff_id=handoff.pk,
        agent=agent,
        expected_version=handoff.version,
        outcome="returned_to_bot",
    )
    back = ask(conversation, "How long does express shipping take?", "c2")
    assert back.reply is not None
    assert "1-2 business days" in back.reply.text


def test_high_risk_message_goes_to_a_person_with_priority(help_center, conversation):
    outcome = ask(conversation, "Someone hacked my account and placed orders", "c1")
    assert outcome.handoff.reason == Handoff.Reason.HIGH_RISK
    assert outcome.handoff.priority == 1


def test_answer_cache_serves_the_same_question_and_is_invalidated_by_document_changes(
    help_center, tenant, customer
):
    conv_a = services.conversation_start(tenant=tenant, customer=customer)
    conv_b = services.conversation_start(tenant=tenant, customer=customer)
    first = ask(conv_a, "How long does express shipping take?", "a1")
    assert not first.reply.meta.get("cached")
    second = ask(conv_b, "how long does EXPRESS shipping take", "b1")
    assert second.reply.meta.get("cached") is True
    assert second.reply.text == first.reply.text
    assert second.reply.citations == first.reply.citations

    index_document(tenant, "Shipping update", SHIPPING_MD.replace("$15", "$12"))
    conv_c = services.conversation_start(tenant=tenant, customer=customer)
    third = ask(conv_c, "How long does express shipping take?", "c1")
    assert not third.reply.meta.get("cached")


def test_questions_with_personal_data_are_not_cached(help_center, tenant, customer):
    conv_a = services.conversation_start(tenant=tenant, customer=customer)
    conv_b = services.conversation_start(tenant=tenant, customer=customer)
    ask(conv_a, "How long does shipping take for order A-1042?", "a1")
    again = ask(conv_b, "How long does shipping take for order A-1042?", "b1")
    assert not again.reply.meta.get("cached")


@pytest.fixture
def failing_model(monkeypatch):
    """A worker the policy tries for every answer, whose stream fails with `failing_model.exc`."""
    from inference import gateway, yields

    state = type("Failing", (), {"exc": None})()

    async def stream_chat(**kwargs):
        raise state.exc
        yield  # an async generator, as the gateway's

    monkeypatch.setattr(gateway, "gateway_available", lambda: True)
    monkeypatch.setattr(gateway, "stream_chat", stream_chat)
    monkeypatch.setattr(yields, "should_generate", lambda model: (True, "yield_ok"))
    monkeypatch.setattr(yields, "model_for_role", lambda role="primary": "smollm2-135m")
    return state


def test_a_model_failing_twice_in_a_conversation_hands_it_to_a_person(
    help_center, conversation, failing_model
):
    from inference.errors import StreamBroken

    failing_model.exc = StreamBroken("worker died", partial_text="")
    first = ask(conversation, "How long does standard shipping take?", "f1")
    second = ask(conversation, "How much does express shipping cost?", "f2")

    assert first.reply.kind == second.reply.kind == Message.Kind.EXTRACTIVE
    assert second.reply.meta["inference_error"] == "inference_stream_broken"
    handoff = Handoff.objects.get(conversation=conversation)
    assert handoff.reason == Handoff.Reason.MODEL_FAILURE


def test_a_spent_token_budget_is_answered_extractively_and_never_hands_off(
    help_center, conversation, failing_model
):
    """The tenant's own budget refusing generation is no model failure: a busy hour must not
    send every conversation to the agents."""
    from inference.errors import TenantRateLimited

    failing_model.exc = TenantRateLimited("tenant token budget exhausted", retry_after=5)
    replies = [
        ask(conversation, text, f"b{i}").reply
        for i, text in enumerate(
            [
                "How long does standard shipping take?",
                "How much does express shipping cost?",
                "Do you ship to Canada?",
            ]
        )
    ]

    assert [r.kind for r in replies] == [Message.Kind.EXTRACTIVE] * 3
    assert replies[-1].meta["inference_error"] == "inference_tenant_rate_limited"
    assert not Handoff.objects.filter(conversation=conversation).exists()


def test_a_follow_up_is_searched_with_the_question_it_follows(help_center, conversation):
    first = ask(conversation, "Do you ship to Canada?", "f1").reply
    assert "Canada" in first.text
    reply = ask(conversation, "how long does it take to get there?", "f2").reply
    assert reply.kind == Message.Kind.EXTRACTIVE
    assert "7-14 business days" in reply.text
    assert reply.citations[0]["heading"] == "International shipping"


def test_the_same_follow_up_after_different_questions_is_never_served_from_one_cache_entry(
    help_center, tenant, customer
):
    shipping = services.conversation_start(tenant=tenant, customer=customer)
    refunds = services.conversation_start(tenant=tenant, customer=customer)
    ask(shipping, "Do you ship to Canada?", "s1")
    abroad = ask(shipping, "how long does it take?", "s2").reply
    ask(refunds, "When will I get my refund after returning an item?", "r1")
    refund = ask(refunds, "how long does it take?", "r2").reply
    assert not refund.meta.get("cached")
    assert "7-14 business days" in abroad.text
    assert "5-10 business days" in refund.text


def test_answers_beyond_the_warm_up_bound_never_wait_on_an_unmeasured_model(
    help_center, tenant, customer, settings, monkeypatch
):
    """With INFERENCE_YIELD_WARMUP=foreground, a fresh model (too few measurements) is tried by
    at most INFERENCE_YIELD_WARMUP_IN_FLIGHT answers at once: a second chat while the first
    waits on it is answered extractively at once, recorded as skipped, and its model is never
    called."""
    import asyncio

    from inference import gateway, yields

    settings.INFERENCE = {
        **settings.INFERENCE,
        "YIELD_WARMUP": "foreground",
        "YIELD_WARMUP_IN_FLIGHT": 1,
    }
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0
    monkeypatch.setattr(gateway, "gateway_available", lambda: True)
    monkeypatch.setattr(yields, "should_generate", lambda model: (True, "warming_up"))
    monkeypatch.setattr(yields, "model_for_role", lambda role="primary": "smollm2-135m")
    waiting, held = services.conversation_start(tenant=tenant, customer=customer), None
    other = services.conversation_start(tenant=tenant, customer=customer)
    started = []

    async def scenario():
        nonlocal held
        held = asyncio.Event()

        async def stream_chat(**kwargs):
            started.append(kwargs["affinity_key"])
            await held.wait()
            yield gateway.ChatDelta("Nothing to add.")

        monkeypatch.setattr(gateway, "stream_chat", stream_chat)
        first = asyncio.ensure_future(
            orchestrator.handle_customer_message(
                conversation=waiting,
                client_message_id="w1",
                text="How long does standard shipping take?",
                emit=Recorder(),
            )
        )
        for _ in range(500):
            if started:
                break
            await asyncio.sleep(0.02)
        second = await asyncio.wait_for(
            orchestrator.handle_customer_message(
                conversation=other,
                client_message_id="o1",
                text="How much does express shipping cost?",
                emit=Recorder(),
            ),
            timeout=20,
        )
        held.set()
        return await first, second

    first, second = async_to_sync(scenario)()

    assert started == [f"conv:{waiting.pk}"], "the second answer never called the model"
    assert second.reply.kind == Message.Kind.EXTRACTIVE
    assert second.reply.meta["path"] == "skipped"
    assert second.reply.meta["path_reason"] == "warming_up_busy"
    assert first.reply.meta["path_reason"] != "warming_up_busy"


def test_a_model_not_measured_yet_is_measured_in_the_background_while_the_customer_is_answered(
    help_center, conversation, settings, monkeypatch
):
    """Warm-up by default: the customer's answer never waits on an unmeasured model; the model
    answers the same prompt in the background, verified and recorded in its yield book."""
    import asyncio

    from chat.orchestrator import generate
    from inference import gateway, yields

    settings.ANSWER_FIRST_WORDS_BUDGET_S = 30.0
    monkeypatch.setattr(gateway, "gateway_available", lambda: True)
    monkeypatch.setattr(yields, "should_generate", lambda model: (True, "warming_up"))
    monkeypatch.setattr(yields, "model_for_role", lambda role="primary": "smollm2-135m")
    recorded, started = [], []
    monkeypatch.setattr(yields, "record", lambda **kw: recorded.append(kw))

    async def scenario():
        held = asyncio.Event()

        async def stream_chat(**kwargs):
            started.append(kwargs["affinity_key"])
            await held.wait()
            yield gateway.ChatDelta("Standard shipping takes 3-5 business days.")
            yield gateway.ChatResult(
                "Standard shipping takes 3-5 business days.", "smollm2-135m", "w1", 600, 9, 5, 9
            )

        monkeypatch.setattr(gateway, "stream_chat", stream_chat)
        outcome = await asyncio.wait_for(
            orchestrator.handle_customer_message(
                conversation=conversation,
                client_message_id="bg1",
                text="How long does standard shipping take?",
                emit=Recorder(),
            ),
            timeout=20,
        )
        answered_while_the_model_was_held = not held.is_set()
        held.set()
        await asyncio.gather(*generate._probes[generate.WARMUP])
        return outcome, answered_while_the_model_was_held

    outcome, early = async_to_sync(scenario)()

    assert early, "the answer went out while the model was still writing"
    assert outcome.reply.kind == Message.Kind.EXTRACTIVE
    assert outcome.reply.meta["path"] == "skipped"
    assert outcome.reply.meta["path_reason"] == "warming_up"
    assert outcome.reply.meta["shadow_probe"] is True
    assert started == [f"conv:{conversation.pk}"]
    assert len(recorded) == 1
    assert recorded[0]["kept"] >= 1, recorded
