"""The action ledger, each tenant's order-system connection and action policy.

Tool arguments, the order snapshot and results are encrypted at rest with the tenant's data
key (supportbot/fields.py); the one equality lookup (the order) goes through `order_key`.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from conversations.models import Conversation, Customer
from supportbot.fields import EncryptedJSONField
from supportbot.models import Tenant

# Rows that still stand for their refund: a new proposal with the same dedupe key returns one.
LIVE_STATES = (
    "proposed",
    "awaiting_confirmation",
    "awaiting_approval",
    "approved",
    "executing",
    "unknown",
    "succeeded",
)
SETTLED_STATES = ("succeeded", "failed", "denied", "rejected", "cancelled", "expired")


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


def default_approver_roles() -> dict[str, list[str]]:
    return {"low": ["agent", "admin"], "high": ["agent", "admin"]}


class ActionPolicy(models.Model):
    """A tenant's rules for actions beyond the refund limits kept on the tenant."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="action_policy")
    # How long a proposal card can be confirmed.
    proposal_ttl_seconds = models.PositiveIntegerField(default=600)
    # The same customer + tool + order + amount within this window is the same refund.
    dedupe_window_hours = models.PositiveIntegerField(default=24)
    # Which membership roles may approve which risk class ({"low": [...], "high": [...]}).
    approver_roles = models.JSONField(default=default_approver_roles)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"action policy of {self.tenant}"


class LimitLock(models.Model):
    """One row per customer, locked (SELECT … FOR UPDATE) while a refund is admitted against
    the customer's limits, so concurrent confirmations are admitted one at a time."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    customer = models.OneToOneField(Customer, on_delete=models.CASCADE, related_name="+")

    def __str__(self) -> str:
        return f"limit lock of customer {self.customer_id}"


class ActionRequest(models.Model):
    """One proposed tool call and everything that happened to it.

    `dedupe_key` = tenant + customer + tool + normalized arguments (never the conversation):
    at most one live row per (dedupe_key, sequence), so the same refund asked in two
    conversations or retried by a partner is one row and one execution; a deliberate second
    refund gets the next `sequence`. `retry_key` (the provider's Idempotency-Key) is unique.
    """

    class State(models.TextChoices):
        PROPOSED = "proposed"
        AWAITING_CONFIRMATION = "awaiting_confirmation"  # shown to the customer as a card
        CANCELLED = "cancelled"  # the customer said no
        EXPIRED = "expired"  # nobody confirmed it in time
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
    arguments = EncryptedJSONField(default=dict)
    # Keyed hash of arguments["order_id"]: the equality lookup the encrypted arguments refuse.
    order_key = models.CharField(max_length=64, blank=True, default="", db_index=True)
    retry_key = models.CharField(max_length=64, unique=True)
    dedupe_key = models.CharField(max_length=64, db_index=True, default="")
    sequence = models.PositiveSmallIntegerField(default=1)
    risk = models.CharField(max_length=5, choices=Risk.choices)
    state = models.CharField(max_length=24, choices=State.choices, default=State.PROPOSED)
    proposed_by = models.CharField(max_length=10, choices=Source.choices)
    order_snapshot = EncryptedJSONField(default=dict, blank=True)
    approval_reason = models.CharField(max_length=100, blank=True)
    provider_request_id = models.CharField(max_length=100, blank=True)
    result = EncryptedJSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=50, blank=True)
    error = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decision_reason = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    notified_state = models.CharField(max_length=24, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    executing_since = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirmed_via = models.CharField(max_length=10, blank=True)  # button | typed | api
    # The customer message that asked, and the bot reply that showed the card.
    requested_in_message_id = models.BigIntegerField(null=True, blank=True)
    proposal_message_id = models.BigIntegerField(null=True, blank=True)
    # A person who proposed it on the customer's behalf (never also its approver).
    initiated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["dedupe_key", "sequence"],
                condition=Q(state__in=LIVE_STATES),
                name="action_one_live_per_dedupe_key",
            )
        ]
        indexes = [
            models.Index(fields=["tenant", "state", "created_at"], name="action_tenant_state"),
            models.Index(fields=["conversation", "created_at"], name="action_conversation"),
            models.Index(
                fields=["state", "updated_at"],
                condition=Q(
                    state__in=["approved", "executing", "unknown", "awaiting_confirmation"]
                ),
                name="action_unsettled",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} #{self.pk} ({self.state})"

    @property
    def is_settled(self) -> bool:
        return self.state in SETTLED_STATES

    @property
    def is_write(self) -> bool:
        return self.risk != self.Risk.READ
