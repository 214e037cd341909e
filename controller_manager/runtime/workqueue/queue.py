"""The work queue: client-go's ``workqueue.Typed`` for one asyncio event loop.

Guarantees (client-go ``util/workqueue/doc.go``):
- Fair: keys are handed out in the order they were added (FIFO).
- Stingy: a key added many times before a worker gets it is handed out once.
- Exclusive: a key is never handed to a second worker while the first is processing it (between ``get``
  and ``done``). Adding it meanwhile marks it dirty, and ``done`` puts it back at the end of the queue, so it is
  processed exactly once more however many times it was re-added.
- Shutdown: after ``shut_down`` new adds are ignored; ``get`` keeps handing out what is already queued and
  returns None once the queue is empty (waiting getters wake with None at once). ``shut_down_with_drain``
  also waits until every key handed out has been marked ``done``; a later ``shut_down`` stops that wait.

Single-threaded by design: every method runs on the event loop, so plain sets and a deque replace client-go's
mutex and condition variable. Only ``get`` (when the queue is empty) and ``shut_down_with_drain`` wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from controller_manager.clock import Clock, RealClock
from controller_manager.runtime.workqueue.metrics import InFlight, QueueStats, stats_for

T = TypeVar("T", bound=Hashable)


class WorkQueue(Generic[T]):
    """A deduplicating FIFO of keys with exclusive processing. ``name`` labels its metrics ("" = none)."""

    def __init__(self, name: str = "", *, clock: Clock | None = None) -> None:
        self.name = name
        self._clock: Clock = clock if clock is not None else RealClock()
        # Every key in _queue is in _dirty and not in _processing (client-go's invariant).
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drained: asyncio.Future[None] | None = None
        self._shutting_down = False
        self._drain = False
        # Metrics, kept as plain numbers here and turned into samples at scrape time.
        self._stats: QueueStats = stats_for(name)
        self._monotonic = self._clock.monotonic
        self._add_times: dict[T, float] = {}
        self._started: dict[T, float] = {}
        self._in_flight = InFlight(self._monotonic, self._started)
        if name:
            self._stats.live.add(self._in_flight)

    # -- client-go verbs -------------------------------------------------------------------------------

    def add(self, key: T) -> None:
        """Mark ``key`` as needing processing (ignored once shutting down)."""
        if self._shutting_down or key in self._dirty:
            return
        stats = self._stats
        stats.adds += 1
        stats.depth += 1
        if key not in self._add_times:
            self._add_times[key] = self._monotonic()
        self._dirty.add(key)
        if key in self._processing:
            # done() will queue it again; handing it out now would give one key to two workers.
            return
        self._queue.append(key)
        if self._getters:
            self._wake_one()

    async def get(self) -> T | None:
        """The next key to process, waiting for one; None once shut down with nothing left queued.

        The caller owns the key until it calls ``done(key)``.
        """
        queue = self._queue
        while not queue:
            if self._shutting_down:
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up meant for this getter must not be lost with it: pass it on.
                if waiter.done() and not waiter.cancelled() and self._queue:
                    self._wake_one()
                raise
        key = queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        now = self._monotonic()
        self._started[key] = now
        stats = self._stats
        stats.depth -= 1
        added = self._add_times.pop(key, None)
        if added is not None:
            stats.queue_duration.observe(now - added)
        return key

    def done(self, key: T) -> None:
        """Mark ``key`` as processed; if it was re-added meanwhile, queue it again."""
        started = self._started.pop(key, None)
        if started is not None:
            self._stats.work_duration.observe(self._monotonic() - started)
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            if self._getters:
                self._wake_one()
        elif not self._processing and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def shut_down(self) -> None:
        """Ignore new adds and release waiting getters; queued keys are still handed out until empty."""
        self._drain = False
        self._shutting_down = True
        self._wake_all()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    async def shut_down_with_drain(self) -> None:
        """Like ``shut_down``, then wait until every key handed out is ``done`` (or ``shut_down`` is called)."""
        self._drain = True
        self._shutting_down = True
        self._wake_all()
        while self._processing and self._drain:
            if self._drained is None or self._drained.done():
                self._drained = asyncio.get_running_loop().create_future()
            await self._drained

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys waiting to be handed out (not those in processing, nor delayed ones)."""
        return len(self._queue)

    # -- internals -------------------------------------------------------------------------------------

    def _wake_one(self) -> None:
        getters = self._getters
        while getters:
            waiter = getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_all(self) -> None:
        getters = self._getters
        while getters:
            waiter = getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
