"""Turn slots: a process answers a bounded number of turns at once, and one tenant (say,
one whose order system hangs) can hold only its share of them."""

import asyncio

from chat.orchestrator.slots import TurnSlots


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
