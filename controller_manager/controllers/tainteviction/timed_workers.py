"""Timers that fire once per key: the taint eviction controller's scheduled deletions
(``pkg/controller/tainteviction/timed_workers.go``), on the injected clock.

Guarantees:
- At most one worker per key. ``add_work`` for a key that already has one (waiting or firing) does nothing.
- A worker fires no earlier than ``fire_at`` (wall seconds, ``clock.now()``); one whose time has passed fires
  at once, inside ``add_work``. Firing calls ``on_fire(key)`` (which only enqueues: it must not block) and marks
  the worker as fired; it stays registered until :meth:`finished`, so a fired deletion is not scheduled twice.
- ``cancel_work`` forgets the key and returns True only if its timer had not fired yet (upstream: "work was
  cancelled"); a fired worker is forgotten too, but the caller is told nothing was cancelled.
- ``cancel_all`` stops every timer; nothing fires afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller_manager.clock import Clock, TimerHandle

__all__ = ["TimedWorker", "TimedWorkerQueue"]


@dataclass(slots=True)
class TimedWorker:
    key: str
    created_at: float
    fire_at: float
    timer: TimerHandle | None = None
    fired: bool = False


class TimedWorkerQueue:
    def __init__(self, clock: Clock, on_fire: Callable[[str], None]) -> None:
        self._clock = clock
        self._on_fire = on_fire
        self._workers: dict[str, TimedWorker] = {}

    def __len__(self) -> int:
        return len(self._workers)

    def add_work(self, key: str, created_at: float, fire_at: float) -> None:
        if key in self._workers:
            return
        worker = TimedWorker(key, created_at, fire_at)
        self._workers[key] = worker
        delay = fire_at - self._clock.now()
        if delay <= 0:
            self._fire(worker)
        else:
            worker.timer = self._clock.call_later(delay, lambda: self._fire(worker))

    def _fire(self, worker: TimedWorker) -> None:
        if self._workers.get(worker.key) is not worker or worker.fired:
            return  # cancelled (or replaced) before the timer ran
        worker.fired = True
        worker.timer = None
        self._on_fire(worker.key)

    def cancel_work(self, key: str) -> bool:
        worker = self._workers.pop(key, None)
        if worker is None:
            return False
        if worker.timer is not None:
            worker.timer.cancel()
        return not worker.fired

    def get_worker(self, key: str) -> TimedWorker | None:
        return self._workers.get(key)

    def finished(self, key: str) -> None:
        """The fired work for ``key`` is over (done or given up): the key may be scheduled again."""
        worker = self._workers.get(key)
        if worker is not None and worker.fired:
            del self._workers[key]

    def cancel_all(self) -> None:
        for worker in self._workers.values():
            if worker.timer is not None:
                worker.timer.cancel()
        self._workers.clear()
