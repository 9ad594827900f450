from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"

    def ready(self) -> None:
        from knowledge import warmup
        from supportbot import health

        health.readiness_check_register("embeddings", warmup.readiness)
