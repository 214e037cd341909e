"""kube-sim's scheduler: binds pending pods to nodes the way kube-scheduler's default profile filters.

Guarantees:
- Pods with no ``spec.nodeName``, ``schedulerName`` "default-scheduler" (or empty), no scheduling
  gates, not terminal and not being deleted are scheduled, highest ``spec.priority`` first, then
  oldest first. Each is bound with a ``Binding`` through the ``pods/binding`` subresource, as
  kube-scheduler does, and a ``Scheduled`` Normal event is recorded from ``default-scheduler``.
- Filters, in kube-scheduler's plugin order (a node fails on the first filter it does not pass):
  NodeUnschedulable (``spec.unschedulable`` unless the pod tolerates
  ``node.kubernetes.io/unschedulable:NoSchedule``), TaintToleration (untolerated NoSchedule and
  NoExecute taints; a node whose Ready condition is not True carries the not-ready/unreachable
  NoSchedule taint the node lifecycle controller would put there), NodeAffinity
  (``spec.nodeSelector`` and required node affinity: terms ORed, expressions and fields ANDed),
  NodeResourcesFit (cpu, memory and pod count against ``status.allocatable`` minus the requests
  of non-terminal pods bound there, including the ones this scheduler just bound).
- Among feasible nodes the least requested one wins (LeastAllocated over cpu and memory with
  kube-scheduler's non-zero defaults), ties broken by fewer pods, then name: pods spread evenly.
- A pod that fits nowhere gets ``PodScheduled=False``, reason ``Unschedulable`` and kube-scheduler's
  message ("0/3 nodes are available: ... preemption: ..."), plus a ``FailedScheduling`` Warning
  event when the message changes. It is retried whenever a node changes or a bound pod goes away,
  and on a periodic backstop (``retry_interval`` seconds on the injected clock).
- Watches that end are re-listed and resumed (:class:`ListWatch`); nothing here blocks the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api import quantity, taints
from controller_manager.api.meta import format_time, key_of, meta, parse_time
from controller_manager.api.resources import EVENTS, NODES, PODS, Resource
from controller_manager.clock import Clock, RealClock, TimerHandle
from controller_manager.sim.apiserver import subresources

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "ListWatch",
    "NodeInfo",
    "PodRequest",
    "Scheduler",
    "event_object",
    "filter_node",
    "fit_error_message",
    "status_code",
]

log = structlog.get_logger("kube-sim.scheduler")

DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Reasons exactly as kube-scheduler's plugins word them.
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"

# kube-scheduler's non-zero request defaults, used only for scoring (util.GetNonzeroRequests).
_DEFAULT_MILLI_CPU = 100
_DEFAULT_MEMORY = 200 * 1024 * 1024


# --------------------------------------------------------------------------- shared sim plumbing


def status_code(exc: BaseException) -> int | None:
    """The HTTP code of an API StatusError (``exc.status["code"]``), else None."""
    status = getattr(exc, "status", None)
    if isinstance(status, Mapping):
        code = status.get("code")
        return code if isinstance(code, int) else None
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def event_object(
    obj: Mapping[str, Any], event_type: str, reason: str, message: str, component: str, now: float, seq: int,
    *, host: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about ``obj``, named ``<name>.<hex nanos>`` as client-go's recorder names them."""
    m = meta(obj)
    ts = format_time(now)
    involved: dict[str, Any] = {
        "kind": obj.get("kind", "Pod"),
        "apiVersion": obj.get("apiVersion", "v1"),
        "name": m.get("name", ""),
        "uid": m.get("uid", ""),
        "resourceVersion": m.get("resourceVersion", ""),
    }
    namespace = m.get("namespace") or "default"
    if m.get("namespace"):
        involved["namespace"] = m["namespace"]
    source: dict[str, Any] = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{m.get('name', '')}.{int(now * 1e9) + seq:x}", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": event_type,
        "source": source,
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }


