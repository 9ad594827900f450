"""The client's address: one rule for HTTP requests and WebSocket handshakes.

The direct peer is the client unless it is one of `TRUSTED_PROXIES` (IPs or CIDRs). From a
trusted peer, X-Forwarded-For is read right to left: every hop a trusted proxy wrote is skipped
and the first hop that is not a trusted proxy is the client. Hops left of it were written by
the client itself and prove nothing. An untrusted peer's X-Forwarded-For is never read. A hop
that is not an IP address (`unknown`, garbage, bad bytes) ends the walk at the last address a
trusted proxy vouched for. Addresses come back in one canonical text form (IPv6 compressed,
IPv4-mapped IPv6 as IPv4), so one client never counts as two because of how it was written.

`request_client_address` (HTTP, `request.META`) and `scope_client_address` (WebSocket, the
ASGI scope) are the only places an address is derived; rate limits, login lockouts, socket
caps and audit events all use them.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address

UNKNOWN = "unknown"
# Set by TrustedProxyMiddleware: the address it derived (REMOTE_ADDR is rewritten to it too).
META_KEY = "supportbot.client_address"
# A forwarded-for header longer than this is cut (a client may pad it; hops we trust are last).
MAX_FORWARDED_FOR_CHARS = 4096


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


@functools.lru_cache(maxsize=8)
def _networks_of(values: tuple[str, ...]) -> tuple[Network, ...]:
    return parse_networks(values)


def trusted_networks() -> tuple[Network, ...]:
    """`settings.TRUSTED_PROXIES`, parsed (cached per value, so tests may change it)."""
    return _networks_of(tuple(getattr(settings, "TRUSTED_PROXIES", ()) or ()))


def parse_address(text: str) -> Address | None:
    """An IP address from a peer or forwarded hop (`1.2.3.4`, `1.2.3.4:56`, `[::1]:56`,
    `"::1"`); None when it is not one."""
    text = text.strip().strip('"').strip()
    if not text or len(text) > 64:
        return None
    if text.startswith("["):  # [v6] or [v6]:port
        end = text.find("]")
        if end < 0:
            return None
        text = text[1:end]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_trusted(address: Address | None, networks: tuple[Network, ...]) -> bool:
    return address is not None and any(address in network for network in networks)


def peer_is_trusted(peer: str) -> bool:
    """Is the direct peer one of `TRUSTED_PROXIES` (so its forwarded headers count)?"""
    return _is_trusted(parse_address(peer or ""), trusted_networks())


def client_address(*, peer: str, forwarded_for: str, networks: tuple[Network, ...]) -> str:
    """The client's address given the direct `peer`, its X-Forwarded-For and the trusted
    proxies (module docstring). Never raises; `unknown` when the peer is not an address."""
    peer_address = parse_address(peer or "")
    if peer_address is None:
        return UNKNOWN
    if not forwarded_for or not _is_trusted(peer_address, networks):
        return str(peer_address)
    address = peer_address
    hops = forwarded_for[-MAX_FORWARDED_FOR_CHARS:].split(",")
    for hop in reversed(hops):
        hop_address = parse_address(hop)
        if hop_address is None:
            if hop.strip():
                break  # garbage: keep the last address a trusted proxy vouched for
            continue
        address = hop_address
        if not _is_trusted(hop_address, networks):
            break
    return str(address)


def request_client_address(request_or_meta) -> str:
    """The client's address of an HTTP request (or its META): what TrustedProxyMiddleware
    derived, else derived here from REMOTE_ADDR and X-Forwarded-For."""
    meta: Mapping = getattr(request_or_meta, "META", request_or_meta)
    derived = meta.get(META_KEY)
    if derived:
        return derived
    return client_address(
        peer=str(meta.get("REMOTE_ADDR") or ""),
        forwarded_for=str(meta.get("HTTP_X_FORWARDED_FOR") or ""),
        networks=trusted_networks(),
    )


def scope_client_address(scope: Mapping) -> str:
    """The client's address of an ASGI connection (a WebSocket handshake): `scope["client"]`
    and the handshake's X-Forwarded-For headers (several are joined, in order)."""
    client = scope.get("client")
    peer = str(client[0]) if client else ""
    forwarded = [
        value.decode("latin-1")
        for name, value in scope.get("headers", ())
        if name.lower() == b"x-forwarded-for"
    ]
    return client_address(peer=peer, forwarded_for=",".join(forwarded), networks=trusted_networks())


def address_truncated(address: str) -> str:
    """The network of `address` that may be stored about a person: IPv4 /24, IPv6 /48
    (`203.0.113.0/24`); `unknown` for anything that is not an address."""
    parsed = parse_address(address or "")
    if parsed is None:
        return UNKNOWN
    prefix = 24 if parsed.version == 4 else 48
    return str(ipaddress.ip_network(f"{parsed}/{prefix}", strict=False))
