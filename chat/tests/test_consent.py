"""Consent to a refund card typed in the chat (`docs/actions.md`, "Typed answers").

Only an explicit yes (or no) typed right after a showing of the card answers it: nothing may
be shown in between (another answer, a queue or system notice, an agent's message). An
acknowledgement ("ok", "sure", "right", "y") is asked back, never taken as consent. Every
showing of the card counts, in whichever of the customer's conversations it was shown; a
re-driven "yes" whose first run confirmed the card is told the outcome.
"""

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from actions.models import ActionRequest
from actions.tests.shop import shop_connect
from chat import orchestrator, tasks
from chat.orchestrator import tools
from conversations import services
from conversations.models import Message
from handoffs.models import Handoff


@pytest.fixture(autouse=True)
def _local_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture
def shop(tenant, orders):
    return shop_connect(tenant, orders, timeout_seconds=2.0)


def chat_as(tenant, external_id="cust-1001"):
    customer = services.customer_get_or_create_verified(tenant=tenant, external_id=external_id)
    return services.conversation_start(tenant=tenant, customer=customer)


def say(conversation, text, client_id):
    return async_to_sync(orchestrator.handle_customer_message)(
        conversation=conversation, client_message_id=client_id, text=text
    )


def card_state(card) -> str:
    return ActionRequest.objects.get(pk=card["id"]).state


@pytest.mark.parametrize(
    "text", ["yes", "yes please", "YES!", "Yes, go ahead", "yep, confirm", "confirm"]
)
def test_an_explicit_yes_right_after_the_card_confirms_it(shop, tenant, text):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    reply = say(conversation, text, "m2").reply
    assert "submitted and confirmed" in reply.text
    assert card_state(card) == "succeeded"
    assert shop.refund_posts() == 1


@pytest.mark.parametrize("text", ["ok", "sure", "right", "y", "Okay, thanks", "sounds good"])
def test_an_acknowledgement_after_the_card_is_asked_back_and_a_yes_then_confirms(
    shop, tenant, text
):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    asked = say(conversation, text, "m2")
    assert asked.reply.kind == Message.Kind.ACTION
    assert 'reply "yes"' in asked.reply.text
    assert "Nothing has been requested yet" in asked.reply.text
    assert asked.action["needs_confirmation"] is True
    assert card_state(card) == "awaiting_confirmation"
    assert shop.refund_posts() == 0
    say(conversation, "yes", "m3")  # right after the question back: explicit consent
    assert card_state(card) == "succeeded"
    assert shop.refund_posts() == 1


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "yes, but for order A-1043",
        "yes but make it $10",
        "yes? what happens next",
        "yes I want to know how long shipping takes",
        "yeah right",
        'he said "yes"',
        "yes yes no",
        "y e s",
    ],
)
def test_words_that_are_not_an_explicit_yes_confirm_nothing(shop, tenant, text):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    say(conversation, text, "m2")
    assert card_state(card) == "awaiting_confirmation"
    assert shop.refund_posts() == 0


@pytest.mark.parametrize("typed", ["yes", "ok", "sure", "no"])
@pytest.mark.parametrize("role", [Message.Role.SYSTEM, Message.Role.AGENT])
def test_nothing_typed_after_a_notice_or_an_agent_message_answers_the_card(
    shop, tenant, typed, role
):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    services.message_post(
        conversation=conversation,
        role=role,
        kind=Message.Kind.NOTICE if role == Message.Role.SYSTEM else Message.Kind.TEXT,
        text="You're number 2 in the queue. A person from our team will be with you shortly.",
        author_label="Sam" if role == Message.Role.AGENT else "",
    )
    say(conversation, typed, "m2")
    assert card_state(card) == "awaiting_confirmation"
    assert shop.refund_posts() == 0


def test_yes_after_an_answer_to_another_question_confirms_nothing(shop, tenant):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    say(conversation, "where is my order A-1043?", "m2")
    say(conversation, "yes", "m3")
    assert card_state(card) == "awaiting_confirmation"
    assert shop.refund_posts() == 0


def test_a_card_shown_again_in_another_conversation_is_confirmed_by_a_yes_there(shop, tenant):
    first, second = chat_as(tenant), chat_as(tenant)
    card = say(first, "refund $25 for A-1042 please", "m1").action
    again = say(second, "refund $25 for A-1042 please", "m1").action
    assert again["id"] == card["id"]
    reply = say(second, "yes", "m2").reply
    assert "submitted and confirmed" in reply.text
    assert card_state(card) == "succeeded"
    assert shop.refund_posts() == 1


