"""Delayed adds: client-go's delaying queue, driven by the injected clock's timers.

Guarantees:
- ``add_after(key, seconds)`` adds ``key`` once ``seconds`` have passed on the queue's clock; ``seconds <= 0``
  adds it at once. Every call counts as a retry in ``workqueue_retries_total`` (as upstream).
- A key waits at most once: a second ``add_after`` for a key already waiting keeps the earlier deadline
  (client-go's "earlier wins"), so a later, longer delay never postpones a pending add.
- A plain ``add`` of a waiting key does not cancel the pending delayed add (upstream does not either); the
  queue's deduplication makes the second add harmless.
- No polling loop and no task: each waiting key holds one clock timer (``Clock.call_later``). Shutting down
  cancels them all, and nothing is added afterwards.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import partial
from typing import TypeVar

from controller_manager.clock import Clock, TimerHandle
from controller_manager.runtime.workqueue.queue import WorkQueue

T = TypeVar("T", bound=Hashable)


class DelayingQueue(WorkQueue[T]):
    """A ``WorkQueue`` that can also add a key after a delay."""

    def __init__(self, name: str = "", *, clock: Clock | None = None) -> None:
        super().__init__(name, clock=clock)
        # key -> (monotonic ready time, timer that will add it)
        self._waiting: dict[T, tuple[float, TimerHandle]] = {}

    def add_after(self, key: T, seconds: float) -> None:
        """Add ``key`` after ``seconds`` (at once if ``seconds <= 0``); ignored once shutting down."""
        if self._shutting_down:
            return
        self._stats.retries += 1
        if seconds <= 0:
            self.add(key)
            return
        ready_at = self._monotonic() + seconds
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        self._waiting[key] = (ready_at, self._clock.call_later(seconds, partial(self._ready, key)))

    def waiting(self) -> int:
        """Keys waiting for their delay to pass."""
        return len(self._waiting)

    def shut_down(self) -> None:
        self._cancel_timers()
        super().shut_down()

    async def shut_down_with_drain(self) -> None:
        self._cancel_timers()
        await super().shut_down_with_drain()

    def _ready(self, key: T) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def _cancel_timers(self) -> None:
        for _, timer in self._waiting.values():
            timer.cancel()
        self._waiting.clear()
