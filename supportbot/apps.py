from django.apps import AppConfig


class SupportbotConfig(AppConfig):
    name = "supportbot"
    verbose_name = "Tenancy"
