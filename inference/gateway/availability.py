"""Whether the gateway can answer at all: at least one ready worker is healthy (cheap)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time

from django.db import connections

from inference import selectors
from inference.config import get_config
from inference.pool import get_pool


def gateway_available() -> bool:
    """At least one ready worker is healthy, as far as this process knows (cheap).

    With a running poller in this process its fresh state answers; otherwise the registry row
    written by any process's poller, if seen healthy within `stale_after_s`.
    """
    cfg = get_config()
    pool = get_pool()
    if pool.last_poll_at is not None and time.monotonic() - pool.last_poll_at <= cfg.stale_after_s:
        return pool.has_healthy_worker()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return selectors.pool_has_healthy_worker(fresh_within_s=cfg.stale_after_s)
    # Called from async code without a fresh poller here: start one, answer from the registry.
    pool_task = asyncio.get_running_loop().create_task(pool.ensure_running())
    pool_task.add_done_callback(lambda t: t.exception())
    with contextlib.suppress(Exception):
        return _registry_check_in_thread(cfg.stale_after_s)
    return False


def _registry_check_in_thread(fresh_within_s: float) -> bool:
    """Run the registry query in a helper thread (the ORM refuses to run inside a loop)."""

    def check() -> bool:
        try:
            return selectors.pool_has_healthy_worker(fresh_within_s=fresh_within_s)
        finally:
            connections.close_all()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as ex:
        return ex.submit(check).result(timeout=2.0)
