"""The stored daily rollups (what pages and the API will read)."""

from __future__ import annotations

from datetime import date

from django.db.models import QuerySet

from analytics.models import DailyRollup
from supportbot.models import Tenant


def rollup_list(*, tenant: Tenant, since: date, until: date) -> QuerySet[DailyRollup]:
    return DailyRollup.objects.filter(tenant=tenant, day__gte=since, day__lte=until).order_by("day")
