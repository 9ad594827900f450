"""The product's ASGI application with the benchmark's echo route (`/ws/bench-echo/`) in front.

`python -m bench.chat_load` serves this (`ASGI_APPLICATION_PATH=bench.asgi:application` for
scripts/run.sh): the echo floor runs on the same daphne as the product, and the product's own
wiring (config/) never imports the benchmark.
"""

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter

from bench.echo import websocket_urlpatterns as echo_routes
from config import asgi as product
from config.routing import websocket_urlpatterns

application = ProtocolTypeRouter(
    {
        "http": product.application.application_mapping["http"],
        "websocket": AuthMiddlewareStack(URLRouter([*echo_routes, *websocket_urlpatterns])),
    }
)
