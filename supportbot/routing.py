"""WebSocket routes of all apps, collected for supportbot.asgi."""

websocket_urlpatterns: list = []
