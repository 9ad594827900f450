"""Enqueue background tasks so that a broker outage never fails a committed write."""

from __future__ import annotations

import logging
import os
import threading

from django.db import transaction
from django_q.brokers import Broker, get_broker
from django_q.conf import Conf
from django_q.tasks import async_task

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# (the process it was made in, the queue it pushes to, the broker)
_broker: tuple[int, str, Broker] | None = None


def shared_broker() -> Broker:
    """This process's one broker (django-q2 makes a new one, with a new Redis connection pool
    and so a new connection, for every task enqueued without one); a forked child makes its
    own rather than share its parent's sockets, and a changed cluster name (the queue's key)
    gets a broker for the new queue."""
    global _broker
    key = (os.getpid(), Conf.CLUSTER_NAME)
    with _lock:
        if _broker is None or _broker[:2] != key:
            _broker = (*key, get_broker())
        return _broker[2]


def task_enqueue(func: str, *args, **kwargs) -> str:
    """`async_task(func, *args, **kwargs)` through this process's broker; return the task id."""
    return async_task(func, *args, broker=shared_broker(), **kwargs)


def task_enqueue_on_commit(func: str, *args, **kwargs) -> None:
    """`task_enqueue(func, *args)` once the transaction commits; a Redis (broker) outage is
    logged, not raised: the write stands, and the task's sweeper or the next trigger redoes it.

    Only for tasks that are rebuildable (summaries); work that must not be lost goes through a
    table a sweeper reads.
    """

    def enqueue() -> None:
        try:
            task_enqueue(func, *args, **kwargs)
        except Exception:  # broker down: nothing to undo, the data is committed
            logger.warning(
                "could not enqueue %s%r (broker unreachable?)", func, args, exc_info=True
            )

    transaction.on_commit(enqueue)
