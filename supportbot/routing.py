"""WebSocket routes of all apps, collected for supportbot.asgi."""

from conversations.routing import websocket_urlpatterns as chat_routes
from handoffs.routing import websocket_urlpatterns as console_routes

websocket_urlpatterns: list = [*chat_routes, *console_routes]
