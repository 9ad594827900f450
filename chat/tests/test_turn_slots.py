"""Turn slots: a process answers a bounded number of turns at once, and one tenant (say,
one whose order system hangs) can hold only its share of them."""

import asyncio
import math
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from chat import orchestrator
from chat.orchestrator.base import db
from chat.orchestrator.slots import TurnSlots, own_thread
from chat.tests.helpcenter import SHIPPING_MD, index_document
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


async def test_a_turn_arriving_just_after_a_release_queues_behind_the_one_that_waited():
    slots = TurnSlots(total=1, per_tenant=1, reserved=0)
    order: list[str] = []

    async def chat_a() -> None:  # answered, then at once the same customer's next question
        async with slots.hold(1):
            order.append("a1")
            await asyncio.sleep(0.01)
        async with slots.hold(1):
            order.append("a2")

    async def chat_b() -> None:
        async with slots.hold(1):
            order.append("b1")

    a = asyncio.create_task(chat_a())
    await asyncio.sleep(0)
    b = asyncio.create_task(chat_b())
    await asyncio.gather(a, b)
    assert order == ["a1", "b1", "a2"]


async def test_a_turn_handed_a_slot_and_cancelled_before_it_runs_hands_the_slot_on():
    slots = TurnSlots(total=1, per_tenant=1, reserved=0)
    entered: list[str] = []
    tasks: dict[str, asyncio.Task] = {}

    async def first() -> None:
        async with slots.hold(1):
            entered.append("first")
            await asyncio.sleep(0.01)
        tasks["handed"].cancel()  # handed the slot at the release above, not yet resumed

    async def turn(name: str) -> None:
        async with slots.hold(1):
            entered.append(name)

    tasks["first"] = asyncio.create_task(first())
    await asyncio.sleep(0)
    tasks["handed"] = asyncio.create_task(turn("handed"))
    tasks["last"] = asyncio.create_task(turn("last"))
    async with asyncio.timeout(10):  # a slot kept by the cancelled turn: "last" waits for ever
        results = await asyncio.gather(*tasks.values(), return_exceptions=True)
    assert isinstance(results[1], asyncio.CancelledError)
    assert entered == ["first", "last"]
    assert (slots.in_use, slots.running, slots._waiters) == (0, {}, [])


async def test_no_turn_waits_long_while_others_keep_asking_under_full_slots():
    """64 chats, each asking 5 questions one after another through 4 slots: every turn
    starts within a few rounds of the slots (a turn that lost every race waited for ever)."""
    slots = TurnSlots(total=4, per_tenant=4, reserved=0)
    waits: list[int] = []
    started = 0

    async def chat() -> None:
        nonlocal started
        for _ in range(5):
            asked = started
            async with slots.hold(1):
                waits.append(started - asked)  # turns that started while this one waited
                started += 1
                await asyncio.sleep(0)

    await asyncio.gather(*(chat() for _ in range(64)))
    assert len(waits) == 320
    assert max(waits) <= 64 + 4  # at most everyone in line once, plus the running turns


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


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_turn_that_must_wait_is_told_its_place_and_a_wait_from_recent_turns(
    monkeypatch,
):
    clock = _Clock()
    monkeypatch.setattr("chat.orchestrator.slots.time.monotonic", clock)
    slots = TurnSlots(total=2, per_tenant=2)
    release = asyncio.Event()
    told: list[tuple[str, int, int]] = []

    async def turn(tenant_id: int, name: str) -> None:
        async def queued(position: int, wait_seconds: int) -> None:
            told.append((name, position, wait_seconds))

        async with slots.hold(tenant_id, queued):
            await release.wait()

    # Two turns of 8 s each finish: recent turns take longer than the first estimate.
    for _ in range(2):
        first = asyncio.create_task(turn(1, "warm"))
        await asyncio.sleep(0)
        clock.now += 8.0
        release.set()
        await first
        release.clear()
    assert 3.0 < slots.turn_seconds < 8.0  # moved toward 8 s, smoothed

    tasks = [asyncio.create_task(turn(t, f"t{t}")) for t in (1, 2, 3, 4, 5)]
    for _ in range(5):
        await asyncio.sleep(0)
    # t1 and t2 hold both slots: t3 and t4 are one round away, t5 two rounds.
    estimate = slots.turn_seconds
    assert told == [
        ("t3", 1, math.ceil(estimate)),
        ("t4", 2, math.ceil(estimate)),
        ("t5", 3, math.ceil(2 * estimate)),
    ]
    release.set()
    await asyncio.gather(*tasks)
    assert len(told) == 3  # told once, not again when woken to re-check


async def test_a_turn_that_finds_a_free_slot_is_not_told_anything():
    slots = TurnSlots(total=2, per_tenant=2)
    told = []

    async def queued(position: int, wait_seconds: int) -> None:
        told.append(position)

    async with slots.hold(1, queued):
        pass
    assert told == []


async def test_a_turn_cancelled_while_it_is_being_told_takes_no_place_in_line():
    slots = TurnSlots(total=1, per_tenant=1)
    release, telling = asyncio.Event(), asyncio.Event()

    async def slow_to_tell(position: int, wait_seconds: int) -> None:
        telling.set()
        await asyncio.Event().wait()  # a socket that never drains

    async def turn(tenant_id: int, on_queued=None) -> None:
        async with slots.hold(tenant_id, on_queued):
            await release.wait()

    running = asyncio.create_task(turn(1))
    waiting = asyncio.create_task(turn(2, slow_to_tell))
    await asyncio.wait_for(telling.wait(), 30)  # a guard against hanging, not a timing
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert slots._waiters == []
    release.set()
    await running
    assert (slots.in_use, slots.running) == (0, {})


@pytest.mark.django_db(transaction=True)
async def test_a_customer_whose_turn_waits_for_a_slot_is_told_then_answered(
    settings, tenant, conversation
):
    """The real turn: the process's one slot is held by a hanging turn; the customer's message
    is accepted, then `answer.queued` says first in line, and the answer follows once the
    slot comes free."""
    await sync_to_async(index_document)(tenant, "Shipping", SHIPPING_MD)
    settings.ORCHESTRATOR_MAX_CONCURRENT_TURNS = 1
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    hung = threading.Event()
    inside = asyncio.Event()

    async def hanging_turn() -> None:
        async with own_thread(tenant.pk + 1000):
            inside.set()
            await db(hung.wait)()

    events: list[dict] = []
    queued = asyncio.Event()

    async def emit(event: dict) -> None:
        events.append(event)
        if event["type"] == "answer.queued":
            queued.set()

    hanging = asyncio.create_task(hanging_turn())
    try:
        await inside.wait()
        turn = asyncio.create_task(
            orchestrator.handle_customer_message(
                conversation=conversation,
                client_message_id="queued-1",
                text="How long does standard shipping take?",
                emit=emit,
            )
        )
        await asyncio.wait_for(queued.wait(), 60)  # a guard against hanging, not a timing
        types = [e["type"] for e in events]
        assert types == ["message.accepted", "answer.queued"]
        accepted, told = events
        assert told["reply_to"] == accepted["message"]["id"]
        assert (told["position"], told["wait_seconds"] >= 1) == (1, True)
    finally:
        hung.set()
        await hanging
    outcome = await asyncio.wait_for(turn, 120)
    assert outcome.reply is not None
    assert [e["type"] for e in events][-1] == "answer.completed"
    assert "business days" in events[-1]["text"]
    await sync_to_async(connections.close_all)()  # the indexing thread's connection
