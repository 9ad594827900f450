"""Backfill daily rollups: `manage.py analytics_rollup --since 2026-11-01 [--tenant acme]`."""

from __future__ import annotations

from datetime import date

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from analytics import selectors, services
from supportbot.models import Tenant


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise CommandError(f"{value!r} is not a date (YYYY-MM-DD).") from exc


class Command(BaseCommand):
    help = "Compute (again) the daily rollups from --since to --until (default: today, UTC)."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, type=_day)
        parser.add_argument("--until", type=_day, default=None)
        parser.add_argument("--tenant", help="One tenant's slug (default: every active tenant).")

    def handle(self, *args, since: date, until: date | None, tenant: str | None, **options):
        until = until or timezone.now().date()
        if until < since:
            raise CommandError("--until is before --since.")
        if tenant:
            tenants = list(Tenant.objects.filter(slug=tenant))
            if not tenants:
                raise CommandError(f"No tenant {tenant!r}.")
        else:
            tenants = selectors.tenants_active()
        for t in tenants:
            days = services.rollups_compute(tenant_id=t.pk, since=since, until=until)
            self.stdout.write(f"{t.slug}: {days} days from {since} to {until}")
