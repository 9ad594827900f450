"""WebSocket routes of all apps, collected for config.asgi."""

from chat.routing import websocket_urlpatterns as chat_routes
from console.routing import websocket_urlpatterns as console_routes

websocket_urlpatterns: list = [*chat_routes, *console_routes]
