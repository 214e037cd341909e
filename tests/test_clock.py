from __future__ import annotations

import asyncio

from controller_manager.clock import FakeClock


async def test_fake_clock_fires_timers_in_order_and_wakes_sleepers() -> None:
    clock = FakeClock()
    fired: list[tuple[str, float]] = []
    clock.call_later(2, lambda: fired.append(("b", clock.monotonic())))
    clock.call_later(1, lambda: fired.append(("a", clock.monotonic())))
    cancelled = clock.call_later(1.5, lambda: fired.append(("x", clock.monotonic())))
    cancelled.cancel()
    sleeper = asyncio.create_task(clock.sleep(3))
    await asyncio.sleep(0)
    clock.advance(2.5)
    assert fired == [("a", 1.0), ("b", 2.0)]
    assert not sleeper.done()
    clock.advance(0.5)
    await asyncio.wait_for(sleeper, 1)
    assert clock.monotonic() == 3.0
