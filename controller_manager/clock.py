"""Injectable time: every timer, backoff, deadline and schedule in the project reads a Clock.

Guarantees:
- ``RealClock`` is the event loop's time (monotonic) plus ``time.time()`` for wall timestamps.
- ``FakeClock`` never moves by itself: tests call ``advance(seconds)``, which fires every timer
  that has come due, in due order, and wakes ``sleep`` callers. Tests therefore never sleep for real.
- ``call_later`` returns a handle whose ``cancel()`` is idempotent; callbacks run on the event loop.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the epoch (for API timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations and deadlines)."""
        ...

    async def sleep(self, delay: float) -> None: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


def utc_datetime(clock: Clock) -> datetime:
    return datetime.fromtimestamp(clock.now(), tz=UTC)


class RealClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback)


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to. ``now()`` starts at ``start`` (epoch seconds)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._wall_offset = start
        self._mono = 0.0
        self._seq = itertools.count()
        self._timers: list[tuple[float, int, _FakeTimer]] = []

    def now(self) -> float:
        return self._wall_offset + self._mono

    def monotonic(self) -> float:
        return self._mono

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(self._mono + max(0.0, delay), callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    async def sleep(self, delay: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        handle = self.call_later(delay, wake)
        try:
            await fut
        finally:
            handle.cancel()

    def advance(self, seconds: float) -> None:
        """Move time forward, firing due timers in order (each sees ``monotonic()`` at its due time)."""
        target = self._mono + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._mono = max(self._mono, when)
            timer.callback()
        self._mono = target

    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)
