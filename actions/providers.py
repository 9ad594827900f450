"""HTTP clients for tenants' order systems (httpx, explicit timeouts).

The calls run on the process's one event loop (supportbot/eventloop.py) through one
long-lived `httpx.AsyncClient` per order-system base URL, created and used only on that loop,
so connections are reused across calls and tenants. The client carries no credentials and
keeps no cookies: each request sends its own tenant's token. `OrderProvider`'s methods stay
sync (they block the calling thread); never call them from the process loop itself.

Outcomes are classified for the ledger: a timeout or a 5xx after the request may have reached
the provider is *ambiguous* (`ProviderUnknown`) — the caller must look the refund up by its
idempotency key before any resend. A 4xx is a definitive refusal (`ProviderRejected`).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from decimal import Decimal
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx
from django.conf import settings

from supportbot import eventloop


class ProviderError(Exception):
    code = "provider_error"


class ProviderUnknown(ProviderError):
    """The request may or may not have taken effect (timeout, dropped connection, 5xx)."""

    code = "provider_unknown"


class ProviderUnavailable(ProviderError):
    """The request certainly did not reach the provider (connect error)."""

    code = "provider_unavailable"


class ProviderBadResponse(ProviderUnknown):
    """The provider answered, but not with the JSON its contract promises (HTML, missing or
    mistyped fields). For a write the outcome is unknown (look it up); a read failed."""

    code = "provider_bad_response"


class ProviderRejected(ProviderError):
    """The provider answered with a definitive refusal (4xx)."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code or "provider_rejected"
        self.detail = detail


@dataclass(frozen=True)
class ProviderSettings:
    base_url: str
    token: str
    timeout_seconds: float


# (base URL, transport) -> (the loop it was made on, the client). Read and written only on the
# process loop; a client found for another loop (the loop thread was restarted, or this is a
# forked child) is never used, a new one is made on the current loop.
_clients: dict[tuple[str, httpx.AsyncBaseTransport | None], tuple[Any, httpx.AsyncClient]] = {}


def _forget_after_fork() -> None:
    _clients.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _no_cookies() -> CookieJar:
    """A jar that stores nothing: a cookie one tenant's order system sets must never ride
    along on another tenant's request through the shared client. (A jar, not an
    `httpx.Cookies`: the client would copy that into a jar of its own that keeps cookies.)"""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


def _shared_client(base_url: str, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    """The process's client of `base_url` (through `transport`), made on first use. Call
    only on the process loop."""
    loop = asyncio.get_running_loop()
    key = (base_url, transport)
    found = _clients.get(key)
    if found is not None and found[0] is loop:
        return found[1]
    client = httpx.AsyncClient(base_url=base_url, transport=transport, cookies=_no_cookies())
    _clients[key] = (loop, client)
    return client


class OrderProvider:
    """Client of one tenant's order API (see demo/orders/openapi.py for the contract).

    `transport` (tests) is an `httpx.AsyncBaseTransport`, e.g. `httpx.MockTransport`; providers
    given the same transport object and base URL share one client, as real ones do.
    """

    def __init__(
        self, cfg: ProviderSettings, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        connect = settings.ACTIONS["PROVIDER_CONNECT_TIMEOUT_S"]
        self._base_url = cfg.base_url.rstrip("/")
        self._transport = transport
        self._headers = {"Authorization": f"Bearer {cfg.token}"} if cfg.token else {}
        self._timeout = httpx.Timeout(
            cfg.timeout_seconds, connect=min(connect, cfg.timeout_seconds)
        )

    def close(self) -> None:
        """Nothing to release: the connection pool is the process's, shared and kept."""

    def __enter__(self) -> OrderProvider:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def _request(self, method: str, url: str, **kwargs) -> httpx.Response:
        client = _shared_client(self._base_url, self._transport)
        headers = {**kwargs.pop("headers", {}), **self._headers}
        return await client.request(method, url, headers=headers, timeout=self._timeout, **kwargs)

    def _send(self, method: str, url: str, **kwargs) -> httpx.Response:
        try:
            response = eventloop.run(self._request(method, url, **kwargs))
        except httpx.ConnectError as exc:
            raise ProviderUnavailable(f"cannot connect: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ProviderUnknown(f"timed out: {exc.__class__.__name__}") from exc
        except httpx.TransportError as exc:
            raise ProviderUnknown(f"transport error: {exc}") from exc
        if response.status_code >= 500:
            raise ProviderUnknown(f"provider answered {response.status_code}")
        return response

    @staticmethod
    def _rejected(response: httpx.Response) -> ProviderRejected:
        try:
            body = response.json()
        except ValueError:
            body = {}
        return ProviderRejected(
            response.status_code, str(body.get("error", "")), str(body.get("detail", ""))[:300]
        )

    @staticmethod
    def _json(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            kind = response.headers.get("content-type", "no content type")
            raise ProviderBadResponse(
                f"provider answered {response.status_code} with a non-JSON body ({kind})"
            ) from exc

    def get_order(self, order_id: str) -> dict[str, Any] | None:
        """The order, or None when the provider has no such order.

        Raise ProviderBadResponse unless the body has the contract's fields with their types.
        """
        response = self._send("GET", f"/orders/{order_id}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise self._rejected(response)
        order = self._json(response)
        problem = order_problem(order)
        if problem:
            raise ProviderBadResponse(f"order body {problem}")
        return order

    def create_refund(
        self, *, order_id: str, amount: Decimal, reason: str, idempotency_key: str
    ) -> dict[str, Any]:
        """Commit a refund (idempotent by key); return the provider's refund record."""
        response = self._send(
            "POST",
            "/refunds",
            json={"order_id": order_id, "amount": f"{amount:.2f}", "reason": reason},
            headers={"Idempotency-Key": idempotency_key},
        )
        if response.status_code not in (200, 201):
            raise self._rejected(response)
        record = self._json(response)
        if not isinstance(record, dict):
            raise ProviderBadResponse("refund body is not an object")
        return record

    def find_refund(self, *, idempotency_key: str) -> dict[str, Any] | None:
        """The refund committed under `idempotency_key`, or None if there is none."""
        response = self._send("GET", "/refunds", params={"idempotency_key": idempotency_key})
        if response.status_code != 200:
            raise self._rejected(response)
        body = self._json(response)
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
            raise ProviderBadResponse("refund lookup body has no 'results' list")
        return results[0] if results else None


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return None
    return number if number.is_finite() else None


def order_problem(order: Any) -> str | None:
    """What is wrong with an order body (None when it fits the contract)."""
    if not isinstance(order, dict):
        return "is not an object"
    for name in ("id", "owner", "status", "currency"):
        if not isinstance(order.get(name), str) or not order.get(name):
            return f"has no string {name!r}"
    amount = _decimal(order.get("amount"))
    if amount is None or amount < 0:
        return "has no numeric 'amount'"
    refunded = order.get("refunded_amount", 0)
    if refunded is not None and (_decimal(refunded) is None or _decimal(refunded) < 0):
        return "has a non-numeric 'refunded_amount'"
    return None
