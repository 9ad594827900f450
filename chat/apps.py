from django.apps import AppConfig


class ChatConfig(AppConfig):
    """The request path: orchestrator, chat consumer, partner chat REST + SSE, chat page."""

    name = "chat"
