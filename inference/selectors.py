"""Reads: the worker registry, pool availability and usage summaries for the ops page."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connections
from django.db.models import Count, Q, Sum
from django.utils import timezone

from inference.models import InferenceUsage, ModelWorker
from supportbot import replicas


def worker_list() -> list[ModelWorker]:
    return list(ModelWorker.objects.order_by("name"))


def worker_get(*, name: str) -> ModelWorker | None:
    return ModelWorker.objects.filter(name=name).first()


def workers_active() -> list[ModelWorker]:
    """Rows the pool polls: everything not stopped or failed (starting ones are not routed)."""
    return list(
        ModelWorker.objects.exclude(
            state__in=[ModelWorker.State.STOPPED, ModelWorker.State.FAILED]
        ).order_by("name")
    )


def pool_has_healthy_worker(*, fresh_within_s: float) -> bool:
    """A ready worker some poller saw healthy within `fresh_within_s` seconds."""
    since = timezone.now() - timedelta(seconds=fresh_within_s)
    return ModelWorker.objects.filter(
        state=ModelWorker.State.READY, healthy=True, last_health_at__gte=since
    ).exists()


@replicas.stale_tolerant
def usage_by_tenant(*, since: datetime) -> list[dict]:
    """Model calls and tokens per tenant since `since` (cancelled and failed calls included,
    also counted apart), busiest first (analytics: the read replica when configured)."""
    rows = (
        InferenceUsage.objects.filter(created_at__gte=since)
        .values("tenant_id", "tenant__slug")
        .annotate(
            requests=Count("id"),
            cancelled=Count("id", filter=Q(outcome=InferenceUsage.Outcome.CANCELLED)),
            failed=Count(
                "id",
                filter=Q(
                    outcome__in=[InferenceUsage.Outcome.ERROR, InferenceUsage.Outcome.STREAM_BROKEN]
                ),
            ),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
        )
        .order_by("-requests")
    )
    return [
        {
            "tenant_id": r["tenant_id"],
            "tenant": r["tenant__slug"],
            "requests": r["requests"],
            "cancelled": r["cancelled"],
            "failed": r["failed"],
            "prompt_tokens": r["prompt_tokens"] or 0,
            "completion_tokens": r["completion_tokens"] or 0,
        }
        for r in rows
    ]


@replicas.stale_tolerant
def router_latency_percentiles(*, since: datetime) -> dict[str, dict[str, float | None]]:
    """Gateway-measured TTFT and inter-token latency p50/p95 (ms) per worker since `since`."""
    table = InferenceUsage._meta.db_table
    sql = f"""
        SELECT u.worker_name,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY u.ttft_ms),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY u.ttft_ms),
               (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x)
                  FROM {table} v, unnest(v.itl_ms) x
                 WHERE v.worker_name = u.worker_name AND v.created_at >= %s),
               (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY x)
                  FROM {table} v, unnest(v.itl_ms) x
                 WHERE v.worker_name = u.worker_name AND v.created_at >= %s),
               count(*)
          FROM {table} u
         WHERE u.created_at >= %s
         GROUP BY u.worker_name
    """  # noqa: S608 - the table name is ours, values are parameters
    with connections[replicas.read_alias()].cursor() as cursor:
        cursor.execute(sql, [since, since, since])
        rows = cursor.fetchall()
    return {
        name: {
            "ttft_p50_ms": ttft50,
            "ttft_p95_ms": ttft95,
            "itl_p50_ms": itl50,
            "itl_p95_ms": itl95,
            "requests": n,
        }
        for name, ttft50, ttft95, itl50, itl95, n in rows
    }


def ops_snapshot(*, stale_after_s: float, window: timedelta = timedelta(minutes=15)) -> dict:
    """Everything the ops page shows: workers (registry + last poll), router-side latency
    percentiles and per-tenant usage over `window`."""
    now = timezone.now()
    since = now - window
    router_side = router_latency_percentiles(since=since)
    workers = []
    for w in worker_list():
        m = w.last_metrics or {}
        age = (now - w.last_metrics_at).total_seconds() if w.last_metrics_at else None
        health_age = (now - w.last_health_at).total_seconds() if w.last_health_at else None
        stale = age is None or age > stale_after_s
        if w.state != ModelWorker.State.READY:
            status = w.state
        elif health_age is None or health_age > stale_after_s:
            status = "unknown"
        else:
            status = "up" if w.healthy else "down"
        workers.append(
            {
                "name": w.name,
                "role": w.role,
                "source": w.source,
                "state": w.state,
                "status": status,
                "base_url": w.base_url,
                "model": w.model_name,
                "breaker": w.breaker_state,
                "metrics_age_s": None if age is None else round(age, 1),
                "stale": stale,
                "running": m.get("running"),
                "waiting": m.get("waiting"),
                "kv_cache_usage": m.get("kv_cache_usage"),
                "prefix_cache_hit_rate": m.get("prefix_cache_hit_rate"),
                "tokens_per_s": m.get("tokens_per_s"),
                "engine": m.get("engine_window") or {},
                "router": router_side.get(w.name, {}),
                "last_error": w.last_error if status != "up" else "",
            }
        )
    return {
        "generated_at": now.isoformat(),
        "window_s": window.total_seconds(),
        "workers": workers,
        "tenants": usage_by_tenant(since=since),
    }
