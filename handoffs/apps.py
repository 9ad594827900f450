from django.apps import AppConfig
from prometheus_client import REGISTRY


class HandoffsConfig(AppConfig):
    name = "handoffs"

    def ready(self) -> None:
        """Export the handoff queue gauges on `/metrics`."""
        from handoffs import metrics  # models are importable only once apps are ready

        metrics.register(REGISTRY)
