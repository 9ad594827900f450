"""The verification gate on the generative path, with a scripted model stream: a sentence the
passages do not support never reaches the customer, is never stored, and is recorded as
dropped (the real engine is exercised in test_generation.py; its wording is not scriptable)."""

import pytest
from asgiref.sync import async_to_sync

from chat import orchestrator
from chat.tests.helpcenter import RETURNS_MD, SHIPPING_MD, index_document
from conversations.models import Message
from inference import gateway, yields

FAITHFUL = "Standard shipping takes 3-5 business days."
INVENTED = "Standard shipping takes 10 business days and is free to every country."
FAITHFUL_TOO = "Orders over $50 ship free within the contiguous United States."


class Recorder:
    def __init__(self):
        self.events = []

    async def __call__(self, event):
        self.events.append(event)


def scripted_stream(text: str | list[str]):
    """A stand-in for gateway.stream_chat that writes `text` a few characters at a time (or
    in the pieces given)."""
    pieces = text if isinstance(text, list) else [text[i : i + 7] for i in range(0, len(text), 7)]
    text = "".join(pieces)

    async def stream_chat(**_kwargs):
        for piece in pieces:
            yield gateway.ChatDelta(piece)
        yield gateway.ChatResult(
            text=text,
            model="scripted",
            worker="scripted-1",
            prompt_tokens=100,
            completion_tokens=len(text.split()),
            ttft_ms=5.0,
            total_ms=20.0,
            finish_reason="stop",
        )

    return stream_chat


@pytest.fixture
def model_writes(monkeypatch, settings):
    """Route every answer to the model (available, policy off) and script what it writes."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.ANSWER_FIRST_WORDS_BUDGET_S = 60.0
    monkeypatch.setattr(gateway, "gateway_available", lambda: True)
    monkeypatch.setattr(yields, "should_generate", lambda model: (True, "policy_off"))

    def script(text: str | list[str]) -> None:
        monkeypatch.setattr(gateway, "stream_chat", scripted_stream(text))

    return script


@pytest.fixture
def shipping(tenant):
    return index_document(tenant, "Shipping", SHIPPING_MD)


def test_an_unsupported_sentence_is_never_streamed_stored_or_cited(
    model_writes, shipping, conversation
):
    model_writes(f"{FAITHFUL} {INVENTED} {FAITHFUL_TOO}")
    events = Recorder()
    outcome = async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation,
        client_message_id="v1",
        text="How long does standard shipping take?",
        emit=events,
    )
    reply = outcome.reply
    streamed = "".join(e["text"] for e in events.events if e["type"] == "answer.delta")
    assert reply.kind == Message.Kind.ANSWER  # the model's verified words, not a fallback quote
    assert FAITHFUL in streamed
    assert FAITHFUL in reply.text
    assert "10 business days" not in streamed
    assert "10 business days" not in reply.text
    assert "every country" not in Message.objects.get(pk=reply.pk).text
    dropped = {d["sentence"]: d["reasons"] for d in reply.meta["dropped_sentences"]}
    assert INVENTED in dropped
    assert dropped[INVENTED] not in (["beside the question"], ["repeated"])  # unsupported
    assert reply.citations
    assert reply.citations[0]["document_id"] == shipping.pk


def test_a_model_that_only_invents_gives_the_quoted_answer_instead(
    model_writes, shipping, conversation
):
    model_writes(f"{INVENTED} Shipping is always free and takes one day.")
    events = Recorder()
    outcome = async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation,
        client_message_id="v2",
        text="How long does standard shipping take?",
        emit=events,
    )
    reply = outcome.reply
    streamed = "".join(e["text"] for e in events.events if e["type"] == "answer.delta")
    assert reply.kind == Message.Kind.EXTRACTIVE
    assert reply.meta["fallback"] == "extractive"
    assert "10 business days" not in streamed + reply.text
    assert "one day" not in streamed + reply.text
    assert "3-5 business days" in reply.text


def test_a_piece_ending_a_sentence_and_a_word_keeps_the_space_after_the_word(
    model_writes, shipping, conversation
):
    """ "days. Express " then "shipping …": the unfinished sentence keeps its trailing space,
    so the next piece does not glue onto it ("Expressshipping", then dropped)."""
    model_writes(
        ["Standard shipping takes ", "3-5 business days. Express ", "shipping takes 1-2 "]
        + ["business days and costs $15."]
    )
    outcome = async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation,
        client_message_id="v3",
        text="How long does shipping take?",
    )
    assert outcome.reply.kind == Message.Kind.ANSWER
    assert "Express shipping takes 1-2 business days and costs $15." in outcome.reply.text, (
        outcome.reply.meta
    )


def test_a_piece_of_the_system_prompt_tucked_into_a_supported_sentence_is_dropped(
    model_writes, tenant, conversation
):
    """An instructed model splices a clause of its prompt into a sentence the passage supports;
    verification lets those few extra words by, the echo gate does not."""
    index_document(tenant, "Returns and refunds", RETURNS_MD)
    plain = "Opened items can be returned within 30 days for store credit only."
    spliced = plain.removesuffix(".") + ", time limits and conditions exactly as written."
    model_writes(f"{plain} {spliced}")
    outcome = async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation,
        client_message_id="v4",
        text="Can I return opened items?",
    )
    reply = outcome.reply
    assert plain in reply.text
    assert "exactly as written" not in reply.text
    dropped = {d["sentence"]: d["reasons"] for d in reply.meta["dropped_sentences"]}
    assert dropped[spliced] == ["repeats the instructions: 'and conditions exactly as'"]
