"""The action ledger and each tenant's order-system connection.

Tool arguments live in one JSON field (`ActionRequest.arguments`) so per-tenant encryption can
be added behind the model layer later; they are never searched with SQL text operators.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation, Customer
from supportbot.models import Tenant


class ProviderConfig(models.Model):
    """Where a tenant's order API lives; the credentials are Fernet-encrypted at rest."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="order_provider")
    base_url = models.URLField(max_length=300)
    credentials_encrypted = models.TextField(blank=True, editable=False)
    timeout_seconds = models.FloatField(default=5.0)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tenant} → {self.base_url}"


class ActionRequest(models.Model):
    """One proposed tool call and everything that happened to it. The retry key is unique:
    the same tenant + conversation + tool + normalized arguments is one row, one execution."""

    class State(models.TextChoices):
        PROPOSED = "proposed"
        AWAITING_APPROVAL = "awaiting_approval"
        APPROVED = "approved"
        EXECUTING = "executing"
        SUCCEEDED = "succeeded"
        FAILED = "failed"  # the provider refused or the execution failed definitively
        UNKNOWN = "unknown"  # the outcome is not known yet (timeout): look it up first
        DENIED = "denied"  # a person denied it
        REJECTED = "rejected"  # policy refused it before any provider write

    class Risk(models.TextChoices):
        READ = "read"
        LOW = "low"
        HIGH = "high"

    class Source(models.TextChoices):
        MODEL = "model"
        INTENT = "intent"
        AGENT = "agent"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="action_requests"
    )
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="+")
    tool = models.CharField(max_length=50)
    arguments = models.JSONField(default=dict)
    retry_key = models.CharField(max_length=64, unique=True)
    risk = models.CharField(max_length=5, choices=Risk.choices)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PROPOSED)
    proposed_by = models.CharField(max_length=10, choices=Source.choices)
    order_snapshot = models.JSONField(default=dict, blank=True)
    approval_reason = models.CharField(max_length=100, blank=True)
    provider_request_id = models.CharField(max_length=100, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=50, blank=True)
    error = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decision_reason = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    notified_state = models.CharField(max_length=20, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    executing_since = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["tenant", "state", "created_at"], name="action_tenant_state"),
            models.Index(fields=["conversation", "created_at"], name="action_conversation"),
            models.Index(
                fields=["state", "updated_at"],
                condition=Q(state__in=["approved", "executing", "unknown"]),
                name="action_unsettled",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} #{self.pk} ({self.state})"

    @property
    def is_settled(self) -> bool:
        return self.state in (
            self.State.SUCCEEDED,
            self.State.FAILED,
            self.State.DENIED,
            self.State.REJECTED,
        )
