"""Every simulated node's periodic kubelet work (Lease renewal, node-status check) on one timer.

Guarantees:
- :meth:`HeartbeatSchedule.arm` makes a node's beats of each kind fire every ``interval`` seconds of the
  injected clock, the first one ``interval`` after arming, each next one ``interval`` after the previous fired:
  the times per-node repeating timers would give. Arming again, or :meth:`disarm`, drops the node's pending beats.
- However many nodes, one clock timer is pending (for the earliest beat). When it fires, every beat then due is
  handed to ``on_due`` in one list, in due order (ties in the order they were scheduled), so a caller can do
  them in one pass instead of one task or queued action per node.
- Nothing here does I/O; ``on_due`` is called synchronously from the timer.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from controller_manager.clock import Clock, TimerHandle

__all__ = ["HeartbeatSchedule"]

K = TypeVar("K", bound=Hashable)  # what is beating: a node name
B = TypeVar("B", bound=Hashable)  # which beat: "lease", "status"


class HeartbeatSchedule(Generic[K, B]):
    def __init__(self, clock: Clock, on_due: Callable[[list[tuple[K, B]]], None]) -> None:
        self._clock = clock
        self._on_due = on_due
        self._heap: list[tuple[float, int, K, B, int, float]] = []  # (due, seq, key, beat, epoch, interval)
        self._epochs: dict[K, int] = {}  # a beat whose epoch is not its key's current one is dropped
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_due = float("inf")

    def arm(self, key: K, beats: list[tuple[B, float]]) -> None:
        """(Re)start ``key``'s beats: each ``(beat, interval)`` fires every ``interval`` seconds from now."""
        epoch = self._epochs.get(key, 0) + 1
        self._epochs[key] = epoch
        now = self._clock.monotonic()
        for beat, interval in beats:
            heapq.heappush(self._heap, (now + interval, next(self._seq), key, beat, epoch, interval))
        self._rearm()

    def disarm(self, key: K) -> None:
        """Stop ``key``'s beats (their heap entries go stale and are dropped when reached)."""
        if key in self._epochs:
            self._epochs[key] += 1

    def cancel(self) -> None:
        """Stop everything."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_due = float("inf")
        self._heap.clear()
        self._epochs.clear()

    @property
    def pending(self) -> int:
        """Beats scheduled (stale ones included until they are reached)."""
        return len(self._heap)

    def _rearm(self) -> None:
        heap = self._heap
        epochs = self._epochs
        while heap and epochs.get(heap[0][2]) != heap[0][4]:
            heapq.heappop(heap)  # stale entries at the top would only wake the timer for nothing
        due = heap[0][0] if heap else float("inf")
        if due >= self._timer_due:
            return  # the pending timer fires first (or nothing is left to fire)
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        self._timer = self._clock.call_later(max(0.0, due - self._clock.monotonic()), self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_due = float("inf")
        now = self._clock.monotonic()
        heap = self._heap
        epochs = self._epochs
        due: list[tuple[K, B]] = []
        later: list[tuple[float, int, K, B, int, float]] = []
        while heap and heap[0][0] <= now:
            _, _, key, beat, epoch, interval = heapq.heappop(heap)
            if epochs.get(key) != epoch:
                continue
            due.append((key, beat))
            later.append((now + interval, next(self._seq), key, beat, epoch, interval))
        for entry in later:
            heapq.heappush(heap, entry)
        self._rearm()
        if due:
            self._on_due(due)
