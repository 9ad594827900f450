"""A tenant's conversations with known endings (`seeded`), and the clock the tests use."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from analytics.tests.factories import (
    ActionRequestFactory,
    BotReplyFactory,
    ConversationFactory,
    CustomerFactory,
    FeedbackFactory,
    HandoffFactory,
    MessageFactory,
)
from conversations.models import Message

DAY0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
STRONG = {"strength": "strong", "path": "generated"}


def converse(tenant, customer, question, *, at, replies=(), after=()):
    """A conversation started at `at` by `customer` asking `question`; each reply is a dict
    of bot-message fields (plus `rating`); `after` are customer messages after the replies.
    Its last message is 5 minutes after the start."""
    conversation = ConversationFactory(
        tenant=tenant, customer=customer, at=at, last_message_at=at + timedelta(minutes=5)
    )
    asked = MessageFactory(conversation=conversation, text=question, at=at)
    for spec in replies:
        spec = dict(spec)
        rating = spec.pop("rating", None)
        reply = BotReplyFactory(conversation=conversation, reply_to=asked, **spec)
        if rating:
            FeedbackFactory(message=reply, rating=rating)
    for text in after:
        MessageFactory(conversation=conversation, text=text)
    return conversation


@pytest.fixture
def prices(settings):
    """Round prices: 0.5 and 1.5 per 1,000 prompt and completion tokens, 0.01 per turn."""
    settings.ANALYTICS_PROMPT_PRICE_PER_1K = Decimal("0.5")
    settings.ANALYTICS_COMPLETION_PRICE_PER_1K = Decimal("1.5")
    settings.ANALYTICS_CPU_COST_PER_TURN = Decimal("0.01")


def seed_day0(tenant) -> dict:
    """Seven conversations on DAY0, one of each ending (see test_rollups for the figures)."""
    alice, bob, carol, dan, erin, frank, gina = (CustomerFactory(tenant=tenant) for _ in range(7))
    c = {}
    c["strong"] = converse(
        tenant,
        alice,
        "How do I return a tent I bought?",
        at=DAY0,
        replies=[{**_stats(400, 900, 1000, 200), "meta": STRONG, "rating": "helpful"}],
    )
    c["action"] = converse(
        tenant,
        bob,
        "Please refund my order A-1042",
        at=DAY0 + timedelta(minutes=1),
        replies=[{"kind": Message.Kind.ACTION, **_stats(None, 300), "meta": {"path": "tool"}}],
    )
    ActionRequestFactory(
        conversation=c["action"], arguments={"order_id": "A-1042", "amount": "25.00"}
    )
    ActionRequestFactory(conversation=c["action"], state="cancelled", error_code="duplicate")
    ActionRequestFactory(
        conversation=c["action"], tool="check_order", risk="read", arguments={"order_id": "A-1042"}
    )
    c["thanked"] = converse(
        tenant,
        carol,
        "What are your opening hours?",
        at=DAY0 + timedelta(minutes=2),
        replies=[
            {
                "kind": Message.Kind.CLARIFY,
                **_stats(200, 500),
                "meta": {"strength": "weak", "path": "weak_evidence"},
            }
        ],
        after=["Thanks, that helped!"],
    )
    c["handoff"] = converse(
        tenant,
        dan,
        "I want to talk to a person",
        at=DAY0 + timedelta(minutes=3),
        replies=[
            {
                "kind": Message.Kind.HANDOFF,
                **_stats(None, 100),
                "meta": {"reason": "customer_request"},
            }
        ],
    )
    HandoffFactory(conversation=c["handoff"], reason="customer_request")
    c["not_helpful"] = converse(
        tenant,
        erin,
        "Does the tent fit four people?",
        at=DAY0 + timedelta(minutes=4),
        replies=[{**_stats(600, 1200, 800, 100), "meta": STRONG, "rating": "not_helpful"}],
    )
    c["abandoned"] = converse(
        tenant, frank, "how do i return a tent i bought", at=DAY0 + timedelta(minutes=5)
    )
    c["declined"] = converse(
        tenant,
        gina,
        "Do you ship to Mars?",
        at=DAY0 + timedelta(minutes=6),
        replies=[
            {
                "kind": Message.Kind.REFUSAL,
                **_stats(None, 250),
                "meta": {"strength": "none", "path": "weak_evidence"},
            }
        ],
    )
    return c


def _stats(ttft_ms, total_ms, prompt_tokens=None, completion_tokens=None) -> dict:
    return {
        "ttft_ms": ttft_ms,
        "total_ms": total_ms,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
    }


def seed_returns(tenant, day0: dict) -> dict:
    """Alice comes back on day 5 about the same tent; Bob on day 3 about something else."""
    alice = day0["strong"].customer
    bob = day0["action"].customer
    return {
        "alice_again": converse(
            tenant,
            alice,
            "How can I return the tent I bought?",
            at=DAY0 + timedelta(days=5),
            replies=[{**_stats(300, 700), "meta": STRONG}],
        ),
        "bob_again": converse(
            tenant,
            bob,
            "How do I reset my password?",
            at=DAY0 + timedelta(days=3),
            replies=[{**_stats(300, 700), "meta": STRONG}],
        ),
    }
