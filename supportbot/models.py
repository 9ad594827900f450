"""Tenancy core: tenants, per-tenant roles, partner API keys and the audit trail."""

import re
import secrets
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from supportbot.fields import EncryptedJSONField

SLUG_RE = r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$"
slug_validator = RegexValidator(
    SLUG_RE, "Use 1-50 lowercase letters, digits or inner hyphens (e.g. 'acme-eu')."
)
# A customer segment's name (a document's audience, an API key's search scope).
SEGMENT_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")


IDENTITY_TOKEN_DEFAULT_LIFETIME_S = 24 * 60 * 60


def _widget_secret() -> str:
    return secrets.token_urlsafe(32)


# A DNS name or an IP literal: no wildcards, spaces or `;` (the value goes into a CSP header).
_HOST_RE = re.compile(
    r"^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$|^[0-9a-f:.]+$"
)


def validate_origin(value: str) -> None:
    """An origin is `scheme://host[:port]` with http(s) and nothing after it."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ValidationError(f"{value!r} is not an origin.") from exc
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username
        or not _HOST_RE.match(parts.hostname)
        or value != value.strip().lower()
    ):
        raise ValidationError(
            f"{value!r} is not an origin: use lowercase scheme://host[:port], "
            "e.g. 'https://shop.example.com', without a path."
        )


class Tenant(models.Model):
    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200)
    # Policy settings (read by actions and handoffs through selectors).
    refund_auto_limit = models.DecimalField(
        max_digits=10,
        decimal_places=2,
        default=50,
        help_text="Refunds up to this amount run without a human approval.",
    )
    refund_window_days = models.PositiveIntegerField(default=30)
    refund_per_customer_daily_limit = models.DecimalField(
        max_digits=10, decimal_places=2, default=200
    )
    handoff_capacity = models.PositiveIntegerField(
        default=20, help_text="Open handoffs per online agent before customers are asked to wait."
    )
    widget_secret = models.CharField(max_length=64, default=_widget_secret, editable=False)
    # After a rotation the old secret still verifies identity tokens until this time.
    widget_secret_previous = models.CharField(max_length=64, blank=True, editable=False)
    widget_secret_previous_until = models.DateTimeField(null=True, blank=True, editable=False)
    identity_token_max_lifetime_s = models.PositiveIntegerField(
        default=IDENTITY_TOKEN_DEFAULT_LIFETIME_S,
        validators=[MinValueValidator(60), MaxValueValidator(IDENTITY_TOKEN_DEFAULT_LIFETIME_S)],
        help_text="Identity tokens may expire at most this many seconds ahead (60 s to 24 h).",
    )
    allowed_origins = ArrayField(
        models.CharField(max_length=200, validators=[validate_origin]),
        default=list,
        blank=True,
        help_text="Sites that may embed the chat page and open its WebSocket, one origin each "
        "(https://shop.example.com). The product's own host is always allowed.",
    )
    retention_days = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Erase conversations with no activity for this many days (empty: keep).",
    )
    conversation_idle_minutes = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text="A conversation quiet this long is over: it gets its outcome (analytics).",
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        AGENT = "agent", "Agent"
        ADMIN = "admin", "Admin"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.AGENT)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user"], name="membership_one_per_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"


class ApiKey(models.Model):
    """A partner key. Only a SHA-256 of the secret is stored; the prefix finds the row."""

    NAME_MAX_LENGTH = 100

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # What the key may search (GET /api/v1/search): agents-only documents, and which customer
    # segments besides the public ones. The default is the public audience only.
    may_search_agent_documents = models.BooleanField(default=False)
    search_segments = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEvent(models.Model):
    """Append-only record of who did what to which target. A trigger refuses UPDATE/DELETE."""

    class ActorType(models.TextChoices):
        USER = "user"
        API_KEY = "api_key"
        SYSTEM = "system"
        CUSTOMER = "customer"

    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    actor_type = models.CharField(max_length=10, choices=ActorType.choices)
    actor_id = models.CharField(max_length=64, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=50, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="audit_tenant_time")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_label} {self.action}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not self._state.adding:
            raise PermissionError("Audit events are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("Audit events are append-only.")


class IdempotencyKey(models.Model):
    """A partner POST's `Idempotency-Key` and the response it produced (Stripe's semantics):
    the same key with the same request replays the saved response; with a different request
    it is a 422; while the first request runs, a repeat gets a 409. Keys belong to the API
    key that sent them: another key of the same tenant has keys of its own (and never sees
    this key's saved response)."""

    class State(models.TextChoices):
        IN_PROGRESS = "in_progress"
        DONE = "done"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    # The partner key that sent it (null: a caller without one, scoped by tenant).
    api_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=255)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=300)
    request_hash = models.CharField(max_length=64)
    state = models.CharField(max_length=12, choices=State.choices, default=State.IN_PROGRESS)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    # The saved response holds conversation text: sealed like it (supportbot/fields.py).
    response_body = EncryptedJSONField(null=True, blank=True)
    # The conversation the request acted on (an id, not a foreign key: this app sits below
    # conversations), set while the request runs: erasing it forgets this response.
    conversation_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["api_key", "key"],
                condition=Q(api_key__isnull=False),
                name="idempotency_unique_key_per_api_key",
            ),
            models.UniqueConstraint(
                fields=["tenant", "key"],
                condition=Q(api_key__isnull=True),
                name="idempotency_unique_key_without_api_key",
            ),
        ]
        indexes = [
            models.Index(fields=["created_at"], name="idempotency_created"),
            models.Index(fields=["tenant", "conversation_id"], name="idempotency_conversation"),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.state})"


class DataKey(models.Model):
    """A tenant's AES-256-GCM data key, stored only wrapped by a master key.

    `key_id` is written into every ciphertext, so rows sealed under a retired key still open
    after a rotation. At most one key per tenant is active (it seals new values).
    """

    class State(models.TextChoices):
        ACTIVE = "active"
        RETIRED = "retired"

    key_id = models.CharField(max_length=32, unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="data_keys")
    master_key_id = models.CharField(max_length=32)
    wrapped = models.TextField()
    state = models.CharField(max_length=8, choices=State.choices, default=State.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)
    rewrapped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant"], condition=Q(state="active"), name="datakey_one_active"
            )
        ]

    def __str__(self) -> str:
        return f"data key {self.key_id} of {self.tenant_id} ({self.state})"


class LoginFailure(models.Model):
    """A wrong password for an existing account, shown to its owner on the console home page.

    The address is kept truncated (IPv4 /24, IPv6 /48, `docs/data-protection.md`): enough for
    the owner to tell their office from a stranger, not enough to identify a person. Rows older
    than `LOGIN_FAILURE_RETENTION_DAYS` are deleted as new ones are written.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="login_failures"
    )
    network = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="loginfailure_user_time")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.user_id} from {self.network}"
