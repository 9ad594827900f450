"""One event loop per process for sync callers of async work (supportbot/eventloop.py)."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading

import pytest

from supportbot import eventloop


async def _loop_and_thread():
    return asyncio.get_running_loop(), threading.current_thread().name


def test_every_call_in_a_process_runs_on_the_same_loop():
    first = eventloop.run(_loop_and_thread())
    second = eventloop.run(_loop_and_thread())

    assert first[0] is second[0]
    assert first[1] == second[1] == "process-event-loop"


def test_an_error_of_the_coroutine_reaches_the_caller():
    async def fails():
        raise ValueError("bad order id")

    with pytest.raises(ValueError, match="bad order id"):
        eventloop.run(fails())
    assert eventloop.run(_loop_and_thread())[1] == "process-event-loop"  # loop still serves


def test_a_slow_coroutine_times_out_and_is_cancelled():
    cancelled = threading.Event()

    async def slow():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        eventloop.run(slow(), timeout=0.2)
    assert cancelled.wait(5)


def test_callers_on_many_threads_share_the_loop_concurrently():
    inside = 0
    most = 0
    both_in = asyncio.Event()

    async def work(i):
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        if inside >= 4:
            both_in.set()
        await asyncio.wait_for(both_in.wait(), timeout=10)
        inside -= 1
        return i, asyncio.get_running_loop()

    results = [None] * 8
    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, eventloop.run(work(i))))
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)

    assert [r[0] for r in results] == list(range(8))
    assert len({id(r[1]) for r in results}) == 1
    assert most >= 4  # they waited together on one loop, not one after another


def test_running_from_the_loop_itself_is_refused():
    async def nested():
        return eventloop.run(_loop_and_thread())

    with pytest.raises(RuntimeError, match="await instead"):
        eventloop.run(nested())


def _child(queue):
    loop, name = eventloop.run(_loop_and_thread())
    queue.put((id(loop), name))


@pytest.mark.process
def test_a_forked_worker_starts_its_own_loop():
    parent_loop = eventloop.run(_loop_and_thread())[0]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    child_loop_id, name = queue.get(timeout=20)
    child.join(20)

    assert child.exitcode == 0
    assert name == "process-event-loop"
    assert eventloop.run(_loop_and_thread())[0] is parent_loop
    assert child_loop_id is not None
