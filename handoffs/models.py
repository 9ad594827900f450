"""Handoffs: a person takes a conversation over from the bot, one open handoff at a time."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation, Message
from supportbot.fields import EncryptedTextField
from supportbot.models import Tenant

OPEN_STATES = ("requested", "queued", "assigned")


class Team(models.Model):
    """Agents of a tenant grouped for routing (e.g. "billing", "returns")."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="teams")
    handles_reasons = models.JSONField(
        default=list, blank=True, help_text="Handoff reasons routed to this team (empty: any)."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="team_unique_name")]

    def __str__(self) -> str:
        return self.name


class Handoff(models.Model):
    class State(models.TextChoices):
        REQUESTED = "requested"
        QUEUED = "queued"
        ASSIGNED = "assigned"
        RESOLVED = "resolved"
        RETURNED_TO_BOT = "returned_to_bot"
        EXPIRED = "expired"

    class Reason(models.TextChoices):
        CUSTOMER_REQUEST = "customer_request", "Customer asked for a person"
        WEAK_EVIDENCE = "weak_evidence", "Weak evidence twice in a row"
        MODEL_FAILURE = "model_failure", "Repeated failure or model unavailable"
        HIGH_RISK = "high_risk", "High-risk intent"
        NEGATIVE_SENTIMENT = "negative_sentiment", "Negative sentiment or abuse"
        APPROVAL_NEEDED = "approval_needed", "An action needs approval"
        AGENT_TAKEOVER = "agent_takeover", "Agent took over"
        PARTNER_REQUEST = "partner_request", "Requested through the API"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="handoffs"
    )
    trigger_message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.REQUESTED)
    reason = models.CharField(max_length=24, choices=Reason.choices)
    reason_detail = EncryptedTextField(blank=True)  # may quote the customer (≤ 300 chars)
    priority = models.PositiveSmallIntegerField(default=2, help_text="1 urgent, 2 normal, 3 low")
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL)
    routed_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The online agent routing offered this handoff to.",
    )
    escalated_at = models.DateTimeField(null=True, blank=True)
    customer_email = EncryptedTextField(blank=True)
    summary = EncryptedTextField(blank=True)
    summary_source = models.CharField(max_length=20, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    assigned_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(state__in=OPEN_STATES),
                name="handoff_one_open_per_conversation",
            )
        ]
        indexes = [models.Index(fields=["tenant", "state", "created_at"], name="handoff_queue")]

    def __str__(self) -> str:
        return f"handoff {self.pk} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


class InternalNote(models.Model):
    """An agent's note on a conversation; never shown to the customer."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    text = EncryptedTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"note {self.pk}"


class CannedResponse(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=100)
    text = models.TextField()

    class Meta:
        ordering = ["title"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "title"], name="canned_unique_title")
        ]

    def __str__(self) -> str:
        return self.title
