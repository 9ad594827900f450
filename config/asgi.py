"""ASGI entry point: HTTP through Django, WebSockets through Channels (served by daphne)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from inference.asgi import PoolPollerMiddleware  # noqa: E402
from knowledge import warmup  # noqa: E402

# Origins are checked per route: the console accepts only our own hosts at the handshake
# (console.routing); the customer chat checks the tenant's allowed origins at session.start.
application = ProtocolTypeRouter(
    {
        "http": PoolPollerMiddleware(django_asgi_app),
        "websocket": AuthMiddlewareStack(URLRouter(websocket_urlpatterns)),
    }
)
# Load the embedding model now, not on the first customer's message (`/readyz` waits for it).
warmup.start()
