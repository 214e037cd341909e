"""The replica manager: keeps ``spec.replicas`` pods running for each ReplicaSet or ReplicationController
(upstream's ``ReplicaSetController`` of ``pkg/controller/replicaset/replica_set.go``, which
``pkg/controller/replication/`` runs for ReplicationControllers through its conversion adapters).

One implementation serves both kinds: a subclass sets ``kind`` (a :class:`~.kind.ReplicaKind`: resource,
event component, selector form, whether status has terminatingReplicas) and the registry identity
(name, alias, queue name, workers flag). Below, "RS" means either kind.

Guarantees:
- Never acts twice for one need. Creations and deletions are recorded as expectations *before* the API
  calls; the pod handlers count them off as the informer shows them; a sync whose expectations are not
  met (or expired, after 5 minutes) only recounts status. Deletions are tracked by pod key, so a pod seen
  first with a deletionTimestamp and then gone counts once. Creates that were never attempted or failed
  are taken off the expectations at once.
- Pods are created in slow-start batches (1, 2, 4, ...; at most ``burst_replicas`` = 500 per sync), each
  from the template with ``generateName: <rs>-`` and the RS as controller (the kind's apiVersion and kind);
  a batch with a failure stops the rest. A refusal because the namespace is terminating is not an error.
- Pods to delete are chosen in upstream's order (unscheduled, pending, not ready, lower deletion cost,
  more co-located pods of sibling RSs, ready for less time, more restarts, newer), and deleted
  with a UID precondition.
- Adoption and release go through the controller-ref manager: orphans matching the selector are adopted
  only after a live GET shows this same RS is not being deleted; owned pods that no longer match are
  released; pods controlled by anyone else (another kind included) are never touched.
- Status (replicas, fullyLabeled/ready/available/terminatingReplicas, observedGeneration, ReplicaFailure)
  is written through ``/status`` only when it changed; terminatingReplicas only for a kind that has it.
  A sync that failed to create or delete raises (and is retried with backoff) after writing status; while
  ready pods wait out ``minReadySeconds`` the key is synced again when the next one turns available.
- An RS with an invalid selector is logged with its key and skipped; no handler or sync error
  escapes into a worker except through the runner's retry path.
- Read-your-own-writes, as upstream's StaleControllerConsistencyReplicaSet (on by default since 1.36): the
  resourceVersions of an RS's status write and of the pods created for it are recorded; its next sync is
  skipped and requeued through the rate limiter (nothing logged above debug) until both informers have
  applied events at least that new (:mod:`controllerutil.consistency`), so it never acts on, or writes
  status from, a copy older than its own last write.
- Events (SuccessfulCreate, FailedCreate, SuccessfulDelete, FailedDelete) come from the PodControl, about
  the RS, as source component ``kind.component``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import controller_ref, is_being_deleted, key_of, meta
from controller_manager.api.pods import pod_key, split_active_and_terminating
from controller_manager.api.resources import PODS
from controller_manager.api.selectors import Selector
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, NotFound, has_status_cause
from controller_manager.controllerutil.consistency import ConsistencyStore, StaleCache
from controller_manager.controllerutil.controller_ref import (
    ControllerRefManager,
    live_owner_check,
    new_controller_ref,
)
from controller_manager.controllerutil.controller_utils import (
    SLOW_START_INITIAL_BATCH_SIZE,
    find_min_next_pod_availability_check,
    pod_keys,
    slow_start_batch,
)
from controller_manager.controllerutil.expectations import ControllerExpectations, UIDTrackingControllerExpectations
from controller_manager.controllerutil.owner_handler import OwnerHandler
from controller_manager.controllerutil.pod_control import PodControl
from controller_manager.controllerutil.selector_cache import SelectorCache
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, NAMESPACE_INDEX, Added, Event, Updated

from .kind import ReplicaKind
from .pods import ORPHAN_INDEX, filter_claimed_pods, get_pods_to_delete, orphan_index
from .status import calculate_status, min_ready_seconds, spec_replicas, update_status

__all__ = ["BURST_REPLICAS", "ReplicaManager"]

Obj = Mapping[str, Any]

# Creations/deletions one sync may start (kube-controller-manager's BurstReplicas).
BURST_REPLICAS = 500


class ReplicaManager(Controller):
    """RSs of ``kind`` -> pods. One instance per kind per manager; its queue holds RS keys.

    Subclasses set ``kind`` and the Controller identity (name, alias, queue_name, workers_option)."""

    kind: ClassVar[ReplicaKind]
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext, *, burst_replicas: int = BURST_REPLICAS) -> None:
        super().__init__(ctx)
        self.burst_replicas = burst_replicas
        # What each ReplicaSet still waits to see created/deleted before it acts again.
        self.expectations = UIDTrackingControllerExpectations(ControllerExpectations(ctx.clock))
        resource = self.kind.resource
        self.pod_control = PodControl(ctx.client, ctx.events.recorder(self.kind.component), resource)
        # The RS store's built-in controller-uid index finds sibling RSs (same Deployment).
        self.rs_informer = ctx.informers.informer(resource)
        self.pod_informer = ctx.informers.informer(PODS, indexers={ORPHAN_INDEX: orphan_index})
        # Parsed selectors by RS key, valid while the RS's resourceVersion is unchanged (None: invalid).
        self._selectors = SelectorCache(self.kind.parse_selector)
        # Pods wake the ReplicaSet that controls them (or, orphans, every one that may adopt them) and count
        # off its expectations: upstream's addPod/updatePod/deletePod.
        self.pods = OwnerHandler(
            self.rs_informer.store, resource, self.queue, log=self.log, selectors=self._selectors,
            deletion_start="deleted_old_too", ready_requeue_skew=0.0,
            created=lambda rs, pod: self.expectations.creation_observed(key_of(rs)), deleted=self._pod_deleted)
        self.rs_informer.add_handler(self._on_replica_set)
        self.pod_informer.add_handler(self.pods.on_event)
        # Read-your-own-writes (upstream's StaleControllerConsistencyReplicaSet, on by default): a sync waits
        # until the informers show this controller's last status write and pod creations for that RS.
        rs_informer, pod_informer = self.rs_informer, self.pod_informer
        self.consistency = ConsistencyStore({resource.plural: lambda: rs_informer.last_sync_resource_version,
                                             PODS.plural: lambda: pod_informer.last_sync_resource_version})

    # --- event handlers (synchronous: they only enqueue keys and count expectations) ----------------

    def _on_replica_set(self, event: Event) -> None:
        if isinstance(event, Added):
            self.queue.add(key_of(event.obj))
        elif isinstance(event, Updated):
            self._update_rs(event.old, event.new)
        else:
            self._delete_rs(event.obj)

    def _update_rs(self, old: Obj, cur: Obj) -> None:
        if meta(old).get("uid") != meta(cur).get("uid"):
            # Deleted and recreated under the same name between two watch events: forget the old one first.
            self._delete_rs(old)
        if spec_replicas(old) != spec_replicas(cur):
            self.log.debug("desired pod count changed", key=key_of(cur), old=spec_replicas(old),
                           new=spec_replicas(cur))
        # Enqueue on every update (status ones included): a resync then retries RSs whose creates failed.
        self.queue.add(key_of(cur))

    def _delete_rs(self, rs: Obj) -> None:
        key = key_of(rs)
        # A new RS of the same name must start without the old one's expectations.
        self.expectations.delete_expectations(key)
        self.consistency.clear(key, str(meta(rs).get("uid") or ""))
        self._selectors.forget(key)
        self.queue.add(key)

    def _pod_deleted(self, rs: Obj | None, pod: Obj, final: bool) -> None:
        if rs is not None:
            self.expectations.deletion_observed(key_of(rs), pod_key(pod))

    # Upstream's handler names, for tests that drive them one event at a time.
    def _add_pod(self, pod: Obj) -> None:
        self.pods.added(pod)

    def _update_pod(self, old: Obj, cur: Obj) -> None:
        self.pods.updated(old, cur)

    def _delete_pod(self, pod: Obj) -> None:
        self.pods.deleted(pod)

    # --- lookups in the cache ---------------------------------------------------------------------

    def _selector(self, rs: Obj) -> Selector | None:
        """The RS's selector, parsed once per resourceVersion; None if it is invalid."""
        return self._selectors.get(rs)

    def _pod_replica_sets(self, pod: Obj) -> list[Obj]:
        """ReplicaSets of the pod's namespace whose selector matches it (``GetPodReplicaSets``)."""
        return self.pods.matching(pod)

    def _pods_of(self, rs: Obj) -> list[Obj]:
        """Pods the RS controls plus the orphans of its namespace (``FilterPodsByOwner``)."""
        m = meta(rs)
        ns, uid = m.get("namespace"), m.get("uid")
        store = self.pod_informer.store
        owned: list[Obj] = [p for p in store.by_index(CONTROLLER_UID_INDEX, str(uid)) if meta(p).get("namespace") == ns]
        return [*owned, *store.by_index(ORPHAN_INDEX, str(ns))]

    def _related_pods(self, rs: Obj) -> list[Obj]:
        """Every pod of every ReplicaSet with the same controller as ``rs`` (``getIndirectlyRelatedPods``)."""
        ref = controller_ref(rs)
        if ref is None:
            self.log.error("ReplicaSet has no controller", key=key_of(rs))
            return []
        related: list[Obj] = []
        seen: set[str] = set()
        pods_by_ns: dict[str, list[dict[str, Any]]] = {}
        for sibling in self.rs_informer.store.by_index(CONTROLLER_UID_INDEX, str(ref.get("uid"))):
            selector = self._selector(sibling)
            if selector is None:
                continue  # an invalid selector matches no pods
            ns = str(meta(sibling).get("namespace") or "")
            if ns not in pods_by_ns:
                pods_by_ns[ns] = self.pod_informer.store.by_index(NAMESPACE_INDEX, ns)
            for pod in pods_by_ns[ns]:
                labels = meta(pod).get("labels")
                if not selector.matches(labels if isinstance(labels, Mapping) else None):
                    continue
                uid = str(meta(pod).get("uid") or "")
                if uid in seen:
                    continue
                seen.add(uid)
                related.append(pod)
        return related

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        try:
            self.consistency.ensure_ready(key)
        except StaleCache as stale:
            # Our own last write is not in the cache yet: acting now would undo or repeat it (and a status
            # write would fail with 409). Try again through the rate limiter, as upstream's error return does.
            self.log.debug("skipping sync of a stale replica set", key=key, reason=str(stale))
            return Result(rate_limited=True)
        unseen = self.rs_informer.unseen_write(key)
        if unseen is not None:
            # Another controller of this process (the Deployment controller scaling it) wrote this RS and the
            # cache does not show it yet: its status would be written from the older copy and refused.
            self.log.debug("skipping sync: a write of this replica set is not in the cache yet", key=key,
                           resource_version=unseen)
            return Result(rate_limited=True)
        rs = self.rs_informer.store.get(key)
        if rs is None:
            self.log.debug("replica set has been deleted", key=key)
            self.consistency.clear(key)
            self.expectations.delete_expectations(key)
            self._selectors.forget(key)
            return None

        needs_sync = self.expectations.satisfied(key)
        selector = self._selector(rs)
        if selector is None:
            self.log.error("error converting pod selector to selector", key=key,
                           selector=(rs.get("spec") or {}).get("selector"))
            return None

        all_pods = self._pods_of(rs)
        resource = self.kind.resource
        manager = ControllerRefManager(self.ctx.client, rs, resource, selector, PODS,
                                       live_owner_check(self.ctx.client, resource, rs))
        # Raises after the whole pass if an adoption or release failed: retried with backoff.
        active_pods, terminating_pods = split_active_and_terminating(all_pods)
        active = await manager.claim(active_pods)
        # Only a kind whose status has terminatingReplicas looks at terminating pods at all.
        terminating = filter_claimed_pods(rs, selector, terminating_pods) \
            if self.kind.status_terminating_replicas else []

        manage_error: Exception | None = None
        if needs_sync and not is_being_deleted(rs):
            manage_error = await self._manage_replicas(key, active, rs)

        now = self.ctx.clock.now()
        new_status = calculate_status(rs, active, terminating, manage_error, now,
                                      terminating_replicas=self.kind.status_terminating_replicas)
        updated = await update_status(self.ctx.client, self.kind, rs, new_status)
        if updated is not rs:  # written: the next sync waits until the cache shows it
            self.consistency.wrote_at(key, str(meta(rs).get("uid") or ""), self.kind.resource.plural,
                                      str(meta(updated).get("resourceVersion") or ""))
            # And the owner's controller (sharing this informer) waits for it too, rather than scale the RS from
            # an older copy and be refused with 409.
            self.rs_informer.wrote(updated)
        if manage_error is not None:
            raise manage_error

        mrs = min_ready_seconds(updated)
        status = updated.get("status") or {}
        if mrs > 0 and status.get("readyReplicas", 0) != status.get("availableReplicas", 0):
            # Ready pods are waiting out minReadySeconds: sync again when the next one becomes available.
            delay = find_min_next_pod_availability_check(active, mrs, now, self.ctx.clock.now())
            return Result(requeue_after=float(mrs) if delay is None else delay)
        return None

    async def _manage_replicas(self, key: str, active: Sequence[Obj], rs: Obj) -> Exception | None:
        """Create or delete pods towards ``spec.replicas``; returns the first failure instead of raising."""
        diff = len(active) - spec_replicas(rs)
        namespace = str(meta(rs).get("namespace") or "")
        if diff < 0:
            count = min(-diff, self.burst_replicas)
            # Before any call: the informer may show a pod before create() returns.
            self.expectations.expect_creations(key, count)
            self.log.info("too few replicas", key=key, need=spec_replicas(rs), creating=count)
            template = (rs.get("spec") or {}).get("template") or {}
            ref = new_controller_ref(rs, self.kind.resource)

            uid = str(meta(rs).get("uid") or "")

            async def create(_: int) -> None:
                try:
                    pod = await self.pod_control.create_pods(namespace, template, rs, ref)
                    self.consistency.wrote_at(key, uid, PODS.plural, str(meta(pod).get("resourceVersion") or ""))
                except ApiError as err:
                    if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                        return  # every create will fail until the namespace is gone: nothing to retry
                    raise

            successes, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, create)
            skipped = count - successes
            if skipped > 0:
                # The informer will never show these: stop waiting for them. The next sync retries.
                self.log.info("slow-start failure, skipping creation of pods", key=key, skipped=skipped,
                              error=str(error))
                self.expectations.lower_expectations(key, skipped, 0)
            return error

        if diff > 0:
            count = min(diff, self.burst_replicas)
            self.log.info("too many replicas", key=key, need=spec_replicas(rs), deleting=count)
            to_delete = get_pods_to_delete(active, self._related_pods(rs), count, self.ctx.clock.now())
            # By pod key, so seeing a pod both terminating and gone counts it once.
            self.expectations.expect_deletions(key, pod_keys(to_delete))
            results = await asyncio.gather(*(self._delete(key, rs, pod) for pod in to_delete))
            return next((err for err in results if err is not None), None)
        return None

    async def _delete(self, key: str, rs: Obj, pod: Obj) -> Exception | None:
        m = meta(pod)
        try:
            await self.pod_control.delete_pod(str(m.get("namespace") or ""), str(m.get("name") or ""), rs,
                                              uid=m.get("uid"))
        except Exception as err:
            # The informer will not show this deletion: count it off now.
            self.expectations.deletion_observed(key, pod_key(pod))
            if isinstance(err, NotFound):
                return None
            self.log.info("failed to delete pod, decremented expectations", key=key, pod=pod_key(pod),
                          error=str(err))
            return err
        return None
