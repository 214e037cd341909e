"""The pod garbage collector: force-deletes pods nothing else will clean up (kube-controller-manager's
``pod-garbage-collector-controller``, ``pkg/controller/podgc/gc_controller.go``).

Guarantees, each pass (every ``gc_check_period`` = 20 s, counted from the end of the previous pass):
- Terminated pods (phase neither Pending, Running nor Unknown) beyond ``--terminated-pod-gc-threshold`` are
  deleted, evicted ones first, then oldest first (creation time, then name). A threshold <= 0 disables this.
- Terminating pods on a node that is not Ready and carries the ``node.kubernetes.io/out-of-service`` taint are
  deleted, in the same order.
- Pods bound to a node the cache does not have are quarantined: only when the node is still missing
  ``quarantine_time`` (40 s) after first noticed, and a live GET confirms it is gone, are its pods deleted, with
  the ``DisruptionTarget`` condition (reason ``DeletionByPodGC``, "PodGC: node no longer exists").
- Terminating pods never scheduled to a node are deleted.
- A pass walks only its candidates (terminated and terminating pods, from an index kept as pod events arrive)
  and the node names pods are bound to (the node-name index), never every cached pod.
- Every deletion first moves a pod that is not terminal to phase Failed through a ``/status`` patch (no kubelet
  will), then deletes it with grace period 0 and a UID precondition. A pod already gone is not an error; any
  other failure is logged and left for the next pass.
- Every deletion attempted counts in ``pod_gc_collector_force_delete_pods_total{namespace,reason}``, every
  failed one (NotFound included, as upstream) in ``..._force_delete_pod_errors_total`` (:mod:`.metrics`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import format_time, meta, parse_time
from controller_manager.api.resources import NODES, PODS
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NODE_NAME_INDEX

from . import metrics

__all__ = ["GC_KEY", "PodGCController", "is_pod_terminated", "sort_for_deletion"]

Obj = Mapping[str, Any]

GC_KEY = "@gc"
TAINT_NODE_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
MAX_CONCURRENT_DELETES = 50


def _phase(pod: Obj) -> str:
    status = pod.get("status")
    return str(status.get("phase") or "") if isinstance(status, Mapping) else ""


def _node_name(pod: Obj) -> str:
    spec = pod.get("spec")
    value = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""


def is_pod_terminated(pod: Obj) -> bool:
    return _phase(pod) not in ("Pending", "Running", "Unknown")


# The pods a pass may act on, indexed as their events arrive, so a pass costs O(nodes + candidates) and not a walk
# over every pod (150,000 every 20 s at the scalability envelope). Upstream lists every pod each pass.
GC_CANDIDATES_INDEX = "podgc-candidates"
TERMINATED = "terminated"  # is_pod_terminated
TERMINATING = "terminating"  # has a deletionTimestamp


def gc_candidates(pod: Obj) -> list[str]:
    values = [TERMINATED] if is_pod_terminated(pod) else []
    if meta(pod).get("deletionTimestamp") is not None:
        values.append(TERMINATING)
    return values


def _is_evicted(pod: Obj) -> bool:
    status = pod.get("status")
    return _phase(pod) == "Failed" and isinstance(status, Mapping) and status.get("reason") == "Evicted"


def sort_for_deletion(pods: Sequence[Obj]) -> list[Obj]:
    """Evicted pods first, then by creation time, then by name (``byEvictionAndCreationTimestamp``)."""
    def order(pod: Obj) -> tuple[bool, float, str]:
        created = meta(pod).get("creationTimestamp")
        stamp = parse_time(created) if isinstance(created, str) else None
        return (not _is_evicted(pod), stamp if stamp is not None else 0.0, str(meta(pod).get("name", "")))
    return sorted(pods, key=order)


def _is_node_ready(node: Obj) -> bool:
    status = node.get("status")
    for cond in (status.get("conditions") or ()) if isinstance(status, Mapping) else ():
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _has_taint_key(node: Obj, key: str) -> bool:
    spec = node.get("spec")
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    return isinstance(taints, list) and any(isinstance(t, Mapping) and t.get("key") == key for t in taints)


class PodGCController(Controller):
    name: ClassVar[str] = "pod-garbage-collector-controller"
    alias: ClassVar[str] = "podgc"
    default_workers: ClassVar[int] = 1
    gc_check_period: ClassVar[float] = 20.0
    quarantine_time: ClassVar[float] = 40.0

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.clock = ctx.clock
        self.client = ctx.client
        self.terminated_pod_threshold = int(ctx.options.get("terminated_pod_gc_threshold", 12500))
        self.pod_informer = ctx.informers.informer(PODS, indexers={GC_CANDIDATES_INDEX: gc_candidates})
        self.node_informer = ctx.informers.informer(NODES)
        # Missing nodes -> when (monotonic) to check with the API server whether they are really gone.
        self.quarantine: dict[str, float] = {}
        self.queue.add(GC_KEY)

    async def sync(self, key: str) -> Result | None:
        if key != GC_KEY:
            return None
        await self.gc()
        return Result(requeue_after=self.gc_check_period)

    async def gc(self) -> None:
        store = self.pod_informer.store
        if self.terminated_pod_threshold > 0:
            await self.gc_terminated(store.by_index(GC_CANDIDATES_INDEX, TERMINATED))
        terminating = store.by_index(GC_CANDIDATES_INDEX, TERMINATING)
        await self.gc_terminating(terminating)
        await self.gc_orphaned()
        await self.gc_unscheduled_terminating(terminating)

    async def gc_terminated(self, terminated: Sequence[Obj]) -> None:
        delete_count = len(terminated) - self.terminated_pod_threshold
        if delete_count <= 0:
            return
        self.log.info("Garbage collecting pods", num_pods=delete_count)
        await self._delete_all(sort_for_deletion(terminated)[:delete_count], metrics.REASON_TERMINATED)

    async def gc_terminating(self, pods: Sequence[Obj]) -> None:
        doomed = []
        for pod in pods:
            if meta(pod).get("deletionTimestamp") is None:
                continue
            node = self.node_informer.store.get(_node_name(pod))
            if node is None:
                continue
            if not _is_node_ready(node) and _has_taint_key(node, TAINT_NODE_OUT_OF_SERVICE):
                doomed.append(pod)
        if doomed:
            self.log.info("Garbage collecting pods that are terminating on node tainted with "
                          "node.kubernetes.io/out-of-service", num_pods=len(doomed))
            await self._delete_all(sort_for_deletion(doomed), metrics.REASON_TERMINATING_OUT_OF_SERVICE)

    async def gc_orphaned(self) -> None:
        existing = set(self.node_informer.store.keys())
        now = self.clock.monotonic()
        pods = self.pod_informer.store
        # The node names pods are bound to, from the node-name index: no walk over the pods themselves.
        for node_name in pods.index_values(NODE_NAME_INDEX):
            if node_name not in existing:
                self.quarantine.setdefault(node_name, now + self.quarantine_time)
        deleted = await self._discover_deleted_nodes(existing, now)
        if not deleted:
            return
        condition = {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
                     "message": "PodGC: node no longer exists"}
        for pod in [p for name in sorted(deleted) for p in pods.by_index(NODE_NAME_INDEX, name)]:
            self.log.info("Found orphaned Pod assigned to the Node, deleting", pod=_key(pod), node=_node_name(pod))
            if await self._mark_failed_and_delete(pod, condition, metrics.REASON_ORPHANED):
                self.log.info("Forced deletion of orphaned Pod succeeded", pod=_key(pod))

    async def _discover_deleted_nodes(self, existing: set[str], now: float) -> set[str]:
        deleted: set[str] = set()
        for name, due in list(self.quarantine.items()):
            if due > now:
                continue
            del self.quarantine[name]
            if name in existing:
                continue
            try:
                await self.client.get(NODES, name)
            except NotFound:
                deleted.add(name)
            except ApiError as err:
                # Quarantined again by the next pass if its pods are still there.
                self.log.error("Error while getting node", node=name, error=str(err))
        return deleted

    async def gc_unscheduled_terminating(self, pods: Sequence[Obj]) -> None:
        for pod in pods:
            if meta(pod).get("deletionTimestamp") is None or _node_name(pod):
                continue
            self.log.info("Found unscheduled terminating Pod not assigned to any Node, deleting", pod=_key(pod))
            if await self._mark_failed_and_delete(pod, None, metrics.REASON_TERMINATING_UNSCHEDULED):
                self.log.info("Forced deletion of unscheduled terminating Pod succeeded", pod=_key(pod))

    async def _delete_all(self, pods: Sequence[Obj], reason: str) -> None:
        limit = asyncio.Semaphore(MAX_CONCURRENT_DELETES)

        async def one(pod: Obj) -> None:
            async with limit:
                await self._mark_failed_and_delete(pod, None, reason)

        await asyncio.gather(*(one(p) for p in pods))

    async def _mark_failed_and_delete(self, pod: Obj, condition: Obj | None, reason: str) -> bool:
        """Failed phase (and ``condition``) first unless terminal, then a forced delete; True on success."""
        name = str(meta(pod).get("name", ""))
        namespace = str(meta(pod).get("namespace", ""))
        uid = meta(pod).get("uid")
        self.log.info("PodGC is force deleting Pod", pod=_key(pod), reason=reason)
        metrics.DELETING_PODS_TOTAL.labels(namespace, reason).inc()
        try:
            if _phase(pod) not in ("Succeeded", "Failed"):
                status: dict[str, Any] = {"phase": "Failed"}
                if condition is not None:
                    status["conditions"] = [{**condition, "lastTransitionTime": format_time(self.clock.now())}]
                await self.client.patch(PODS, name, {"metadata": {"uid": uid}, "status": status}, namespace,
                                        patch_type="strategic", subresource="status")
            await self.client.delete(PODS, name, namespace, grace_period_seconds=0, uid=uid)
        except NotFound:
            # Done all the same; upstream still counts the NotFound among its errors.
            metrics.DELETING_PODS_ERROR_TOTAL.labels(namespace, reason).inc()
            return True
        except ApiError as err:
            self.log.error("PodGC failed to delete pod", pod=_key(pod), reason=reason, error=str(err))
            metrics.DELETING_PODS_ERROR_TOTAL.labels(namespace, reason).inc()
            return False
        return True


def _key(pod: Obj) -> str:
    return f"{meta(pod).get('namespace', '')}/{meta(pod).get('name', '')}"
