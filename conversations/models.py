"""Conversation state: customers, conversations, messages and feedback.

Message text, summaries and feedback comments are encrypted at rest with the tenant's data
key (supportbot/fields.py): one field each, never searched with SQL text operators.
"""

from django.db import models
from django.db.models import Q

from supportbot.fields import EncryptedTextField
from supportbot.models import Tenant


class Customer(models.Model):
    """A person chatting. Verified customers were identified by the tenant's signed token."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="customers")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    visitor_id = models.CharField(max_length=64, null=True, blank=True)
    verified = models.BooleanField(default=False)
    # Personal data, encrypted at rest like the conversation text (≤ 200 / 254 characters).
    name = EncryptedTextField(blank=True)
    email = EncryptedTextField(blank=True)
    segments = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "external_id"],
                condition=Q(external_id__isnull=False),
                name="customer_unique_external_id",
            ),
            models.UniqueConstraint(
                fields=["tenant", "visitor_id"],
                condition=Q(visitor_id__isnull=False),
                name="customer_unique_visitor_id",
            ),
        ]

    def __str__(self) -> str:
        return self.external_id or f"visitor:{self.visitor_id}"


class Conversation(models.Model):
    class Owner(models.TextChoices):
        BOT = "bot"
        HUMAN = "human"

    class State(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    class Channel(models.TextChoices):
        WEB = "web"
        WIDGET = "widget"
        API = "api"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="conversations")
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="conversations")
    channel = models.CharField(max_length=10, choices=Channel.choices, default=Channel.WEB)
    owner = models.CharField(max_length=10, choices=Owner.choices, default=Owner.BOT)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    version = models.PositiveIntegerField(default=1)
    summary = EncryptedTextField(blank=True)
    summary_through_message_id = models.BigIntegerField(null=True, blank=True)
    weak_evidence_streak = models.PositiveSmallIntegerField(default=0)
    model_failures = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_message_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["tenant", "customer", "-created_at"], name="conv_customer")]

    def __str__(self) -> str:
        return f"conversation {self.pk} ({self.tenant_id})"


class Message(models.Model):
    class Role(models.TextChoices):
        CUSTOMER = "customer"
        BOT = "bot"
        AGENT = "agent"
        SYSTEM = "system"

    class State(models.TextChoices):
        RECEIVED = "received"
        SEARCHING = "searching"
        ANSWERING = "answering"
        CALLING_TOOL = "calling_tool"
        ANSWERED = "answered"
        HANDED_OFF = "handed_off"
        FAILED = "failed"
        # Bot replies
        STREAMING = "streaming"
        DELIVERED = "delivered"

    class Kind(models.TextChoices):
        TEXT = "text"  # customer/agent text
        ANSWER = "answer"  # generated, verified, cited
        EXTRACTIVE = "extractive"  # quoted passages (model unavailable or unverifiable)
        CLARIFY = "clarify"  # weak evidence: ask back or offer a person
        REFUSAL = "refusal"  # out of scope
        HANDOFF = "handoff"  # told the customer a person takes over
        ACTION = "action"  # text generated from the action ledger
        NOTICE = "notice"  # system notices
        FAILED = "failed"  # the bot gave up on a message whose turn kept failing

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(max_length=10, choices=Role.choices)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.TEXT)
    text = EncryptedTextField()
    client_message_id = models.CharField(max_length=100, null=True, blank=True)
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    state = models.CharField(max_length=15, choices=State.choices, default=State.RECEIVED)
    citations = models.JSONField(default=list, blank=True)
    author_label = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=100, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=40, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    ttft_ms = models.FloatField(null=True, blank=True)
    total_ms = models.FloatField(null=True, blank=True)
    tool_outcome_ref = models.CharField(max_length=64, blank=True)
    # Customer messages: how often the reply sweeper re-drove this message's turn (it ends
    # `failed` after ANSWER_MAX_REDRIVE_ATTEMPTS instead of being retried forever).
    redrive_attempts = models.PositiveSmallIntegerField(default=0)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "conversation", "client_message_id"],
                condition=Q(client_message_id__isnull=False),
                name="message_unique_client_id",
            ),
            # Exactly one official bot answer per customer message.
            models.UniqueConstraint(
                fields=["reply_to"],
                condition=Q(role="bot"),
                name="message_one_bot_answer",
            ),
        ]
        indexes = [models.Index(fields=["conversation", "id"], name="message_conv_id")]

    def __str__(self) -> str:
        return f"{self.role} #{self.pk}"


class Feedback(models.Model):
    class Rating(models.TextChoices):
        HELPFUL = "helpful"
        NOT_HELPFUL = "not_helpful"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="feedback")
    rating = models.CharField(max_length=12, choices=Rating.choices)
    comment = EncryptedTextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.rating} on {self.message_id}"
