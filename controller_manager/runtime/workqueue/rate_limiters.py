"""Rate limiters for re-adds: client-go's ``default_rate_limiters.go``.

A rate limiter answers "how long should this item wait before it is added again?" (``when``), counts the
item's failures (``num_requeues``) and forgets them on success (``forget``). Guarantees:
- ``ItemExponentialFailureRateLimiter(base, max)``: the n-th consecutive ``when`` for an item is
  ``base * 2**(n-1)``, capped at ``max``; ``forget`` starts the item over at ``base``.
- ``ItemFastSlowRateLimiter(fast, slow, max_fast)``: ``fast`` for the first ``max_fast`` attempts, then ``slow``.
- ``BucketRateLimiter(qps, burst)``: one token bucket shared by all items, as golang.org/x/time/rate's
  ``Reserve().Delay()``: ``burst`` items pass at once, later ones are spaced ``1/qps`` apart. Time comes from
  the injected clock's monotonic time. It keeps no per-item state.
- ``MaxOfRateLimiter(*limiters)``: asks every limiter (so each records the attempt) and returns the longest
  wait; ``num_requeues`` is the largest count, ``forget`` forgets everywhere.
- ``WithMaxWaitRateLimiter(limiter, max_delay)``: another limiter's answer capped at ``max_delay``.
- ``default_controller_rate_limiter()``: client-go's ``DefaultControllerRateLimiter``: per-item exponential
  5 ms .. 1000 s, combined with an overall 10 qps / burst 100 bucket.
All times are seconds (floats).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from controller_manager.clock import Clock, RealClock


class RateLimiter(Protocol):
    def when(self, item: Hashable) -> float:
        """Seconds ``item`` should wait before it is added again; records the attempt."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item`` (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many times ``item`` has been rate limited since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """``base_delay * 2**failures`` per item, capped at ``max_delay``."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # 2.0 ** 1024 overflows; anything that large is far beyond any sane cap anyway.
        if exp >= 1023:
            return self.max_delay
        return min(self.base_delay * 2.0**exp, self.max_delay)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)


class ItemFastSlowRateLimiter:
    """``fast_delay`` for the first ``max_fast_attempts`` tries of an item, ``slow_delay`` after."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        attempts = self._failures.get(item, 0) + 1
        self._failures[item] = attempts
        return self.fast_delay if attempts <= self.max_fast_attempts else self.slow_delay

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)


class BucketRateLimiter:
    """An overall token bucket: ``burst`` tokens, refilled at ``qps`` per second; ``when`` reserves one."""

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError("qps must be positive")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.qps = qps
        self.burst = burst
        self._clock: Clock = clock if clock is not None else RealClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    def when(self, item: Hashable) -> float:
        now = self._clock.monotonic()
        elapsed = now - self._last if now > self._last else 0.0
        self._last = max(now, self._last)
        # Tokens may go negative: each reservation then waits for the refill that covers it.
        tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
        self._tokens = tokens
        return -tokens / self.qps if tokens < 0 else 0.0

    def num_requeues(self, item: Hashable) -> int:
        return 0

    def forget(self, item: Hashable) -> None:
        return None


class MaxOfRateLimiter:
    """The worst case of several limiters."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        longest = 0.0
        for limiter in self.limiters:
            longest = max(longest, limiter.when(item))
        return longest

    def num_requeues(self, item: Hashable) -> int:
        return max((limiter.num_requeues(item) for limiter in self.limiters), default=0)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)


class WithMaxWaitRateLimiter:
    """Another limiter's answer, capped at ``max_delay``."""

    def __init__(self, limiter: RateLimiter, max_delay: float) -> None:
        self.limiter = limiter
        self.max_delay = max_delay

    def when(self, item: Hashable) -> float:
        return min(self.limiter.when(item), self.max_delay)

    def num_requeues(self, item: Hashable) -> int:
        return self.limiter.num_requeues(item)

    def forget(self, item: Hashable) -> None:
        self.limiter.forget(item)


def default_controller_rate_limiter(clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go's ``DefaultControllerRateLimiter``: exponential 5 ms..1000 s per item, max'd with 10 qps/100."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
