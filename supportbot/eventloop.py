"""One asyncio event loop per process for sync code that must await (django-q2 workers).

Sync callers of async work (a re-driven answer, a handoff summary drafted by the model) run
their coroutine here instead of through a fresh `async_to_sync` loop per call: the inference
pool, its poller and its HTTP clients are bound to the loop they started on, so one loop per
process means one pool per process, started once and reused by every task.

The loop runs in a daemon thread started on first use; a forked child (q2 forks its workers)
starts its own on first use instead of inheriting a dead one.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _forget_after_fork() -> None:
    global _loop, _thread, _lock
    _loop, _thread, _lock = None, None, threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def process_loop() -> asyncio.AbstractEventLoop:
    """Return this process's loop, starting its thread on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name="process-event-loop", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def run(coroutine: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
    """Run `coroutine` on this process's loop and return its result (or raise its error).

    Blocks the calling thread; refuse to be called from the loop's own thread (it would wait
    for itself). With `timeout`, cancel the coroutine and raise TimeoutError when it passes.
    """
    loop = process_loop()
    if threading.current_thread() is _thread:
        coroutine.close()
        raise RuntimeError("eventloop.run called from the process loop itself; await instead")
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise
