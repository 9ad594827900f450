from django.apps import AppConfig


class EvalsConfig(AppConfig):
    """Evaluation runners, saved suites and injection worlds (off the product's import graph)."""

    name = "evals"
