"""HTTP clients for tenants' order systems (httpx, explicit timeouts).

Outcomes are classified for the ledger: a timeout or a 5xx after the request may have reached
the provider is *ambiguous* (`ProviderUnknown`) — the caller must look the refund up by its
idempotency key before any resend. A 4xx is a definitive refusal (`ProviderRejected`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
from django.conf import settings


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


class OrderProvider:
    """Client of one tenant's order API (see demo/orders/openapi.py for the contract)."""

    def __init__(self, cfg: ProviderSettings, *, transport: httpx.BaseTransport | None = None):
        connect = settings.ACTIONS["PROVIDER_CONNECT_TIMEOUT_S"]
        self._client = httpx.Client(
            base_url=cfg.base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {cfg.token}"} if cfg.token else {},
            timeout=httpx.Timeout(cfg.timeout_seconds, connect=min(connect, cfg.timeout_seconds)),
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OrderProvider:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, method: str, url: str, **kwargs) -> httpx.Response:
        try:
            response = self._client.request(method, url, **kwargs)
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
