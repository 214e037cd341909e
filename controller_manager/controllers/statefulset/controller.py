"""The StatefulSet controller (kube-controller-manager's ``statefulset-controller``, ``stateful_set.go``).

Guarantees:
- Informers: StatefulSets, pods, ControllerRevisions and PersistentVolumeClaims (the last two read from the cache
  only, as upstream: no handlers). Queue ``statefulset``; ``--concurrent-statefulset-syncs`` workers (default 5).
- Handlers only enqueue: a set's add/update/delete enqueues it; a pod with a controller reference wakes that set
  (if it is still the same one by UID), on add, update and delete; an orphan pod wakes every set of its
  namespace whose selector matches it, when added or when its labels or controller reference changed; a pod
  turning ready wakes its set again after ``minReadySeconds + 1`` s. A pod seen terminating or gone is no longer
  remembered as deleted by us.
- A sync reads the set from the cache (gone: nothing to do); an unparsable selector is logged and not retried.
  Orphan revisions the selector matches are adopted after a live read shows the set is not being deleted; pods
  are claimed (ours or orphans of the namespace, members by name, matching the selector), adopting and releasing
  as the controller-ref manager does. Then :class:`.control.StatefulSetControl` acts and writes status; with
  ``minReadySeconds`` the set is synced again after that many seconds while not every replica is available.
- Read-your-own-writes, as upstream's StaleControllerConsistencyStatefulSet (beta, on by default since 1.36):
  the resourceVersions of the set's status writes and of the pods and claims written for it are recorded
  (ControllerRevisions are not, as upstream); its next sync is skipped and requeued through the rate limiter
  until the set, pod and claim informers have applied events at least that new
  (:mod:`controllerutil.consistency`). The record goes with the set (deleted, or found gone by a sync).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta
from controller_manager.api.resources import CONTROLLERREVISIONS, PERSISTENTVOLUMECLAIMS, PODS, STATEFULSETS
from controller_manager.api.selectors import InvalidSelector, Selector, from_label_selector
from controller_manager.controllerutil.consistency import ConsistencyStore, StaleCache
from controller_manager.controllerutil.controller_ref import (
    ControllerRefManager,
    live_owner_check,
)
from controller_manager.controllerutil.owner_handler import OwnerHandler
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Added, Deleted, Event, Updated

from .control import StatefulSetControl
from .history import History
from .pod_control import StatefulPodControl
from .status import StatusUpdater
from .util import is_member_of, min_ready_seconds, replicas

__all__ = ["POD_ORPHAN_INDEX", "StatefulSetController"]

Obj = Mapping[str, Any]

# Pods without a controller reference, by namespace: with the set's own (controller-uid index), the only pods a
# StatefulSet may claim (upstream's FilterPodsByOwner).
POD_ORPHAN_INDEX = "statefulset-orphan-pods-by-namespace"


def orphan_index(pod: Obj) -> list[str]:
    if controller_ref(pod) is not None:
        return []
    namespace = meta(pod).get("namespace")
    return [namespace] if isinstance(namespace, str) and namespace else []


class StatefulSetController(Controller):
    """StatefulSets -> pods with stable identities and storage. Its queue holds StatefulSet keys."""

    name: ClassVar[str] = "statefulset-controller"
    alias: ClassVar[str] = "statefulset"
    queue_name: ClassVar[str | None] = "statefulset"
    workers_option: ClassVar[str | None] = "concurrent-statefulset-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.set_informer = ctx.informers.informer(STATEFULSETS)
        self.pod_informer = ctx.informers.informer(PODS, indexers={POD_ORPHAN_INDEX: orphan_index})
        self.revision_informer = ctx.informers.informer(CONTROLLERREVISIONS)
        self.claim_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        self.recorder = ctx.events.recorder(self.name)
        # Read-your-own-writes (upstream's StaleControllerConsistencyStatefulSet, on by default): a sync waits until
        # the informers show this controller's last writes of the set's status, its pods and its claims.
        set_informer, pod_informer, claim_informer = self.set_informer, self.pod_informer, self.claim_informer
        self.consistency = ConsistencyStore({
            STATEFULSETS.plural: lambda: set_informer.last_sync_resource_version,
            PODS.plural: lambda: pod_informer.last_sync_resource_version,
            PERSISTENTVOLUMECLAIMS.plural: lambda: claim_informer.last_sync_resource_version})
        claims = self.claim_informer.store
        self.pod_control = StatefulPodControl(ctx.client, self.recorder,
                                              lambda namespace, name: claims.get(f"{namespace}/{name}"),
                                              self.consistency)
        self.history = History(ctx.client, self.revision_informer)
        self.control = StatefulSetControl(self.pod_control, StatusUpdater(ctx.client, self.consistency), self.history,
                                          ctx.clock, self.log)
        # Pods wake the set that controls them (or every set that may adopt an orphan); a pod turning ready wakes
        # its set again after minReadySeconds (+1 s against clock skew).
        self.pods = OwnerHandler(self.set_informer.store, STATEFULSETS, self.queue, log=self.log,
                                 deletion_start="ignore", ready_requeue_skew=1.0,
                                 deleted=lambda sts, pod, final: self.pod_control.forget_deletion(pod))
        self.set_informer.add_handler(self._on_set)
        self.pod_informer.add_handler(self._on_pod)

    # --- handlers ---------------------------------------------------------------------------------

    def _on_set(self, event: Event) -> None:
        if isinstance(event, Added):
            self.queue.add(key_of(event.obj))
        elif isinstance(event, Updated):
            self.queue.add(key_of(event.new))
        elif isinstance(event, Deleted):
            self.consistency.clear(key_of(event.obj), str(meta(event.obj).get("uid") or ""))
            self.queue.add(key_of(event.obj))

    def _on_pod(self, event: Event) -> None:
        if (isinstance(event, Updated) and is_being_deleted(event.new)
                and meta(event.new).get("resourceVersion") != meta(event.old).get("resourceVersion")):
            self.pod_control.forget_deletion(event.new)  # its deletion is under way: no longer ours to wait for
        self.pods.on_event(event)

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        try:
            self.consistency.ensure_ready(key)
        except StaleCache as stale:
            # The caches do not show our own last writes for this set yet: acting now would repeat or undo them
            # (and the status write would conflict). Retry through the rate limiter, as upstream's error return.
            self.log.debug("skipping sync of a stale stateful set", key=key, reason=str(stale))
            return Result(rate_limited=True)
        sts = self.set_informer.store.get(key)
        if sts is None:
            self.log.info("StatefulSet has been deleted", key=key)
            self.consistency.clear(key)
            return None
        try:
            selector = from_label_selector((sts.get("spec") or {}).get("selector"))
        except (InvalidSelector, TypeError, ValueError, AttributeError) as err:
            # Not transient: retrying cannot help until the set changes.
            self.log.error("error converting StatefulSet selector", key=key, error=str(err))
            return None
        can_adopt = live_owner_check(self.ctx.client, STATEFULSETS, sts)
        await self.history.adopt_orphans(sts, selector, self.history.list(sts, selector), can_adopt)
        pods = await self._claim_pods(sts, selector)
        status = await self.control.update_stateful_set(sts, selector, pods)
        mrs = min_ready_seconds(sts)
        if mrs > 0 and status.available_replicas != replicas(sts):
            return Result(requeue_after=float(mrs))
        return None

    async def _claim_pods(self, sts: Obj, selector: Selector) -> list[Obj]:
        """``getPodsForStatefulSet``: our pods and the namespace's orphans, members by name, claimed."""
        namespace = str(meta(sts).get("namespace") or "")
        store = self.pod_informer.store
        candidates = [p for p in store.by_index(CONTROLLER_UID_INDEX, str(meta(sts).get("uid") or ""))
                      if meta(p).get("namespace") == namespace]
        candidates += store.by_index(POD_ORPHAN_INDEX, namespace)
        manager = ControllerRefManager(self.ctx.client, sts, STATEFULSETS, selector, PODS,
                                       live_owner_check(self.ctx.client, STATEFULSETS, sts))
        return await manager.claim(candidates, [lambda pod: is_member_of(sts, pod)])
