"""Rotate encryption keys without downtime (see docs/security.md)."""

from django.core.management.base import BaseCommand, CommandError

from supportbot import encryption
from supportbot.models import Tenant


class Command(BaseCommand):
    help = (
        "Re-wrap every tenant data key under the current master key (the first of "
        "ENCRYPTION_MASTER_KEYS; keep the old one listed until this has run everywhere). With "
        "--new-data-keys, also give tenants a new data key and re-seal their rows in batches."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--new-data-keys",
            action="store_true",
            help="Retire each tenant's data key, create a new one and re-seal rows under it.",
        )
        parser.add_argument("--tenant", help="Only this tenant (slug) for --new-data-keys.")
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, new_data_keys=False, tenant=None, batch_size=500, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        try:
            rewrapped = encryption.data_keys_rewrap(batch_size=batch_size)
        except encryption.DecryptionError as exc:
            raise CommandError(str(exc)) from exc
        master_id, _ = encryption.current_master()
        self.stdout.write(f"re-wrapped {rewrapped} data key(s) under master key {master_id}")
        if not new_data_keys:
            return
        tenants = Tenant.objects.all()
        if tenant:
            tenants = tenants.filter(slug=tenant)
            if not tenants.exists():
                raise CommandError(f"No tenant {tenant!r}.")
        for t in tenants.order_by("pk"):
            row = encryption.data_key_create(tenant_id=t.pk, retire_current=True)
            encryption.clear_cache()
            report = encryption.rows_reseal(tenant_id=t.pk, batch_size=batch_size)
            total = sum(report.values())
            self.stdout.write(f"{t.slug}: new data key {row.key_id}, re-sealed {total} row(s)")
