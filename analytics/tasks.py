"""Background jobs of analytics (django-q2 schedules: analytics/migrations). Each is safe to
run twice: outcomes are decided once per conversation (again only if it went on), rollups are
upserts of the same values."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from analytics import selectors, services


def outcomes_sweep_task() -> dict[str, int]:
    """Decide idle conversations' outcomes and close ended windows (every 5 minutes)."""
    return services.outcomes_sweep()


def rollups_recent_task() -> dict[str, int]:
    """Recompute every active tenant's rollups of the last ANALYTICS_ROLLUP_DAYS_BACK days
    and today (hourly): outcomes change until their window closes."""
    today = timezone.now().date()
    since = today - timedelta(days=settings.ANALYTICS_ROLLUP_DAYS_BACK)
    return {
        tenant.slug: services.rollups_compute(tenant_id=tenant.pk, since=since, until=today)
        for tenant in selectors.tenants_active()
    }
