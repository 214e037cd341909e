"""The per-zone tainting queue: unique values ordered by when to process them, drained under a token bucket
(``pkg/controller/nodelifecycle/scheduler/rate_limited_queue.go``).

Guarantees:
- A value is in a :class:`UniqueQueue` at most once. ``add`` refuses a value that was added and not yet
  ``remove``\\ d, even after it was processed (``remove_from_queue`` keeps it in the set), so one outage taints a
  node once; ``remove`` (the node is healthy again) allows it to be added again.
- :meth:`RateLimitedTimedQueue.try_process` walks values by ``process_at`` (then insertion order) and spends one
  token per value looked at: it stops at the first refused token or the first value not yet due. A value whose
  action fails is put back with ``process_at = now + wait + 1 ns``; one that succeeds leaves the queue but not the
  set.
- Limiters read the injected clock. A bucket starts full (``burst`` tokens, upstream's
  ``EvictionRateLimiterBurst`` is 1) and refills at ``qps``; qps <= 0 is a limiter that never accepts (the
  "stop evicting" of full disruption). :meth:`swap_limiter` keeps a drained bucket drained across the swap, as
  upstream does.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from controller_manager.clock import Clock

__all__ = [
    "EVICTION_RATE_LIMITER_BURST",
    "NODE_EVICTION_PERIOD",
    "NODE_HEALTH_UPDATE_RETRY",
    "NeverRateLimiter",
    "RateLimitedTimedQueue",
    "RateLimiter",
    "TimedValue",
    "TokenBucketRateLimiter",
    "UniqueQueue",
]

NODE_HEALTH_UPDATE_RETRY = 5  # tries of one node's status write per monitor pass
NODE_EVICTION_PERIOD = 0.1  # how often the NoExecute tainting pass drains the zone queues
EVICTION_RATE_LIMITER_BURST = 1
_ONE_NANOSECOND = 1e-9


class RateLimiter(Protocol):
    """The part of client-go's ``flowcontrol.RateLimiter`` the queue uses."""

    def try_accept(self) -> bool: ...

    @property
    def qps(self) -> float: ...


class TokenBucketRateLimiter:
    """``flowcontrol.NewTokenBucketRateLimiter``: ``burst`` tokens at start, ``qps`` more per second."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.monotonic()

    @property
    def qps(self) -> float:
        return self._qps

    def try_accept(self) -> bool:
        now = self._clock.monotonic()
        if now > self._last:
            self._tokens = min(float(self._burst), self._tokens + (now - self._last) * self._qps)
            self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class NeverRateLimiter:
    """``flowcontrol.NewFakeNeverRateLimiter``: refuses everything; its qps is 0."""

    @property
    def qps(self) -> float:
        return 0.0

    def try_accept(self) -> bool:
        return False


@dataclass(slots=True)
class TimedValue:
    """A value to process no earlier than ``process_at`` (monotonic seconds)."""

    value: str
    uid: str
    added_at: float
    process_at: float
    seq: int = field(default=0, compare=False)


class UniqueQueue:
    """A heap of :class:`TimedValue` by ``process_at`` plus the set of values that may not be added again."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimedValue]] = []
        self._set: set[str] = set()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def __contains__(self, value: object) -> bool:
        return value in self._set

    def add(self, value: TimedValue) -> bool:
        if value.value in self._set:
            return False
        self._push(value)
        self._set.add(value.value)
        return True

    def replace(self, value: TimedValue) -> bool:
        """Put ``value`` in place of the queued entry with the same value; False if there is none."""
        if not self._drop(value.value):
            return False
        self._push(value)
        return True

    def remove_from_queue(self, value: str) -> bool:
        """Take ``value`` out of the heap but keep it in the set (it will not be added again)."""
        if value not in self._set:
            return False
        return self._drop(value)

    def remove(self, value: str) -> bool:
        """Forget ``value`` entirely: out of the heap and the set. False if it was never added."""
        if value not in self._set:
            return False
        self._set.discard(value)
        self._drop(value)
        return True

    def get(self) -> TimedValue | None:
        if not self._heap:
            return None
        _, _, value = heapq.heappop(self._heap)
        self._set.discard(value.value)
        return value

    def head(self) -> TimedValue | None:
        return self._heap[0][2] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
        self._set.clear()

    def _push(self, value: TimedValue) -> None:
        value.seq = next(self._seq)
        heapq.heappush(self._heap, (value.process_at, value.seq, value))

    def _drop(self, value: str) -> bool:
        for i, (_, _, entry) in enumerate(self._heap):
            if entry.value == value:
                self._heap[i] = self._heap[-1]
                self._heap.pop()
                heapq.heapify(self._heap)
                return True
        return False


# fn(value) -> (done, wait): done False puts the value back to be retried ``wait`` seconds later.
ActionFunc = Callable[[TimedValue], Awaitable[tuple[bool, float]]]


class RateLimitedTimedQueue:
    """A :class:`UniqueQueue` whose processing is paced by a swappable rate limiter."""

    def __init__(self, limiter: RateLimiter, clock: Clock) -> None:
        self.queue = UniqueQueue()
        self.limiter = limiter
        self._clock = clock

    def __len__(self) -> int:
        return len(self.queue)

    async def try_process(self, fn: ActionFunc) -> None:
        """Process due values while the limiter allows (upstream's ``Try``)."""
        val = self.queue.head()
        while val is not None:
            if not self.limiter.try_accept():
                break
            now = self._clock.monotonic()
            if now < val.process_at:
                break
            done, wait = await fn(val)
            if val.value not in self.queue:
                # Removed while fn ran (the node recovered or went away): nothing to put back.
                val = self.queue.head()
                continue
            if done:
                self.queue.remove_from_queue(val.value)
            else:
                self.queue.replace(TimedValue(val.value, val.uid, val.added_at, now + wait + _ONE_NANOSECOND))
            val = self.queue.head()

    def add(self, value: str, uid: str) -> bool:
        now = self._clock.monotonic()
        return self.queue.add(TimedValue(value, uid, now, now))

    def remove(self, value: str) -> bool:
        return self.queue.remove(value)

    def clear(self) -> None:
        self.queue.clear()

    def swap_limiter(self, qps: float) -> None:
        """Pace the queue at ``qps`` from now on (0: never). Same qps: keep the current bucket."""
        if self.limiter.qps == qps:
            return
        new: RateLimiter
        if qps <= 0:
            new = NeverRateLimiter()
        else:
            new = TokenBucketRateLimiter(qps, EVICTION_RATE_LIMITER_BURST, self._clock)
            # A drained bucket stays drained, so swapping limiters cannot be used to skip the wait.
            if not self.limiter.try_accept():
                new.try_accept()
        self.limiter = new
