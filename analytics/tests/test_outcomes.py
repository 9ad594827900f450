from datetime import timedelta

import pytest

from analytics import services
from analytics.models import ConversationOutcome, Topic
from analytics.tests.conftest import DAY0, STRONG, converse, seed_day0, seed_returns
from analytics.tests.factories import CustomerFactory, MessageFactory

pytestmark = pytest.mark.django_db


def _outcome(conversation) -> ConversationOutcome:
    return ConversationOutcome.objects.get(conversation=conversation)


def test_each_known_ending_gets_its_one_outcome_and_reasons(tenant):
    c = seed_day0(tenant)
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    got = {name: (_outcome(conv).kind, _outcome(conv).reasons["codes"]) for name, conv in c.items()}
    assert got == {
        "strong": ("resolved", ["strong_evidence", "customer_confirmed"]),
        "action": ("resolved", ["action_completed"]),
        "thanked": ("resolved", ["customer_confirmed"]),
        "handoff": ("handed_off", ["handoff"]),
        "not_helpful": ("unresolved", ["not_helpful", "strong_evidence"]),
        "abandoned": ("abandoned", ["left_before_answer"]),
        "declined": ("unresolved", ["declined"]),
    }
    assert _outcome(c["handoff"]).handoff_reason == "customer_request"
    assert ConversationOutcome.objects.filter(final=True).count() == 0


def test_paraphrased_first_questions_share_a_topic_and_other_subjects_do_not(tenant):
    c = seed_day0(tenant)
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    topics = {name: _outcome(conv).topic_id for name, conv in c.items()}
    assert topics["strong"] == topics["abandoned"]
    assert len(set(topics.values())) == 6
    topic = Topic.objects.get(pk=topics["strong"])
    assert topic.representative_message.conversation_id == c["strong"].pk


def test_repeat_contact_on_day_5_on_the_same_topic_withdraws_the_resolution(tenant):
    day0 = seed_day0(tenant)
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    returns = seed_returns(tenant, day0)
    services.outcomes_sweep(now=DAY0 + timedelta(days=6))
    withdrawn = _outcome(day0["strong"])
    assert (withdrawn.kind, withdrawn.withdrawn) == ("unresolved", True)
    assert withdrawn.reasons["codes"][0] == "repeat_contact"
    assert withdrawn.reasons["repeat_contact"] == returns["alice_again"].pk
    assert _outcome(returns["alice_again"]).kind == "resolved"


def test_repeat_contact_on_another_topic_leaves_the_resolution_standing(tenant):
    day0 = seed_day0(tenant)
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    returns = seed_returns(tenant, day0)
    services.outcomes_sweep(now=DAY0 + timedelta(days=6))
    assert _outcome(returns["bob_again"]).topic_id != _outcome(day0["action"]).topic_id
    kept = _outcome(day0["action"])
    assert (kept.kind, kept.withdrawn) == ("resolved", False)


def test_contact_after_the_window_closed_withdraws_nothing(tenant):
    alice = CustomerFactory(tenant=tenant)
    first = converse(
        tenant, alice, "How do I return a tent I bought?", at=DAY0, replies=[{"meta": STRONG}]
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    converse(
        tenant,
        alice,
        "How can I return the tent I bought?",
        at=DAY0 + timedelta(days=8),
        replies=[{"meta": STRONG}],
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=9))
    assert (_outcome(first).kind, _outcome(first).final) == ("resolved", True)


def test_window_close_withdraws_a_resolution_decided_after_its_repeat_contact(tenant):
    """The first conversation went on after the repeat contact was decided: deciding it
    again finds the repeat, and so does the check when its window closes."""
    alice = CustomerFactory(tenant=tenant)
    first = converse(
        tenant, alice, "How do I return a tent I bought?", at=DAY0, replies=[{"meta": STRONG}]
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    again = converse(
        tenant,
        alice,
        "How can I return the tent I bought?",
        at=DAY0 + timedelta(days=2),
        replies=[{"meta": STRONG}],
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=3))
    # Force the earlier verdict back (as a re-decision that ignored the repeat would).
    ConversationOutcome.objects.filter(conversation=first).update(
        kind="resolved", withdrawn=False, reasons={"codes": ["strong_evidence"]}
    )
    assert services.outcomes_finalize(now=DAY0 + timedelta(days=6)) == 0  # window still open
    services.outcomes_finalize(now=DAY0 + timedelta(days=8))
    closed = _outcome(first)
    assert (closed.kind, closed.withdrawn, closed.final) == ("unresolved", True, True)
    assert closed.reasons["repeat_contact"] == again.pk


