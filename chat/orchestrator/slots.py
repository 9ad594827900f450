"""Where a turn runs: a thread of its own, within the process's and the tenant's turn slots."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import AsyncToSync, ThreadSensitiveContext
from django.conf import settings

from chat import metrics
from chat.orchestrator.base import db
from supportbot.db_connections import connections_release

_turn_slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class TurnSlots:
    """At most ORCHESTRATOR_MAX_CONCURRENT_TURNS turns at once in this process, and at most
    ORCHESTRATOR_MAX_TURNS_PER_TENANT of them for one tenant: a tenant whose order system
    hangs can hold only its share, never every slot. Saving and acknowledging a message is
    bounded separately (as many at once as turns), so a queue of turns never delays the
    customer's `message.accepted`."""

    def __init__(self, total: int, per_tenant: int) -> None:
        self.total = asyncio.Semaphore(total)
        self.receiving = asyncio.Semaphore(total)
        self.per_tenant_limit = max(1, min(per_tenant, total))
        self.tenants: dict[int, asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def hold(self, tenant_id: int):
        tenant = self.tenants.setdefault(tenant_id, asyncio.Semaphore(self.per_tenant_limit))
        async with tenant, self.total:
            yield


def _slots() -> TurnSlots:
    loop = asyncio.get_running_loop()
    if loop not in _turn_slots:
        total = settings.ORCHESTRATOR_MAX_CONCURRENT_TURNS
        _turn_slots[loop] = TurnSlots(
            total, settings.ORCHESTRATOR_MAX_TURNS_PER_TENANT or max(1, total // 2)
        )
    return _turn_slots[loop]


@contextlib.asynccontextmanager
async def _thread_of_its_own(name: str):
    """Run the block's ORM work (`db(...)`) in a thread of its own, closing its connection at
    the end.

    A plain ThreadSensitiveContext() is a no-op inside an inherited one (the consumer's
    per-event context, Django's per-request one), and the work would then run on a thread
    that dies with that event, holding its connection: hence an executor of its own. A sync
    caller (async_to_sync: a management command, a test inside its transaction) keeps the ORM
    work on its own thread, as asgiref does by default.
    """
    sync_caller = getattr(AsyncToSync.executors, "current", None) is not None
    executor = None if sync_caller else ThreadPoolExecutor(1, thread_name_prefix=name)
    try:
        async with ThreadSensitiveContext(executor=executor):
            try:
                yield
            finally:
                await db(connections_release)()
    finally:
        if executor is not None:
            executor.shutdown(wait=False)


@contextlib.asynccontextmanager
async def own_thread(tenant_id: int):
    """Run a turn in a thread of its own, within the process's and the tenant's turn slots.

    Turns of different conversations proceed in parallel (asgiref would otherwise run every
    thread-sensitive call of the process on one shared thread); the bounds keep the
    process's database connections finite and one tenant from taking every slot.
    """
    async with metrics.turn_tracked(), _slots().hold(tenant_id), _thread_of_its_own("turn"):
        yield


@contextlib.asynccontextmanager
async def receiving():
    """Save and acknowledge a message in a short thread of its own, outside the turn slots."""
    async with _slots().receiving, _thread_of_its_own("receive"):
        yield
