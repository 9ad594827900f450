from django.core.management.base import BaseCommand, CommandError

from supportbot.errors import ApplicationError
from supportbot.models import ApiKey
from supportbot.services import Actor, api_key_revoke


class Command(BaseCommand):
    help = "Revoke a partner API key by its prefix (the 8 characters after 'sb_')."

    def add_arguments(self, parser):
        parser.add_argument("prefix")

    def handle(self, *args, prefix: str, **options):
        key = ApiKey.objects.select_related("tenant").filter(prefix=prefix).first()
        if key is None:
            raise CommandError(f"No API key with prefix {prefix!r}.")
        try:
            api_key_revoke(tenant=key.tenant, key_id=key.pk, actor=Actor.system("revoke_api_key"))
        except ApplicationError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"revoked {prefix}")
