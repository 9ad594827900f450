"""Recompute stored blind indexes under the newest key of BLIND_INDEX_KEYS."""

from django.core.management.base import BaseCommand, CommandError

from actions import services
from supportbot import encryption


class Command(BaseCommand):
    help = (
        "Recompute every stored blind index under the newest key of BLIND_INDEX_KEYS (the "
        "first), in batches; safe to run again. Run it after adding a new key first, before "
        "dropping the old one (docs/data-protection.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)

    def handle(self, *args, batch_size=500, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        try:
            orders = services.order_keys_rekey(batch_size=batch_size)
        except encryption.DecryptionError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"order keys of action requests: {orders} re-computed")
