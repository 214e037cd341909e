"""WorkQueue: dedup, exclusive processing, dirty re-adds, FIFO, shutdown and drain (client-go queue_test.go)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.runtime.workqueue import WorkQueue


async def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    """Let the loop run until ``predicate()`` holds (loop turns, not sleeps)."""
    async with asyncio.timeout(timeout):
        while True:
            if predicate():
                return
            await asyncio.sleep(0)


def get_now(q: WorkQueue[str]) -> str | None:
    """Run ``q.get()`` to completion without an event loop; only valid when it cannot wait."""
    coro: Coroutine[Any, Any, str | None] = q.get()
    try:
        coro.send(None)
    except StopIteration as stop:
        result: str | None = stop.value
        return result
    coro.close()
    raise AssertionError("get() would have waited")


async def test_fifo_and_dedup() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [await q.get(), await q.get(), await q.get()] == ["a", "b", "c"]
    assert len(q) == 0


async def test_len_counts_each_key_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    assert len(q) == 1
    q.add("bar")
    assert len(q) == 2
    q.add("foo")
    assert len(q) == 2


async def test_reinsert_while_processing_is_processed_once_more() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    key = await q.get()
    assert key == "foo"
    # Re-added (several times) while processing: not handed out again until done.
    q.add("foo")
    q.add("foo")
    assert len(q) == 0
    q.done("foo")
    assert len(q) == 1
    assert await q.get() == "foo"
    q.done("foo")
    assert len(q) == 0
    assert q.shutting_down is False


async def test_key_in_processing_is_not_handed_to_a_second_getter() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("k")
    assert await q.get() == "k"
    q.add("k")
    second = asyncio.create_task(q.get(), name="second-getter")
    for _ in range(5):
        await asyncio.sleep(0)
    assert not second.done()
    q.done("k")
    assert await asyncio.wait_for(second, 5) == "k"
    q.done("k")


async def test_waiting_getter_wakes_on_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get(), name="getter")
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("x")
    assert await asyncio.wait_for(getter, 5) == "x"


async def test_cancelled_getter_does_not_swallow_a_wakeup() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get(), name="first")
    second = asyncio.create_task(q.get(), name="second")
    await asyncio.sleep(0)
    q.add("x")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs: `second` must get the key
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await asyncio.wait_for(second, 5) == "x"


async def test_shut_down_wakes_waiting_getters_with_none() -> None:
    q: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(q.get(), name=f"getter-{i}") for i in range(3)]
    await asyncio.sleep(0)
    q.shut_down()
    assert await asyncio.wait_for(asyncio.gather(*getters), 5) == [None, None, None]
    assert q.shutting_down


async def test_shut_down_ignores_new_adds_but_hands_out_queued_keys() -> None:
    # client-go: Get returns shutdown only once the queue is empty.
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shut_down()
    q.add("added after shutdown!")
    assert await q.get() == "a"
    assert await q.get() == "b"
    assert await q.get() is None
    assert len(q) == 0


async def test_shut_down_does_not_wait_for_processing() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    await q.get()
    await q.get()
    q.shut_down()  # returns at once although nothing was marked done
    assert await q.get() is None


async def test_shut_down_with_drain_waits_for_in_flight_keys() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    first = await q.get()
    second = await q.get()
    assert first is not None
    assert second is not None
    drain = asyncio.create_task(q.shut_down_with_drain(), name="drain")
    await asyncio.sleep(0)
    assert await q.get() is None  # getters see the shutdown at once
    q.done(first)
    await asyncio.sleep(0)
    assert not drain.done()
    q.done(second)
    await asyncio.wait_for(drain, 5)


async def test_shut_down_after_drain_forces_it_to_return() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    await q.get()
    drain = asyncio.create_task(q.shut_down_with_drain(), name="drain")
    await asyncio.sleep(0)
    assert not drain.done()
    q.shut_down()  # e.g. a second SIGTERM
    await asyncio.wait_for(drain, 5)


async def test_drain_waits_for_dirty_key_to_be_processed_again() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    gotten = await q.get()
    assert gotten == "foo"
    q.add("foo")
    drain = asyncio.create_task(q.shut_down_with_drain(), name="drain")
    await asyncio.sleep(0)
    assert await q.get() is None
    q.done(gotten)
    again = await q.get()  # the dirty key came back, shutdown or not
    assert again == "foo"
    await asyncio.sleep(0)
    assert not drain.done()
    q.done(again)
    assert await q.get() is None
    await asyncio.wait_for(drain, 5)


async def test_drain_with_nothing_in_flight_returns_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    await asyncio.wait_for(q.shut_down_with_drain(), 5)
    assert await q.get() is None


@pytest.mark.parametrize("drain", [pytest.param(False, id="shut_down"), pytest.param(True, id="with_drain")])
async def test_add_while_processing_many_workers(drain: bool) -> None:
    """Port of TestAddWhileProcessing: every worker re-adds every key once; all end processed, none lost."""
    q: WorkQueue[int] = WorkQueue()
    for i in range(50):
        q.add(i)
    seen: dict[int, int] = {}

    async def worker() -> None:
        counters: dict[int, int] = {}
        while (key := await q.get()) is not None:
            counters[key] = counters.get(key, 0) + 1
            seen[key] = seen.get(key, 0) + 1
            if counters[key] < 2:
                q.add(key)
            await asyncio.sleep(0)
            q.done(key)

    workers = [asyncio.create_task(worker(), name=f"worker-{i}") for i in range(10)]
    await wait_until(lambda: len(q) == 0 and not q._processing)
    if drain:
        await q.shut_down_with_drain()
    else:
        q.shut_down()
    await asyncio.wait_for(asyncio.gather(*workers), 5)
    assert len(q) == 0
    assert set(seen) == set(range(50))
    assert all(count >= 2 for count in seen.values())


@pytest.mark.parametrize("seed", range(8))
async def test_randomized_workers_never_share_a_key_and_lose_no_add(seed: int) -> None:
    rng = random.Random(seed)
    q: WorkQueue[str] = WorkQueue()
    keys = [f"ns/k{i}" for i in range(20)]
    in_flight: set[str] = set()
    seq = 0
    last_add: dict[str, int] = {}
    last_start: dict[str, int] = {}
    violations: list[str] = []

    async def worker() -> None:
        nonlocal seq
        while (key := await q.get()) is not None:
            if key in in_flight:
                violations.append(key)
            in_flight.add(key)
            seq += 1
            last_start[key] = seq
            for _ in range(rng.randrange(4)):
                await asyncio.sleep(0)
            in_flight.discard(key)
            q.done(key)

    async def producer() -> None:
        nonlocal seq
        for _ in range(600):
            key = rng.choice(keys)
            seq += 1
            last_add[key] = seq
            q.add(key)
            if rng.random() < 0.3:
                await asyncio.sleep(0)

    workers = [asyncio.create_task(worker(), name=f"worker-{i}") for i in range(8)]
    await producer()
    await wait_until(lambda: len(q) == 0 and not in_flight)
    await q.shut_down_with_drain()
    await asyncio.wait_for(asyncio.gather(*workers), 5)
    assert violations == []
    # Every add was followed by a hand-out of that key: nothing was lost.
    assert all(last_start[k] > last_add[k] for k in last_add)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("abcde")),
        st.tuples(st.just("get"), st.just("")),
        st.tuples(st.just("done"), st.integers(min_value=0, max_value=4)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_property_exclusive_fifo_and_no_lost_adds(ops: list[tuple[str, Any]]) -> None:
    """Driven without an event loop: ``get`` is only called when it cannot wait."""
    q: WorkQueue[str] = WorkQueue()
    processing: list[str] = []
    dirty: set[str] = set()  # added since their last hand-out
    expected: list[str] = []  # the order keys should come out in
    for op, arg in ops:
        if op == "add":
            q.add(arg)
            if arg not in dirty:
                dirty.add(arg)
                if arg not in processing:
                    expected.append(arg)
        elif op == "get" and len(q):
            key = get_now(q)
            assert key is not None
            assert key not in processing, "a key in processing was handed out again"
            assert key == expected.pop(0)
            dirty.discard(key)
            processing.append(key)
        elif op == "done" and processing:
            key = processing.pop(arg % len(processing))
            q.done(key)
            if key in dirty:
                expected.append(key)
        assert len(q) == len(expected)
    for key in list(processing):
        q.done(key)
        if key in dirty:
            expected.append(key)
    delivered = []
    while len(q):
        key = get_now(q)
        assert key is not None
        delivered.append(key)
        q.done(key)
    # Every add is eventually handed out, each key once.
    assert delivered == expected
    assert sorted(delivered) == sorted(dirty)
