"""Where a turn runs: a thread of its own, within the process's and the tenant's turn slots."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import AsyncToSync, ThreadSensitiveContext
from django.conf import settings

from chat import metrics
from chat.orchestrator.base import db
from supportbot.db_connections import connections_release

_turn_slots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

# Told to a customer whose turn waits for a slot: (place in line, estimated seconds).
OnQueued = Callable[[int, int], Awaitable[None]]


class TurnSlots:
    """At most `total` turns at once in this process (ORCHESTRATOR_MAX_CONCURRENT_TURNS), at
    most `per_tenant` of them for one tenant (ORCHESTRATOR_MAX_TURNS_PER_TENANT), and the
    turns of tenants already running one leave `reserved` slots free
    (ORCHESTRATOR_TURN_SLOTS_RESERVED): a tenant with no turn running finds a slot at once
    even while two (or more) tenants whose order systems hang fill their shares. Saving and
    acknowledging a message is bounded separately (as many at once as turns), so a queue of
    turns never delays the customer's `message.accepted`.

    All bookkeeping happens on the event loop's thread without awaiting, so a turn cancelled
    while it waits takes nothing, and one cancelled while it runs gives its slot back.

    A turn that has to wait is told its place in line and an estimated wait (`on_queued`):
    the turns ahead of it, served `capacity` at a time, each taking as long as recent turns
    took on average (`turn_seconds`, a moving average of how long a slot was held).
    """

    FIRST_ESTIMATE_S = 3.0  # before any turn has finished in this process
    SMOOTHING = 0.2  # weight of the newest turn in the moving average

    def __init__(self, total: int, per_tenant: int, reserved: int | None = None) -> None:
        self.capacity = max(1, total)
        self.receiving = asyncio.Semaphore(self.capacity)
        self.per_tenant_limit = max(1, min(per_tenant, self.capacity))
        if reserved is None or reserved < 0:
            reserved = max(1, self.capacity // 4)
        self.reserved = min(reserved, self.capacity - 1)
        self.running: dict[int, int] = {}
        self.in_use = 0
        self.turn_seconds = self.FIRST_ESTIMATE_S
        self._waiters: list[tuple[int, asyncio.Future]] = []  # (tenant, its turn's future)

    def may_start(self, tenant_id: int) -> bool:
        """Whether a turn of `tenant_id` may start now."""
        held = self.running.get(tenant_id, 0)
        if held >= self.per_tenant_limit:
            return False
        free = self.capacity - self.in_use
        return free > (self.reserved if held else 0)

    def wait_estimate(self, position: int) -> int:
        """Whole seconds until the turn at `position` in line (1: next) may start."""
        rounds = math.ceil(position / self.capacity)
        return max(1, math.ceil(rounds * self.turn_seconds))

    @contextlib.asynccontextmanager
    async def hold(self, tenant_id: int, on_queued: OnQueued | None = None):
        await self._acquire(tenant_id, on_queued)
        started = time.monotonic()
        try:
            yield
        finally:
            self._release(tenant_id)
            held = time.monotonic() - started
            self.turn_seconds += self.SMOOTHING * (held - self.turn_seconds)

    async def _acquire(self, tenant_id: int, on_queued: OnQueued | None = None) -> None:
        """Take a slot now, or wait in line for one handed over by `_release`.

        Slots are handed over at release to the oldest waiting turn that may start, so a turn
        arriving just after a release never takes the slot from one that waited (under a busy
        Monday's load, barging arrivals kept some turns waiting for minutes)."""
        if self.may_start(tenant_id):  # no waiting turn may start now (see `_grant`)
            self._take(tenant_id)
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (tenant_id, waiter)
        self._waiters.append(entry)
        try:
            if on_queued is not None:
                position = len(self._waiters)
                await on_queued(position, self.wait_estimate(position))
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release(tenant_id)  # handed a slot, then cancelled: hand it on
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
            raise

    def _take(self, tenant_id: int) -> None:
        self.running[tenant_id] = self.running.get(tenant_id, 0) + 1
        self.in_use += 1

    def _release(self, tenant_id: int) -> None:
        held = self.running.get(tenant_id, 0) - 1
        if held > 0:
            self.running[tenant_id] = held
        else:
            self.running.pop(tenant_id, None)
        self.in_use -= 1
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to waiting turns, oldest first, each that may start now (a turn of
        a tenant at its share is passed over, not the turns behind it). Afterwards no waiting
        turn may start: a new arrival may take a slot only when none of them could."""
        for entry in list(self._waiters):
            tenant_id, waiter = entry
            if waiter.done():  # cancelled while waiting
                self._waiters.remove(entry)
            elif self.may_start(tenant_id):
                self._waiters.remove(entry)
                self._take(tenant_id)
                waiter.set_result(None)


def _slots() -> TurnSlots:
    loop = asyncio.get_running_loop()
    if loop not in _turn_slots:
        total = settings.ORCHESTRATOR_MAX_CONCURRENT_TURNS
        _turn_slots[loop] = TurnSlots(
            total,
            settings.ORCHESTRATOR_MAX_TURNS_PER_TENANT or max(1, total // 2),
            settings.ORCHESTRATOR_TURN_SLOTS_RESERVED,
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
async def own_thread(tenant_id: int, on_queued: OnQueued | None = None):
    """Run a turn in a thread of its own, within the process's and the tenant's turn slots.

    Turns of different conversations proceed in parallel (asgiref would otherwise run every
    thread-sensitive call of the process on one shared thread); the bounds keep the
    process's database connections finite and one tenant from taking every slot. A turn
    that must wait for a slot calls `on_queued(position, seconds)` once before it waits.
    """
    async with (
        metrics.turn_tracked(),
        _slots().hold(tenant_id, on_queued),
        _thread_of_its_own("turn"),
    ):
        yield


@contextlib.asynccontextmanager
async def receiving():
    """Save and acknowledge a message in a short thread of its own, outside the turn slots."""
    async with _slots().receiving, _thread_of_its_own("receive"):
        yield
