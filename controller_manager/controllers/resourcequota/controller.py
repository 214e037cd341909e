"""The resource quota controller (kube-controller-manager's ``resourcequota-controller``,
``pkg/controller/resourcequota/resource_quota_controller.go``): keeps every ResourceQuota's ``status.hard`` equal to
its ``spec.hard`` and its ``status.used`` equal to what its namespace holds, so quota admission enforces real numbers.

Guarantees:
- A quota whose ``spec.hard`` is not yet its ``status.hard``, or whose status lacks the usage of a resource some
  evaluator tracks, goes to the priority queue (``resourcequota_priority``); other quotas to the primary one
  (``resourcequota_primary``). Each queue has ``--concurrent-resource-quota-syncs`` workers. Status-only updates
  of a quota queue nothing (this controller writes them); a deleted quota's key syncs to nothing.
- A sync recalculates the whole usage from the caches (see :mod:`.evaluators`) and writes the status through
  ``/status`` (an update carrying the cached resourceVersion: a 409 is retried with backoff) only when it
  differs. An evaluator that cannot list fails the sync after the others' numbers were written.
- Every ``--resource-quota-sync-period`` (5m; 0 disables it) every quota is queued for a full recalculation;
  discovery runs every 30 s and monitors each quotable resource (:mod:`.monitor`): deleting an object, or an
  update lowering its charge (a pod terminating or past its deletion grace period, a service changing type, a
  claim's allocated size changing), queues (through ``resource_quota_controller_resource_changes``) the quotas
  of its namespace that track its kind.
- No quota is synced before the quota cache and every monitor have listed; while discovery brings new
  resources, syncs wait until their monitors have listed, for at most the discovery period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import key_of
from controller_manager.api.resources import (
    CONFIGMAPS,
    PERSISTENTVOLUMECLAIMS,
    PODS,
    REPLICATIONCONTROLLERS,
    RESOURCEQUOTAS,
    SECRETS,
    SERVICES,
    Resource,
)
from controller_manager.client import ApiClient
from controller_manager.client.errors import ApiError
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NAMESPACE_INDEX, Added, Deleted, Event, Updated
from controller_manager.runtime.workqueue import RateLimitingQueue, default_controller_rate_limiter

from .evaluators import Evaluator, Registry, semantic, status_for
from .monitor import GVR, QuotaMonitor, lister_for, quotable_resources

__all__ = ["DISCOVERY_PERIOD", "ResourceQuotaController", "UsageCalculationError"]

DEFAULT_SYNC_PERIOD = 5 * 60.0
DISCOVERY_PERIOD = 30.0  # kube-controller-manager runs the quota controller's discovery Sync every 30 s
SYNCED_POLL_PERIOD = 0.1  # client-go's WaitForCacheSync poll

Obj = Mapping[str, Any]
Discover = Callable[[], Awaitable[tuple[list[Resource], dict[str, ApiError]]]]


class UsageCalculationError(Exception):
    """Some evaluators could not list; the others' usage was written."""


def _seconds(options: Mapping[str, Any], name: str, default: float) -> float:
    value = options.get(name, options.get(name.replace("_", "-"), default))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def server_preferred_resources(client: ApiClient) -> Discover:
    async def discover() -> tuple[list[Resource], dict[str, ApiError]]:
        return await client.discover_partial()
    return discover


