"""DelayingQueue and RateLimitingQueue on a FakeClock (client-go delaying_queue_test.go and friends)."""

from __future__ import annotations

import pytest

from controller_manager.clock import FakeClock
from controller_manager.runtime.workqueue import (
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
)


async def drain_now(q: DelayingQueue[str]) -> list[str]:
    out = []
    while len(q):
        key = await q.get()
        assert key is not None
        out.append(key)
        q.done(key)
    return out


async def test_add_after_adds_only_once_due() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 0.05)
    assert len(q) == 0
    clock.advance(0.049)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    assert await q.get() == "foo"
    q.done("foo")
    assert clock.pending_timers() == 0


@pytest.mark.parametrize("delay", [pytest.param(0, id="zero"), pytest.param(-1, id="negative")])
async def test_add_after_without_delay_adds_at_once(delay: float) -> None:
    q: DelayingQueue[str] = DelayingQueue(clock=FakeClock())
    q.add_after("foo", delay)
    assert len(q) == 1


@pytest.mark.parametrize(
    ("first", "second", "due"),
    [
        pytest.param(0.05, 0.07, 0.05, id="later-second-call-does-not-postpone"),
        pytest.param(0.07, 0.05, 0.05, id="earlier-second-call-wins"),
    ],
)
async def test_earlier_deadline_wins(first: float, second: float, due: float) -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", first)
    q.add_after("foo", second)
    assert q.waiting() == 1
    clock.advance(due - 0.001)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    clock.advance(1.0)
    assert len(q) == 1  # the superseded timer fires nothing
    assert await drain_now(q) == ["foo"]


async def test_items_come_out_in_deadline_order() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 0.05)
    q.add_after("bar", 0.03)
    q.add_after("baz", 0.04)
    clock.advance(0.06)
    assert await drain_now(q) == ["bar", "baz", "foo"]


async def test_two_fire_early() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1.0)
    q.add_after("bar", 0.05)
    clock.advance(0.06)
    assert await drain_now(q) == ["bar"]
    q.add_after("foo", 0.02)  # sooner than its pending 1 s
    clock.advance(0.03)
    assert await drain_now(q) == ["foo"]
    clock.advance(2.0)
    assert len(q) == 0


async def test_plain_add_does_not_cancel_pending_delay() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1.0)
    q.add("foo")
    assert await drain_now(q) == ["foo"]
    clock.advance(1.0)
    assert await drain_now(q) == ["foo"]


async def test_shut_down_cancels_waiting_adds() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1.0)
    q.shut_down()
    assert clock.pending_timers() == 0
    q.add_after("bar", 0.5)
    clock.advance(2.0)
    assert len(q) == 0
    assert await q.get() is None


async def test_add_rate_limited_backs_off_and_forget_resets() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        rate_limiter=ItemExponentialFailureRateLimiter(0.005, 1000.0), clock=clock
    )
    for expected_delay in (0.005, 0.010, 0.020, 0.040):
        q.add_rate_limited("ns/a")
        clock.advance(expected_delay - 0.0005)
        assert len(q) == 0
        clock.advance(0.0005)
        assert len(q) == 1
        assert await drain_now(q) == ["ns/a"]
    assert q.num_requeues("ns/a") == 4
    q.forget("ns/a")
    assert q.num_requeues("ns/a") == 0
    q.add_rate_limited("ns/a")
    clock.advance(0.005)
    assert await drain_now(q) == ["ns/a"]


async def test_rate_limiting_queue_defaults_to_controller_limiter() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    q.add_rate_limited("one")
    q.add_rate_limited("one")  # second failure wants 10 ms but the 5 ms add is still pending: earlier wins
    assert q.num_requeues("one") == 2
    clock.advance(0.005)
    assert await drain_now(q) == ["one"]
