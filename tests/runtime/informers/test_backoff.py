"""The reflector's backoff: client-go's NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)."""

from __future__ import annotations

import asyncio
import random

import pytest

from controller_manager.clock import FakeClock
from controller_manager.runtime.informers.backoff import ExponentialBackoff


@pytest.mark.parametrize(
    ("step", "low", "high"),
    [
        pytest.param(1, 0.8, 1.6, id="first"),
        pytest.param(2, 1.6, 3.2, id="second"),
        pytest.param(3, 3.2, 6.4, id="third"),
        pytest.param(6, 25.6, 51.2, id="sixth"),
        pytest.param(7, 30.0, 60.0, id="capped"),
        pytest.param(20, 30.0, 60.0, id="stays-capped"),
    ],
)
def test_delays_double_with_jitter_up_to_the_cap(step: int, low: float, high: float) -> None:
    for seed in range(20):
        backoff = ExponentialBackoff(FakeClock(), rng=random.Random(seed))
        delays = [backoff.next_delay() for _ in range(step)]
        assert low <= delays[-1] < high


def test_without_jitter_the_sequence_is_exact() -> None:
    backoff = ExponentialBackoff(FakeClock(), jitter=0.0)
    assert [backoff.next_delay() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_resets_after_two_quiet_minutes() -> None:
    clock = FakeClock()
    backoff = ExponentialBackoff(clock, jitter=0.0)
    for _ in range(5):
        backoff.next_delay()
    clock.advance(120.0)  # not more than the reset period: keeps growing
    assert backoff.next_delay() == 25.6
    clock.advance(120.1)
    assert backoff.next_delay() == 0.8


async def test_wait_sleeps_on_the_injected_clock() -> None:
    clock = FakeClock()
    backoff = ExponentialBackoff(clock, jitter=0.0)
    task = asyncio.create_task(backoff.wait(), name="backoff-wait")
    for _ in range(3):
        await asyncio.sleep(0)
    clock.advance(0.79)
    for _ in range(3):
        await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.01)
    assert await task == 0.8