class ListWatch:
    """List, then watch from the list's resourceVersion; re-list whenever the watch ends or fails.

    ``handler(type, obj)`` is called synchronously for every change ("ADDED", "MODIFIED",
    "DELETED"); after a re-list it receives the difference from what it saw before, so no change is
    lost across a dropped watch. ``synced`` is set once the first list has been delivered.
    """

    def __init__(
        self, api: ApiServer, res: Resource, handler: Callable[[str, dict[str, Any]], None], *,
        clock: Clock, name: str, retry_seconds: float = 0.5,
    ) -> None:
        self._api = api
        self._res = res
        self._handler = handler
        self._clock = clock
        self._name = name
        self._retry = retry_seconds
        self._known: dict[str, dict[str, Any]] = {}
        self.synced = asyncio.Event()

    def _deliver(self, kind: str, obj: dict[str, Any]) -> None:
        try:
            self._handler(kind, obj)
        except Exception:  # a bad object must not stop the watch
            log.exception("handler failed", watch=self._name, key=key_of(obj), event=kind)

    def _relisted(self, items: Iterable[dict[str, Any]]) -> None:
        fresh = {key_of(o): o for o in items}
        for key, gone in self._known.items():
            if key not in fresh:
                self._deliver("DELETED", gone)
        for key, obj in fresh.items():
            seen = self._known.get(key)
            if seen is None:
                self._deliver("ADDED", obj)
            elif meta(seen).get("resourceVersion") != meta(obj).get("resourceVersion"):
                self._deliver("MODIFIED", obj)
        self._known = fresh
        self.synced.set()

    async def run(self) -> None:
        while True:
            try:
                items, rv = self._api.list(self._res)
            except Exception as exc:
                log.warning("list failed", watch=self._name, error=str(exc))
                await self._clock.sleep(self._retry)
                continue
            self._relisted(items)
            try:
                watcher = self._api.watch(self._res, resource_version=rv)
            except Exception as exc:  # 410 Gone and friends: list again
                log.info("watch refused", watch=self._name, error=str(exc))
                await self._clock.sleep(self._retry)
                continue
            delivered = 0
            try:
                async for kind, obj in watcher:
                    if kind == "ERROR":
                        break
                    if kind not in ("ADDED", "MODIFIED", "DELETED"):
                        continue
                    delivered += 1
                    key = key_of(obj)
                    if kind == "DELETED":
                        self._known.pop(key, None)
                    else:
                        self._known[key] = obj
                    self._deliver(kind, obj)
            except Exception as exc:
                log.info("watch ended", watch=self._name, error=str(exc))
            finally:
                watcher.close()
            await asyncio.sleep(0)
            if not delivered:
                await self._clock.sleep(self._retry)  # a watch that ends at once must not spin the loop


# --------------------------------------------------------------------------- pure scheduling logic


def _requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = req.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_requirement_matches(req: Mapping[str, Any], node_name: str) -> bool:
    # Only metadata.name is a valid node field, with In/NotIn and exactly one value (upstream validation).
    if req.get("key") != "metadata.name" or req.get("operator") not in ("In", "NotIn"):
        return False
    if len(req.get("values") or []) != 1:
        return False
    return _requirement_matches(req, node_name)


def _term_matches(term: Mapping[str, Any], name: str, labels: Mapping[str, str]) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no node
    return all(_requirement_matches(r, labels.get(str(r.get("key", "")))) for r in exprs) and all(
        _field_requirement_matches(r, name) for r in fields
    )


def match_node_selector_terms(terms: Iterable[Mapping[str, Any]] | None, name: str,
                              labels: Mapping[str, str]) -> bool:
    """corev1 MatchNodeSelectorTerms: any term matches (no terms: nothing matches)."""
    return any(_term_matches(t, name, labels) for t in terms or ())