def test_window_waits_for_a_later_conversation_still_without_outcome(tenant):
    alice = CustomerFactory(tenant=tenant)
    first = converse(
        tenant, alice, "How do I return a tent I bought?", at=DAY0, replies=[{"meta": STRONG}]
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    converse(
        tenant,
        alice,
        "How can I return the tent I bought?",
        at=DAY0 + timedelta(days=6),
        replies=[{"meta": STRONG}],
    )
    assert services.outcomes_finalize(now=DAY0 + timedelta(days=8)) == 0
    assert _outcome(first).final is False
    services.outcomes_sweep(now=DAY0 + timedelta(days=8))
    assert (_outcome(first).kind, _outcome(first).final) == ("unresolved", True)


def test_conversation_is_decided_only_after_the_tenants_idle_time(tenant):
    tenant.conversation_idle_minutes = 60
    tenant.save()
    conversation = converse(
        tenant,
        CustomerFactory(tenant=tenant),
        "Where is my parcel?",
        at=DAY0,
        replies=[{"meta": STRONG}],
    )
    last = DAY0 + timedelta(minutes=5)
    services.outcomes_sweep(now=last + timedelta(minutes=59))
    assert not ConversationOutcome.objects.filter(conversation=conversation).exists()
    services.outcomes_sweep(now=last + timedelta(minutes=60))
    assert _outcome(conversation).kind == "resolved"


def test_conversation_that_went_on_is_decided_again(tenant):
    conversation = converse(tenant, CustomerFactory(tenant=tenant), "Where is my parcel?", at=DAY0)
    services.outcomes_sweep(now=DAY0 + timedelta(hours=1))
    assert _outcome(conversation).kind == "abandoned"
    asked = conversation.messages.get()
    MessageFactory(
        conversation=conversation,
        role="bot",
        kind="answer",
        state="delivered",
        reply_to=asked,
        meta=STRONG,
    )
    conversation.last_message_at = DAY0 + timedelta(hours=2)
    conversation.save()
    services.outcomes_sweep(now=DAY0 + timedelta(hours=3))
    assert _outcome(conversation).kind == "resolved"
    assert ConversationOutcome.objects.filter(conversation=conversation).count() == 1


def test_topics_store_no_copy_of_the_question_text(tenant):
    seed_day0(tenant)
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    text_fields = [
        f.name
        for model in (Topic, ConversationOutcome)
        for f in model._meta.concrete_fields
        if f.get_internal_type() in ("TextField", "CharField")
    ]
    assert text_fields == ["kind", "handoff_reason"]


def test_erasing_a_customer_erases_their_outcomes_and_unlinks_their_question(tenant):
    from conversations import customer_data
    from supportbot.services import Actor

    alice = CustomerFactory(tenant=tenant, external_id="crm-alice")
    conversation = converse(
        tenant, alice, "How do I return a tent I bought?", at=DAY0, replies=[{"meta": STRONG}]
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    topic_id = _outcome(conversation).topic_id
    result = customer_data.customer_erase(
        tenant=tenant, external_id="crm-alice", actor=Actor.system("test")
    )
    assert result["erased"]["outcomes"] == 1
    assert not ConversationOutcome.objects.filter(customer=alice).exists()
    assert Topic.objects.get(pk=topic_id).representative_message_id is None


def test_thanks_before_the_bots_first_reply_is_no_confirmation(tenant):
    conversation = converse(tenant, CustomerFactory(tenant=tenant), "Hi, thanks", at=DAY0)
    MessageFactory(conversation=conversation, text="Thanks!")
    asked = conversation.messages.order_by("pk").first()
    MessageFactory(
        conversation=conversation,
        role="bot",
        kind="clarify",
        state="delivered",
        reply_to=asked,
        meta={"strength": "weak", "path": "weak_evidence"},
    )
    services.outcomes_sweep(now=DAY0 + timedelta(days=1))
    assert (_outcome(conversation).kind, _outcome(conversation).reasons["codes"]) == (
        "unresolved",
        ["weak_evidence"],
    )
