"""The quota monitor (``resource_quota_monitor.go``): one watch per quotable resource, turning the changes that
can lower a namespace's usage into a replenishment of its quotas.

Guarantees:
- :func:`quotable_resources` is ``GetQuotableResources`` over ``ServerPreferredNamespacedResources``: every
  namespaced resource, at its group's preferred version, that supports create, list, watch and delete. A
  partial discovery failure returns what was found beside the failed group/versions.
- :meth:`QuotaMonitor.sync_monitors` monitors exactly the given resources, ignored ones aside (events and the
  virtual review kinds): a resource already monitored keeps its watch; a new one gets the shared informer another
  controller runs for it (full objects), else a metadata-only one, and a generic object-count evaluator unless
  one is registered.
  A resource no longer given is left alone (the shared factory has no way to stop one informer: its events are
  simply no longer acted on).
- Deletions always replenish (``replenish(resource, namespace)``); updates only when
  :func:`controller_manager.api.quota.replenish_on_update` says the charge may have dropped; additions never
  (admission already charged them). A resync (the same object twice) is not a change.
- :meth:`QuotaMonitor.is_synced` is true once there is at least one monitor and every one has listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.quota import IGNORED_RESOURCES, replenish_on_update
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError
from controller_manager.clock import Clock
from controller_manager.runtime.informers import (
    NAMESPACE_INDEX,
    Deleted,
    Event,
    SharedInformer,
    SharedInformerFactory,
    Updated,
)

from .evaluators import Evaluator, Registry

__all__ = ["IGNORED_RESOURCES", "QUOTABLE_VERBS", "QuotaMonitor", "quotable_resources"]

GVR = tuple[str, str, str]
QUOTABLE_VERBS = frozenset({"create", "list", "watch", "delete"})

Replenish = Callable[[Resource, str], None]


def quotable_resources(resources: Iterable[Resource]) -> dict[GVR, Resource]:
    """The namespaced, quotable resources, each at its preferred version (the first listed), by GVR."""
    seen: set[tuple[str, str]] = set()
    out: dict[GVR, Resource] = {}
    for res in resources:
        if not res.namespaced or (res.group, res.plural) in seen:
            continue
        seen.add((res.group, res.plural))
        if QUOTABLE_VERBS.issubset(res.verbs):
            out[(res.group, res.version, res.plural)] = res
    return out


def lister_for(informer: SharedInformer) -> Callable[[str], list[dict[str, Any]]]:
    def objects(namespace: str) -> list[dict[str, Any]]:
        return informer.store.by_index(NAMESPACE_INDEX, namespace)
    return objects


@dataclass(eq=False)
class Monitor:
    resource: Resource
    informer: SharedInformer
    active: bool = True


@dataclass(eq=False)
class QuotaMonitor:
    informers: SharedInformerFactory
    registry: Registry
    replenish: Replenish
    clock: Clock
    log: Any
    ignored: frozenset[tuple[str, str]] = IGNORED_RESOURCES
    monitors: dict[GVR, Monitor] = field(default_factory=dict)

    def sync_monitors(self, resources: Mapping[GVR, Resource]) -> list[str]:
        """Monitor exactly ``resources``; the errors of those that could not be."""
        errors: list[str] = []
        current: dict[GVR, Monitor] = {}
        previous = dict(self.monitors)
        added = kept = 0
        for gvr, res in resources.items():
            if (res.group, res.plural) in self.ignored:
                continue
            existing = previous.pop(gvr, None)
            if existing is not None:
                current[gvr] = existing
                kept += 1
                continue
            try:
                informer = self._informer_for(res)
            except (ValueError, ApiError) as err:
                errors.append(f"couldn't start monitor for resource {'/'.join(gvr)!r}: {err}")
                continue
            monitor = Monitor(res, informer)
            informer.add_handler(self._handler(monitor))
            if self.registry.get(res.group, res.plural) is None:
                self.registry.add(Evaluator(res, lister_for(informer)))
                self.log.info("QuotaMonitor created object count evaluator", resource=res.group_resource)
            current[gvr] = monitor
            added += 1
        for monitor in previous.values():
            monitor.active = False
        self.monitors = current
        self.log.debug("quota synced monitors", added=added, kept=kept, removed=len(previous))
        return errors

    def _informer_for(self, res: Resource) -> SharedInformer:
        shared = self.informers.existing(res) or self.informers.existing(res, metadata_only=True)
        return shared if shared is not None else self.informers.informer(res, metadata_only=True)

    def _handler(self, monitor: Monitor) -> Callable[[Event], None]:
        res = monitor.resource

        def on_event(event: Event) -> None:
            if not monitor.active:
                return
            if isinstance(event, Updated):
                if event.old is event.new or not replenish_on_update(res, event.old, event.new, self.clock.now()):
                    return
                obj = event.new
            elif isinstance(event, Deleted):
                obj = event.obj
            else:
                return
            namespace = (obj.get("metadata") or {}).get("namespace")
            self.replenish(res, str(namespace or ""))

        return on_event

    def is_synced(self) -> bool:
        if not self.monitors:
            return False
        return all(m.informer.has_synced for m in self.monitors.values())
