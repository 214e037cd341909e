"""The Deployment controller: rolls each Deployment's pod template out through ReplicaSets
(kube-controller-manager's ``deployment-controller``, ``pkg/controller/deployment/deployment_controller.go``).

Guarantees:
- Keys are Deployment keys. A Deployment is synced when it is added, updated or deleted; when a ReplicaSet it
  controls is added, updated (also the previous controller when the controller reference changed) or deleted;
  when an orphan ReplicaSet its selector matches appears or changes labels (to adopt it); and, for Recreate
  Deployments, when the last of its pods is deleted.
- A sync reads the Deployment from the cache and never edits it: each step that writes the Deployment returns
  it as it now is, and the next step goes on with that (see :mod:`.control`). Gone -> nothing. An empty selector
  -> Warning ``SelectingAll`` and only ``observedGeneration`` is written. Otherwise the ReplicaSets are claimed
  (matching orphans adopted after a live GET shows this Deployment is not being deleted; owned ones that stop
  matching released), then: being deleted -> status only; pause/resume recorded on Progressing; paused -> resize
  only; a deprecated rollback request -> rollback; ``spec.replicas`` changed -> proportional resize; otherwise
  one step of the Recreate or RollingUpdate strategy (see :mod:`.recreate`, :mod:`.rolling`).
- Writes carry resourceVersions; a refused write raises and the key is retried with backoff, at most
  ``MAX_RETRIES`` times in a row (then the runner drops it until the next event, as upstream). A create
  refused because the namespace is terminating is not retried. Progress-deadline checks come back as
  ``Result(requeue_after=...)``, or ``Result(rate_limited=True, forget_failures=True)`` within a second of it.
- Read-your-own-writes, beyond upstream (1.37 gates it only for the ReplicaSet, Job, StatefulSet and DaemonSet
  controllers): the resourceVersions of the Deployment's own writes (status and spec) and of the ReplicaSets it
  creates or updates are recorded under its key; its next sync is skipped and requeued through the rate limiter
  until the Deployment and ReplicaSet informers have applied events at least that new. Why: every status write
  of a ReplicaSet wakes its Deployment, usually before the Deployment informer shows the Deployment's own last
  status write, so without this the sync computes from a stale Deployment and its status (or scale) write fails
  with 409 Conflict, and a stale ReplicaSet list can scale twice. Likewise while a status write of one of its
  ReplicaSets by this process's ReplicaSet controller is not in the shared cache yet
  (``SharedInformer.unseen_write``): a scale sent from the older copy would be refused. The skip is not an
  error: logged at debug only and never counted towards ``MAX_RETRIES``. The record goes with the Deployment
  (deleted, or found gone).
- Events come from source component ``deployment-controller``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta, split_key
from controller_manager.api.resources import DEPLOYMENTS, PODS, REPLICASETS
from controller_manager.api.selectors import Selector, from_label_selector
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, has_status_cause
from controller_manager.controllers.deployment.util_conditions import SELECTING_ALL_MESSAGE, SELECTING_ALL_REASON
from controller_manager.controllers.deployment.util_strategy import is_recreate
from controller_manager.controllerutil.consistency import ConsistencyStore, StaleCache
from controller_manager.controllerutil.controller_ref import (
    ControllerRefManager,
    live_owner_check,
)
from controller_manager.controllerutil.owner_handler import OwnerHandler
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Deleted, Event, Updated

from .control import DeploymentControl, Obj, with_status
from .progress import NOW_RATE_LIMITED
from .recreate import rollout_recreate
from .rollback import get_rollback_to, rollback
from .rolling import rollout_rolling
from .sync import check_paused_conditions, is_scaling_event, sync, sync_status_only

__all__ = ["MAX_RETRIES", "DeploymentController"]

# Retries of one key in a row before it is dropped from the queue (until its next event).
MAX_RETRIES = 15

# ReplicaSets without a controller reference, by namespace: the only ones besides its own a Deployment may claim.
RS_ORPHAN_INDEX = "deployment-orphan-replicasets-by-namespace"


def orphan_index(rs: Obj) -> list[str]:
    """Index function: ``[namespace]`` for a ReplicaSet without a controller reference, else nothing."""
    if controller_ref(rs) is not None:
        return []
    ns = meta(rs).get("namespace")
    return [ns] if isinstance(ns, str) and ns else []


class DeploymentController(Controller):
    """Deployments -> ReplicaSets. One instance per manager; its queue holds Deployment keys."""

    name: ClassVar[str] = "deployment-controller"
    alias: ClassVar[str] = "deployment"
    queue_name: ClassVar[str | None] = "deployment"
    max_retries: ClassVar[int | None] = MAX_RETRIES
    workers_option: ClassVar[str | None] = "concurrent-deployment-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.d_informer = ctx.informers.informer(DEPLOYMENTS)
        self.rs_informer = ctx.informers.informer(REPLICASETS, indexers={RS_ORPHAN_INDEX: orphan_index})
        self.pod_informer = ctx.informers.informer(PODS)
        # Read-your-own-writes (beyond upstream, see above): a sync waits until the informers show this
        # controller's last writes of that Deployment and of its ReplicaSets.
        d_informer, rs_informer = self.d_informer, self.rs_informer
        self.consistency = ConsistencyStore({DEPLOYMENTS.plural: lambda: d_informer.last_sync_resource_version,
                                             REPLICASETS.plural: lambda: rs_informer.last_sync_resource_version})
        self.control = DeploymentControl(
            client=ctx.client,
            recorder=ctx.events.recorder(self.name),
            clock=ctx.clock,
            rs_lister=lambda namespace, name: self.rs_informer.store.get(f"{namespace}/{name}"),
            log=self.log,
            consistency=self.consistency,
            replica_set_written=self.rs_informer.wrote,
        )
        # ReplicaSets wake the Deployment that controls them, or every one that may adopt an orphan; a
        # ReplicaSet's deletionTimestamp is an update like any other (upstream's add/update/deleteReplicaSet).
        self.replica_sets = OwnerHandler(self.d_informer.store, DEPLOYMENTS, self.queue, log=self.log,
                                         deletion_start="ignore")
        self.d_informer.add_handler(self._on_deployment)
        self.rs_informer.add_handler(self._on_replica_set)
        self.pod_informer.add_handler(self._on_pod)

    # --- event handlers (synchronous: they only enqueue keys) ------------------------------------------

    def _on_deployment(self, event: Event) -> None:
        obj = event.new if isinstance(event, Updated) else event.obj
        if isinstance(event, Deleted):
            self.consistency.clear(key_of(obj), str(meta(obj).get("uid") or ""))
        self.queue.add(key_of(obj))

    def _on_replica_set(self, event: Event) -> None:
        self.replica_sets.on_event(event)

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Deleted):
            self._delete_pod(event.obj)

    def _delete_pod(self, pod: Obj) -> None:
        """A Recreate Deployment waits for its last old pod to go: sync it when none is left."""
        d = self._deployment_for_pod(pod)
        if d is None or not is_recreate(d):
            return
        # Upstream lists the ReplicaSets from the API here; a handler must not block, so the cache serves.
        rs_uids = {str(meta(rs).get("uid")) for rs in self._owned_replica_sets(d)}
        for uid in rs_uids:
            if self.pod_informer.store.by_index(CONTROLLER_UID_INDEX, uid):
                return
        self.queue.add(key_of(d))

    # --- lookups in the cache ------------------------------------------------------------------------

    def _deployment_for_pod(self, pod: Obj) -> Obj | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != REPLICASETS.kind:
            return None
        rs = self.rs_informer.store.get(f"{meta(pod).get('namespace')}/{ref.get('name')}")
        if rs is None or meta(rs).get("uid") != ref.get("uid"):
            return None
        rs_ref = controller_ref(rs)
        if rs_ref is None:
            return None
        return self.replica_sets.resolve(rs, rs_ref)

    def _owned_replica_sets(self, d: Obj) -> list[Obj]:
        namespace = meta(d).get("namespace")
        return [rs for rs in self.rs_informer.store.by_index(CONTROLLER_UID_INDEX, str(meta(d).get("uid")))
                if meta(rs).get("namespace") == namespace]

    async def get_replica_sets_for_deployment(self, d: Obj, selector: Selector) -> list[Obj]:
        """The ReplicaSets ``d`` manages, adopting matching orphans and releasing owned ones that stopped
        matching (all of the namespace are looked at, to find the latter)."""
        namespace = str(meta(d).get("namespace") or "")
        # Upstream looks at every ReplicaSet of the namespace, but the claim ignores those another owner
        # controls: ours (by controller UID) and the namespace's orphans are the same answer, without a pass
        # over every ReplicaSet of the namespace on each sync.
        store = self.rs_informer.store
        candidates = [rs for rs in store.by_index(CONTROLLER_UID_INDEX, str(meta(d).get("uid") or ""))
                      if meta(rs).get("namespace") == namespace]
        candidates += store.by_index(RS_ORPHAN_INDEX, namespace)
        manager = ControllerRefManager(self.ctx.client, d, DEPLOYMENTS, selector, REPLICASETS,
                                       live_owner_check(self.ctx.client, DEPLOYMENTS, d))
        return await manager.claim(candidates)

    def get_pod_map_for_deployment(self, d: Obj, selector: Selector, rs_list: Sequence[Obj]) -> dict[str, list[Obj]]:
        """Pods of ``d``'s namespace matching its selector, by the UID of their controlling ReplicaSet (only
        ReplicaSets in ``rs_list``). Inactive pods are kept: Recreate must see them."""
        # Upstream lists the whole namespace and groups by controller; the controller-UID index yields the same
        # pods without a pass over every pod of the namespace on each sync (quadratic with many Deployments).
        namespace = str(meta(d).get("namespace") or "")
        store = self.pod_informer.store
        pod_map: dict[str, list[Obj]] = {}
        for rs in rs_list:
            uid = str(meta(rs).get("uid"))
            if uid in pod_map:
                continue
            pods = pod_map[uid] = []
            for pod in store.by_index(CONTROLLER_UID_INDEX, uid):
                pod_meta = meta(pod)
                if str(pod_meta.get("namespace") or "") != namespace:
                    continue
                labels = pod_meta.get("labels")
                if selector.matches(labels if isinstance(labels, Mapping) else None):
                    pods.append(pod)
        return pod_map

    # --- sync ----------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        try:
            return await self._sync(key)
        except Exception as err:
            if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                return None  # nothing will succeed until the namespace is gone
            raise  # retried with backoff; the runner drops the key after max_retries in a row

    async def _sync(self, key: str) -> Result | None:
        try:
            self.consistency.ensure_ready(key)
        except StaleCache as stale:
            # Our own last writes are not in the caches yet: a sync now would compute from an older Deployment
            # or ReplicaSet list (its writes failing with 409 Conflict, or scaling twice). Wait for the informers.
            self.log.debug("skipping sync of a stale deployment", key=key, reason=str(stale))
            return Result(rate_limited=True)
        cached = self.d_informer.store.get(key)
        if cached is None:
            self.log.debug("deployment has been deleted", key=key)
            self.consistency.clear(key)
            return None
        for rs in self._owned_replica_sets(cached):
            unseen = self.rs_informer.unseen_write(key_of(rs))
            if unseen is not None:
                # The ReplicaSet controller wrote this ReplicaSet's status and the cache does not show it yet: a
                # scale or annotation update now would carry the older resourceVersion and be refused (409).
                self.log.debug("skipping sync: a ReplicaSet write is not in the cache yet", key=key,
                               replica_set=key_of(rs), resource_version=unseen)
                return Result(rate_limited=True)
        # Cached list items may lack type meta; the rollout code builds new objects and never edits this one.
        d: Obj = {"apiVersion": DEPLOYMENTS.api_version, "kind": DEPLOYMENTS.kind, **cached}
        dc = self.control

        raw_selector = (d.get("spec") or {}).get("selector")
        if _selects_everything(raw_selector):
            dc.event(d, "Warning", SELECTING_ALL_REASON, SELECTING_ALL_MESSAGE)
            status = d.get("status") or {}
            generation = int(meta(d).get("generation") or 0)
            if int(status.get("observedGeneration") or 0) < generation:
                await dc.update_deployment_status(with_status(d, {**status, "observedGeneration": generation}))
            return None
        try:
            selector = from_label_selector(raw_selector)
        except ValueError as err:
            ns, name = split_key(key)
            raise ValueError(f"deployment {ns}/{name} has invalid label selector: {err}") from err

        rs_list = await self.get_replica_sets_for_deployment(d, selector)
        # Only the Recreate strategy reads the pods (upstream lists them for every sync; the result is unused
        # otherwise, and grouping thousands of pods per sync is what a large rolling Deployment pays for it).
        pod_map = self.get_pod_map_for_deployment(d, selector, rs_list) if is_recreate(d) else {}

        if is_being_deleted(d):
            await sync_status_only(dc, d, rs_list)
            return None

        d = await check_paused_conditions(dc, d)
        if (d.get("spec") or {}).get("paused"):
            await sync(dc, d, rs_list)
            return None

        # Rollback is not re-entrant: the request is cleared before anything else may roll.
        if get_rollback_to(d) is not None:
            await rollback(dc, d, rs_list)
            return None

        scaling, d = await is_scaling_event(dc, d, rs_list)
        if scaling:
            await sync(dc, d, rs_list)
            return None

        strategy = ((d.get("spec") or {}).get("strategy") or {}).get("type")
        if strategy == "Recreate":
            delay = await rollout_recreate(dc, d, rs_list, pod_map)
        elif strategy == "RollingUpdate":
            delay = await rollout_rolling(dc, d, rs_list)
        else:
            raise ValueError(f"unexpected deployment strategy type: {strategy}")
        if delay is None:
            return None
        if delay == NOW_RATE_LIMITED:
            return Result(rate_limited=True, forget_failures=True)
        return Result(requeue_after=delay)


def _selects_everything(selector: object) -> bool:
    """An empty (non-nil) LabelSelector: it would select every pod of the namespace."""
    return isinstance(selector, Mapping) and all(v is None for v in selector.values())
