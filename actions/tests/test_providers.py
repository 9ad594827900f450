"""The order provider's HTTP calls on the process loop, one shared client per order system
(actions/providers.py), against the reference order service or a recording transport."""

import asyncio
import threading
import time

import httpx
import pytest
from asgiref.sync import sync_to_async

from actions import providers
from actions.providers import OrderProvider, ProviderRejected, ProviderSettings, ProviderUnknown
from actions.services.config import provider_for
from actions.tests.shop import shop_connect
from supportbot import eventloop


@pytest.fixture
def fresh_clients(monkeypatch):
    """No shared client left by an earlier test; count the clients made from here on."""
    monkeypatch.setattr(providers, "_clients", {})
    made = []

    class Counted(httpx.AsyncClient):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(httpx, "AsyncClient", Counted)
    return made


def _provider(orders, *, token=None, timeout=2.0, transport=None):
    cfg = ProviderSettings(
        base_url=orders.url if hasattr(orders, "url") else orders,
        token=orders.token if token is None else token,
        timeout_seconds=timeout,
    )
    return OrderProvider(cfg, transport=transport)


def test_one_client_serves_every_call_and_every_context_of_a_tenant(fresh_clients, tenant, orders):
    shop_connect(tenant, orders, timeout_seconds=2.0)
    with provider_for(tenant) as provider:
        assert provider.get_order("A-1042")["id"] == "A-1042"
        assert provider.find_refund(idempotency_key="none-yet") is None
    with provider_for(tenant) as provider:
        assert provider.get_order("A-1043")["id"] == "A-1043"

    assert len(fresh_clients) == 1
    (loop, client), *others = providers._clients.values()
    assert not others
    assert client is fresh_clients[0]
    assert loop is eventloop.process_loop()
    assert not client.is_closed


def test_tenants_sharing_an_order_system_each_send_only_their_own_token(fresh_clients):
    seen = []

    def handler(request):
        seen.append((request.headers.get("authorization"), request.headers.get("cookie")))
        return httpx.Response(
            200,
            json={"results": []},
            headers={"set-cookie": "session=tenant-secret; Path=/"},
        )

    transport = httpx.MockTransport(handler)
    for _ in range(2):
        for token in ("token-a", "token-b"):
            with _provider("http://orders.test", token=token, transport=transport) as provider:
                provider.find_refund(idempotency_key="k")

    assert len(fresh_clients) == 1  # one client, yet every request carries its own token only
    assert seen == [(f"Bearer {t}", None) for t in ("token-a", "token-b") * 2]


def test_a_wrong_token_is_refused_even_after_a_good_one_used_the_shared_client(orders):
    with _provider(orders) as good:
        assert good.get_order("A-1042")["id"] == "A-1042"
    with _provider(orders, token="not-the-token") as bad, pytest.raises(ProviderRejected) as exc:
        bad.get_order("A-1042")
    assert exc.value.status == 401
    with _provider(orders) as good:
        assert good.get_order("A-1042")["id"] == "A-1042"


def test_a_provider_hanging_past_the_timeout_is_unknown_and_the_loop_keeps_serving(orders):
    orders.set_faults(latency_ms=3000)
    started = time.monotonic()
    with _provider(orders, timeout=0.3) as provider, pytest.raises(ProviderUnknown) as exc:
        provider.get_order("A-1042")
    assert "timed out" in str(exc.value)
    assert time.monotonic() - started < 2.5

    orders.set_faults()
    with _provider(orders, timeout=2.0) as provider:
        assert provider.get_order("A-1042")["id"] == "A-1042"
    assert eventloop.run(asyncio.sleep(0, result="served"), timeout=2) == "served"


def test_calls_from_eight_threads_at_once_all_complete_side_by_side(orders):
    orders.set_faults(latency_ms=600)
    results = [None] * 8

    def call(i):
        with _provider(orders, timeout=5.0) as provider:
            results[i] = provider.get_order("A-1042")["id"]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    elapsed = time.monotonic() - started

    assert results == ["A-1042"] * 8
    assert elapsed < 8 * 0.6 / 2  # side by side on the loop, not one after another


def test_a_coroutine_on_the_process_loop_reaches_the_provider_through_a_sync_thread(orders):
    def check():
        with _provider(orders) as provider:
            return provider.get_order("A-1042")["id"]

    async def turn():  # as the orchestrator does: services run via sync_to_async
        return await sync_to_async(check, thread_sensitive=True)()

    assert eventloop.run(turn(), timeout=10) == "A-1042"


def test_a_call_from_the_process_loop_itself_is_refused_before_any_request(orders):
    async def from_the_loop():
        with _provider(orders) as provider:
            provider.get_order("A-1042")

    with pytest.raises(RuntimeError, match="process loop itself"):
        eventloop.run(from_the_loop())
    assert orders.calls("GET", "/orders/A-1042") == []