@pytest.mark.parametrize(("typed", "state"), [("yes", "succeeded"), ("no", "cancelled")])
def test_the_first_showing_still_answers_the_card_once_it_was_shown_elsewhere(
    shop, tenant, typed, state
):
    """One rule for yes and no: every showing counts, wherever it was shown."""
    first, second = chat_as(tenant), chat_as(tenant)
    card = say(first, "refund $25 for A-1042 please", "m1").action
    say(second, "refund $25 for A-1042 please", "m1")
    say(first, typed, "m2")
    assert card_state(card) == state
    assert shop.refund_posts() == (1 if state == "succeeded" else 0)


def test_another_customers_yes_never_answers_a_card_even_after_a_reply_naming_it(shop, tenant):
    """The selector checks the card's owner, not only what the reply before the yes says."""
    card = say(chat_as(tenant), "refund $15 for A-1042", "m1").action
    stranger = chat_as(tenant, "cust-1002")
    asked = services.message_receive(conversation=stranger, client_message_id="s1", text="hi")[0]
    forged = services.reply_reserve(customer_message=asked)
    services.reply_finalize(
        reply=forged,
        text="I can request a refund. Please confirm to go ahead, or cancel.",
        kind=Message.Kind.ACTION,
        citations=[],
        customer_state=Message.State.ANSWERED,
        stats={"meta": {"action_id": card["id"], "action_state": "awaiting_confirmation"}},
    )
    say(stranger, "yes", "s2")
    assert card_state(card) == "awaiting_confirmation"
    assert shop.refund_posts() == 0


def test_a_yes_in_another_tenant_never_answers_the_card(shop, tenant, other_tenant):
    card = say(chat_as(tenant), "refund $15 for A-1042", "m1").action
    elsewhere = chat_as(other_tenant)
    asked = services.message_receive(conversation=elsewhere, client_message_id="o1", text="hi")[0]
    reply = services.reply_reserve(customer_message=asked)
    services.reply_finalize(
        reply=reply,
        text="Please confirm.",
        kind=Message.Kind.ACTION,
        citations=[],
        customer_state=Message.State.ANSWERED,
        stats={"meta": {"action_id": card["id"], "action_state": "awaiting_confirmation"}},
    )
    say(elsewhere, "yes", "o2")
    assert card_state(card) == "awaiting_confirmation"


@pytest.mark.django_db(transaction=True)
def test_a_yes_re_driven_after_its_turn_died_past_the_confirmation_is_told_the_outcome(
    shop, tenant, settings, monkeypatch
):
    """The first run confirmed the card, then died before its reply was saved; the sweeper
    re-drives the "yes": the customer is told the refund's outcome, no question is searched,
    no handoff opens and the refund is not sent twice."""
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    finish = tools.finish

    async def dies_after_confirming(turn, draft, **kwargs):
        if turn.message.client_message_id == "m2":
            raise RuntimeError("the web process died here")
        return await finish(turn, draft, **kwargs)

    monkeypatch.setattr(tools, "finish", dies_after_confirming)
    with pytest.raises(RuntimeError):
        say(conversation, "yes", "m2")
    monkeypatch.setattr(tools, "finish", finish)
    assert card_state(card) == "succeeded"  # confirmed before the turn died
    message = Message.objects.get(conversation=conversation, client_message_id="m2")
    settings.ANSWER_STALE_AFTER_S = 1
    past = timezone.now() - timedelta(minutes=5)
    Message.objects.filter(conversation=conversation, pk__gte=message.pk).update(updated_at=past)

    assert tasks.unanswered_messages_sweep_task() == [message.pk]

    reply = Message.objects.get(reply_to=message, role=Message.Role.BOT)
    assert (reply.state, reply.kind) == ("delivered", Message.Kind.ACTION)
    assert "submitted and confirmed" in reply.text
    assert reply.meta["path_reason"] == "typed_answer"
    assert not Handoff.objects.filter(conversation=conversation).exists()
    assert shop.refund_posts() == 1


@pytest.mark.django_db(transaction=True)
def test_a_yes_re_driven_before_its_first_run_confirmed_anything_confirms_the_card(
    shop, tenant, settings
):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1").action
    message, _ = services.message_receive(
        conversation=conversation, client_message_id="m2", text="Yes please!"
    )
    services.reply_reserve(customer_message=message)  # then the process died
    settings.ANSWER_STALE_AFTER_S = 1
    past = timezone.now() - timedelta(minutes=5)
    Message.objects.filter(conversation=conversation, pk__gte=message.pk).update(updated_at=past)

    assert tasks.unanswered_messages_sweep_task() == [message.pk]

    assert card_state(card) == "succeeded"
    assert not Handoff.objects.filter(conversation=conversation).exists()
    assert shop.refund_posts() == 1


