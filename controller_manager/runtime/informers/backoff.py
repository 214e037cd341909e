"""Jittered exponential backoff with a quiet-period reset, as client-go's reflector uses between failures.

Guarantees (client-go ``wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0, clock)``):
- The n-th consecutive delay is drawn from ``[d, d * (1 + jitter))`` where ``d = initial * factor**(n-1)``,
  capped at ``cap`` (so with the defaults delays settle in ``[30 s, 60 s)``).
- If more than ``reset_after`` seconds passed (on the injected clock) since the previous backoff started, the
  sequence starts over from ``initial``: a reflector that has been healthy for a while reconnects quickly.
"""

from __future__ import annotations

import random

from controller_manager.clock import Clock

INITIAL_BACKOFF = 0.8
MAX_BACKOFF = 30.0
RESET_AFTER = 120.0
FACTOR = 2.0
JITTER = 1.0


class ExponentialBackoff:
    def __init__(
        self,
        clock: Clock,
        *,
        initial: float = INITIAL_BACKOFF,
        cap: float = MAX_BACKOFF,
        reset_after: float = RESET_AFTER,
        factor: float = FACTOR,
        jitter: float = JITTER,
        rng: random.Random | None = None,
    ) -> None:
        self._clock = clock
        self._initial = initial
        self._cap = cap
        self._reset_after = reset_after
        self._factor = factor
        self._jitter = jitter
        self._rng = rng or random.Random()
        self._next = initial
        self._last_start: float | None = None

    def next_delay(self) -> float:
        """The delay to wait now, advancing the sequence."""
        now = self._clock.monotonic()
        if self._last_start is None or now - self._last_start > self._reset_after:
            self._next = self._initial
        self._last_start = now
        delay = self._next
        self._next = min(self._next * self._factor, self._cap)
        if self._jitter > 0:
            delay += self._rng.random() * self._jitter * delay
        return delay

    async def wait(self) -> float:
        """Sleep (on the injected clock) for the next delay; returns how long that was."""
        delay = self.next_delay()
        await self._clock.sleep(delay)
        return delay
