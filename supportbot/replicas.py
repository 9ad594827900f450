"""Stale-tolerant reads on a read replica (`DATABASE_REPLICA_URL`), by explicit opt-in only.

A read goes to the replica only while a function decorated with `stale_tolerant` runs (the
history pages, the console's lists, analytics, search), and even then never inside a
transaction on the primary (`select_for_update` needs one, so locked reads stay there). Every
write, and every read outside those functions (dedupe, the action ledger, ownership and
claims, idempotency keys, the chat's own turn state), goes to the primary: a read right after
a write never meets a lagging replica by accident.

When the replica fails (down, unreachable, refusing), the call is run again on the primary and
the replica is skipped for `DATABASE_REPLICA_RETRY_S` in this process.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)

REPLICA = "replica"
P = ParamSpec("P")
R = TypeVar("R")

_stale_ok: ContextVar[bool] = ContextVar("supportbot_stale_reads", default=False)
_lock = threading.Lock()
_down_until = 0.0


def configured() -> bool:
    """Is a replica configured for this process?"""
    return REPLICA in connections.settings


def available() -> bool:
    """Configured and not skipped after a recent failure."""
    return configured() and time.monotonic() >= _down_until


def mark_down() -> None:
    """Skip the replica for a while after it failed (reads go to the primary meanwhile)."""
    global _down_until
    with _lock:
        _down_until = time.monotonic() + settings.DATABASE_REPLICA_RETRY_S
    connections[REPLICA].close()


def read_alias() -> str:
    """The database alias a read should use now: the replica only inside a stale-tolerant
    call, when the replica is available and no transaction is open on the primary."""
    if _stale_ok.get() and available() and not connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return REPLICA
    return DEFAULT_DB_ALIAS


def _replica_broken() -> bool:
    conn = connections[REPLICA]
    if conn.connection is None:
        return True  # it could not even connect
    try:
        return not conn.is_usable()
    except Exception:  # noqa: BLE001 - whatever the driver raises, it is not usable
        return True


def stale_tolerant(
    fn: Callable[P, R] | None = None, *, primary_on: tuple[type[Exception], ...] = ()
):
    """Let the reads of `fn` be served by the replica (they may lag the primary a moment).

    `fn` must only read and must finish its reads before it returns (return lists, not lazy
    querysets). If the replica fails, `fn` runs again on the primary. `primary_on` names
    exceptions that mean "maybe just not replicated yet" (NotFound of a row created a moment
    ago): those also run again on the primary before they propagate.
    """

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if _stale_ok.get() or not available():
                return func(*args, **kwargs)  # nested, or no replica: the caller decides
            token = _stale_ok.set(True)
            try:
                return func(*args, **kwargs)
            except (OperationalError, InterfaceError):
                if not _replica_broken():
                    raise
                logger.warning("read replica failed; reading %s from the primary", func.__name__)
                mark_down()
            except primary_on:
                pass
            finally:
                _stale_ok.reset(token)
            return func(*args, **kwargs)

        return wrapper

    return decorate(fn) if fn is not None else decorate


class ReplicaRouter:
    """Reads follow `read_alias()`; writes and migrations only ever use the primary."""

    def db_for_read(self, model, **hints) -> str:
        return read_alias()

    def db_for_write(self, model, **hints) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints) -> bool:
        return True  # the same data on both

    def allow_migrate(self, db, app_label, model_name=None, **hints) -> bool:
        return db == DEFAULT_DB_ALIAS
