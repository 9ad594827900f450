"""Cancellations redis-py swallows on Python 3.11, raised again.

redis-py wraps every socket write in `asyncio.wait_for`. On Python 3.11 `wait_for` returns the
finished write instead of raising `CancelledError` when the cancel lands just after the write
completed (CPython gh-86296, fixed in 3.12): the cancelled task runs on as if nothing happened.
The cancel still shows in the task's `cancelling()` count, which is how it is found again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


def cancel_count() -> int:
    """The current task's pending cancel requests (0 outside a task)."""
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


def cancel_swallowed_since(before: int) -> bool:
    """Was the current task cancelled after `cancel_count()` returned `before`?"""
    return cancel_count() > before


async def keeping_cancel(call: Awaitable[T]) -> T:
    """Await a Redis call; raise `CancelledError` after it if the task was cancelled during it
    and redis-py swallowed that. A cancellation the task had already handled before the call
    is left alone."""
    before = cancel_count()
    result = await call
    if cancel_swallowed_since(before):
        raise asyncio.CancelledError
    return result
