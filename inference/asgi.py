"""ASGI glue: start the process's pool poller in the serving event loop (daphne).

The gateway starts the poller lazily on first use; this middleware also starts it on the first
HTTP request, so the registry rows (ops page, `/metrics`, `gateway_available()` in sync views)
are kept fresh by a serving process even before any answer is generated. A failed start is
logged and retried at most every 5 s; requests never wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from inference.pool import get_pool

logger = logging.getLogger(__name__)


class PoolPollerMiddleware:
    def __init__(self, app) -> None:
        self.app = app
        self._next_try = 0.0
        self._task: asyncio.Task | None = None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self._kick()
        return await self.app(scope, receive, send)

    def _kick(self) -> None:
        loop = asyncio.get_running_loop()
        pool = get_pool()
        if pool.running_in(loop) or time.monotonic() < self._next_try:
            return
        if self._task is not None and not self._task.done():
            return
        self._next_try = time.monotonic() + 5.0
        self._task = loop.create_task(pool.ensure_running(), name="inference-pool-start")
        self._task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("inference pool poller did not start: %r", task.exception())
