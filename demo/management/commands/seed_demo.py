from django.core.management.base import BaseCommand

from demo.seed import DEMO_SLUG, seed_all


class Command(BaseCommand):
    help = "Create (idempotently) the demo tenant 'acme' with admin and agent logins."

    def handle(self, *args, **options):
        logins = seed_all(stdout=self.stdout)
        self.stdout.write(f"Demo tenant '{DEMO_SLUG}' is ready. Logins:")
        for login in logins:
            self.stdout.write(f"  {login.role:<6} {login.username} / {login.password}")
