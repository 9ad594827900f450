"""Turn slots: a process answers a bounded number of turns at once, and one tenant (say,
one whose order system hangs) can hold only its share of them."""

import asyncio
import threading

import pytest

from chat.orchestrator.base import db
from chat.orchestrator.slots import TurnSlots, own_thread
from supportbot.models import Tenant


async def test_one_tenant_cannot_take_every_slot():
    slots = TurnSlots(total=4, per_tenant=2)
    release = asyncio.Event()
    entered: list[str] = []

    async def turn(tenant_id: int, name: str) -> None:
        async with slots.hold(tenant_id):
            entered.append(name)
            await release.wait()

    slow = [asyncio.create_task(turn(1, f"a{i}")) for i in range(3)]
    other = asyncio.create_task(turn(2, "b0"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert sorted(entered) == ["a0", "a1", "b0"]  # the third turn of tenant 1 waits
    release.set()
    await asyncio.gather(*slow, other)
    assert sorted(entered) == ["a0", "a1", "a2", "b0"]


async def test_the_process_bound_holds_across_tenants():
    slots = TurnSlots(total=2, per_tenant=2)
    release = asyncio.Event()
    entered: list[int] = []

    async def turn(tenant_id: int) -> None:
        async with slots.hold(tenant_id):
            entered.append(tenant_id)
            await release.wait()

    tasks = [asyncio.create_task(turn(t)) for t in (1, 2, 3)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(entered) == 2
    release.set()
    await asyncio.gather(*tasks)
    assert sorted(entered) == [1, 2, 3]


async def test_two_tenants_filling_their_shares_leave_a_slot_for_a_third():
    slots = TurnSlots(total=6, per_tenant=3, reserved=1)
    release = asyncio.Event()
    entered: list[str] = []

    async def turn(tenant_id: int, name: str) -> None:
        async with slots.hold(tenant_id):
            entered.append(name)
            await release.wait()

    busy = [asyncio.create_task(turn(t, f"{t}-{i}")) for i in range(3) for t in (1, 2)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(entered) == 5  # both shares would be 6: the sixth turn waits for the reserve
    third = asyncio.create_task(turn(3, "3-0"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert "3-0" in entered
    release.set()
    await asyncio.gather(*busy, third)
    assert len(entered) == 7


async def test_a_turn_cancelled_while_waiting_takes_no_slot_and_a_running_one_gives_it_back():
    slots = TurnSlots(total=1, per_tenant=1)
    release = asyncio.Event()

    async def turn(tenant_id: int) -> None:
        async with slots.hold(tenant_id):
            await release.wait()

    running = asyncio.create_task(turn(1))
    waiting = asyncio.create_task(turn(2))
    for _ in range(3):
        await asyncio.sleep(0)
    waiting.cancel()
    running.cancel()
    await asyncio.gather(running, waiting, return_exceptions=True)
    assert (slots.in_use, slots.running) == (0, {})
    assert slots.may_start(3)


@pytest.mark.django_db(transaction=True)
async def test_a_third_tenants_turn_runs_while_two_tenants_turns_hang_in_their_threads(settings):
    """Real turns' slots (`own_thread`: a thread and a database connection each): tenants 1
    and 2 start every turn they may, all hanging in their order systems; tenant 3's turn still
    runs to its end before any of them is let go."""
    settings.ORCHESTRATOR_MAX_CONCURRENT_TURNS = 6
    settings.ORCHESTRATOR_MAX_TURNS_PER_TENANT = 3
    settings.ORCHESTRATOR_TURN_SLOTS_RESERVED = 1
    hung = threading.Event()  # the order systems of tenants 1 and 2 never answer
    inside: asyncio.Queue = asyncio.Queue()

    async def hanging_turn(tenant_id: int) -> None:
        async with own_thread(tenant_id):
            await inside.put(tenant_id)
            await db(hung.wait)()

    async def quick_turn(tenant_id: int) -> int:
        async with own_thread(tenant_id):
            return await db(Tenant.objects.count)()

    hanging = [asyncio.create_task(hanging_turn(t)) for t in (1, 2, 1, 2, 1, 2)]
    try:
        held = sorted([await inside.get() for _ in range(5)])  # every slot they may take
        assert held in ([1, 1, 1, 2, 2], [1, 1, 2, 2, 2])
        # A guard against hanging forever, not a timing assertion: without the reserve the
        # two tenants hold all six slots and this turn never starts.
        assert await asyncio.wait_for(quick_turn(3), timeout=60) >= 0
        assert inside.empty()  # the sixth hanging turn still waits
    finally:
        hung.set()
        await asyncio.gather(*hanging)
    assert inside.qsize() == 1  # it ran once a slot came free
