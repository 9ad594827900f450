"""The reference order service (Starlette). Bearer-token auth on every route but /healthz and
/openapi.json. Refunds are idempotent by the `Idempotency-Key` header.

Fault injection (tests and demos) through `PUT /admin/faults`:
- `latency_ms`: sleep before answering any /orders or /refunds request;
- `fail_count` + `fail_status` (+ `fail_method`, e.g. "POST"): answer the next N of them
  (with that method) with that 5xx, doing nothing;
- `commit_then_timeout_count` + `timeout_sleep_s`: commit the next N refunds, then sleep
  past the client's timeout before answering (the client sees a timeout, the refund exists);
- `html_count` (+ `fail_method`): answer the next N requests 200 with an HTML body, doing
  nothing; `html_after_commit_count`: commit the next N refunds, then answer 200 with HTML
  (a proxy mangling the response: the refund exists, the body is unreadable).
`GET /admin/requests` lists what was received (to count provider calls), `POST /admin/reset`
forgets refunds, requests and faults and re-seeds the orders.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from demo.orders import config as service_config
from demo.orders.openapi import OPENAPI
from demo.orders.store import Store, cents

ORDER_ID_RE = re.compile(r"^[A-Z]-\d{3,8}$")
MAX_KEY_LEN = 200
HTML_BODY = "<html><body><h1>502 Bad Gateway</h1><p>upstream hiccup</p></body></html>"

Endpoint = Callable[[Request], Awaitable[Response]]


def error(status: int, code: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)


def _unauthorized() -> JSONResponse:
    return error(401, "unauthorized", "Missing or wrong bearer token.")


@dataclass(frozen=True)
class _RefundBody:
    order_id: str
    amount: Decimal
    reason: str


async def _refund_body(request: Request) -> _RefundBody | JSONResponse:
    """The refund the JSON body asks for, or the 400 answer to a body that is not one."""
    try:
        body = await request.json()
        order_id = str(body["order_id"]).upper()
        amount = Decimal(str(body["amount"]))
        reason = str(body.get("reason", ""))[:500]
    except (ValueError, KeyError, TypeError, InvalidOperation):
        return error(400, "invalid_body", "Send order_id, amount and reason as JSON.")
    if not ORDER_ID_RE.match(order_id) or not amount.is_finite():
        return error(400, "invalid_body", "Malformed order_id or amount.")
    return _RefundBody(order_id, amount, reason)


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(OPENAPI)


class _OrderService:
    """The service's handlers over one store, behind one bearer token.

    Business routes (/orders, /refunds) are logged, need the token and suffer the injected
    faults (`business`); admin routes only need the token (`admin`).
    """

    def __init__(self, store: Store, token: str) -> None:
        self.store = store
        self.token = token

    def routes(self) -> list[Route]:
        """The route table: each path with its handler behind the wrapper it needs."""
        business, admin = self.business, self.admin
        return [
            Route("/healthz", healthz),
            Route("/openapi.json", openapi),
            Route("/orders/{order_id}", business(self.order_get), methods=["GET"]),
            Route("/refunds", business(self.refund_create), methods=["POST"]),
            Route("/refunds", business(self.refund_list), methods=["GET"]),
            Route("/admin/faults", admin(self.admin_faults), methods=["GET", "PUT"]),
            Route("/admin/requests", admin(self.admin_requests), methods=["GET"]),
            Route("/admin/reset", admin(self.admin_reset), methods=["POST"]),
        ]

    # ------------------------------------------------------------------ wrappers

    def authorized(self, request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token, self.token)

    async def faulted(self, request: Request) -> Response | None:
        """The injected answer to this request (after any injected latency), or None."""
        faults = self.store.faults()
        if faults.get("latency_ms"):
            await asyncio.sleep(float(faults["latency_ms"]) / 1000)
        method = faults.get("fail_method")
        matches = not method or method.upper() == request.method
        if faults.get("fail_count") and matches and self.store.take_fault("fail_count"):
            status = int(faults.get("fail_status", 503))
            return error(status, "injected_failure", "Injected failure.")
        if faults.get("html_count") and matches and self.store.take_fault("html_count"):
            return HTMLResponse(HTML_BODY, status_code=200)
        return None

    def business(self, handler: Endpoint) -> Endpoint:
        """`handler` behind the request log, the bearer token and the injected faults."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            logged = self.store.log_request(
                method=request.method,
                path=request.url.path,
                key=request.headers.get("idempotency-key"),
            )
            if not self.authorized(request):
                response = _unauthorized()
            else:
                response = await self.faulted(request) or await handler(request)
            self.store.log_status(logged, response.status_code)
            return response

        return endpoint

    def admin(self, handler: Endpoint) -> Endpoint:
        """`handler` behind the bearer token (not logged, no faults)."""

        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            if not self.authorized(request):
                return _unauthorized()
            return await handler(request)

        return endpoint

    # ------------------------------------------------------------------ business routes

    async def order_get(self, request: Request) -> Response:
        order = self.store.order(request.path_params["order_id"].upper())
        if order is None:
            return error(404, "order_not_found", "No such order.")
        return JSONResponse(order)

    async def refund_create(self, request: Request) -> Response:
        key = request.headers.get("idempotency-key", "")
        if not key or len(key) > MAX_KEY_LEN:
            return error(400, "idempotency_key_required", "Send an Idempotency-Key header.")
        body = await _refund_body(request)
        if isinstance(body, JSONResponse):
            return body
        status, payload = self.store.refund_create(
            key=key, order_id=body.order_id, amount_cents=cents(body.amount), reason=body.reason
        )
        fresh = status == 201 and not payload.get("replayed")
        return await self.after_commit(fresh) or JSONResponse(payload, status_code=status)

    async def after_commit(self, fresh: bool) -> Response | None:
        """The faults that strike once a new refund is committed: a late answer (the client
        times out), an HTML body in place of the JSON one. None when no such fault is set."""
        faults = self.store.faults()
        if fresh and self.store.take_fault("commit_then_timeout_count"):
            await asyncio.sleep(float(faults.get("timeout_sleep_s", 3.0)))
        if fresh and self.store.take_fault("html_after_commit_count"):
            return HTMLResponse(HTML_BODY, status_code=200)
        return None

    async def refund_list(self, request: Request) -> Response:
        key = request.query_params.get("idempotency_key", "")
        if not key:
            return error(400, "idempotency_key_required", "Pass ?idempotency_key=.")
        refund = self.store.refund_by_key(key)
        return JSONResponse({"results": [refund] if refund else []})

    # ------------------------------------------------------------------ admin routes

    async def admin_faults(self, request: Request) -> Response:
        if request.method == "PUT":
            data: dict[str, Any] = await request.json()
            self.store.set_faults(
                {k: v for k, v in data.items() if isinstance(v, int | float | str)}
            )
        return JSONResponse(self.store.faults())

    async def admin_requests(self, request: Request) -> Response:
        return JSONResponse({"requests": self.store.requests(), "refunds": self.store.refunds()})

    async def admin_reset(self, request: Request) -> Response:
        self.store.reset()
        return JSONResponse({"status": "reset"})


def create_app(cfg: service_config.ServiceConfig | None = None) -> Starlette:
    """The order service for `cfg` (default: from the environment), its demo orders seeded."""
    cfg = cfg or service_config.load()
    store = Store(cfg.db_path)
    store.seed()
    return Starlette(routes=_OrderService(store, cfg.token).routes())
