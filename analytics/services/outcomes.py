"""Deciding each idle conversation's outcome, and keeping resolutions honest for a window.

A conversation quiet for its tenant's `conversation_idle_minutes` gets one outcome
(`decide.decide`) and the topic of its first question. A resolution is withdrawn (it becomes
`unresolved`, reason `repeat_contact`) when the same customer comes back on the same topic
within ANALYTICS_REPEAT_CONTACT_DAYS of the conversation's end: checked when the later
conversation is decided, and once more when the window closes, which makes the outcome final.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from analytics import decide, selectors
from analytics.models import ConversationOutcome
from analytics.services.topics import topic_assign
from conversations.models import Conversation
from knowledge.embeddings import embed_texts
from supportbot.models import Tenant

logger = logging.getLogger(__name__)
Kind = ConversationOutcome.Kind
REPEAT_CONTACT = "repeat_contact"


def _window() -> timedelta:
    return timedelta(days=settings.ANALYTICS_REPEAT_CONTACT_DAYS)


def _withdraw(outcome: ConversationOutcome, *, by_conversation_id: int) -> None:
    """Take a resolution back: a repeat contact on its topic came within the window."""
    outcome.kind = Kind.UNRESOLVED
    outcome.withdrawn = True
    codes = outcome.reasons.get("codes", [])
    outcome.reasons = {
        **outcome.reasons,
        "codes": [REPEAT_CONTACT, *(c for c in codes if c != REPEAT_CONTACT)],
        REPEAT_CONTACT: by_conversation_id,
    }
    outcome.save(update_fields=["kind", "withdrawn", "reasons"])


def _repeat_after(outcome: ConversationOutcome) -> int | None:
    """The first later conversation of the same customer on the same topic that started
    within the outcome's window, if one has been decided."""
    if outcome.topic_id is None:
        return None
    return (
        ConversationOutcome.objects.filter(
            tenant_id=outcome.tenant_id,
            customer_id=outcome.customer_id,
            topic_id=outcome.topic_id,
            started_at__gt=outcome.started_at,
            started_at__lte=outcome.window_closes_at,
        )
        .exclude(pk=outcome.pk)
        .order_by("started_at")
        .values_list("conversation_id", flat=True)
        .first()
    )


def _withdraw_earlier(outcome: ConversationOutcome) -> None:
    """Withdraw the customer's earlier resolutions on this topic whose window this start
    falls in."""
    if outcome.topic_id is None:
        return
    earlier = ConversationOutcome.objects.select_for_update().filter(
        tenant_id=outcome.tenant_id,
        customer_id=outcome.customer_id,
        topic_id=outcome.topic_id,
        kind=Kind.RESOLVED,
        final=False,
        started_at__lt=outcome.started_at,
        window_closes_at__gte=outcome.started_at,
    )
    for row in earlier:
        _withdraw(row, by_conversation_id=outcome.conversation_id)


@transaction.atomic
def outcome_decide(
    *, conversation_id: int, topic_id: int | None, now: datetime
) -> ConversationOutcome | None:
    """Decide (or decide again, while not final) the conversation's outcome; None when another
    sweep holds the conversation right now (it decides it)."""
    conversation = (
        Conversation.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(pk=conversation_id)
        .first()
    )
    if conversation is None:
        return None
    verdict = decide.decide(selectors.conversation_facts(conversation=conversation))
    ended_at = conversation.last_message_at or conversation.created_at
    existing = ConversationOutcome.objects.filter(conversation=conversation).first()
    outcome, _ = ConversationOutcome.objects.update_or_create(
        conversation=conversation,
        defaults={
            "tenant_id": conversation.tenant_id,
            "customer_id": conversation.customer_id,
            "kind": verdict.kind,
            "reasons": {"codes": verdict.codes, "handoff_reason": verdict.handoff_reason},
            "handoff_reason": verdict.handoff_reason,
            "topic_id": topic_id if topic_id is not None else getattr(existing, "topic_id", None),
            "answered": verdict.answered,
            "withdrawn": False,
            "day": conversation.created_at.astimezone(UTC).date(),
            "started_at": conversation.created_at,
            "ended_at": ended_at,
            "window_closes_at": ended_at + _window(),
            "decided_at": now,
            "final": False,
        },
    )
    if outcome.kind == Kind.RESOLVED and (later := _repeat_after(outcome)) is not None:
        _withdraw(outcome, by_conversation_id=later)
    _withdraw_earlier(outcome)
    return outcome


def _topics_of(tenant: Tenant, conversation_ids: list[int]) -> dict[int, int]:
    """Topic ids of the conversations' first questions (one embedding batch); conversations
    that already have a topic keep it, those without a question get none."""
    have = set(
        ConversationOutcome.objects.filter(
            conversation_id__in=conversation_ids, topic__isnull=False
        ).values_list("conversation_id", flat=True)
    )
    questions = selectors.first_questions(
        tenant=tenant, conversation_ids=[c for c in conversation_ids if c not in have]
    )
    items = list(questions.items())
    vectors = embed_texts([message.text for _, message in items])
    return {
        conversation_id: topic_assign(tenant_id=tenant.pk, question=message, embedding=vector).pk
        for (conversation_id, message), vector in zip(items, vectors, strict=True)
    }


def _sweep_tenant(tenant: Tenant, now: datetime) -> int:
    decided = 0
    while ids := selectors.conversations_idle(
        tenant=tenant, now=now, limit=settings.ANALYTICS_OUTCOME_BATCH
    ):
        topics = _topics_of(tenant, ids)
        done = [outcome_decide(conversation_id=c, topic_id=topics.get(c), now=now) for c in ids]
        progress = sum(1 for o in done if o is not None)
        decided += progress
        if progress < len(ids):  # others hold the rest: they decide them
            break
    return decided


def outcomes_finalize(*, now: datetime) -> int:
    """Close the windows that have ended: withdraw a resolution a repeat contact took back,
    mark the outcome final; return how many became final. An outcome waits while a later
    conversation of its customer inside the window has no outcome yet."""
    finalized = 0
    due = ConversationOutcome.objects.filter(final=False, window_closes_at__lte=now).order_by(
        "window_closes_at", "pk"
    )
    for outcome_id in due.values_list("pk", flat=True).iterator():
        with transaction.atomic():
            outcome = ConversationOutcome.objects.select_for_update().get(pk=outcome_id)
            if outcome.final or _later_undecided(outcome):
                continue
            if outcome.kind == Kind.RESOLVED and (later := _repeat_after(outcome)) is not None:
                _withdraw(outcome, by_conversation_id=later)
            outcome.final = True
            outcome.save(update_fields=["final"])
            finalized += 1
    return finalized


def _later_undecided(outcome: ConversationOutcome) -> bool:
    return Conversation.objects.filter(
        tenant_id=outcome.tenant_id,
        customer_id=outcome.customer_id,
        created_at__gt=outcome.started_at,
        created_at__lte=outcome.window_closes_at,
        outcome__isnull=True,
    ).exists()


def outcomes_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Decide every idle conversation of every active tenant, then finalize the outcomes whose
    window closed; return counts (`decided` by tenant slug, `finalized`)."""
    now = now or timezone.now()
    counts = {tenant.slug: _sweep_tenant(tenant, now) for tenant in selectors.tenants_active()}
    counts = {slug: n for slug, n in counts.items() if n}
    counts["finalized"] = outcomes_finalize(now=now)
    return counts
