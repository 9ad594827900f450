"""Handoff queue gauges, read from the database when `/metrics` is scraped."""

from __future__ import annotations

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from handoffs.models import Handoff

WAITING = (Handoff.State.REQUESTED, Handoff.State.QUEUED)


class HandoffQueueCollector:
    """`supportbot_handoff_queue_depth` and `supportbot_handoff_queue_oldest_age_seconds`
    over every tenant (the same figures from every web process: alert on max, not sum)."""

    def describe(self):
        """The families without a query (registration must not touch the database)."""
        return list(_families())

    def collect(self):
        depth, oldest = _families()
        try:
            row = Handoff.objects.filter(state__in=WAITING).aggregate(
                n=Count("id"), first=Min("created_at")
            )
        except Exception:  # noqa: BLE001 - a scrape never fails on the database; gauges absent
            return
        depth.add_metric([], float(row["n"]))
        age = (timezone.now() - row["first"]).total_seconds() if row["first"] else 0.0
        oldest.add_metric([], max(0.0, age))
        yield from (depth, oldest)


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    depth = GaugeMetricFamily(
        "supportbot_handoff_queue_depth", "Handoffs waiting for an agent (all tenants)."
    )
    oldest = GaugeMetricFamily(
        "supportbot_handoff_queue_oldest_age_seconds",
        "Age of the oldest handoff waiting for an agent (0 when none waits).",
    )
    return depth, oldest


_registered = False


def register(registry) -> None:
    """Add the collector to `registry` once per process."""
    global _registered
    if not _registered:
        registry.register(HandoffQueueCollector())
        _registered = True
