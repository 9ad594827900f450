"""Limits behind a real reverse proxy: a daphne process of the test stack with
`TRUSTED_PROXIES=127.0.0.1`, and in front of it a proxy that appends each client's address to
X-Forwarded-For (`supportbot/tests/forwarding_proxy.py`, what nginx's shipped config does).
Clients connect from different loopback addresses, so each is a different forwarded client:
each gets its own buckets (anonymous sessions, sockets, login lockout), and what a client
writes into X-Forwarded-For itself, through the proxy or straight to daphne, buys it nothing.
"""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from supportbot.models import LoginFailure
from supportbot.tests.factories import MembershipFactory
from supportbot.tests.forwarding_proxy import ForwardingProxy
from supportbot.tests.webprocs import start_web

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

PASSWORD = "pw-for-test-only-123"
# Ten forwarded clients: Linux routes all of 127/8 to loopback.
CLIENTS = [f"127.0.0.{n}" for n in range(2, 12)]
ORIGIN = "http://127.0.0.1:8000"


@pytest.fixture
def behind_proxy(tmp_path, tenant, strict_limits):
    """(daphne port, proxy port): the stack trusts only the proxy's address, 127.0.0.1."""
    strict_limits()  # no counter or lock left in the shared Redis by earlier tests
    (web,) = start_web(
        tmp_path,
        count=1,
        env={
            "TRUSTED_PROXIES": "127.0.0.1",
            "RATE_LIMIT_SESSION_ANONYMOUS": "2/600",
            "RATE_LIMIT_LOGIN_USER": "3/900",
            "CHAT_SOCKETS_PER_IP": "3",
            "EMBEDDINGS_WARMUP": "0",
        },
    )
    try:
        daphne_port = int(web.url.rsplit(":", 1)[1])
        with ForwardingProxy(daphne_port) as proxy:
            yield daphne_port, proxy.port
    finally:
        web.stop()


async def _session_start(port: int, tenant_slug: str, *, source: str, xff: str = "") -> str:
    """A chat socket to `port` from address `source` starting an anonymous session: the type
    of the reply (`session.ready` or `rate_limited`)."""
    async with connect(
        f"ws://127.0.0.1:{port}/ws/chat/",
        origin=ORIGIN,
        additional_headers={"X-Forwarded-For": xff} if xff else None,
        local_addr=(source, 0),
        open_timeout=30,
    ) as ws:
        await ws.send(json.dumps({"type": "session.start", "tenant": tenant_slug}))
        return json.loads(await asyncio.wait_for(ws.recv(), 60))["type"]


def test_each_forwarded_client_gets_its_own_anonymous_session_bucket(behind_proxy, tenant):
    _, proxy_port = behind_proxy

    async def scenario() -> tuple[list[str], list[str]]:
        # Twenty new chats at once, two per client: each client is within its own limit.
        first = await asyncio.gather(
            *(_session_start(proxy_port, tenant.slug, source=c) for c in CLIENTS for _ in "ab")
        )
        # A third for every client: each client's own bucket is full, nobody else's counts.
        third = await asyncio.gather(
            *(_session_start(proxy_port, tenant.slug, source=c) for c in CLIENTS)
        )
        return first, third

    first, third = asyncio.run(scenario())
    assert first == ["session.ready"] * 20
    assert third == ["rate_limited"] * 10


def test_a_forwarded_for_written_by_the_client_buys_no_new_bucket(behind_proxy, tenant):
    daphne_port, proxy_port = behind_proxy

    async def scenario() -> tuple[list[str], list[str]]:
        # Straight to daphne: the peer 127.0.0.30 is no trusted proxy, its header is ignored.
        direct = [
            await _session_start(
                daphne_port, tenant.slug, source="127.0.0.30", xff=f"198.51.100.{n}"
            )
            for n in range(3)
        ]
        # Through the proxy: what the client prepended sits left of the address the proxy saw.
        proxied = [
            await _session_start(
                proxy_port, tenant.slug, source="127.0.0.31", xff=f"203.0.113.{n}, 127.0.0.1"
            )
            for n in range(3)
        ]
        return direct, proxied

    direct, proxied = asyncio.run(scenario())
    assert direct == ["session.ready", "session.ready", "rate_limited"]
    assert proxied == ["session.ready", "session.ready", "rate_limited"]


def test_the_socket_cap_counts_each_forwarded_client_apart(behind_proxy, tenant):
    _, proxy_port = behind_proxy
    url = f"ws://127.0.0.1:{proxy_port}/ws/chat/"

    async def scenario() -> tuple[int, list[int], bool, bool]:
        barrier = asyncio.Barrier(6)

        async def open_one(source: str):
            await barrier.wait()  # all six handshakes race for the three places
            try:
                return await connect(url, origin=ORIGIN, local_addr=(source, 0), open_timeout=30)
            except InvalidStatus as exc:
                return exc.response.status_code

        results = await asyncio.gather(*(open_one("127.0.0.50") for _ in range(6)))
        held = [r for r in results if not isinstance(r, int)]
        refused = [r for r in results if isinstance(r, int)]
        # Another client behind the same proxy is not affected.
        other = await connect(url, origin=ORIGIN, local_addr=("127.0.0.51", 0), open_timeout=30)
        other_open = other.state.name == "OPEN"
        await other.close()
        # A closed socket gives its place back.
        await held[0].close()
        again = await connect(url, origin=ORIGIN, local_addr=("127.0.0.50", 0), open_timeout=30)
        again_open = again.state.name == "OPEN"
        for ws in [*held[1:], again]:
            await ws.close()
        return len(held), refused, other_open, again_open

    held, refused, other_open, again_open = asyncio.run(scenario())
    assert held == 3
    assert refused == [403, 403, 403]
    assert other_open
    assert again_open


def _login_client(proxy_port: int, source: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"http://127.0.0.1:{proxy_port}",
        transport=httpx.HTTPTransport(local_address=source),
        timeout=30,
    )


def _login(client: httpx.Client, username: str, password: str) -> int:
    page = client.get("/console/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    r = client.post(
        "/console/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
    )
    return r.status_code


def test_a_stranger_behind_the_proxy_locks_only_his_own_address(behind_proxy, tenant):
    _, proxy_port = behind_proxy
    user = MembershipFactory(tenant=tenant, role="agent").user
    user.set_password(PASSWORD)
    user.save()
    with _login_client(proxy_port, "127.0.0.60") as stranger:
        codes = [_login(stranger, user.username, f"guess-{n}") for n in range(5)]
        assert codes == [200, 200, 200, 200, 429]
        assert _login(stranger, user.username, PASSWORD) == 429  # locked: password unseen
    with _login_client(proxy_port, "127.0.0.61") as owner:
        assert _login(owner, user.username, PASSWORD) == 302
    failures = list(LoginFailure.objects.filter(user=user))
    assert len(failures) == 4
    assert {f.network for f in failures} == {"127.0.0.0/24"}
