"""The disruption controller: PodDisruptionBudget status (kube-controller-manager's ``disruption-controller``,
``pkg/controller/disruption/disruption.go``).

The eviction API lets a pod go only while its PDB's ``status.disruptionsAllowed`` is positive and its
``observedGeneration`` is current; this controller keeps that status true to the pods.

Guarantees:
- For each PDB: its pods are the pods of its namespace its selector matches (policy/v1: an empty selector matches
  every pod, a missing one none). ``expectedPods`` and ``desiredHealthy`` follow upstream's
  ``getExpectedPodCount``: an integer ``minAvailable`` is the desired count and the pods found the expected count;
  a percentage ``minAvailable`` or any ``maxUnavailable`` takes the expected count from the scale of the pods'
  controllers (:mod:`.finders`), scaled rounding up. Pods without a controller are reported (``UnmanagedPods``)
  and not counted; a pod whose controller cannot be found fails the sync.
- ``currentHealthy`` counts ready pods neither terminating nor evicted within the last two minutes
  (:mod:`.status`); ``disruptedPods`` entries of pods that were not deleted within two minutes are dropped
  (``NotDeleted`` Warning on the pod) and the PDB is synced again when the next entry expires (the
  ``disruption_recheck`` queue hands it back to the main queue, rate limited).
- The status (with the ``DisruptionAllowed`` condition, ``SufficientPods``/``InsufficientPods``) is written through
  ``/status`` only when it differs, carrying the cached resourceVersion: a 409 is retried with backoff, never
  overwritten. Any other failure takes upstream's fail-safe path: ``disruptionsAllowed: 0`` and a
  ``SyncFailed`` condition whose message is the error, so evictions stop until a sync succeeds.
- A sync never computes from a copy of the PDB older than this controller's own last status write of it: the
  resourceVersion each write returns is recorded, and the next sync of that PDB is skipped and requeued through
  the rate limiter until the PDB informer has applied an event at least that new
  (:mod:`controllerutil.consistency`, the read-your-own-writes upstream gives its workload controllers). Pod
  events arrive faster than the PDB watch shows the last write, so without it about half of the status writes
  were refused with 409 Conflict and retried; the statuses written, the conflict rule (an eviction's write is
  never overwritten) and the fail-safe path are unchanged. The record goes with the PDB.
- A pod carrying ``DisruptionTarget=True`` (not set by the kubelet) that is neither terminating nor terminal two
  minutes after the condition's transition gets it set back to False, through a strategic-merge patch of
  ``pods/status`` (the ``stale_pod_disruption`` queue).
- Handlers: PDB add/update/delete enqueue the PDB; pod add/update/delete enqueue the (first, by name) PDB selecting
  the pod, with a ``MultiplePodDisruptionBudgets`` Warning on the pod when several do. Events come from component
  ``controllermanager``, as upstream's do. One worker per queue, as upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.intstr import scaled_value
from controller_manager.api.meta import controller_ref, format_time, key_of, meta, parse_time, split_key
from controller_manager.api.pods import POD_FAILED, POD_SUCCEEDED, get_pod_condition
from controller_manager.api.resources import DEPLOYMENTS, PODDISRUPTIONBUDGETS, PODS, REPLICASETS, STATEFULSETS
from controller_manager.api.selectors import InvalidSelector, from_label_selector
from controller_manager.client.errors import ApiError, Conflict
from controller_manager.controllerutil.consistency import ConsistencyStore, StaleCache
from controller_manager.controllerutil.selector_cache import SelectorCache
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NAMESPACE_INDEX, Added, Deleted, Event, Updated
from controller_manager.runtime.informers.labelindex import NAMESPACE_LABEL_INDEX, namespace_label_index, select
from controller_manager.runtime.workqueue import DelayingQueue

from . import messages
from .finders import REPLICATIONCONTROLLERS, ControllerAndScale, FinderError, Finders, KindMapper
from .status import (
    build_disrupted_pod_map,
    count_healthy_pods,
    fail_safe_status,
    new_status,
    status_is_current,
)

__all__ = [
    "DISRUPTION_TARGET_CONDITION",
    "EVENT_COMPONENT",
    "STALE_POD_DISRUPTION_TIMEOUT",
    "TERMINATION_BY_KUBELET_REASON",
    "DisruptionController",
]

Obj = Mapping[str, Any]

# How long a pod may carry DisruptionTarget=True without starting to terminate before the condition is reset.
STALE_POD_DISRUPTION_TIMEOUT = 120.0
DISRUPTION_TARGET_CONDITION = "DisruptionTarget"
# The kubelet's own disruption (node shutdown, eviction under pressure) may take arbitrarily long to end in a
# deletion, so its condition is never stale.
TERMINATION_BY_KUBELET_REASON = "TerminationByKubelet"
EVENT_COMPONENT = "controllermanager"

# What a failed sync may raise before it takes the fail-safe path (anything else is a bug: retried, reported).
_SYNC_ERRORS = (ApiError, FinderError, ValueError)


class DisruptionController(Controller):
    """PodDisruptionBudgets -> their status. Its queue holds PDB keys; two more queues run in the background."""

    name: ClassVar[str] = "disruption-controller"
    alias: ClassVar[str] = "disruption"
    queue_name: ClassVar[str | None] = "disruption"
    default_workers: ClassVar[int] = 1

    def __init__(self, ctx: ControllerContext, *, watch_replication_controllers: bool = False,
                 stale_pod_disruption_timeout: float = STALE_POD_DISRUPTION_TIMEOUT) -> None:
        super().__init__(ctx)
        self.stale_pod_disruption_timeout = stale_pod_disruption_timeout
        self.recorder = ctx.events.recorder(EVENT_COMPONENT)
        # PDBs whose disruptedPods entries expire later; each key is handed to the main queue when due.
        self.recheck_queue: DelayingQueue[str] = DelayingQueue("disruption_recheck", clock=ctx.clock)
        # Pods whose DisruptionTarget condition may become stale.
        self.stale_pod_disruption_queue = ctx.new_queue("stale_pod_disruption")
        self.pdb_selectors = SelectorCache()

        self.pod_informer = ctx.informers.informer(PODS, indexers={NAMESPACE_LABEL_INDEX: namespace_label_index})
        self.pdb_informer = ctx.informers.informer(PODDISRUPTIONBUDGETS)
        pdb_informer = self.pdb_informer
        self.consistency = ConsistencyStore(
            {PODDISRUPTIONBUDGETS.plural: lambda: pdb_informer.last_sync_resource_version})
        self.rs_informer = ctx.informers.informer(REPLICASETS)
        self.deployment_informer = ctx.informers.informer(DEPLOYMENTS)
        self.statefulset_informer = ctx.informers.informer(STATEFULSETS)
        # kube-sim serves no ReplicationControllers; elsewhere their pods are found through /scale without one.
        self.rc_informer = ctx.informers.informer(REPLICATIONCONTROLLERS) if watch_replication_controllers else None
        self.finders = Finders(
            ctx.client, KindMapper(ctx.client, ctx.clock),
            rs=self.rs_informer.store, deployments=self.deployment_informer.store,
            statefulsets=self.statefulset_informer.store,
            rc=self.rc_informer.store if self.rc_informer is not None else None)

        self.pdb_informer.add_handler(self._on_pdb)
        self.pod_informer.add_handler(self._on_pod)

    # --- handlers ---------------------------------------------------------------------------------

    def _on_pdb(self, event: Event) -> None:
        if isinstance(event, Added):
            self.queue.add(key_of(event.obj))
        elif isinstance(event, Updated):
            self.queue.add(key_of(event.new))
        elif isinstance(event, Deleted):
            self.pdb_selectors.forget(key_of(event.obj))
            self.consistency.clear(key_of(event.obj), str(meta(event.obj).get("uid") or ""))
            self.queue.add(key_of(event.obj))

    def _on_pod(self, event: Event) -> None:
        pod = event.new if isinstance(event, Updated) else event.obj
        if self.pdb_informer.store.index_count(NAMESPACE_INDEX, str(meta(pod).get("namespace") or "")):
            pdb = self.pdb_for_pod(pod)
            if pdb is not None:
                self.queue.add(key_of(pdb))
        if isinstance(event, Deleted):
            return
        wait = self.stale_disruption_wait(pod)
        if wait is not None:
            self._enqueue_stale_pod_disruption_cleanup(pod, wait)

    def _enqueue_stale_pod_disruption_cleanup(self, pod: Obj, delay: float) -> None:
        self.stale_pod_disruption_queue.add_after(key_of(pod), delay)
        self.log.debug("enqueued pod to clean up a stale DisruptionTarget condition", pod=key_of(pod), delay=delay)

    def pdb_for_pod(self, pod: Obj) -> Obj | None:
        """The PDB a pod event wakes (``getPdbForPod``): the first, by name, of those selecting the pod."""
        pdbs = self.pdbs_for_pod(pod)
        if not pdbs:
            return None
        if len(pdbs) > 1:
            m = meta(pod)
            msg = messages.multiple_pdbs_message(str(m.get("namespace") or ""), str(m.get("name") or ""),
                                                 str(meta(pdbs[0]).get("name") or ""))
            self.log.info(msg, pod=key_of(pod))
            self.recorder.event(pod, "Warning", messages.MULTIPLE_PDBS, msg, resource=PODS)
        return pdbs[0]

    def pdbs_for_pod(self, pod: Obj) -> list[Obj]:
        """PDBs of the pod's namespace whose (valid) selector matches its labels (``GetPodPodDisruptionBudgets``)."""
        labels = meta(pod).get("labels") or {}
        found: list[Obj] = []
        for pdb in self.pdb_informer.store.by_index(NAMESPACE_INDEX, str(meta(pod).get("namespace") or "")):
            selector = self.pdb_selectors.get(pdb)
            if selector is not None and selector.matches(labels):
                found.append(pdb)
        found.sort(key=lambda p: str(meta(p).get("name") or ""))
        return found

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        try:
            self.consistency.ensure_ready(key)
        except StaleCache as stale:
            # The cache does not show our own last status write yet: a write now would carry the older
            # resourceVersion and be refused (409). Retry through the rate limiter, as after a conflict.
            self.log.debug("skipping sync of a stale pod disruption budget", key=key, reason=str(stale))
            return Result(rate_limited=True)
        pdb = self.pdb_informer.store.get(key)
        if pdb is None:
            self.log.debug("pod disruption budget has been deleted", key=key)
            self.consistency.clear(key)
            return None
        try:
            await self._try_sync(key, pdb)
        except Conflict:
            raise  # our copy was stale: retry with backoff, no fail-safe write over a newer status
        except _SYNC_ERRORS as err:
            self.log.error("failed to sync PDB", key=key, error=str(err))
            await self._fail_safe(pdb, err)
        return None

    async def _try_sync(self, key: str, pdb: Obj) -> None:
        try:
            pods = self.pods_for_pdb(pdb)
        except InvalidSelector as err:
            self._event(pdb, "Warning", messages.NO_PODS, messages.get_pods_failed_message(err))
            raise
        if not pods:
            self._event(pdb, "Normal", messages.NO_PODS, messages.NO_MATCHING_PODS_MESSAGE)

        try:
            expected_count, desired_healthy, unmanaged = await self.expected_pod_count(pdb, pods)
        except _SYNC_ERRORS as err:
            self._event(pdb, "Warning", messages.CALCULATE_EXPECTED_POD_COUNT_FAILED,
                        messages.calculate_failed_message(err))
            raise
        if unmanaged:
            # Not an error: retrying would only hot-loop on status writes. Reported, then counted without them.
            self.log.debug("found unmanaged pods associated with this PDB", key=key, pods=unmanaged)
            self._event(pdb, "Warning", messages.UNMANAGED_PODS,
                        messages.unmanaged_pods_message((pdb.get("spec") or {}).get("selector")))

        now = self.ctx.clock.now()
        disrupted_pods, expired, recheck_at = build_disrupted_pod_map(pods, pdb, now)
        namespace = str(meta(pdb).get("namespace") or "")
        for pod in expired:
            self.log.info("pod was expected to be deleted but it wasn't, updating PDB", pod=key_of(pod), key=key,
                          disruption_time=((pdb.get("status") or {}).get("disruptedPods") or {}).get(
                              meta(pod).get("name")))
            self.recorder.event(pod, "Warning", messages.NOT_DELETED, messages.not_deleted_message(namespace),
                                resource=PODS)
        current_healthy = count_healthy_pods(pods, disrupted_pods, now)
        await self._update_pdb_status(pdb, current_healthy, desired_healthy, expected_count, disrupted_pods, now)
        if recheck_at is not None:
            # At most one wait per key is kept, the earliest: exactly the next expiry.
            self.recheck_queue.add_after(key, recheck_at - now)

    def pods_for_pdb(self, pdb: Obj) -> list[Obj]:
        """The PDB's pods, by name; InvalidSelector if its selector cannot be parsed."""
        selector = from_label_selector((pdb.get("spec") or {}).get("selector"))
        pods: list[Obj] = list(select(self.pod_informer.store, str(meta(pdb).get("namespace") or ""), selector))
        pods.sort(key=lambda p: str(meta(p).get("name") or ""))
        return pods

    async def expected_pod_count(self, pdb: Obj, pods: Sequence[Obj]) -> tuple[int, int, list[str]]:
        """(expectedPods, desiredHealthy, names of pods without a controller) (``getExpectedPodCount``)."""
        spec = pdb.get("spec") or {}
        expected_count = desired_healthy = 0
        unmanaged: list[str] = []
        if spec.get("maxUnavailable") is not None:
            expected_count, unmanaged = await self.expected_scale(pods)
            max_unavailable = scaled_value(spec["maxUnavailable"], expected_count, True)
            desired_healthy = max(0, expected_count - max_unavailable)
        elif spec.get("minAvailable") is not None:
            min_available = spec["minAvailable"]
            if isinstance(min_available, int) and not isinstance(min_available, bool):
                desired_healthy = min_available
                expected_count = len(pods)
            elif isinstance(min_available, str):
                expected_count, unmanaged = await self.expected_scale(pods)
                desired_healthy = scaled_value(min_available, expected_count, True)
        return expected_count, desired_healthy, unmanaged

    async def expected_scale(self, pods: Sequence[Obj]) -> tuple[int, list[str]]:
        """(sum of the scales of the pods' distinct controllers, names of pods without one) (``getExpectedScale``)."""
        controller_scale: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(str(meta(pod).get("name") or ""))
                continue
            if ref.get("uid") in controller_scale:
                continue
            found: ControllerAndScale | None = await self.finders.find(ref, str(meta(pod).get("namespace") or ""))
            if found is None:
                raise FinderError(messages.no_controllers_message(str(meta(pod).get("name") or "")))
            controller_scale[found.uid] = found.scale
        return sum(controller_scale.values()), unmanaged

    async def _update_pdb_status(self, pdb: Obj, current_healthy: int, desired_healthy: int, expected_count: int,
                                 disrupted_pods: Mapping[str, Any], now: float) -> None:
        if status_is_current(pdb, current_healthy, desired_healthy, expected_count, disrupted_pods):
            return
        await self._write_status(pdb, new_status(pdb, current_healthy, desired_healthy, expected_count,
                                                 disrupted_pods, now))

    async def _fail_safe(self, pdb: Obj, err: BaseException) -> None:
        """At least stop evictions: no disruption allowed, and a SyncFailed condition saying why. A failure to write
        it raises (retried with backoff); once written the PDB waits for its next event, as upstream."""
        await self._write_status(pdb, fail_safe_status(pdb, str(err), self.ctx.clock.now()))

    async def _write_status(self, pdb: Obj, status: dict[str, Any]) -> None:
        # One attempt, with the cached resourceVersion: a conflict means an eviction (or another writer) got there
        # first, and writing our older view over it could allow one disruption too many.
        written = await self.ctx.client.update_status(PODDISRUPTIONBUDGETS, {**pdb, "status": status})
        self.consistency.record(pdb, PODDISRUPTIONBUDGETS.plural, written)

    def _event(self, pdb: Obj, type_: str, reason: str, message: str) -> None:
        self.recorder.event(pdb, type_, reason, message, resource=PODDISRUPTIONBUDGETS)

    # --- stale DisruptionTarget conditions --------------------------------------------------------

    def stale_disruption_wait(self, pod: Obj) -> float | None:
        """None if the pod has no DisruptionTarget condition that can go stale; else seconds until it is stale
        (0: now) (``nonTerminatingPodHasStaleDisruptionCondition``)."""
        if meta(pod).get("deletionTimestamp") is not None:
            return None
        cond = get_pod_condition(pod, DISRUPTION_TARGET_CONDITION)
        phase = (pod.get("status") or {}).get("phase")
        if (cond is None or cond.get("status") != "True" or cond.get("reason") == TERMINATION_BY_KUBELET_REASON
                or phase in (POD_SUCCEEDED, POD_FAILED)):
            return None
        since = parse_time(cond.get("lastTransitionTime"))
        if since is None:
            return 0.0  # the zero time: long stale
        return max(0.0, self.stale_pod_disruption_timeout - (self.ctx.clock.now() - since))

    async def sync_stale_pod_disruption(self, key: str) -> None:
        """Reset a stale DisruptionTarget condition to False (``syncStalePodDisruption``)."""
        pod = self.pod_informer.store.get(key)
        if pod is None:
            self.log.debug("skipping clearing DisruptionTarget condition because pod was deleted", pod=key)
            return
        wait = self.stale_disruption_wait(pod)
        if wait is None:
            return
        if wait > 0:
            self._enqueue_stale_pod_disruption_cleanup(pod, wait)
            return
        namespace, name = split_key(key)
        patch: dict[str, Any] = {
            "status": {"conditions": [{
                "type": DISRUPTION_TARGET_CONDITION, "status": "False",
                "lastTransitionTime": format_time(self.ctx.clock.now()),
                # The whole condition is replaced upstream: its reason, message and probe time go.
                "reason": None, "message": None, "lastProbeTime": None,
            }]},
        }
        resource_version = meta(pod).get("resourceVersion")
        if resource_version:
            # A conditional write, as upstream's UpdateStatus of the cached pod is.
            patch["metadata"] = {"resourceVersion": resource_version}
        await self.ctx.client.patch(PODS, name, patch, namespace, patch_type="strategic", subresource="status")
        self.log.info("reset stale DisruptionTarget condition to False", pod=key)

    # --- background queues ------------------------------------------------------------------------

    async def run_background(self) -> None:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.run_queue(self.recheck_queue, self._recheck), name=f"{self.name}/recheck")
                tg.create_task(self.run_queue(self.stale_pod_disruption_queue, self.sync_stale_pod_disruption),
                               name=f"{self.name}/stale-pod-disruption")
        finally:
            self.recheck_queue.shut_down()
            self.stale_pod_disruption_queue.shut_down()

    async def _recheck(self, key: str) -> None:
        """A PDB whose recheck time came: back on the main queue, rate-limited (upstream's recheck worker)."""
        self.queue.add_rate_limited(key)
