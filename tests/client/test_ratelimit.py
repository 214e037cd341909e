"""The token bucket holds qps/burst as client-go's flowcontrol limiter does, on fake time."""

from __future__ import annotations

import asyncio

import pytest

from controller_manager.client.ratelimit import TokenBucket
from controller_manager.clock import FakeClock


async def _drive(clock: FakeClock, tasks: list[asyncio.Task[float]], step: float = 0.01) -> None:
    """Advance fake time in small steps until every task is done (bounded, so a bug cannot hang)."""
    for _ in range(100_000):
        await asyncio.sleep(0)
        if all(t.done() for t in tasks):
            return
        clock.advance(step)
    raise AssertionError("limiter never released every caller")


@pytest.mark.parametrize(
    ("calls", "qps", "burst", "expected_seconds"),
    [
        pytest.param(100, 20.0, 30, 3.5, id="100-calls-qps20-burst30"),
        pytest.param(30, 20.0, 30, 0.0, id="burst-is-free"),
        pytest.param(31, 20.0, 30, 0.05, id="one-past-burst-waits-one-interval"),
        pytest.param(10, 5.0, 1, 1.8, id="burst-1-spaces-every-call"),
        pytest.param(10, 5.0, 0, 1.8, id="burst-0-behaves-as-1"),
    ],
)
async def test_holds_qps(calls: int, qps: float, burst: int, expected_seconds: float) -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps, burst, clock)
    done_at: list[float] = []

    async def call() -> float:
        waited = await bucket.acquire()
        done_at.append(clock.monotonic())
        return waited

    tasks = [asyncio.ensure_future(call()) for _ in range(calls)]
    await _drive(clock, tasks, step=0.005)
    assert max(done_at) == pytest.approx(expected_seconds, abs=0.006)
    # Turns are handed out in call order, one 1/qps interval apart past the burst.
    waits = [t.result() for t in tasks]
    assert waits == sorted(waits)
    assert sum(1 for w in waits if w == 0.0) == min(calls, max(burst, 1))


async def test_refills_at_qps_up_to_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 5, clock)
    assert all(bucket.try_accept() for _ in range(5))
    assert not bucket.try_accept()
    clock.advance(0.25)  # 2.5 tokens back
    assert bucket.try_accept()
    assert bucket.try_accept()
    assert not bucket.try_accept()
    clock.advance(60.0)  # never more than burst
    assert sum(bucket.try_accept() for _ in range(10)) == 5


async def test_disabled_never_waits() -> None:
    clock = FakeClock()
    bucket = TokenBucket(0.0, 1, clock)
    assert not bucket.enabled
    assert [await bucket.acquire() for _ in range(1000)] == [0.0] * 1000
    assert bucket.try_accept()
    assert clock.pending_timers() == 0


async def test_cancelled_waiter_gives_its_token_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1.0, 1, clock)
    assert await bucket.acquire() == 0.0
    waiter = asyncio.ensure_future(bucket.acquire())
    await asyncio.sleep(0)
    assert clock.pending_timers() == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    clock.advance(1.0)
    # The cancelled caller's reservation was returned: a token is free again after one interval.
    assert bucket.try_accept()