def _resources(container: Mapping[str, Any]) -> tuple[int, int]:
    res = container.get("resources") or {}
    requests = res.get("requests") or {}
    limits = res.get("limits") or {}
    cpu = requests.get("cpu", limits.get("cpu"))
    mem = requests.get("memory", limits.get("memory"))
    try:
        return (quantity.milli_value(cpu) if cpu is not None else 0,
                quantity.value(mem) if mem is not None else 0)
    except ValueError:
        return 0, 0


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What the filters need to know about a pod, computed once per attempt."""

    node_selector: Mapping[str, str]
    affinity_terms: tuple[Mapping[str, Any], ...] | None  # None: no required node affinity
    tolerations: tuple[Mapping[str, Any], ...]
    milli_cpu: int
    memory: int
    nonzero_milli_cpu: int
    nonzero_memory: int

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodRequest:
        spec = pod.get("spec") or {}
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        terms = None if required is None else tuple(required.get("nodeSelectorTerms") or ())
        # Effective request: regular containers and sidecars run together; an init container runs
        # alone, so the pod needs the larger of the two (resource.PodRequests, simplified).
        cpu = mem = nz_cpu = nz_mem = 0
        init_cpu = init_mem = 0
        for c in spec.get("containers") or ():
            c_cpu, c_mem = _resources(c)
            cpu, mem = cpu + c_cpu, mem + c_mem
            nz_cpu += c_cpu or _DEFAULT_MILLI_CPU
            nz_mem += c_mem or _DEFAULT_MEMORY
        for c in spec.get("initContainers") or ():
            c_cpu, c_mem = _resources(c)
            if c.get("restartPolicy") == "Always":
                cpu, mem = cpu + c_cpu, mem + c_mem
            else:
                init_cpu, init_mem = max(init_cpu, c_cpu), max(init_mem, c_mem)
        overhead = spec.get("overhead") or {}
        o_cpu = quantity.milli_value(overhead["cpu"]) if "cpu" in overhead else 0
        o_mem = quantity.value(overhead["memory"]) if "memory" in overhead else 0
        return cls(
            node_selector=spec.get("nodeSelector") or {},
            affinity_terms=terms,
            tolerations=tuple(spec.get("tolerations") or ()),
            milli_cpu=max(cpu, init_cpu) + o_cpu,
            memory=max(mem, init_mem) + o_mem,
            nonzero_milli_cpu=max(nz_cpu, init_cpu) + o_cpu,
            nonzero_memory=max(nz_mem, init_mem) + o_mem,
        )


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """The scheduling-relevant view of a Node."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]  # including a synthesized not-ready/unreachable taint
    unschedulable: bool
    milli_cpu: int
    memory: int
    pods: int

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> NodeInfo:
        m = meta(node)
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        node_taints = list(spec.get("taints") or ())
        ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
        ready_status = ready.get("status") if ready else None
        if ready_status != "True":
            # The node lifecycle controller taints such nodes; the sim may run without it.
            key = taints.TAINT_NODE_NOT_READY if ready_status == "False" else taints.TAINT_NODE_UNREACHABLE
            if not any(t.get("key") == key and t.get("effect") == taints.EFFECT_NO_SCHEDULE for t in node_taints):
                node_taints.append({"key": key, "effect": taints.EFFECT_NO_SCHEDULE})

        def _q(name: str, fn: Callable[[Any], int]) -> int:
            try:
                return fn(alloc[name]) if name in alloc else 0
            except ValueError:
                return 0

        return cls(
            name=str(m.get("name", "")),
            labels=m.get("labels") or {},
            taints=tuple(node_taints),
            unschedulable=bool(spec.get("unschedulable")),
            milli_cpu=_q("cpu", quantity.milli_value),
            memory=_q("memory", quantity.value),
            pods=_q("pods", quantity.value),
        )


@dataclass(slots=True)
class Usage:
    """What the pods bound to one node request."""

    milli_cpu: int = 0
    memory: int = 0
    pods: int = 0
    nonzero_milli_cpu: int = 0
    nonzero_memory: int = 0

    def add(self, req: PodRequest, sign: int = 1) -> None:
        self.milli_cpu += sign * req.milli_cpu
        self.memory += sign * req.memory
        self.pods += sign
        self.nonzero_milli_cpu += sign * req.nonzero_milli_cpu
        self.nonzero_memory += sign * req.nonzero_memory


_UNRESOLVABLE = "unresolvable"  # preemption cannot help (taints, affinity, unschedulable)
_RESOLVABLE = "resolvable"  # freeing resources could help


def filter_node(req: PodRequest, node: NodeInfo, usage: Usage) -> tuple[list[str], str]:
    """The reasons ``node`` cannot take the pod (empty if it can) and whether preemption could help."""
    unschedulable_tol = {"key": taints.TAINT_NODE_UNSCHEDULABLE, "effect": taints.EFFECT_NO_SCHEDULE}
    if node.unschedulable and not any(taints.tolerates(t, unschedulable_tol) for t in req.tolerations):
        return [REASON_UNSCHEDULABLE], _UNRESOLVABLE
    bad = taints.find_untolerated_taint(req.tolerations, node.taints)
    if bad is not None:
        return [f"node(s) had untolerated taint {{{bad.get('key', '')}: {bad.get('value', '')}}}"], _UNRESOLVABLE
    if any(node.labels.get(k) != v for k, v in req.node_selector.items()) or (
        req.affinity_terms is not None and not match_node_selector_terms(req.affinity_terms, node.name, node.labels)
    ):
        return [REASON_AFFINITY], _UNRESOLVABLE
    reasons = []
    if usage.pods + 1 > node.pods:
        reasons.append(REASON_TOO_MANY_PODS)
    if req.milli_cpu and usage.milli_cpu + req.milli_cpu > node.milli_cpu:
        reasons.append("Insufficient cpu")
    if req.memory and usage.memory + req.memory > node.memory:
        reasons.append("Insufficient memory")
    return reasons, _RESOLVABLE


