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
import hmac
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from demo.orders import config as service_config
from demo.orders.openapi import OPENAPI
from demo.orders.store import Store, cents

ORDER_ID_RE = re.compile(r"^[A-Z]-\d{3,8}$")
MAX_KEY_LEN = 200
HTML_BODY = "<html><body><h1>502 Bad Gateway</h1><p>upstream hiccup</p></body></html>"


def error(status: int, code: str, detail: str) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status)


def create_app(cfg: service_config.ServiceConfig | None = None) -> Starlette:
    cfg = cfg or service_config.load()
    store = Store(cfg.db_path)
    store.seed()

    def authorized(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token, cfg.token)

    async def faulted(request: Request) -> JSONResponse | None:
        faults = store.faults()
        if faults.get("latency_ms"):
            await asyncio.sleep(float(faults["latency_ms"]) / 1000)
        method = faults.get("fail_method")
        matches = not method or method.upper() == request.method
        if faults.get("fail_count") and matches and store.take_fault("fail_count"):
            status = int(faults.get("fail_status", 503))
            return error(status, "injected_failure", "Injected failure.")
        if faults.get("html_count") and matches and store.take_fault("html_count"):
            return HTMLResponse(HTML_BODY, status_code=200)
        return None

    async def handle(request: Request, handler) -> JSONResponse:
        logged = store.log_request(
            method=request.method,
            path=request.url.path,
            key=request.headers.get("idempotency-key"),
        )
        if not authorized(request):
            response = error(401, "unauthorized", "Missing or wrong bearer token.")
        else:
            response = await faulted(request) or await handler(request)
        store.log_status(logged, response.status_code)
        return response

    async def order_get(request: Request) -> JSONResponse:
        async def inner(request: Request) -> JSONResponse:
            order = store.order(request.path_params["order_id"].upper())
            if order is None:
                return error(404, "order_not_found", "No such order.")
            return JSONResponse(order)

        return await handle(request, inner)

    async def refund_create(request: Request) -> JSONResponse:
        async def inner(request: Request) -> JSONResponse:
            key = request.headers.get("idempotency-key", "")
            if not key or len(key) > MAX_KEY_LEN:
                return error(400, "idempotency_key_required", "Send an Idempotency-Key header.")
            try:
                body = await request.json()
                order_id = str(body["order_id"]).upper()
                amount = Decimal(str(body["amount"]))
                reason = str(body.get("reason", ""))[:500]
            except (ValueError, KeyError, TypeError, InvalidOperation):
                return error(400, "invalid_body", "Send order_id, amount and reason as JSON.")
            if not ORDER_ID_RE.match(order_id) or not amount.is_finite():
                return error(400, "invalid_body", "Malformed order_id or amount.")
            status, payload = store.refund_create(
                key=key, order_id=order_id, amount_cents=cents(amount), reason=reason
            )
            faults = store.faults()
            fresh = status == 201 and not payload.get("replayed")
            if fresh and store.take_fault("commit_then_timeout_count"):
                await asyncio.sleep(float(faults.get("timeout_sleep_s", 3.0)))
            if fresh and store.take_fault("html_after_commit_count"):
                return HTMLResponse(HTML_BODY, status_code=200)
            return JSONResponse(payload, status_code=status)

        return await handle(request, inner)

    async def refund_list(request: Request) -> JSONResponse:
        async def inner(request: Request) -> JSONResponse:
            key = request.query_params.get("idempotency_key", "")
            if not key:
                return error(400, "idempotency_key_required", "Pass ?idempotency_key=.")
            refund = store.refund_by_key(key)
            return JSONResponse({"results": [refund] if refund else []})

        return await handle(request, inner)

    async def admin_faults(request: Request) -> JSONResponse:
        if not authorized(request):
            return error(401, "unauthorized", "Missing or wrong bearer token.")
        if request.method == "PUT":
            data: dict[str, Any] = await request.json()
            store.set_faults({k: v for k, v in data.items() if isinstance(v, int | float | str)})
        return JSONResponse(store.faults())

    async def admin_requests(request: Request) -> JSONResponse:
        if not authorized(request):
            return error(401, "unauthorized", "Missing or wrong bearer token.")
        return JSONResponse({"requests": store.requests(), "refunds": store.refunds()})

    async def admin_reset(request: Request) -> JSONResponse:
        if not authorized(request):
            return error(401, "unauthorized", "Missing or wrong bearer token.")
        store.reset()
        return JSONResponse({"status": "reset"})

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(OPENAPI)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/openapi.json", openapi),
            Route("/orders/{order_id}", order_get, methods=["GET"]),
            Route("/refunds", refund_create, methods=["POST"]),
            Route("/refunds", refund_list, methods=["GET"]),
            Route("/admin/faults", admin_faults, methods=["GET", "PUT"]),
            Route("/admin/requests", admin_requests, methods=["GET"]),
            Route("/admin/reset", admin_reset, methods=["POST"]),
        ]
    )
