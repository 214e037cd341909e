"""Rate-limited re-adds: client-go's rate limiting queue.

Guarantees:
- ``add_rate_limited(key)`` adds ``key`` after the delay its rate limiter gives (``add_after(key,
  limiter.when(key))``), so a key that keeps failing backs off (5 ms, 10 ms, 20 ms, ... up to 1000 s with
  the default limiter) and all retries together stay under the overall bucket.
- ``forget(key)`` clears the limiter's memory of the key (call it when a sync succeeds); it does not
  replace ``done``. ``num_requeues(key)`` is the limiter's failure count for the key.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from controller_manager.clock import Clock, RealClock
from controller_manager.runtime.workqueue.delaying import DelayingQueue
from controller_manager.runtime.workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """A ``DelayingQueue`` whose retries are spaced by a ``RateLimiter`` (client-go's default if none given)."""

    def __init__(self, name: str = "", *, rate_limiter: RateLimiter | None = None, clock: Clock | None = None) -> None:
        clock = clock if clock is not None else RealClock()
        super().__init__(name, clock=clock)
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock)
        )

    def add_rate_limited(self, key: T) -> None:
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: T) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: T) -> int:
        return self.rate_limiter.num_requeues(key)
