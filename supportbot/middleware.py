"""Forwarded headers (X-Forwarded-For/-Proto) from configured proxies only."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.deprecation import MiddlewareMixin

# Headers a client could send to pose as someone else or as HTTPS.
FORWARDED_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_REAL_IP",
    "HTTP_FORWARDED",
)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """IPs or CIDRs (`10.0.0.0/8`, `::1`); a bad entry is an ImproperlyConfigured error."""
    networks = []
    for value in values:
        value = value.strip()
        if not value:
            continue
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"TRUSTED_PROXIES: {value!r} is not an IP address or CIDR network."
            ) from exc
    return tuple(networks)


def _is_trusted(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(*, peer: str, forwarded_for: str, networks: tuple[Network, ...]) -> str:
    """The client's address: the right-most X-Forwarded-For entry that is not a trusted proxy.

    Entries left of the first untrusted one were written by the client and prove nothing.
    """
    address = peer
    for hop in reversed([h.strip() for h in forwarded_for.split(",") if h.strip()]):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            break  # garbage: stop at the last address a trusted proxy vouched for
        address = hop
        if not _is_trusted(hop, networks):
            break
    return address


class TrustedProxyMiddleware(MiddlewareMixin):
    """Honour X-Forwarded-For/-Proto only when the direct peer is in `TRUSTED_PROXIES`.

    From a trusted peer REMOTE_ADDR becomes the client's address and X-Forwarded-Proto stays
    for `SECURE_PROXY_SSL_HEADER`; from anyone else every forwarded header is dropped, so
    `request.is_secure()` and REMOTE_ADDR describe the real connection. Must run first.
    """

    def __init__(self, get_response):
        super().__init__(get_response)
        self.networks = parse_networks(getattr(settings, "TRUSTED_PROXIES", ()))

    def process_request(self, request) -> None:
        meta = request.META
        peer = meta.get("REMOTE_ADDR", "")
        if self.networks and _is_trusted(peer, self.networks):
            forwarded_for = meta.get("HTTP_X_FORWARDED_FOR", "")
            if forwarded_for:
                meta["REMOTE_ADDR"] = client_address(
                    peer=peer, forwarded_for=forwarded_for, networks=self.networks
                )
        else:
            for header in FORWARDED_HEADERS:
                meta.pop(header, None)
