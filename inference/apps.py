from django.apps import AppConfig


class InferenceConfig(AppConfig):
    name = "inference"

    def ready(self) -> None:
        """Register the system checks."""
        from inference import checks  # noqa: F401 - models are importable only once apps are ready
