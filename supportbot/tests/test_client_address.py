"""The one client-address rule (supportbot.client_address) for HTTP and WebSocket."""

import pytest

from supportbot.client_address import (
    address_truncated,
    client_address,
    parse_networks,
    request_client_address,
    scope_client_address,
)

NETWORKS = parse_networks(["10.0.0.0/8", "2001:db8:ffff::/48"])


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "expected"),
    [
        # An untrusted peer's header is never read, whatever it claims.
        ("203.0.113.9", "198.51.100.1", "203.0.113.9"),
        ("203.0.113.9", "10.0.0.1", "203.0.113.9"),
        # A trusted peer: the right-most hop that is not a trusted proxy.
        ("10.0.0.3", "198.51.100.7", "198.51.100.7"),
        ("10.0.0.3", "1.1.1.1, 198.51.100.7, 10.0.0.2", "198.51.100.7"),
        ("10.0.0.3", "198.51.100.7,10.0.0.9,,10.0.0.2", "198.51.100.7"),
        # Every hop trusted: the left-most one is the best there is.
        ("10.0.0.3", "10.0.0.4, 10.0.0.2", "10.0.0.4"),
        # Garbage ends the walk at the last address a trusted proxy vouched for.
        ("10.0.0.3", "garbage", "10.0.0.3"),
        ("10.0.0.3", "198.51.100.7, unknown, 10.0.0.2", "10.0.0.2"),
        ("10.0.0.3", "198.51.100.7, \x00\xff, 10.0.0.2", "10.0.0.2"),
        ("10.0.0.3", "x" * 100_000, "10.0.0.3"),
        # Ports, brackets and quotes as proxies write them; one canonical form.
        ("10.0.0.3", "198.51.100.7:4711", "198.51.100.7"),
        ("10.0.0.3", '"[2001:DB8:0::1]:4711"', "2001:db8::1"),
        ("10.0.0.3", "::ffff:198.51.100.7", "198.51.100.7"),
        ("2001:db8:ffff::5", "2001:db8::2", "2001:db8::2"),
        ("::ffff:10.0.0.3", "198.51.100.7", "198.51.100.7"),
        # No usable peer at all.
        ("", "198.51.100.7", "unknown"),
        ("not-an-ip", "", "unknown"),
    ],
)
def test_client_address_walks_forwarded_for_past_trusted_proxies_only(
    peer, forwarded_for, expected
):
    assert client_address(peer=peer, forwarded_for=forwarded_for, networks=NETWORKS) == expected


def test_http_and_websocket_derive_the_same_address(settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    meta = {"REMOTE_ADDR": "10.0.0.3", "HTTP_X_FORWARDED_FOR": "1.1.1.1, 198.51.100.7"}
    scope = {
        "client": ["10.0.0.3", 51000],
        "headers": [
            (b"x-forwarded-for", b"1.1.1.1"),
            (b"X-Forwarded-For", b"198.51.100.7"),
            (b"origin", b"http://127.0.0.1:8000"),
        ],
    }
    assert request_client_address(meta) == scope_client_address(scope) == "198.51.100.7"
    settings.TRUSTED_PROXIES = []
    assert request_client_address(meta) == scope_client_address(scope) == "10.0.0.3"
    assert scope_client_address({"headers": []}) == "unknown"  # a unix socket: no client


def test_stored_addresses_are_truncated_to_a_network():
    assert address_truncated("203.0.113.77") == "203.0.113.0/24"
    assert address_truncated("2001:db8:1:2:3::9") == "2001:db8:1::/48"
    assert address_truncated("garbage") == "unknown"
