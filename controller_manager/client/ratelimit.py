"""Client-side request throttle: a token bucket with client-go flowcontrol semantics.

Guarantees (``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``, i.e. ``rate.Limiter.Wait``):
- The bucket starts full with ``burst`` tokens and refills at ``qps`` tokens per second, never past
  ``burst``. Each ``acquire()`` takes one token; when none is left it *waits* for its turn instead of
  failing. Turns are handed out in call order: the n-th caller past the burst waits ``(n - burst) / qps``.
- A caller cancelled while waiting gives its token back, so cancellation does not slow the others.
- ``qps <= 0`` disables the limit: ``acquire()`` never waits.
- Time comes from the injected clock, so tests run on a FakeClock.
"""

from __future__ import annotations

import asyncio

from controller_manager.clock import Clock, RealClock


class TokenBucket:
    __slots__ = ("_burst", "_clock", "_last", "_qps", "_tokens")

    def __init__(self, qps: float, burst: int, clock: Clock | None = None) -> None:
        self._qps = float(qps)
        # client-go refuses burst < 1 with a positive qps; one token at a time is the sane reading.
        self._burst = float(max(1, burst))
        self._clock: Clock = clock or RealClock()
        self._tokens = self._burst
        self._last = self._clock.monotonic()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return int(self._burst)

    @property
    def enabled(self) -> bool:
        return self._qps > 0

    def _reserve(self) -> float:
        """Take a token now (possibly going into debt); return how long the caller must wait."""
        now = self._clock.monotonic()
        tokens = self._tokens + (now - self._last) * self._qps
        if tokens > self._burst:
            tokens = self._burst
        self._last = now
        tokens -= 1.0
        self._tokens = tokens
        return 0.0 if tokens >= 0.0 else -tokens / self._qps

    def try_accept(self) -> bool:
        """Take a token if one is free now, without waiting (client-go ``TryAccept``)."""
        if self._qps <= 0:
            return True
        now = self._clock.monotonic()
        tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return True
        self._tokens = tokens
        return False

    async def acquire(self) -> float:
        """Wait for a token; return the seconds waited (0.0 when one was free)."""
        if self._qps <= 0:
            return 0.0
        delay = self._reserve()
        if delay <= 0.0:
            return 0.0
        try:
            await self._clock.sleep(delay)
        except asyncio.CancelledError:
            self._tokens += 1.0
            raise
        return delay
