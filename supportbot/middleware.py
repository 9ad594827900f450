"""Forwarded headers (X-Forwarded-For/-Proto) from configured proxies only."""

from __future__ import annotations

from django.utils.deprecation import MiddlewareMixin

from supportbot import client_address
from supportbot.client_address import parse_networks

__all__ = ["FORWARDED_HEADERS", "TrustedProxyMiddleware", "parse_networks"]

# Headers a client could send to pose as someone else or as HTTPS.
FORWARDED_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_REAL_IP",
    "HTTP_FORWARDED",
)


class TrustedProxyMiddleware(MiddlewareMixin):
    """Honour X-Forwarded-For/-Proto only when the direct peer is in `TRUSTED_PROXIES`.

    REMOTE_ADDR becomes the client's address (`supportbot.client_address`, the one rule shared
    with WebSockets) and X-Forwarded-Proto from a trusted peer stays for
    `SECURE_PROXY_SSL_HEADER`; from anyone else every forwarded header is dropped, so
    `request.is_secure()` and REMOTE_ADDR describe the real connection. Must run first.
    """

    def process_request(self, request) -> None:
        meta = request.META
        trusted = client_address.peer_is_trusted(str(meta.get("REMOTE_ADDR") or ""))
        address = client_address.request_client_address(meta)
        meta[client_address.META_KEY] = address
        if address != client_address.UNKNOWN:
            meta["REMOTE_ADDR"] = address
        if not trusted:
            for header in FORWARDED_HEADERS:
                meta.pop(header, None)
