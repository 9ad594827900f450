"""`manage.py injection_report [--out docs/reports/prompt-injection.md]`."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evals.injection import injection_report


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Run the prompt-injection corpus through the chat path and write the report."

    def add_arguments(self, parser):
        parser.add_argument("--out", default="docs/reports/prompt-injection.md")

    def handle(self, *args, out: str, **options):
        path = Path(out)
        results = []
        try:
            with transaction.atomic():  # the scratch tenants and their rows are rolled back
                results = injection_report(path)
                raise _Rollback
        except _Rollback:
            pass
        violations = sum(len(r.violations) for r in results)
        self.stdout.write(f"{len(results)} cases, {violations} violations -> {path}")
        if violations:
            raise CommandError(f"{violations} prompt-injection violations; see {path}")
