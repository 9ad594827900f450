"""WebSocket routes of all apps, collected for config.asgi."""

from django.conf import settings

from chat.routing import websocket_urlpatterns as chat_routes
from console.routing import websocket_urlpatterns as console_routes

websocket_urlpatterns: list = [*chat_routes, *console_routes]

if settings.BENCH_ECHO_ENABLED:
    # The benchmark's echo reference (bench/echo.py); never routed unless asked for.
    from bench.echo import websocket_urlpatterns as bench_routes

    websocket_urlpatterns += bench_routes
