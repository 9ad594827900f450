"""`manage.py injection_report --orders-url URL --orders-token TOKEN [--out PATH]`.

The order system is the reference order service (`demo/orders`; `make run` starts it on port
8090, its token is in var/orders/token): tenant A of the corpus is connected to it, and its
request log shows whether a refund reached it.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evals.injection import OrderSystem, injection_report
from evals.injection.run import model_worker_retire


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Run the prompt-injection corpus through the chat path and write the report."

    def add_arguments(self, parser):
        parser.add_argument("--out", default="docs/reports/prompt-injection.md")
        parser.add_argument("--orders-url", required=True)
        parser.add_argument("--orders-token", required=True)

    def handle(self, *args, out: str, orders_url: str, orders_token: str, **options):
        path = Path(out)
        run = None
        try:
            with transaction.atomic():  # the scratch tenants and their rows are rolled back
                run = injection_report(path, orders=OrderSystem(orders_url, orders_token))
                raise _Rollback
        except _Rollback:
            pass
        finally:
            if run is not None:
                model_worker_retire(run.model_url)
        violations = sum(len(r.violations) for r in run.results)
        self.stdout.write(f"{len(run.results)} cases, {violations} violations -> {path}")
        if violations or run.refund_requests:
            raise CommandError(f"{violations} prompt-injection violations; see {path}")
