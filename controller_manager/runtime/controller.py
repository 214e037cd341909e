"""The Controller contract and the one worker loop every controller shares.

A controller maps informer events to keys (``namespace/name``) on its queue and implements
``sync(key)``: level-based, reading the cache, writing through the client. It never writes a worker
loop of its own; :func:`run_controller` owns get/sync/done/forget/backoff (controller-runtime's
Reconciler contract, client-go's ``processNextWorkItem``).

Guarantees of :func:`run_controller`:
- ``workers`` tasks each loop ``key = await queue.get()`` until the queue is shut down and empty
  (``None``). The queue hands a key to one worker at a time, so one key is never synced twice at once.
- After ``sync``: ``Result(requeue_after=s)`` -> ``forget`` + ``add_after(key, s)``; ``None`` or a
  ``Result`` without a delay -> ``forget``; an exception -> a structured log line (controller, key,
  error) + ``add_rate_limited`` (growing per-key backoff). ``done(key)`` always follows.
- A sync exception never kills a worker. A worker that dies anyway (a bug outside ``sync``) is logged
  and makes :meth:`Controller.health` report it; the other workers keep going.
- Shutting the queue down stops intake; in-flight syncs run to completion and queued keys drain;
  then :func:`run_controller` returns. Cancelling it cancels the workers (the manager does this after
  its drain timeout).
- ``Controller.run_background()`` (long-lived work beside the workers: a second queue, a periodic loop; none by
  default) runs as one more task, started with the workers and cancelled once they have all returned. An
  exception from it is logged and reported by :meth:`Controller.health`; the workers keep going.
- Prometheus: ``controller_sync_duration_seconds{controller}`` (histogram) and
  ``controller_sync_errors_total{controller}`` (counter), on the default registry.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import structlog
from prometheus_client import Counter, Histogram

from controller_manager.client import ApiClient, Conflict
from controller_manager.clock import Clock
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

__all__ = [
    "SYNC_DURATION",
    "SYNC_ERRORS",
    "Controller",
    "ControllerContext",
    "Result",
    "run_controller",
]

SYNC_DURATION = Histogram(
    "controller_sync_duration_seconds",
    "Time one sync of one key took, by controller.",
    ["controller"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
SYNC_ERRORS = Counter(
    "controller_sync_errors_total",
    "Syncs that raised (and were retried with backoff), by controller.",
    ["controller"],
)


@dataclass(frozen=True, slots=True)
class Result:
    """What a sync asks of the runner: ``requeue_after`` seconds -> sync the key again then."""

    requeue_after: float | None = None


@dataclass
class ControllerContext:
    """Everything a controller is built from; one per controller (``logger`` is bound to its name)."""

    client: ApiClient
    informers: SharedInformerFactory
    clock: Clock
    events: EventBroadcaster
    options: Mapping[str, Any] = field(default_factory=dict)  # parsed flags, by flag name without dashes
    logger: Any = field(default_factory=lambda: structlog.get_logger("controller_manager.controller"))

    def new_queue(self, name: str) -> RateLimitingQueue[str]:
        """A rate-limited queue named ``name`` (its metrics' label), on this context's clock."""
        return RateLimitingQueue(name, rate_limiter=default_controller_rate_limiter(self.clock), clock=self.clock)


class Controller(ABC):
    """A controller: class-level identity for the registry, a queue of keys, and ``sync``."""

    name: ClassVar[str]  # canonical, as kube-controller-manager spells it: "replicaset-controller"
    alias: ClassVar[str]  # short name accepted by --controllers: "replicaset"
    enabled_by_default: ClassVar[bool] = True
    workers_option: ClassVar[str | None] = None  # flag giving the worker count: "concurrent-replicaset-syncs"
    default_workers: ClassVar[int] = 1
    # Name of the work queue (the ``name`` label of the workqueue_* metrics): upstream's own queue name
    # ("deployment", "replicaset", ...) so kube-controller-manager's dashboards and alerts keep working.
    queue_name: ClassVar[str | None] = None
    # (qps, burst) multipliers when the controller needs its own API client with a larger rate limit than the
    # daemon's --kube-api-qps/--kube-api-burst (upstream does this for the namespace controller); None: shared.
    client_rate_scale: ClassVar[tuple[float, float] | None] = None

    queue: RateLimitingQueue[str]

    def __init__(self, ctx: ControllerContext) -> None:
        """Subclasses call this first, then take informers from ``ctx.informers`` and add handlers."""
        self.ctx = ctx
        self.log = ctx.logger.bind(controller=self.name)
        self.queue = ctx.new_queue(self.queue_name or self.name)
        self._dead_workers: list[str] = []

    @abstractmethod
    async def sync(self, key: str) -> Result | None:
        """Bring ``key``'s object to its desired state. Raise to be retried with backoff."""

    async def run_background(self) -> None:
        """Long-lived work beside the workers (extra queues, periodic loops); nothing by default.

        :func:`run_controller` starts it with the workers and cancels it once they have returned (this
        controller's queue was shut down and drained), so it must stop promptly when cancelled."""
        return None

    def health(self) -> str | None:
        """None when healthy; otherwise why not (the ``/healthz/<name>`` check)."""
        if self._dead_workers:
            return f"{len(self._dead_workers)} worker(s) died: {self._dead_workers[0]}"
        return None

    def workers(self) -> int:
        """How many workers to run: the ``workers_option`` flag if set, else ``default_workers``."""
        if self.workers_option is not None:
            value = self.ctx.options.get(self.workers_option.replace("-", "_"),
                                         self.ctx.options.get(self.workers_option))
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return self.default_workers


async def _process(controller: Controller, key: str, duration: Histogram, errors: Counter) -> None:
    """One sync of ``key`` and what follows it (the caller marks it done)."""
    queue = controller.queue
    clock = controller.ctx.clock
    started = clock.monotonic()
    try:
        result = await controller.sync(key)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # we are being stopped
        # A stray cancellation from inside the sync is a failure like any other, not a stop.
        errors.inc()
        controller.log.error("sync failed", key=key, error="sync was cancelled from within")
        queue.add_rate_limited(key)
        return
    except Exception as err:
        duration.observe(clock.monotonic() - started)
        errors.inc()
        # A conflict means our cache was a step behind another writer: normal under contention, retried at
        # once with backoff, so it is worth an info line, not an error (upstream logs these at V(2)).
        log = controller.log.info if isinstance(err, Conflict) else controller.log.error
        log("sync failed", key=key, error=str(err) or type(err).__name__,
            error_type=type(err).__name__, requeues=queue.num_requeues(key))
        queue.add_rate_limited(key)
        return
    duration.observe(clock.monotonic() - started)
    queue.forget(key)
    if result is not None and result.requeue_after is not None:
        queue.add_after(key, result.requeue_after)


async def _worker(controller: Controller, index: int) -> None:
    queue = controller.queue
    duration = SYNC_DURATION.labels(controller.name)
    errors = SYNC_ERRORS.labels(controller.name)
    try:
        while True:
            key = await queue.get()
            if key is None:
                return
            try:
                await _process(controller, key, duration, errors)
            finally:
                queue.done(key)
    except asyncio.CancelledError:
        raise
    except Exception as err:
        # Not from sync (that is caught above): a bug in the loop or the queue. Report, don't hide.
        reason = f"worker {index}: {type(err).__name__}: {err}"
        controller._dead_workers.append(reason)
        controller.log.exception("worker died", worker=index)


async def _background(controller: Controller) -> None:
    try:
        await controller.run_background()
    except asyncio.CancelledError:
        raise
    except Exception as err:
        controller._dead_workers.append(f"background: {type(err).__name__}: {err}")
        controller.log.exception("background task died")


async def run_controller(controller: Controller, workers: int) -> None:
    """Run ``workers`` workers on ``controller``'s queue until it is shut down and drained."""
    if workers < 1:
        raise ValueError(f"{controller.name}: need at least one worker, got {workers}")
    controller.log.info("starting workers", workers=workers)
    try:
        async with asyncio.TaskGroup() as tg:
            background = tg.create_task(_background(controller), name=f"{controller.name}/background")
            running = [tg.create_task(_worker(controller, i), name=f"{controller.name}/worker-{i}")
                       for i in range(workers)]
            await asyncio.wait(running)
            background.cancel()
    finally:
        controller.log.info("workers stopped")
