from django.apps import AppConfig


class SupportbotConfig(AppConfig):
    name = "supportbot"
    verbose_name = "Tenancy"

    def ready(self) -> None:
        from supportbot import db_fork

        db_fork.install()  # a forked q2 worker never shares the parent's database connections
        from supportbot import (
            schema,  # noqa: F401 - registers the API key's OpenAPI scheme
            signals,  # noqa: F401 - audits login attempts
        )
        from supportbot.observability import tasks, tracing  # noqa: F401 - q2 signal receivers

        tracing.configure_from_env()
