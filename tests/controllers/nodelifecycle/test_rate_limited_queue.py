"""Port of upstream's rate_limited_queue_test.go: uniqueness, ordering, removal and limiter swaps."""

from __future__ import annotations

import pytest

from controller_manager.clock import FakeClock
from controller_manager.controllers.nodelifecycle.rate_limited_queue import (
    NeverRateLimiter,
    RateLimitedTimedQueue,
    TimedValue,
    TokenBucketRateLimiter,
)


class AlwaysRateLimiter:
    qps = 1.0

    def try_accept(self) -> bool:
        return True


def values(q: RateLimitedTimedQueue) -> list[str]:
    return [entry.value for _, _, entry in sorted(q.queue._heap)]


async def drain(q: RateLimitedTimedQueue, results: dict[str, tuple[bool, float]] | None = None) -> list[str]:
    seen: list[str] = []

    async def fn(value: TimedValue) -> tuple[bool, float]:
        seen.append(value.value)
        return (results or {}).get(value.value, (True, 0.0))

    await q.try_process(fn)
    return seen


def new_queue(clock: FakeClock | None = None) -> RateLimitedTimedQueue:
    return RateLimitedTimedQueue(AlwaysRateLimiter(), clock or FakeClock())


def test_add_node() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    assert q.add("first", "11111")
    clock.advance(1)
    assert q.add("second", "22222")
    clock.advance(1)
    assert q.add("third", "33333")
    assert values(q) == ["first", "second", "third"]
    assert not q.add("first", "11111")


def test_del() -> None:
    q = new_queue()
    for v in ("first", "second", "third"):
        q.add(v, v)
    assert q.remove("first")
    assert values(q) == ["second", "third"]
    assert not q.remove("missing")


async def test_try() -> None:
    q = new_queue()
    for v in ("first", "second", "third"):
        q.add(v, v)
    q.remove("second")
    assert sorted(await drain(q)) == ["first", "third"]
    assert len(q) == 0


async def test_try_ordering_requeues_failures_after_wait() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    for v in ("first", "second", "third"):
        q.add(v, v)
        clock.advance(1)
    # "first" fails once and asks for a 1 s wait: it goes behind the others, then is retried when due.
    order: list[str] = []
    attempts: dict[str, int] = {}

    async def fn(value: TimedValue) -> tuple[bool, float]:
        order.append(value.value)
        attempts[value.value] = attempts.get(value.value, 0) + 1
        if value.value == "first" and attempts["first"] == 1:
            return False, 1.0
        return True, 0.0

    await q.try_process(fn)
    assert order == ["first", "second", "third"]
    clock.advance(1.5)
    await q.try_process(fn)
    assert order == ["first", "second", "third", "first"]
    assert len(q) == 0


async def test_processed_value_is_not_added_again_until_removed() -> None:
    q = new_queue()
    q.add("first", "1")
    assert await drain(q) == ["first"]
    assert not q.add("first", "1")  # still in the set: one outage taints once
    assert q.remove("first")
    assert q.add("first", "1")


async def test_removing_while_try() -> None:
    q = new_queue()
    q.add("first", "1")
    q.add("second", "2")

    async def fn(value: TimedValue) -> tuple[bool, float]:
        q.remove("second")
        return False, 0.0

    await q.try_process(fn)
    assert "second" not in q.queue


def test_clear() -> None:
    q = new_queue()
    for v in ("first", "second"):
        q.add(v, v)
    q.clear()
    assert len(q) == 0
    assert q.add("first", "1")


@pytest.mark.parametrize(("swaps", "expected_qps"), [
    pytest.param([0.0], 0.0, id="stop"),
    pytest.param([0.0, 2.0], 2.0, id="stop-then-resume"),
    pytest.param([0.01], 0.01, id="secondary-rate"),
])
def test_swap_limiter(swaps: list[float], expected_qps: float) -> None:
    clock = FakeClock()
    q = RateLimitedTimedQueue(TokenBucketRateLimiter(0.1, 1, clock), clock)
    for qps in swaps:
        q.swap_limiter(qps)
    assert q.limiter.qps == expected_qps
    if expected_qps == 0:
        assert isinstance(q.limiter, NeverRateLimiter)


def test_swap_keeps_a_drained_bucket_drained() -> None:
    clock = FakeClock()
    q = RateLimitedTimedQueue(TokenBucketRateLimiter(0.1, 1, clock), clock)
    assert q.limiter.try_accept()
    q.swap_limiter(1.0)
    assert not q.limiter.try_accept()
    clock.advance(1.0)
    assert q.limiter.try_accept()


async def test_token_bucket_paces_processing() -> None:
    clock = FakeClock()
    q = RateLimitedTimedQueue(TokenBucketRateLimiter(0.1, 1, clock), clock)
    for v in ("a", "b", "c"):
        q.add(v, v)
    assert await drain(q) == ["a"]
    clock.advance(9.9)
    assert await drain(q) == []
    clock.advance(0.1)
    assert await drain(q) == ["b"]
    clock.advance(10)
    assert await drain(q) == ["c"]
