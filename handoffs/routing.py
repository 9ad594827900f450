from django.urls import re_path

from handoffs.consumers import ConsoleConsumer

websocket_urlpatterns = [re_path(r"^ws/console/$", ConsoleConsumer.as_asgi())]
