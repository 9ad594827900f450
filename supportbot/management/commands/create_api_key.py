from django.core.management.base import BaseCommand, CommandError

from supportbot.errors import ApplicationError
from supportbot.models import Tenant
from supportbot.services import Actor, api_key_create


class Command(BaseCommand):
    help = "Create a partner API key for a tenant and print it (shown only this once)."

    def add_arguments(self, parser):
        parser.add_argument("tenant_slug")
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--agent-documents",
            action="store_true",
            help="The key may also search agents-only documents.",
        )
        parser.add_argument(
            "--segments",
            default="",
            help="Comma-separated customer segments the key may search (besides public).",
        )

    def handle(self, *args, tenant_slug: str, name: str, **options):
        tenant = Tenant.objects.filter(slug=tenant_slug).first()
        if tenant is None:
            raise CommandError(f"No tenant with slug {tenant_slug!r}.")
        try:
            _, raw = api_key_create(
                tenant=tenant,
                name=name,
                actor=Actor.system("create_api_key"),
                may_search_agent_documents=options["agent_documents"],
                search_segments=options["segments"].split(","),
            )
        except ApplicationError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(raw)