class ResourceQuotaController(Controller):
    name: ClassVar[str] = "resourcequota-controller"
    alias: ClassVar[str] = "resourcequota"
    workers_option: ClassVar[str | None] = "concurrent-resource-quota-syncs"
    default_workers: ClassVar[int] = 5
    queue_name: ClassVar[str | None] = "resourcequota_primary"

    def __init__(self, ctx: ControllerContext, *, discover: Discover | None = None,
                 discovery_period: float = DISCOVERY_PERIOD) -> None:
        super().__init__(ctx)
        self.clock = ctx.clock
        self.client = ctx.client
        self.resync_period = _seconds(ctx.options, "resource_quota_sync_period", DEFAULT_SYNC_PERIOD)
        self.discover = discover or server_preferred_resources(ctx.client)
        self.discovery_period = discovery_period
        self.missing_usage_queue = ctx.new_queue("resourcequota_priority")
        self.quotas = ctx.informers.informer(RESOURCEQUOTAS)
        self.quotas.add_handler(self._on_quota)
        # The evaluators upstream registers up front: pods, services and claims (their caches are this
        # controller's), and the legacy object counts (whatever cache the monitor finds for them).
        registry = Registry(Evaluator(res, lister_for(ctx.informers.informer(res)))
                            for res in (PODS, SERVICES, PERSISTENTVOLUMECLAIMS))
        for res in (CONFIGMAPS, SECRETS, REPLICATIONCONTROLLERS, RESOURCEQUOTAS):
            registry.add(Evaluator(res, self._monitored_objects(res)))
        self.registry = registry
        # The monitors' events go through their own queue, as upstream's (its workqueue metrics included).
        self.resource_changes: RateLimitingQueue[tuple[Resource, str]] = RateLimitingQueue(
            "resource_quota_controller_resource_changes", rate_limiter=default_controller_rate_limiter(ctx.clock),
            clock=ctx.clock)
        self.monitor = QuotaMonitor(ctx.informers, registry, self._resource_changed, ctx.clock, self.log)
        self._monitored: dict[GVR, Resource] = {}
        self._workers_may_run = asyncio.Event()
        self._started = False

    def _monitored_objects(self, res: Resource) -> Callable[[str], list[dict[str, Any]]]:
        """A lister over the cache the monitor watches ``res`` with (none yet: nothing listed)."""
        def objects(namespace: str) -> list[dict[str, Any]]:
            for monitor in self.monitor.monitors.values():
                if (monitor.resource.group, monitor.resource.plural) == (res.group, res.plural):
                    return monitor.informer.store.by_index(NAMESPACE_INDEX, namespace)
            return []
        return objects

    # --- handlers ----------------------------------------------------------------------------------

    def _on_quota(self, event: Event) -> None:
        if isinstance(event, Added):
            self.add_quota(event.obj)
        elif isinstance(event, Updated):
            # Only spec changes matter: status updates are this controller's own (and admission's).
            if semantic(_spec_hard(event.old)) != semantic(_spec_hard(event.new)):
                self.add_quota(event.new)
        elif isinstance(event, Deleted):
            self.queue.add(key_of(event.obj))

    def add_quota(self, quota: Obj) -> None:
        """Queue a quota, on the priority queue when its status lacks what this controller can tell."""
        key = key_of(quota)
        status = quota.get("status") or {}
        if semantic(_spec_hard(quota)) != semantic(status.get("hard")):
            self.missing_usage_queue.add(key)
            return
        used = status.get("used") or {}
        for constraint in status.get("hard") or {}:
            if constraint in used:
                continue
            if any(e.matching_resources([constraint]) for e in self.registry.list()):
                self.missing_usage_queue.add(key)
                return
        self.queue.add(key)

    def _resource_changed(self, res: Resource, namespace: str) -> None:
        self.resource_changes.add((res, namespace))

    async def _process_resource_change(self, change: tuple[Resource, str]) -> Result | None:
        self.replenish(*change)
        return None

    def replenish(self, res: Resource, namespace: str) -> None:
        """An object of ``res`` changed in ``namespace``: recalculate the quotas there that track its kind."""
        evaluator = self.registry.get(res.group, res.plural)
        if evaluator is None:
            return
        for quota in self.quotas.store.by_index(NAMESPACE_INDEX, namespace):
            if evaluator.matching_resources((quota.get("status") or {}).get("hard") or {}):
                self.queue.add(key_of(quota))

    def enqueue_all(self) -> None:
        for quota in self.quotas.store.list():
            self.queue.add(key_of(quota))
        self.log.debug("Resource quota controller queued all resource quota for full calculation of usage")

    # --- sync --------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        if not await self._may_run():
            return None
        quota = self.quotas.store.get(key)
        if quota is None:
            self.log.info("Resource quota has been deleted", key=key)
            return None
        await self.sync_quota(quota)
        return None

    async def _may_run(self) -> bool:
        """Wait until the workers may run (upstream's worker lock); False if the controller stops first."""
        while not self._workers_may_run.is_set():
            if self.queue.shutting_down:
                return False
            try:
                await asyncio.wait_for(self._workers_may_run.wait(), SYNCED_POLL_PERIOD)
            except TimeoutError:
                continue
        return True

    async def sync_quota(self, quota: Obj) -> None:
        """``syncResourceQuota``: write the recalculated status if it changed; raise what went wrong."""
        result = status_for(quota, self.registry, self.clock.now())
        if result.dirty:
            await self.client.update_status(RESOURCEQUOTAS, {**quota, "status": result.status})
        if result.errors:
            raise UsageCalculationError("; ".join(str(e) for e in result.errors))

    # --- discovery, monitors and the periodic recalculation ------------------------------------------

    async def run_background(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._discovery_loop(), name=f"{self.name}/discovery")
                tg.create_task(self._resync_loop(), name=f"{self.name}/resync")
                tg.create_task(self.run_queue(self.missing_usage_queue, self.sync, workers=self.workers()),
                               name=f"{self.name}/priority")
                tg.create_task(self.run_queue(self.resource_changes, self._process_resource_change, timed=False,
                                              describe=_describe_change), name=f"{self.name}/resource-changes")
        finally:
            self.missing_usage_queue.shut_down()
            self.resource_changes.shut_down()

    async def _resync_loop(self) -> None:
        await self._workers_may_run.wait()
        if self.resync_period <= 0:
            self.log.info("periodic quota controller resync disabled")
            return
        while True:
            self.enqueue_all()
            await self.clock.sleep(self.resync_period)

    async def _discovery_loop(self) -> None:
        while True:
            await self.resync_monitors()
            await self.clock.sleep(self.discovery_period)

    async def resync_monitors(self) -> None:
        """One pass of upstream's ``Sync``: discover, re-monitor if the quotable resources changed, and hold the
        workers back until the monitors have listed (for at most a discovery period once they have run)."""
        try:
            found, failed = await self.discover()
        except Exception as err:  # /api or /apis unreachable: nothing to go on this time
            self.log.error("failed to discover resources", error=str(err))
            return
        resources = quotable_resources(found)
        if failed:
            self.log.error("unable to retrieve the complete list of server APIs", groups=sorted(failed))
            if not resources:
                return
            # Keep watching what a failed group served: only newly seen resources are added.
            for gvr, res in self._monitored.items():
                gv = f"{res.group}/{res.version}" if res.group else res.version
                if gv in failed:
                    resources[gvr] = res
        if resources.keys() == self._monitored.keys():
            if not self._started:
                await self._wait_for_monitors()
            return
        added = sorted("/".join(g) for g in resources.keys() - self._monitored.keys())
        removed = sorted("/".join(g) for g in self._monitored.keys() - resources.keys())
        self.log.info("syncing resource quota controller with updated resources from discovery", added=added,
                      removed=removed)
        self._workers_may_run.clear()
        try:
            errors = self.monitor.sync_monitors(resources)
            if errors:
                self.log.error("failed to sync resource monitors", errors=errors)
                return
            self._monitored = resources
            if not await self._wait_for_monitors() and self._started:
                self.log.error("timed out waiting for quota monitor sync")
                return
            self.log.info("synced quota controller")
        finally:
            if self._started:
                self._workers_may_run.set()

    async def _wait_for_monitors(self) -> bool:
        """Wait (a discovery period at most) for the quota cache and the monitors; the first success lets the
        workers start."""
        deadline = self.clock.monotonic() + self.discovery_period
        while not (self.quotas.has_synced and self.monitor.is_synced()):
            if self.clock.monotonic() >= deadline or self.queue.shutting_down:
                return False
            await self.clock.sleep(SYNCED_POLL_PERIOD)
        if not self._started:
            self._started = True
            self._workers_may_run.set()
        return True


def _describe_change(change: tuple[Resource, str]) -> str:
    return f"{change[0].group_resource} in {change[1]}"


def _spec_hard(quota: Obj) -> Any:
    return (quota.get("spec") or {}).get("hard")

