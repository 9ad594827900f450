"""Analytics: each conversation's outcome, the topics of first questions, daily rollups.

No message text is copied here: a topic points at the message that first asked it (whose text
stays sealed in `conversations`), and rollups hold counts, amounts and ids only.
"""

from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from conversations.models import Conversation, Customer, Message
from knowledge.models import EMBEDDING_DIMENSIONS
from supportbot.models import Tenant


class Topic(models.Model):
    """A cluster of first questions: the vector of the question that opened it."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    # The question that opened the topic (its text stays sealed on the message).
    representative_message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "id"], name="topic_tenant")]

    def __str__(self) -> str:
        return f"topic {self.pk}"


class ConversationOutcome(models.Model):
    """What one conversation came to, decided once it went idle; `final` once the window in
    which a repeat contact on the same topic withdraws a resolution has closed."""

    class Kind(models.TextChoices):
        RESOLVED = "resolved"
        HANDED_OFF = "handed_off"
        UNRESOLVED = "unresolved"
        ABANDONED = "abandoned"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    conversation = models.OneToOneField(
        Conversation, on_delete=models.CASCADE, related_name="outcome"
    )
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    # Reason codes and the ids behind them, e.g. {"codes": ["strong_evidence"], ...}.
    reasons = models.JSONField(default=dict)
    handoff_reason = models.CharField(max_length=24, blank=True)
    topic = models.ForeignKey(
        Topic, null=True, blank=True, on_delete=models.SET_NULL, related_name="outcomes"
    )
    first_question = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The bot answered with strong evidence, completed an action or the customer confirmed.
    answered = models.BooleanField(default=False)
    withdrawn = models.BooleanField(default=False)  # a resolution a repeat contact took back
    day = models.DateField()  # the conversation's first day (UTC): the rollup it counts in
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()  # its last message when decided
    window_closes_at = models.DateTimeField()
    decided_at = models.DateTimeField()
    final = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "day"], name="outcome_tenant_day"),
            models.Index(fields=["tenant", "customer", "ended_at"], name="outcome_customer"),
            models.Index(
                fields=["window_closes_at"], condition=Q(final=False), name="outcome_open_window"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} ({self.conversation_id})"


class DailyRollup(models.Model):
    """One tenant's figures for one day (UTC) of conversations, written only by the rollup
    job (an upsert on tenant + day); pages read these rows, never the conversations."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    conversations = models.PositiveIntegerField(default=0)
    undecided = models.PositiveIntegerField(default=0)
    resolved = models.PositiveIntegerField(default=0)
    handed_off = models.PositiveIntegerField(default=0)
    unresolved = models.PositiveIntegerField(default=0)
    abandoned = models.PositiveIntegerField(default=0)
    resolutions_withdrawn = models.PositiveIntegerField(default=0)
    resolution_rate = models.FloatField(null=True)  # resolved / decided
    handoffs_by_reason = models.JSONField(default=dict)
    helpful = models.PositiveIntegerField(default=0)
    not_helpful = models.PositiveIntegerField(default=0)
    helpful_rate = models.FloatField(null=True)  # helpful / rated
    first_words_p50_ms = models.FloatField(null=True)
    first_words_p95_ms = models.FloatField(null=True)
    answer_paths = models.JSONField(default=dict)  # {path: replies}
    actions = models.JSONField(default=dict)  # {tool: {state: count}}
    refunds_succeeded = models.PositiveIntegerField(default=0)
    refund_amount = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    duplicate_refunds_prevented = models.PositiveIntegerField(default=0)
    bot_turns = models.PositiveIntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    tokens_per_resolved = models.FloatField(null=True)
    cost_per_resolved = models.DecimalField(max_digits=14, decimal_places=6, null=True)
    top_questions = models.JSONField(default=list)  # [{"topic": id, "conversations": n}]
    top_unanswered = models.JSONField(default=list)
    final = models.BooleanField(default=False)  # every outcome of the day is final

    class Meta:
        ordering = ["tenant", "day"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "day"], name="rollup_one_per_tenant_day")
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.day}"
