"""The Controller contract and the one worker loop every controller shares.

A controller maps informer events to keys (``namespace/name``) on its queue and implements
``sync(key)``: level-based, reading the cache, writing through the client. It never writes a worker
loop of its own; :func:`run_controller` owns get/sync/done/forget/backoff (controller-runtime's
Reconciler contract, client-go's ``processNextWorkItem``).

Guarantees of :func:`run_controller`:
- ``workers`` tasks each loop ``key = await queue.get()`` until the queue is shut down and empty
  (``None``). The queue hands a key to one worker at a time, so one key is never synced twice at once.
- After ``sync``: ``Result(requeue_after=s)`` -> ``forget`` + ``add_after(key, s)``; ``None`` or a
  ``Result`` without a delay -> ``forget``; ``Result(rate_limited=True)`` -> ``add_rate_limited`` (then
  ``forget`` with ``forget_failures=True``: upstream's ``enqueueRateLimited`` then a nil error); an exception
  -> a structured log line (controller, key, error) + ``add_rate_limited`` (growing per-key backoff), or,
  once ``Controller.max_retries`` failures in a row are reached, a log line and ``forget`` (upstream's
  ``handleErr`` dropping the key); :class:`TerminalError` -> logged, counted and forgotten, never retried.
  ``done(key)`` always follows; a debug line carries the sync's duration.
- A sync exception never kills a worker. A worker that dies anyway (a bug outside ``sync``) is logged
  and makes :meth:`Controller.health` report it; the other workers keep going.
- Shutting the queue down stops intake; in-flight syncs run to completion and queued keys drain;
  then :func:`run_controller` returns. Cancelling it cancels the workers (the manager does this after
  its drain timeout).
- Any other queue a controller owns runs on the same loop: ``await self.run_queue(queue, sync)`` from
  ``run_background`` (same contract; metrics labelled ``<controller>/<queue name>``).
- ``Controller.run_background()`` (long-lived work beside the workers: other queues, a periodic loop; none by
  default) runs as one more task, started with the workers and cancelled once they have all returned. An
  exception from it is logged and reported by :meth:`Controller.health`; the workers keep going.
- With a :class:`SyncAdmission` in the context (a shard member's sharded controllers), a key taken off the
  controller's own queue (or another queue run with ``admitted=True``) is synced only if ``admit(queue, key)``
  says so (else it is forgotten: the admission adds it back when it may sync); ``release(key)`` follows every
  admitted sync.
- Prometheus: ``controller_sync_duration_seconds{controller}`` (histogram) and
  ``controller_sync_errors_total{controller}`` (counter), on the default registry.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import structlog
from prometheus_client import Counter, Histogram

from controller_manager.client import ApiClient, Conflict
from controller_manager.clock import Clock
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.workqueue import (
    DelayingQueue,
    RateLimitingQueue,
    WorkQueue,
    default_controller_rate_limiter,
)

T = TypeVar("T", bound=Hashable)

__all__ = [
    "RATE_LIMITED",
    "SYNC_DURATION",
    "SYNC_ERRORS",
    "Controller",
    "ControllerContext",
    "Result",
    "SyncAdmission",
    "TerminalError",
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
    """What a sync asks of the runner beyond "done".

    - ``requeue_after=s``: sync the key again in ``s`` seconds (its failures forgotten).
    - ``rate_limited=True``: sync it again through the queue's rate limiter, its backoff growing as after a
      failure but with nothing logged (controller-runtime's ``Requeue``; the garbage collector's requeue).
    - ``rate_limited=True, forget_failures=True``: the same add, then the key's failures forgotten, so its
      backoff never grows: upstream's syncs that call ``enqueueRateLimited`` and then return nil.

    To retry with growing per-key backoff, raise; to give up on the key, raise :class:`TerminalError`.
    """

    requeue_after: float | None = None
    rate_limited: bool = False
    forget_failures: bool = False


RATE_LIMITED = Result(rate_limited=True)


class TerminalError(Exception):
    """Raised by a sync to give up on its key: logged (with its ``__cause__``) and counted, then forgotten.

    controller-runtime's ``reconcile.TerminalError``: for failures no retry can fix. The key is synced again
    only when an event adds it back."""


class SyncAdmission(Protocol):
    """Which keys a controller may sync now (sharding: only those whose root this member owns, not draining)."""

    def admit(self, queue: WorkQueue[str], key: str) -> bool:
        """True: sync ``key`` now (it counts as in flight until :meth:`release`). False: skip it; the admission
        adds it back to ``queue`` once it may be synced."""

    def release(self, key: str) -> None:
        """The admitted sync of ``key`` has finished."""


@dataclass(eq=False)
class _Loop(Generic[T]):
    """One queue and the sync that drains it, with what the runner logs and counts against."""

    name: str  # the task names' prefix
    label: str  # prefix of a dead worker's health reason
    queue: WorkQueue[T]
    sync: Callable[[T], Awaitable[Result | None]]
    clock: Clock
    log: Any
    duration: Any  # a labelled Histogram child
    errors: Any  # a labelled Counter child
    dead: list[str]
    describe: Callable[[T], str] = str
    max_retries: int | None = None
    yield_between: bool = False
    timed: bool = True
    gate: Callable[[], Awaitable[None]] | None = None  # awaited before each sync (the leader's intake fence)
    admission: SyncAdmission | None = None  # asked before each sync of an admitted queue (sharding)


@dataclass
class ControllerContext:
    """Everything a controller is built from; one per controller (``logger`` is bound to its name)."""

    client: ApiClient
    informers: SharedInformerFactory
    clock: Clock
    events: EventBroadcaster
    options: Mapping[str, Any] = field(default_factory=dict)  # parsed flags, by flag name without dashes
    logger: Any = field(default_factory=lambda: structlog.get_logger("controller_manager.controller"))
    # Awaited by every worker before it starts a sync: with leader election, returns only while the Lease's
    # renewal is not overdue (LeaderElector.wait_for_intake), so a leader that may have lost it starts nothing.
    intake: Callable[[], Awaitable[None]] | None = None
    # Sharding: which of this controller's keys this member may sync now (None: all of them).
    admission: SyncAdmission | None = None

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
    # Upstream's maxRetries for controllers whose handleErr drops a key after that many failed syncs in a row
    # (logged; the key comes back with its next event); None: retry with backoff for ever.
    max_retries: ClassVar[int | None] = None

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

    async def run_queue(self, queue: WorkQueue[T], sync: Callable[[T], Awaitable[Result | None]], *,
                        workers: int = 1, describe: Callable[[T], str] = str, yield_between: bool = False,
                        timed: bool = True, max_retries: int | None = None, admitted: bool = False) -> None:
        """Drain one more queue this controller owns through the shared runner, from :meth:`run_background`.

        ``sync`` follows the contract of :meth:`sync` (a :class:`Result`, an exception to retry with backoff
        on a rate-limited queue, :class:`TerminalError` to give up); its durations and errors are recorded
        under ``<controller>/<queue name>``. Returns once ``queue`` is shut down and drained.
        ``yield_between``: give the event loop a turn after every item (a queue fed in bursts of thousands);
        ``timed=False``: no duration observations or debug lines (very many cheap items); ``max_retries``: this
        queue's retry budget, as :attr:`Controller.max_retries` is the controller's own queue's; ``admitted``: its
        keys pass the context's :class:`SyncAdmission` too, as the own queue's do (sharding: keys whose kind the
        admission tells by a prefix, such as the job controller's orphan pods)."""
        loop = self._loop(queue, sync, describe, yield_between)
        loop.timed = timed
        if max_retries is not None:
            loop.max_retries = max_retries
        if admitted:
            loop.admission = self.ctx.admission
        await run_queue(loop, workers)

    async def process_next(self, queue: WorkQueue[T], sync: Callable[[T], Awaitable[Result | None]], *,
                           describe: Callable[[T], str] = str, max_retries: int | None = None) -> bool:
        """One step of :meth:`run_queue`: take one key off ``queue`` and sync it as a worker would.

        False once ``queue`` is shut down and drained (upstream's ``processNextWorkItem``; tests step with it)."""
        loop = self._loop(queue, sync, describe, False)
        if max_retries is not None:
            loop.max_retries = max_retries
        return await _process_next(loop)

    def _loop(self, queue: WorkQueue[T], sync: Callable[[T], Awaitable[Result | None]],
              describe: Callable[[T], str], yield_between: bool) -> _Loop[T]:
        if queue is self.queue:  # the controller's own queue: its name, its metrics, its retry budget
            return _Loop(name=self.name, label="worker ", queue=queue, sync=sync, clock=self.ctx.clock, log=self.log,
                         duration=SYNC_DURATION.labels(self.name), errors=SYNC_ERRORS.labels(self.name),
                         dead=self._dead_workers, describe=describe, max_retries=self.max_retries,
                         yield_between=yield_between, gate=self.ctx.intake, admission=self.ctx.admission)
        label = f"{self.name}/{queue.name}"
        return _Loop(name=label, label=f"{queue.name} worker ", queue=queue, sync=sync, clock=self.ctx.clock,
                     log=self.log.bind(queue=queue.name), duration=SYNC_DURATION.labels(label),
                     errors=SYNC_ERRORS.labels(label), dead=self._dead_workers, describe=describe,
                     yield_between=yield_between, gate=self.ctx.intake)

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


async def _process(loop: _Loop[T], key: T) -> None:
    """One sync of ``key`` and what follows it (the caller marks it done)."""
    queue = loop.queue
    clock = loop.clock
    started = clock.monotonic() if loop.timed else 0.0
    try:
        result = await loop.sync(key)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # we are being stopped
        # A stray cancellation from inside the sync is a failure like any other, not a stop.
        loop.errors.inc()
        loop.log.error("sync failed", key=loop.describe(key), error="sync was cancelled from within")
        _retry(queue, key)
        return
    except TerminalError as err:
        if loop.timed:
            loop.duration.observe(clock.monotonic() - started)
        loop.errors.inc()
        cause = err.__cause__
        loop.log.error("sync failed, not retrying", key=loop.describe(key), error=str(err) or type(err).__name__,
                       cause=None if cause is None else (str(cause) or type(cause).__name__),
                       error_type=type(cause or err).__name__)
        _forget(queue, key)
        return
    except Exception as err:
        if loop.timed:
            loop.duration.observe(clock.monotonic() - started)
        message = str(err) or type(err).__name__
        requeues = queue.num_requeues(key) if isinstance(queue, RateLimitingQueue) else 0
        if loop.max_retries is not None and requeues >= loop.max_retries:
            # Upstream's handleErr: past its retry budget a key is logged and dropped until its next event.
            loop.log.info("dropping key out of the queue", key=loop.describe(key), error=message,
                          error_type=type(err).__name__, requeues=requeues)
            _forget(queue, key)
            return
        loop.errors.inc()
        # A conflict means our cache was a step behind another writer: normal under contention, retried at
        # once with backoff, so it is worth an info line, not an error (upstream logs these at V(2)).
        log = loop.log.info if isinstance(err, Conflict) else loop.log.error
        log("sync failed", key=loop.describe(key), error=message, error_type=type(err).__name__, requeues=requeues)
        _retry(queue, key)
        return
    if loop.timed:
        elapsed = clock.monotonic() - started
        loop.duration.observe(elapsed)
        loop.log.debug("finished syncing", key=key if isinstance(key, str) else loop.describe(key),
                       duration=elapsed)
    if result is not None and result.rate_limited:
        _retry(queue, key)
        if result.forget_failures:
            _forget(queue, key)
        return
    _forget(queue, key)
    if result is not None and result.requeue_after is not None:
        if not isinstance(queue, DelayingQueue):
            raise TypeError(f"{loop.name}: requeue_after on a queue that cannot delay")
        queue.add_after(key, result.requeue_after)


def _retry(queue: WorkQueue[T], key: T) -> None:
    if not isinstance(queue, RateLimitingQueue):
        raise TypeError(f"queue {queue.name!r} has no rate limiter to retry {key!r} with")
    queue.add_rate_limited(key)


def _forget(queue: WorkQueue[T], key: T) -> None:
    if isinstance(queue, RateLimitingQueue):
        queue.forget(key)


async def _process_next(loop: _Loop[T]) -> bool:
    """Take one key off ``loop``'s queue and sync it; False once the queue is shut down and drained."""
    queue = loop.queue
    key = await queue.get()
    if key is None:
        return False
    try:
        if loop.gate is not None:
            await loop.gate()
        admission = loop.admission
        if admission is None:
            await _process(loop, key)
        elif admission.admit(queue, key):  # type: ignore[arg-type]  # only set on a controller's str-keyed queue
            try:
                await _process(loop, key)
            finally:
                admission.release(key)  # type: ignore[arg-type]
        else:
            _forget(queue, key)
    finally:
        queue.done(key)
    if loop.yield_between:
        await asyncio.sleep(0)
    return True


async def _worker(loop: _Loop[T], index: int) -> None:
    queue = loop.queue
    try:
        while await _process_next(loop):
            pass
    except asyncio.CancelledError:
        raise
    except Exception as err:
        # Not from sync (that is caught above): a bug in the loop or the queue. Report, don't hide.
        loop.dead.append(f"{loop.label}{index}: {type(err).__name__}: {err}")
        loop.log.exception("worker died", worker=index, queue=queue.name)


async def run_queue(loop: _Loop[T], workers: int) -> None:
    """Run ``workers`` workers on ``loop``'s queue until it is shut down and drained (or cancelled)."""
    if workers < 1:
        raise ValueError(f"{loop.name}: need at least one worker, got {workers}")
    async with asyncio.TaskGroup() as tg:
        for i in range(workers):
            tg.create_task(_worker(loop, i), name=f"{loop.name}/worker-{i}")


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
    loop = controller._loop(controller.queue, controller.sync, str, False)
    controller.log.info("starting workers", workers=workers)
    try:
        async with asyncio.TaskGroup() as tg:
            background = tg.create_task(_background(controller), name=f"{controller.name}/background")
            running = [tg.create_task(_worker(loop, i), name=f"{controller.name}/worker-{i}")
                       for i in range(workers)]
            await asyncio.wait(running)
            background.cancel()
    finally:
        controller.log.info("workers stopped")
