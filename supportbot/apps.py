from django.apps import AppConfig


class SupportbotConfig(AppConfig):
    name = "supportbot"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        from supportbot import (
            schema,  # noqa: F401 - registers the API key's OpenAPI scheme
            signals,  # noqa: F401 - audits login attempts
        )
