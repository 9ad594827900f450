"""Writes: the worker registry and usage records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from inference.models import InferenceUsage, ModelWorker

ROLES = {c.value for c in ModelWorker.Role}


@dataclass(frozen=True)
class ExternalWorkerSpec:
    base_url: str
    role: str
    model_name: str


def parse_external_workers(value: str, *, default_model: str) -> list[ExternalWorkerSpec]:
    """Parse `INFERENCE_WORKERS`: comma-separated `url` or `url|role|model`; raise ValueError."""
    specs = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        url, role, model = ([*item.split("|"), "", ""])[:3]
        url = url.strip().rstrip("/")
        role = role.strip() or ModelWorker.Role.PRIMARY
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"INFERENCE_WORKERS: {url!r} is not an http(s) URL")
        if role not in ROLES:
            raise ValueError(f"INFERENCE_WORKERS: role {role!r} not one of {sorted(ROLES)}")
        specs.append(ExternalWorkerSpec(url, role, model.strip() or default_model))
    return specs


def external_worker_name(base_url: str) -> str:
    return "ext-" + base_url.split("://", 1)[1].replace("/", "_")[:90]


@transaction.atomic
def workers_sync_external(*, specs: list[ExternalWorkerSpec]) -> list[ModelWorker]:
    """Register (or update) each external worker as `ready`; health comes from the poller."""
    out = []
    for spec in specs:
        worker, _ = ModelWorker.objects.update_or_create(
            base_url=spec.base_url,
            defaults={
                "name": external_worker_name(spec.base_url),
                "role": spec.role,
                "model_name": spec.model_name,
                "source": ModelWorker.Source.EXTERNAL,
                "state": ModelWorker.State.READY,
            },
        )
        out.append(worker)
    return out


def discovered_worker_name(base_url: str) -> str:
    return "disc-" + base_url.split("://", 1)[1].replace("/", "_")[:90]


@transaction.atomic
def workers_sync_discovered(
    *, base_urls: list[str], role: str, model_name: str, drain_after_s: float
) -> None:
    """Make the discovered workers exactly `base_urls`: upsert those as `ready`, move other
    discovered ones that are `ready` to `draining`, and stop those draining longer than
    `drain_after_s` (their in-flight calls had that long to finish).

    Several processes sync at once: the upsert is one `INSERT ... ON CONFLICT` on the base URL,
    retried when a racing insert of the same worker collides on its unique name; no process
    fails and no row is duplicated.
    """
    if role not in ROLES:
        raise ValueError(f"role {role!r} not one of {sorted(ROLES)}")
    now = timezone.now()
    rows = [
        ModelWorker(
            name=discovered_worker_name(url),
            base_url=url,
            model_name=model_name,
            role=role,
            source=ModelWorker.Source.DISCOVERED,
            state=ModelWorker.State.READY,
            updated_at=now,
        )
        for url in sorted(set(base_urls))
    ]
    for attempt in range(3) if rows else ():
        try:
            with transaction.atomic():
                ModelWorker.objects.bulk_create(
                    rows,
                    update_conflicts=True,
                    unique_fields=["base_url"],
                    update_fields=["name", "model_name", "role", "source", "state", "updated_at"],
                )
            break
        except IntegrityError:
            # Two processes inserting the same new worker at once: ON CONFLICT arbitrates the
            # base URL only, so the unique name of the other's row can still collide. Again:
            # the committed row is now visible and takes the ON CONFLICT path.
            if attempt == 2:
                raise
    discovered = ModelWorker.objects.filter(source=ModelWorker.Source.DISCOVERED)
    discovered.filter(state=ModelWorker.State.READY).exclude(base_url__in=base_urls).update(
        state=ModelWorker.State.DRAINING, updated_at=now
    )
    discovered.filter(
        state=ModelWorker.State.DRAINING, updated_at__lt=now - timedelta(seconds=drain_after_s)
    ).update(state=ModelWorker.State.STOPPED, healthy=False, updated_at=now)


@transaction.atomic
def worker_register(
    *,
    name: str,
    base_url: str,
    model_name: str,
    role: str = ModelWorker.Role.PRIMARY,
    source: str = ModelWorker.Source.LAUNCHED,
    state: str = ModelWorker.State.STARTING,
    pid: int | None = None,
    log_path: str = "",
) -> ModelWorker:
    """Create or replace the registry row called `name` (a relaunch reuses its name)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} not one of {sorted(ROLES)}")
    ModelWorker.objects.filter(base_url=base_url).exclude(name=name).delete()
    worker, _ = ModelWorker.objects.update_or_create(
        name=name,
        defaults={
            "base_url": base_url.rstrip("/"),
            "model_name": model_name,
            "role": role,
            "source": source,
            "state": state,
            "pid": pid,
            "log_path": log_path,
            "healthy": False,
            "last_health_at": None,
            "last_error": "",
            "last_metrics": {},
            "last_metrics_at": None,
            "breaker_state": "closed",
        },
    )
    return worker


def worker_set_state(
    *, worker_id: int, state: str, pid: int | None | object = ..., error: str | None = None
) -> None:
    """Move a worker to `state` (and optionally change its pid / last error)."""
    fields: dict = {"state": state, "updated_at": timezone.now()}
    if pid is not ...:
        fields["pid"] = pid
    if error is not None:
        fields["last_error"] = error[:500]
    if state in (ModelWorker.State.STOPPED, ModelWorker.State.FAILED):
        fields["healthy"] = False
    ModelWorker.objects.filter(pk=worker_id).update(**fields)


def worker_record_poll(
    *,
    worker_id: int,
    healthy: bool,
    error: str,
    metrics: dict | None,
    breaker_state: str,
) -> None:
    """Store what a poller saw; metrics are kept from the last successful scrape if None."""
    now = timezone.now()
    fields: dict = {
        "healthy": healthy,
        "last_health_at": now,
        "last_error": error[:500],
        "breaker_state": breaker_state,
    }
    if metrics is not None:
        fields["last_metrics"] = metrics
        fields["last_metrics_at"] = now
    ModelWorker.objects.filter(pk=worker_id).update(**fields)


def usage_record(
    *,
    tenant_id: int,
    worker_id: int | None,
    worker_name: str,
    model_name: str,
    role: str,
    outcome: str,
    prompt_tokens: int,
    completion_tokens: int,
    ttft_ms: float | None,
    total_ms: float,
    itl_ms: list[float],
    attempts: int,
    estimated: bool = False,
) -> InferenceUsage:
    """Save one model call's usage (the caller may also store the ChatResult itself);
    `estimated` when the token counts are the gateway's estimate, not the engine's."""
    return InferenceUsage.objects.create(
        tenant_id=tenant_id,
        worker_id=worker_id if ModelWorker.objects.filter(pk=worker_id).exists() else None,
        worker_name=worker_name,
        model_name=model_name,
        role=role,
        outcome=outcome,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        ttft_ms=ttft_ms,
        total_ms=total_ms,
        itl_ms=[round(x, 3) for x in itl_ms],
        attempts=attempts,
        estimated=estimated,
    )
