from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """Pages, JSON endpoints and the consumer that agents, approvers and tenant admins use."""

    name = "console"
