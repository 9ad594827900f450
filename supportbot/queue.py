"""Enqueue background tasks so that a broker outage never fails a committed write."""

from __future__ import annotations

import logging

from django.db import transaction
from django_q.tasks import async_task

logger = logging.getLogger(__name__)


def task_enqueue_on_commit(func: str, *args, **kwargs) -> None:
    """`async_task(func, *args)` once the transaction commits; a Redis (broker) outage is
    logged, not raised: the write stands, and the task's sweeper or the next trigger redoes it.

    Only for tasks that are rebuildable (summaries); work that must not be lost goes through a
    table a sweeper reads.
    """

    def enqueue() -> None:
        try:
            async_task(func, *args, **kwargs)
        except Exception:  # broker down: nothing to undo, the data is committed
            logger.warning(
                "could not enqueue %s%r (broker unreachable?)", func, args, exc_info=True
            )

    transaction.on_commit(enqueue)
