from django.apps import AppConfig


class HandoffsConfig(AppConfig):
    name = "handoffs"