def score_node(req: PodRequest, node: NodeInfo, usage: Usage) -> float:
    """LeastAllocated: the mean share of cpu and memory left free once the pod is placed (0..100)."""
    def free(alloc: int, used: int) -> float:
        return 0.0 if alloc <= 0 or used > alloc else (alloc - used) * 100.0 / alloc
    return (free(node.milli_cpu, usage.nonzero_milli_cpu + req.nonzero_milli_cpu)
            + free(node.memory, usage.nonzero_memory + req.nonzero_memory)) / 2


def fit_error_message(num_nodes: int, failures: Mapping[str, tuple[list[str], str]]) -> str:
    """kube-scheduler's FitError text, with the default preemption plugin's post-filter message."""
    if num_nodes == 0:
        return "no nodes available to schedule pods"
    histogram: Counter[str] = Counter()
    for reasons, _ in failures.values():
        histogram.update(reasons)
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    message = f"0/{num_nodes} nodes are available: {', '.join(parts)}."
    preemption: Counter[str] = Counter(
        PREEMPTION_NOT_HELPFUL if kind == _UNRESOLVABLE else PREEMPTION_NO_VICTIMS for _, kind in failures.values()
    )
    pre = sorted(f"{count} {reason}" for reason, count in preemption.items())
    return f"{message} preemption: 0/{num_nodes} nodes are available: {', '.join(pre)}."


def is_schedulable_candidate(pod: Mapping[str, Any], scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> bool:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return (
        not spec.get("nodeName")
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) == scheduler_name
        and not meta(pod).get("deletionTimestamp")
        and status.get("phase") not in ("Succeeded", "Failed")
    )


def _is_bound_and_active(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed")


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
        retry_interval: float = 15.0, batch_yield: int = 64,
    ) -> None:
        self._api = api
        self._clock = clock or RealClock()
        self._name = scheduler_name
        self._retry_interval = retry_interval
        self._batch_yield = batch_yield
        self._nodes: dict[str, NodeInfo] = {}
        self._usage: dict[str, Usage] = {}
        self._bound: dict[str, _Bound] = {}  # pod uid -> where it counts
        self._waiting: dict[str, _Waiting] = {}  # pod key -> pod not yet bound
        self._active: set[str] = set()  # keys to try on the next pass
        self._wake = asyncio.Event()
        self._seq = itertools.count()
        self._backstop: TimerHandle | None = None
        self.scheduled = 0  # pods bound, for tests and benchmarks

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
        self._retry_all()

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        m = meta(pod)
        key, uid = key_of(pod), str(m.get("uid", ""))
        if kind != "DELETED" and _is_bound_and_active(pod):
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
        self._arm_backstop()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(node_watch.run(), name="sim-scheduler-watch-nodes")
                tg.create_task(pod_watch.run(), name="sim-scheduler-watch-pods")
                await node_watch.synced.wait()
                await pod_watch.synced.wait()
                tg.create_task(self._schedule_loop(), name="sim-scheduler-loop")
        finally:
            if self._backstop is not None:
                self._backstop.cancel()

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
        failures: dict[str, tuple[list[str], str]] = {}
        best: tuple[float, int, str] | None = None
        for name, node in self._nodes.items():
            usage = self._usage.get(name) or Usage()
            reasons, kind = filter_node(req, node, usage)
            if reasons:
                failures[name] = (reasons, kind)
                continue
            # Highest score; then fewest pods (the default topology spreading by hostname); then name.
            candidate = (score_node(req, node, usage), usage.pods, name)
            if best is None or candidate[0] > best[0] or (candidate[0] == best[0] and candidate[1:] < best[1:]):
                best = candidate
        if best is None:
            message = fit_error_message(len(self._nodes), failures)
            if message != waiting.last_message:
                waiting.last_message = message
                await self._set_unschedulable(pod, "Unschedulable", message, event=True)
            return
        await self._bind(pod, best[2], req)

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
                                       subresource="status")
        if event:
            await self._event(pod, "Warning", "FailedScheduling", message)

    async def _event(self, pod: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        ev = event_object(pod, event_type, reason, message, DEFAULT_SCHEDULER_NAME, self._clock.now(),
                          next(self._seq))
        try:
            self._api.create(EVENTS, ev, namespace=ev["metadata"]["namespace"])
        except Exception as exc:  # events are best effort, as client-go's recorder
            log.debug("event dropped", reason=reason, error=str(exc))
