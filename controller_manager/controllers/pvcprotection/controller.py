"""The PVC protection controller (kube-controller-manager's ``persistentvolumeclaim-protection-controller``,
``pkg/controller/volume/pvcprotection/pvc_protection_controller.go``).

Guarantees:
- Every claim not being deleted carries the ``kubernetes.io/pvc-protection`` finalizer (the API server's
  StorageObjectInUseProtection admission adds it on create; this adds it to claims created without it).
- A claim being deleted keeps the finalizer while a pod uses it: a scheduled pod naming it in a
  ``persistentVolumeClaim`` volume (whatever the pod's phase), or naming it through a generic ephemeral volume
  when the claim is controlled by that pod and the pod is not shut down (deleted with grace period 0). The
  informer's cache is asked first; only when it finds no user is a live list of the namespace's pods asked, and
  that list is made once per batch of claims of one namespace (upstream's per-namespace batching: one worker
  moves claim keys into per-namespace batches, the namespace workers process a batch at a time).
- The ``Unused`` condition (feature gate PersistentVolumeClaimUnusedSinceTime, beta and on by default in 1.37):
  on a Bound claim not being deleted, ``Unused=True`` (reason ``NoPodsUsingPVC``) when no pod that has not
  terminated names it (unscheduled pods count), ``Unused=False`` (``PodUsingPVC``) otherwise, written through
  ``/status`` only on a change, ``lastTransitionTime`` being when this controller saw the change.
- A failed claim is retried with the default controller backoff (5 ms doubling to 1000 s, per claim).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import deep_copy, format_time, key_of, meta, split_key
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PODS
from controller_manager.api.volumes import (
    POD_PVC_INDEX,
    PVC_PROTECTION_FINALIZER,
    ephemeral_claim_name,
    is_deletion_candidate,
    is_pod_terminated,
    need_to_add_finalizer,
    pod_pvc_index,
    pod_volumes,
    volume_is_for_pod,
)
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Deleted, Event, Updated
from controller_manager.runtime.workqueue import WorkQueue
from controller_manager.runtime.workqueue.rate_limiters import default_controller_rate_limiter

__all__ = [
    "UNUSED_CONDITION",
    "PVCProtectionController",
    "pod_is_shut_down",
    "pod_uses_pvc_for_deletion",
    "pod_uses_pvc_for_unused_since",
]

Obj = Mapping[str, Any]
PodPredicate = Callable[[Obj, Obj], bool]

UNUSED_CONDITION = "Unused"
REASON_UNUSED = "NoPodsUsingPVC"
REASON_USED = "PodUsingPVC"
MESSAGE_UNUSED = "No pods are currently referencing this PVC"
MESSAGE_USED = "A pod is currently referencing this PVC"


def pod_is_shut_down(pod: Obj) -> bool:
    """Deleted with grace period 0: the kubelet is done with it, or it was force-deleted."""
    m = meta(pod)
    return m.get("deletionTimestamp") is not None and m.get("deletionGracePeriodSeconds") == 0


def _names_claim(pod: Obj, pvc: Obj, *, ephemeral_ok: bool) -> bool:
    name = meta(pvc).get("name")
    for volume in pod_volumes(pod):
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping) and source.get("claimName") == name:
            return True
        if (ephemeral_ok and volume.get("ephemeral") is not None and ephemeral_claim_name(pod, volume) == name
                and volume_is_for_pod(pod, pvc) is None):
            return True
    return False


def pod_uses_pvc_for_deletion(pod: Obj, pvc: Obj) -> bool:
    """Blocks the claim's deletion: scheduled, and naming it (an ephemeral one only while not shut down)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping) or not spec.get("nodeName"):
        # The kubelet sees pods only once scheduled, and will not start one whose claim is being deleted.
        return False
    return _names_claim(pod, pvc, ephemeral_ok=not pod_is_shut_down(pod))


