"""Show, start or stop the embedded PostgreSQL and Valkey (no-op for external URLs)."""

from django.conf import settings
from django.core.management.base import BaseCommand

from supportbot import devservices


class Command(BaseCommand):
    help = (
        "Manage the embedded services: status (default), start or stop. `start` also writes "
        "the development keys under var/ (once) and grants the runtime database role."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "action", nargs="?", default="status", choices=["status", "start", "stop"]
        )

    def handle(self, *args, action: str, **options):
        if action == "stop":
            stopped = devservices.services_stop()
            for name, was_running in stopped.items():
                self.stdout.write(f"{name}: {'stopped' if was_running else 'was not running'}")
            return
        if action == "start":
            self._start()
        embedded = {"postgres": settings.EMBEDDED_POSTGRES, "valkey": settings.EMBEDDED_REDIS}
        for status in devservices.services_status():
            if not embedded[status.name]:
                self.stdout.write(f"{status.name}: external (from environment), not embedded")
                continue
            state = "running" if status.running else "stopped"
            self.stdout.write(
                f"{status.name}: {state} pid={status.pid or '-'} data={status.data_dir} "
                f"url={status.url or '-'}"
            )

    def _start(self) -> None:
        """Start what settings name as embedded; write dev keys; grant the runtime role."""
        devservices.services_start(
            postgres=settings.EMBEDDED_POSTGRES,
            valkey=settings.EMBEDDED_REDIS,
            dev_files=not settings.PRODUCTION,
        )
        if settings.EMBEDDED_POSTGRES:
            # Re-run after migrations (scripts/run.sh does): the audit trail's table must
            # exist for its UPDATE/DELETE to be revoked from the runtime role.
            devservices.postgres_app_role_grant()
