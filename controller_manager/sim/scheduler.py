"""kube-sim's scheduler: binds pending pods to nodes the way kube-scheduler's default profile does.

Guarantees:
- Pods with no ``spec.nodeName``, ``schedulerName`` "default-scheduler" (or empty), no scheduling
  gates, not terminal and not being deleted are scheduled, highest ``spec.priority`` first, then
  oldest first. Each is bound with a ``Binding`` through the ``pods/binding`` subresource, as
  kube-scheduler does, and a ``Scheduled`` Normal event is recorded from ``default-scheduler``.
- Feasibility and ranking are :mod:`~controller_manager.sim.predicates` (kube-scheduler's filter
  plugins, LeastAllocated scoring), against ``status.allocatable`` minus the requests of non-terminal
  pods bound there, including the ones this scheduler just bound (assumed before the write lands).
  Ties go to the node with fewer pods, then to the first name: pods spread evenly.
- As kube-scheduler's default (adaptive ``percentageOfNodesToScore``), a pod's filtering stops once it has found
  :func:`~controller_manager.sim.predicates.num_feasible_nodes_to_find` feasible nodes (all of them below 100
  nodes; 420 of 1,000; 500 of 5,000), starting where the previous pod's stopped, and the best of those is
  chosen: a pod costs O(nodes sampled), not O(nodes), and the rotation keeps the spreading even.
- A pod that fits nowhere gets ``PodScheduled=False``, reason ``Unschedulable`` and kube-scheduler's
  message ("0/3 nodes are available: ... preemption: ..."), plus a ``FailedScheduling`` Warning
  event when the message changes. A gated pod gets ``PodScheduled=False``, reason
  ``SchedulingGated``, once. Pending pods are retried whenever a node changes or a bound pod goes
  away, and on a periodic backstop (``retry_interval`` seconds on the injected clock).
- Pods with PersistentVolumeClaims go through the VolumeBinding plugin (:mod:`~controller_manager.sim.volumebinding`):
  unbound Immediate claims keep a pod unschedulable ("pod has unbound immediate PersistentVolumeClaims"),
  volume node affinity and WaitForFirstConsumer claims filter nodes, and on the chosen node the matched volumes
  are pre-bound and claims to provision get ``volume.kubernetes.io/selected-node``; the pod is bound only once
  its claims are (the binding runs beside the loop), else it is scheduled again with a ``FailedScheduling``
  event. Claim, volume and StorageClass changes retry pending pods.
- Watches that end are re-listed and resumed (:class:`~controller_manager.sim.listwatch.ListWatch`);
  nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import structlog

from controller_manager.api.meta import format_time, key_of, meta, parse_time
from controller_manager.api.resources import NODES, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, PODS, STORAGECLASSES
from controller_manager.clock import Clock, RealClock, TimerHandle
from controller_manager.sim.apiserver import subresources
from controller_manager.sim.listwatch import ListWatch, status_code
from controller_manager.sim.predicates import (
    DEFAULT_SCHEDULER_NAME,
    RESOLVABLE,
    UNRESOLVABLE,
    NodeInfo,
    PodRequest,
    Usage,
    filter_node,
    fit_error_message,
    fit_resources,
    is_bound_and_active,
    is_schedulable_candidate,
    match_node_selector_terms,
    num_feasible_nodes_to_find,
    prefilter_error_message,
    score_node,
    static_filter,
)
from controller_manager.sim.recorder import event_object, record
from controller_manager.sim.volumebinding import NodeDecision, VolumeBinding, VolumeBindingError

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

_EXCLUDED_CACHE_SIZE = 256  # pod shapes whose statically excluded nodes are kept (cleared when a node changes)
FIELD_MANAGER = "kube-scheduler"  # what its writes are recorded under in managedFields (its User-Agent)

# The pure names stay importable from here, where callers first found them.
__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "ListWatch",
    "NodeInfo",
    "PodRequest",
    "Scheduler",
    "Usage",
    "event_object",
    "filter_node",
    "fit_error_message",
    "match_node_selector_terms",
    "status_code",
]

log = structlog.get_logger("kube-sim.scheduler")


# --------------------------------------------------------------------------- the actor


@dataclass(slots=True)
class _Bound:
    node: str
    req: PodRequest
    assumed: bool  # bound by us, not yet seen bound through the watch


@dataclass(slots=True)
class _Waiting:
    pod: dict[str, Any]
    seq: int
    last_message: str | None = None
    gated_reported: bool = False


class Scheduler:
    """Watches nodes and pods; binds pending pods. ``run()`` until cancelled."""

    def __init__(
        self, api: ApiServer, clock: Clock | None = None, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        retry_interval: float = 15.0, batch_yield: int = 64, volume_bind_timeout: float = 600.0,
    ) -> None:
        self._api = api
        self._clock = clock or RealClock()
        self._name = scheduler_name
        self._retry_interval = retry_interval
        self._batch_yield = batch_yield
        self._nodes: dict[str, NodeInfo] = {}
        self._node_order: list[tuple[str, NodeInfo]] | None = None  # _nodes as a list, made again on change
        self._next_start = 0  # kube-scheduler's nextStartNodeIndex: where the next pod's filtering begins
        # Per pod shape (tolerations, node selector, required node affinity): the nodes the filters that read
        # only the pod and the Node rule out, with why. Pods of one template share it; a node change clears it.
        self._excluded: dict[bytes, dict[str, tuple[list[str], str]]] = {}
        self._usage: dict[str, Usage] = {}
        self._bound: dict[str, _Bound] = {}  # pod uid -> where it counts
        self._waiting: dict[str, _Waiting] = {}  # pod key -> pod not yet bound
        self._active: set[str] = set()  # keys to try on the next pass
        self._wake = asyncio.Event()
        self._seq = itertools.count()
        self._backstop: TimerHandle | None = None
        self.scheduled = 0  # pods bound, for tests and benchmarks
        self._volume_binding = VolumeBinding(api, self._clock, field_manager=FIELD_MANAGER,
                                             bind_timeout=volume_bind_timeout)
        self._binding_tasks: set[asyncio.Task[None]] = set()  # pods waiting in PreBind for their volumes

    # ---- event intake (synchronous; only updates state and wakes the loop)

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        name = str(meta(node).get("name", ""))
        if kind == "DELETED":
            self._nodes.pop(name, None)
        else:
            info = NodeInfo.of(node)
            if self._nodes.get(name) == info:
                return  # heartbeats change nothing the filters read
            self._nodes[name] = info
        self._node_order = None
        self._excluded.clear()
        self._retry_all()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        m = meta(pod)
        key, uid = key_of(pod), str(m.get("uid", ""))
        if kind != "DELETED" and is_bound_and_active(pod):
            self._account(uid, str(pod["spec"]["nodeName"]), pod, assumed=False)
        elif (kind == "DELETED" or not is_schedulable_candidate(pod, self._name)
              or not self._is_assumed(uid)) and self._unaccount(uid):
            self._retry_all()  # resources were freed
        if kind != "DELETED" and is_schedulable_candidate(pod, self._name) and not self._is_assumed(uid):
            waiting = self._waiting.get(key)
            if waiting is None or meta(waiting.pod).get("uid") != uid:
                self._waiting[key] = _Waiting(pod, next(self._seq))
                self._activate(key)
            else:
                changed = waiting.pod.get("spec") != pod.get("spec") or meta(waiting.pod).get("labels") != m.get(
                    "labels")
                waiting.pod = pod
                if changed:
                    self._activate(key)
        else:
            self._waiting.pop(key, None)
            self._active.discard(key)

    def _on_storage(self, kind: str, obj: dict[str, Any]) -> None:
        """A claim, volume or class changed: pods waiting on volumes may fit now."""
        self._retry_all()

    def _is_assumed(self, uid: str) -> bool:
        bound = self._bound.get(uid)
        return bound is not None and bound.assumed

    def _account(self, uid: str, node: str, pod: Mapping[str, Any], *, assumed: bool) -> None:
        current = self._bound.get(uid)
        if current is not None and current.node == node:
            current.assumed = current.assumed and assumed
            return
        if current is not None:
            self._unaccount(uid)
        req = PodRequest.of(pod)
        self._bound[uid] = _Bound(node, req, assumed)
        self._usage.setdefault(node, Usage()).add(req)

    def _unaccount(self, uid: str) -> bool:
        gone = self._bound.pop(uid, None)
        if gone is None:
            return False
        self._usage.setdefault(gone.node, Usage()).add(gone.req, -1)
        return True

    def _activate(self, key: str) -> None:
        self._active.add(key)
        self._wake.set()

    def _retry_all(self) -> None:
        if self._waiting:
            self._active.update(self._waiting)
            self._wake.set()

    def _arm_backstop(self) -> None:
        def fire() -> None:
            self._retry_all()
            self._arm_backstop()
        self._backstop = self._clock.call_later(self._retry_interval, fire)

    # ---- the loop

    async def run(self) -> None:
        node_watch = ListWatch(self._api, NODES, self._on_node, clock=self._clock, name="scheduler-nodes")
        pod_watch = ListWatch(self._api, PODS, self._on_pod, clock=self._clock, name="scheduler-pods")
        storage_watches = {res.plural: ListWatch(self._api, res, self._on_storage, clock=self._clock,
                                                 name=f"scheduler-{res.plural}")
                           for res in (PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, STORAGECLASSES)}
        self._arm_backstop()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(node_watch.run(), name="sim-scheduler-watch-nodes")
                tg.create_task(pod_watch.run(), name="sim-scheduler-watch-pods")
                for plural, watch in storage_watches.items():
                    tg.create_task(watch.run(), name=f"sim-scheduler-watch-{plural}")
                await node_watch.synced.wait()
                await pod_watch.synced.wait()
                tg.create_task(self._schedule_loop(), name="sim-scheduler-loop")
        finally:
            if self._backstop is not None:
                self._backstop.cancel()
            for task in list(self._binding_tasks):
                task.cancel()

    async def _schedule_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = [self._waiting[k] for k in self._active if k in self._waiting]
            self._active.clear()
            batch.sort(key=lambda w: (-int((w.pod.get("spec") or {}).get("priority") or 0),
                                      parse_time(meta(w.pod).get("creationTimestamp")) or 0.0, w.seq))
            for i, waiting in enumerate(batch):
                if key_of(waiting.pod) in self._waiting:
                    await self._schedule_one(waiting)
                if i % self._batch_yield == self._batch_yield - 1:
                    await asyncio.sleep(0)  # let watch events (and everyone else) in

    async def _schedule_one(self, waiting: _Waiting) -> None:
        pod = waiting.pod
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            if not waiting.gated_reported:
                waiting.gated_reported = True
                await self._set_unschedulable(
                    pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates", event=False)
            return
        req = PodRequest.of(pod)
        try:
            volumes = self._volume_binding.prefilter(pod)
        except Exception as exc:
            log.warning("volume binding prefilter failed", pod=key_of(pod), error=str(exc))
            return
        if isinstance(volumes, str):
            message = prefilter_error_message(len(self._nodes), volumes)
            if message != waiting.last_message:
                waiting.last_message = message
                await self._set_unschedulable(pod, "Unschedulable", message, event=True)
            return
        failures: dict[str, tuple[list[str], str]] = {}
        decisions: dict[str, NodeDecision] = {}
        best: tuple[float, int, str] | None = None
        if self._node_order is None:
            self._node_order = list(self._nodes.items())
        nodes = self._node_order
        total = len(nodes)
        wanted = num_feasible_nodes_to_find(total)
        start = self._next_start % total if total else 0
        feasible = processed = 0
        empty = Usage()
        excluded = self._excluded_nodes(req)
        usages = self._usage
        for i in range(total):
            if feasible >= wanted:
                break
            name, node = nodes[(start + i) % total]
            processed += 1
            out = excluded.get(name)
            if out is not None:
                failures[name] = out
                continue
            usage = usages.get(name) or empty
            reasons, kind = fit_resources(req, node, usage), RESOLVABLE
            if not reasons and volumes is not None:
                reasons, decision = volumes.decide(name, node.labels)
                kind = UNRESOLVABLE
                decisions[name] = decision
            if reasons:
                failures[name] = (reasons, kind)
                continue
            feasible += 1
            # Highest score; then fewest pods (the default topology spreading by hostname); then name.
            candidate = (score_node(req, node, usage), usage.pods, name)
            if best is None or candidate[0] > best[0] or (candidate[0] == best[0] and candidate[1:] < best[1:]):
                best = candidate
        if total:
            self._next_start = (start + processed) % total
        if best is None:
            message = fit_error_message(len(self._nodes), failures)
            if message != waiting.last_message:
                waiting.last_message = message
                await self._set_unschedulable(pod, "Unschedulable", message, event=True)
            return
        if volumes is not None and volumes.needs_binding:
            self._bind_after_volumes(pod, best[2], req, decisions[best[2]])
            return
        await self._bind(pod, best[2], req)

    def _excluded_nodes(self, req: PodRequest) -> dict[str, tuple[list[str], str]]:
        """The nodes :func:`static_filter` rules out for pods shaped as ``req``, computed once per shape."""
        shape = orjson.dumps([req.tolerations, req.node_selector, req.affinity_terms], option=orjson.OPT_SORT_KEYS)
        excluded = self._excluded.get(shape)
        if excluded is None:
            if len(self._excluded) >= _EXCLUDED_CACHE_SIZE:
                self._excluded.clear()
            excluded = {}
            for name, node in self._nodes.items():
                out = static_filter(req, node)
                if out is not None:
                    excluded[name] = out
            self._excluded[shape] = excluded
        return excluded

    def _bind_after_volumes(self, pod: dict[str, Any], node: str, req: PodRequest, decision: NodeDecision) -> None:
        """Reserve the node, then PreBind (volumes) and bind beside the scheduling loop, as the binding cycle."""
        m = meta(pod)
        key, uid = key_of(pod), str(m.get("uid", ""))
        self._account(uid, node, pod, assumed=True)
        self._waiting.pop(key, None)

        async def binding_cycle() -> None:
            try:
                await self._volume_binding.bind(pod, node, decision, still_wanted=lambda: self._is_assumed(uid))
            except VolumeBindingError as err:
                if self._is_assumed(uid):
                    self._unaccount(uid)
                    self._waiting[key] = _Waiting(pod, next(self._seq))
                    await self._set_unschedulable(
                        pod, "SchedulerError", f'running PreBind plugin "VolumeBinding": {err}', event=True)
                    self._activate(key)
                return
            await self._bind(pod, node, req)

        task = asyncio.get_running_loop().create_task(binding_cycle(), name=f"sim-scheduler-prebind:{key}")
        self._binding_tasks.add(task)
        task.add_done_callback(self._binding_tasks.discard)

    async def _bind(self, pod: dict[str, Any], node: str, req: PodRequest) -> None:
        m = meta(pod)
        key, uid = key_of(pod), str(m.get("uid", ""))
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": m.get("name"), "namespace": m.get("namespace"), "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        # Assume the placement before the write lands so the next pod in the batch sees it (and the
        # pod's own events meanwhile do not make it a candidate again).
        self._account(uid, node, pod, assumed=True)
        self._waiting.pop(key, None)
        try:
            subresources.bind(self._api, str(m.get("namespace")), str(m.get("name")), binding)
        except Exception as exc:
            code = status_code(exc)
            if self._is_assumed(uid):
                self._unaccount(uid)
            if code in (404, 409):
                return  # gone, or bound by someone else: the watch tells the rest
            log.warning("binding failed", pod=key, node=node, error=str(exc))
            self._waiting[key] = _Waiting(pod, next(self._seq))
            return
        self.scheduled += 1
        message = f"Successfully assigned {m.get('namespace')}/{m.get('name')} to {node}"
        await self._event(pod, "Normal", "Scheduled", message)

    async def _set_unschedulable(self, pod: dict[str, Any], reason: str, message: str, *, event: bool) -> None:
        m = meta(pod)
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": format_time(self._clock.now()),
            "reason": reason,
            "message": message,
        }
        current = next((c for c in (pod.get("status") or {}).get("conditions") or ()
                        if c.get("type") == "PodScheduled"), None)
        if current is not None and current.get("status") == "False" and current.get("lastTransitionTime"):
            condition["lastTransitionTime"] = current["lastTransitionTime"]
        patch = {"status": {"conditions": [condition]}}
        with contextlib.suppress(Exception):  # the pod may be gone; the watch will tell
            self._api.patch(PODS, str(m.get("namespace")), str(m.get("name")), patch, "strategic",
                            subresource="status", field_manager=FIELD_MANAGER)
        if event:
            await self._event(pod, "Warning", "FailedScheduling", message)

    async def _event(self, pod: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        record(self._api, event_object(pod, event_type, reason, message, DEFAULT_SCHEDULER_NAME, self._clock.now(),
                                       next(self._seq)))
