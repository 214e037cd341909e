"""Run controllers in-process against an in-process kube-sim, the way the manager runs them.

``async with controller_harness(ReplicaSetController) as h:`` starts a :class:`SimCluster` (scheduler and
kubelets on, short kubelet intervals), a real :class:`ApiClient` from its kubeconfig, then a "manager": a
SharedInformerFactory, an EventBroadcaster, the controllers built on a ControllerContext, the informers
synced, and ``run_controller`` for each. Tests act and assert only through ``h.client`` (what any API client
sees). ``await h.restart()`` stops the manager (queues drained, tasks awaited) and starts a fresh one
(new caches, new expectations) against the same cluster, as a controller-manager restart would.

Leaving the block stops everything in reverse order and leaves no task behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from controller_manager.api.resources import EVENTS, PODS, Resource
from controller_manager.client import ApiClient, load_config
from controller_manager.clock import Clock, RealClock
from controller_manager.runtime.controller import Controller, ControllerContext, run_controller
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.sim.cluster import SimCluster
from controller_manager.sim.kubelet import KubeletConfig
from controller_manager.sim.storage import StorageConfig

__all__ = ["FAST_KUBELETS", "Harness", "controller_harness", "wait_for"]

T = TypeVar("T")

# Kubelets that start containers at once, report often and stop pods quickly: tests stay fast.
FAST_KUBELETS = KubeletConfig(
    node_status_update_frequency=1.0,
    lease_renew_interval=1.0,
    default_start_seconds=0.0,
    termination_delay=0.05,
    crash_loop_base=0.1,
    crash_loop_max=0.5,
    events=False,
)

STOP_TIMEOUT = 10.0


async def wait_for(check: Callable[[], Awaitable[T | None]], *, timeout: float = 15.0, interval: float = 0.02,
                   what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy; that value is returned. Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval)


@dataclass
class _Manager:
    factory: SharedInformerFactory
    events: EventBroadcaster
    controllers: list[Controller]
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class Harness:
    """A cluster, a client, and a running set of controllers."""

    def __init__(self, cluster: SimCluster, client: ApiClient, controller_types: Sequence[type[Controller]],
                 options: Mapping[str, Any], workers: int | None, clock: Clock,
                 controller_clock: Clock | None = None) -> None:
        self.cluster = cluster
        self.client = client
        self.clock = clock
        # The controllers' own clock (their "now", queue delays); a FakeClock here drives timed behaviour
        # (cron schedules, TTLs) while the cluster, client and informers run on real time.
        self.controller_clock = controller_clock or clock
        self._types = list(controller_types)
        self._options = dict(options)
        self._workers = workers
        self._manager: _Manager | None = None

    @property
    def controllers(self) -> list[Controller]:
        return self._manager.controllers if self._manager else []

    def controller(self, kind: type[T]) -> T:
        for ctrl in self.controllers:
            if isinstance(ctrl, kind):
                return ctrl
        raise LookupError(kind)

    # --- the "manager" ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._manager is not None:
            raise RuntimeError("controllers are already running")
        factory = SharedInformerFactory(self.client, self.clock)
        events = EventBroadcaster(self.client, self.clock)
        controllers = [
            kind(ControllerContext(client=self.client, informers=factory, clock=self.controller_clock, events=events,
                                   options=self._options))
            for kind in self._types
        ]
        manager = _Manager(factory, events, controllers)
        self._manager = manager
        manager.tasks.append(asyncio.create_task(factory.run(), name="harness:informers"))
        manager.tasks.append(asyncio.create_task(events.run(), name="harness:events"))
        if not await factory.wait_for_cache_sync(timeout=15.0):
            await self.stop()
            raise AssertionError("informer caches did not sync")
        for ctrl in controllers:
            workers = self._workers if self._workers is not None else ctrl.workers()
            if ctrl.workers() < 1:
                continue  # as the manager: a controller with no workers is not started (node IPAM when off)
            manager.tasks.append(asyncio.create_task(run_controller(ctrl, workers), name=f"harness:{ctrl.name}"))

    async def stop(self, *, graceful: bool = True) -> None:
        """Stop intake, let in-flight syncs finish, then stop informers and flush events.

        ``graceful=False`` is a crash instead: workers are cancelled mid-sync (requests in flight are
        abandoned, whether or not the server got them)."""
        manager, self._manager = self._manager, None
        if manager is None:
            return
        for ctrl in manager.controllers:
            ctrl.queue.shut_down()
        runners = manager.tasks[2:]
        if runners:
            _, pending = await asyncio.wait(runners, timeout=STOP_TIMEOUT if graceful else 0)
            for task in pending:
                task.cancel()
        for task in manager.tasks[:2]:
            task.cancel()
        results = await asyncio.gather(*manager.tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result

    async def restart(self, *, graceful: bool = True) -> None:
        """A new manager (fresh caches and expectations) after the old one stopped, or crashed."""
        await self.stop(graceful=graceful)
        await self.start()

    # --- reading the cluster through the API ------------------------------------------------------

    async def list_objects(self, res: Resource, namespace: str | None = "default",
                           **kwargs: Any) -> list[dict[str, Any]]:
        items, _ = await self.client.list_all(res, namespace, **kwargs)
        return items

    async def pods(self, namespace: str = "default", selector: str | None = None) -> list[dict[str, Any]]:
        return await self.list_objects(PODS, namespace, label_selector=selector)

    async def events_for(self, name: str, namespace: str = "default") -> list[dict[str, Any]]:
        """Events whose involvedObject is ``name``, oldest first."""
        events = await self.list_objects(EVENTS, namespace)
        mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
        return sorted(mine, key=lambda e: str(e.get("lastTimestamp") or e.get("firstTimestamp") or ""))


@contextlib.asynccontextmanager
async def controller_harness(*controller_types: type[Controller], nodes: int = 3,
                             kubelet_config: KubeletConfig = FAST_KUBELETS, options: Mapping[str, Any] | None = None,
                             workers: int | None = None, start: bool = True,
                             qps: float = 0.0, controller_clock: Clock | None = None,
                             storage: StorageConfig | None = None, tls: bool = False,
                             audit_log_path: Path | None = None) -> AsyncIterator[Harness]:
    """A running :class:`Harness`; ``start=False`` leaves the controllers for the test to ``start()``.
    ``storage``: kube-sim's simulated CSI driver, with kubelets that wait for pods' volumes; ``tls=True``
    serves HTTPS (kubectl sends bearer tokens only over HTTPS); ``audit_log_path`` has kube-sim write its audit
    log there (complete once the block is left)."""
    clock = RealClock()
    async with SimCluster(nodes=nodes, kubelet_config=kubelet_config, scheduler_retry_interval=0.5,
                          clock=clock, storage=storage, tls=tls, audit_log_path=audit_log_path) as cluster:
        config = await load_config(kubeconfig=str(cluster.kubeconfig_path))
        async with ApiClient(config, qps=qps, burst=max(1, int(qps * 1.5)), clock=clock) as client:
            harness = Harness(cluster, client, controller_types, options or {}, workers, clock, controller_clock)
            try:
                if start:
                    await harness.start()
                yield harness
            finally:
                await harness.stop()