def pod_uses_pvc_for_unused_since(pod: Obj, pvc: Obj) -> bool:
    """Counts as a user for the Unused condition: not terminated (scheduled or not) and naming the claim."""
    return not is_pod_terminated(pod) and _names_claim(pod, pvc, ephemeral_ok=True)


def _unused_condition(pvc: Obj) -> Mapping[str, Any] | None:
    status = pvc.get("status")
    for cond in (status.get("conditions") or ()) if isinstance(status, Mapping) else ():
        if isinstance(cond, Mapping) and cond.get("type") == UNUSED_CONDITION:
            return cond
    return None


def _phase(pvc: Obj) -> str:
    status = pvc.get("status")
    return str(status.get("phase") or "") if isinstance(status, Mapping) else ""


class _LivePods:
    """One live list of a namespace's pods, made at most once per batch (upstream's LazyLivePodList)."""

    def __init__(self) -> None:
        self.pods: list[Obj] | None = None


class PVCProtectionController(Controller):
    name: ClassVar[str] = "persistentvolumeclaim-protection-controller"
    alias: ClassVar[str] = "pvc-protection"
    queue_name: ClassVar[str | None] = "pvcprotection"
    default_workers: ClassVar[int] = 1  # upstream starts it with one namespace worker, not configurable
    # Feature gate PersistentVolumeClaimUnusedSinceTime: beta, on by default in 1.37.
    unused_since_time: ClassVar[bool] = True

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.client = ctx.client
        self.pvc_informer = ctx.informers.informer(PERSISTENTVOLUMECLAIMS)
        self.pod_informer = ctx.informers.informer(PODS, indexers={POD_PVC_INDEX: pod_pvc_index})
        self.pvc_informer.add_handler(self._on_pvc)
        self.pod_informer.add_handler(self._on_pod)
        # Claims waiting for their namespace's batch: namespace -> {claim key: claim name}, in arrival order.
        self.batches: dict[str, dict[str, str]] = {}
        self.namespace_queue: WorkQueue[str] = WorkQueue(clock=ctx.clock)
        self.backoff = default_controller_rate_limiter(ctx.clock)

    # --- event handlers ----------------------------------------------------------------------------------

    def _on_pvc(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        pvc = event.obj if isinstance(event, Added) else event.new
        if (need_to_add_finalizer(pvc, PVC_PROTECTION_FINALIZER)
                or is_deletion_candidate(pvc, PVC_PROTECTION_FINALIZER)
                or (self.unused_since_time and _unused_condition(pvc) is None)):
            self.queue.add(key_of(pvc))

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Updated):
            self._enqueue_claims(event.new, deleted=False)
            # An update can hide the deletion of a pod and the creation of a namesake: the old one's claims
            # may no longer be used.
            if meta(event.old).get("uid") != meta(event.new).get("uid"):
                self._enqueue_claims(event.old, deleted=True)
        else:
            self._enqueue_claims(event.obj, deleted=isinstance(event, Deleted))

    def _enqueue_claims(self, pod: Obj, *, deleted: bool) -> None:
        spec = pod.get("spec")
        scheduled = isinstance(spec, Mapping) and bool(spec.get("nodeName"))
        # Without the Unused condition only pods that can free a claim matter.
        if not self.unused_since_time and not deleted and not is_pod_terminated(pod) and scheduled:
            return
        for key in pod_pvc_index(pod):
            self.queue.add(key)

    # --- the main worker: claim keys into per-namespace batches -------------------------------------------

    async def sync(self, key: str) -> Result | None:
        namespace, name = split_key(key)
        batch = self.batches.get(namespace)
        if batch is None:
            batch = self.batches[namespace] = {}
            self.namespace_queue.add(namespace)
        batch[key] = name
        return None

    async def run_background(self) -> None:
        try:
            await self.run_queue(self.namespace_queue, self.process_namespace, workers=self.workers())
        finally:
            self.namespace_queue.shut_down()

    async def process_namespace(self, namespace: str) -> Result | None:
        """One namespace's batch of claims, sharing one live pod list."""
        batch = self.batches.pop(namespace, {})
        live = _LivePods()
        for key, name in batch.items():
            try:
                await self.process_pvc(namespace, name, live)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                delay = self.backoff.when(key)
                self.log.error("PVC failed", pvc=key, error=str(err) or type(err).__name__, retry_in=delay)
                self.queue.add_after(key, delay)
            else:
                self.backoff.forget(key)
        return None

    async def process_pvc(self, namespace: str, name: str, live: _LivePods | None = None) -> None:
        live = live or _LivePods()
        pvc = self.pvc_informer.store.get(f"{namespace}/{name}")
        if pvc is None:
            self.log.debug("PVC not found, ignoring", pvc=f"{namespace}/{name}")
            return
        if is_deletion_candidate(pvc, PVC_PROTECTION_FINALIZER):
            if not await self.is_being_used(pvc, live, pod_uses_pvc_for_deletion):
                await self._remove_finalizer(pvc)
                return
            self.log.info("Keeping PVC because it is being used", pvc=key_of(pvc))
        if need_to_add_finalizer(pvc, PVC_PROTECTION_FINALIZER):
            # Admission adds it on create; this catches claims created while the plugin was off.
            await self._add_finalizer(pvc)
            return
        if self.unused_since_time and meta(pvc).get("deletionTimestamp") is None and _phase(pvc) == "Bound":
            await self.update_unused_condition(pvc, live)

    async def is_being_used(self, pvc: Obj, live: _LivePods, uses: PodPredicate) -> bool:
        # The cache first: a user found there settles it without a live list.
        for pod in self.pod_informer.store.by_index(POD_PVC_INDEX, key_of(pvc)):
            if uses(pod, pvc):
                return True
        # Absent from the cache proves nothing (it may lag): only a live list can say the claim is unused.
        if live.pods is None:
            items, _ = await self.client.list_all(PODS, meta(pvc).get("namespace"))
            live.pods = list(items)
        if any(uses(pod, pvc) for pod in live.pods):
            return True
        self.log.debug("PVC is unused", pvc=key_of(pvc))
        return False

    async def update_unused_condition(self, pvc: Obj, live: _LivePods) -> None:
        used = await self.is_being_used(pvc, live, pod_uses_pvc_for_unused_since)
        status = "False" if used else "True"
        current = _unused_condition(pvc)
        if current is not None and current.get("status") == status:
            return
        condition = {"type": UNUSED_CONDITION, "status": status, "lastProbeTime": None,
                     "lastTransitionTime": format_time(self.ctx.clock.now()),
                     "reason": REASON_USED if used else REASON_UNUSED,
                     "message": MESSAGE_USED if used else MESSAGE_UNUSED}
        clone: dict[str, Any] = deep_copy(dict(pvc))
        pvc_status = clone.setdefault("status", {})
        others = [c for c in pvc_status.get("conditions") or () if c.get("type") != UNUSED_CONDITION]
        pvc_status["conditions"] = [*others, condition]
        await self.client.update_status(PERSISTENTVOLUMECLAIMS, clone)
        self.log.info("Updated PVC Unused condition", pvc=key_of(pvc), status=status)

    async def _add_finalizer(self, pvc: Obj) -> None:
        clone: dict[str, Any] = deep_copy(dict(pvc))
        clone["metadata"]["finalizers"] = [*(clone["metadata"].get("finalizers") or ()), PVC_PROTECTION_FINALIZER]
        await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        self.log.debug("Added protection finalizer to PVC", pvc=key_of(pvc))

    async def _remove_finalizer(self, pvc: Obj) -> None:
        clone: dict[str, Any] = deep_copy(dict(pvc))
        clone["metadata"]["finalizers"] = [f for f in clone["metadata"].get("finalizers") or ()
                                           if f != PVC_PROTECTION_FINALIZER]
        await self.client.update(PERSISTENTVOLUMECLAIMS, clone)
        self.log.info("Removed protection finalizer from PVC", pvc=key_of(pvc))
