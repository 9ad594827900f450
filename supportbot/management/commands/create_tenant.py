from django.core.management.base import BaseCommand, CommandError

from supportbot.errors import ApplicationError
from supportbot.services import Actor, tenant_create


class Command(BaseCommand):
    help = "Create a tenant and print its id."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", required=True)

    def handle(self, *args, slug: str, name: str, **options):
        try:
            tenant = tenant_create(slug=slug, name=name, actor=Actor.system("create_tenant"))
        except ApplicationError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(str(tenant.pk))
