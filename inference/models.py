"""The worker registry and per-request usage records.

`ModelWorker` is shared state between processes: the launcher writes its lifecycle (`state`,
`pid`), every pool poller writes what it last saw (`healthy`, `last_metrics`, breaker). A
process routes with its own fresher in-memory copy; the ops page and `gateway_available()` in
processes without a poller read the row, where a stale `last_health_at` means "unknown".
"""

from django.contrib.postgres.fields import ArrayField
from django.db import models

from supportbot.models import Tenant


class ModelWorker(models.Model):
    class Role(models.TextChoices):
        PRIMARY = "primary", "Primary"
        FALLBACK = "fallback", "Fallback"
        SMALL = "small", "Small"

    class Source(models.TextChoices):
        LAUNCHED = "launched", "Launched here"
        EXTERNAL = "external", "External (INFERENCE_WORKERS)"
        DISCOVERED = "discovered", "Discovered (INFERENCE_DISCOVERY)"

    class State(models.TextChoices):
        STARTING = "starting", "Starting"
        READY = "ready", "Ready"
        DRAINING = "draining", "Draining"
        STOPPED = "stopped", "Stopped"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=100, unique=True)
    base_url = models.URLField(max_length=300, unique=True)
    model_name = models.CharField(max_length=200)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.PRIMARY)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.LAUNCHED)
    state = models.CharField(max_length=10, choices=State.choices, default=State.STARTING)
    pid = models.PositiveIntegerField(null=True, blank=True)
    log_path = models.CharField(max_length=500, blank=True)
    healthy = models.BooleanField(default=False)
    last_health_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_metrics = models.JSONField(default=dict, blank=True)
    last_metrics_at = models.DateTimeField(null=True, blank=True)
    breaker_state = models.CharField(max_length=10, default="closed")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.role}, {self.state})"


class InferenceUsage(models.Model):
    """One model call (one attempt a worker accepted): who asked, which worker answered,
    tokens and latencies. Calls the caller abandoned (`cancelled`) and calls that failed after
    the worker took them (`error`, `stream_broken`) are rows too: the worker spent tokens.
    `estimated` marks token counts the engine did not report (see
    `gateway.metering.ReceivedAttempt`)."""

    class Outcome(models.TextChoices):
        OK = "ok", "OK"
        STREAM_BROKEN = "stream_broken", "Stream broken"
        CANCELLED = "cancelled", "Cancelled by the caller"
        ERROR = "error", "Failed before any text"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    worker = models.ForeignKey(ModelWorker, null=True, on_delete=models.SET_NULL, related_name="+")
    worker_name = models.CharField(max_length=100)
    model_name = models.CharField(max_length=200)
    role = models.CharField(max_length=10)
    outcome = models.CharField(max_length=15, choices=Outcome.choices, default=Outcome.OK)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    ttft_ms = models.FloatField(null=True)
    total_ms = models.FloatField()
    itl_ms = ArrayField(models.FloatField(), default=list, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    estimated = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "created_at"])]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.worker_name} {self.prompt_tokens}+{self.completion_tokens}"