@pytest.fixture
def shop_without_review(shop, tenant):
    """The shop with its auto limit above A-1042's $89.99: a confirmed full refund of it is
    sent at once (one provider POST), not parked for a person."""
    tenant.refund_auto_limit = 100
    tenant.save()
    return shop


@pytest.mark.parametrize(
    ("asked", "asked_again"),
    [
        ("I want a full refund for A-1042", "please refund my order A-1042 in full"),
        ("refund $89.99 for A-1042", "I want my money back for A-1042"),
        ("refund what I paid for A-1042", "refund what I paid for A-1042"),
        ("I want all of it back for A-1042", "give me back everything I paid for A-1042"),
    ],
)
def test_a_full_refund_asked_again_elsewhere_shows_the_open_card_and_a_yes_there_confirms_it(
    shop_without_review, tenant, asked, asked_again
):
    first, second = chat_as(tenant), chat_as(tenant)
    card = say(first, asked, "m1").action
    again = say(second, asked_again, "m1")
    assert (again.action["id"], again.action["amount"]) == (card["id"], "89.99")
    assert "already have this refund request open in another conversation" in again.reply.text
    assert again.action["needs_confirmation"] is True

    reply = say(second, "yes", "m2").reply

    assert "submitted and confirmed" in reply.text
    assert card_state(card) == "succeeded"
    assert shop_without_review.refund_posts() == 1
    assert [r["amount"] for r in shop_without_review.refunds()] == ["89.99"]


def test_asking_again_in_the_same_conversation_says_the_request_is_already_open(shop, tenant):
    conversation = chat_as(tenant)
    card = say(conversation, "refund $15 for A-1042", "m1")
    assert "already have" not in card.reply.text
    again = say(conversation, "refund $15 for A-1042 please", "m2")
    assert again.action["id"] == card.action["id"]
    assert again.reply.text.startswith("You already have this refund request open (")
    assert "another conversation" not in again.reply.text


def test_yes_typed_in_both_conversations_showing_the_card_refunds_once(shop_without_review, tenant):
    first, second = chat_as(tenant), chat_as(tenant)
    card = say(first, "please refund my order A-1042 in full", "m1").action
    say(second, "I want my money back for A-1042", "m1")

    there = say(second, "yes", "m2")
    here = say(first, "yes", "m2")

    assert "submitted and confirmed" in there.reply.text
    assert here.action["id"] == card["id"]
    assert here.action["state"] == "succeeded"
    assert card_state(card) == "succeeded"
    assert shop_without_review.refund_posts() == 1
    assert len(shop_without_review.refunds()) == 1


def test_no_typed_where_the_card_was_shown_again_cancels_it_for_both_conversations(shop, tenant):
    first, second = chat_as(tenant), chat_as(tenant)
    card = say(first, "I want my money back for A-1042", "m1").action
    say(second, "refund A-1042 in full", "m1")

    say(second, "no", "m2")
    say(first, "yes", "m2")

    assert card_state(card) == "cancelled"
    assert shop.refund_posts() == 0


def test_a_card_shown_again_answers_only_the_next_message_in_that_conversation(
    shop_without_review, tenant
):
    first, second = chat_as(tenant), chat_as(tenant)
    card = say(first, "refund A-1042 in full", "m1").action
    say(second, "refund what I paid for A-1042", "m1")
    say(second, "where is my order A-1043?", "m2")

    say(second, "yes", "m3")

    assert card_state(card) == "awaiting_confirmation"
    assert shop_without_review.refund_posts() == 0


def test_another_tenants_customer_naming_the_order_in_full_gets_no_card(shop, tenant, other_tenant):
    """A tenant connected to the same order system whose customer names cust-1001's order of
    `tenant`: the order is answered like a missing one, and `tenant`'s open card stays open."""
    card = say(chat_as(tenant), "refund A-1042 in full", "m1").action
    shop_connect(other_tenant, shop, timeout_seconds=2.0)
    elsewhere = chat_as(other_tenant, "cust-1002")

    outcome = say(elsewhere, "please refund my order A-1042 in full", "o1")
    say(elsewhere, "yes", "o2")

    assert outcome.action is None or not outcome.action["needs_confirmation"]
    assert "couldn't find that order" in outcome.reply.text
    assert card_state(card) == "awaiting_confirmation"
    assert shop.refund_posts() == 0
