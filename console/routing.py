from channels.security.websocket import AllowedHostsOriginValidator
from django.urls import re_path

from console.consumers import ConsoleConsumer

# Only pages of this product (Origin host in ALLOWED_HOSTS) may open the console channel.
websocket_urlpatterns = [
    re_path(r"^ws/console/$", AllowedHostsOriginValidator(ConsoleConsumer.as_asgi()))
]
