"""kube-scheduler's default-profile filters and scoring, as pure functions over plain API dicts.

Guarantees:
- :func:`filter_node` applies kube-scheduler's filter plugins in their order, a node failing on the
  first it does not pass: NodeUnschedulable (``spec.unschedulable`` unless tolerated),
  TaintToleration (untolerated NoSchedule/NoExecute taints; a node whose Ready condition is not True
  carries the not-ready/unreachable NoSchedule taint the node lifecycle controller would put there),
  NodeAffinity (``spec.nodeSelector`` and required node affinity: terms ORed, expressions and fields
  ANDed, as corev1's MatchNodeSelectorTerms), NodeResourcesFit (cpu, memory and pod count against
  ``status.allocatable`` minus what is already bound there). Reasons are the plugins' own words.
- :func:`score_node` is LeastAllocated over cpu and memory with kube-scheduler's non-zero request
  defaults (100m cpu, 200Mi memory for containers that request nothing).
- :func:`fit_error_message` is the FitError text ("0/3 nodes are available: ...") with the default
  preemption plugin's post-filter sentence.
- Nothing here does I/O or reads a clock; inputs are never mutated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api import quantity, taints
from controller_manager.api.meta import meta

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "NodeInfo",
    "PodRequest",
    "Usage",
    "filter_node",
    "fit_error_message",
    "fit_resources",
    "is_bound_and_active",
    "is_schedulable_candidate",
    "match_node_selector_terms",
    "num_feasible_nodes_to_find",
    "score_node",
    "static_filter",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Reasons exactly as kube-scheduler's plugins word them.
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_TOO_MANY_PODS = "Too many pods"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
PREEMPTION_NO_VICTIMS = "No preemption victims found for incoming pod"

# kube-scheduler's adaptive percentageOfNodesToScore (the default profile sets none): how many feasible nodes a
# scheduling cycle looks for before it stops filtering and scores what it found.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

# kube-scheduler's non-zero request defaults, used only for scoring (util.GetNonzeroRequests).
_DEFAULT_MILLI_CPU = 100
_DEFAULT_MEMORY = 200 * 1024 * 1024


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


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int = 0) -> int:
    """How many feasible nodes kube-scheduler's filtering stops at (``numFeasibleNodesToFind``): every node below
    100; else ``percentage`` of them (0: adaptive, 50% less 1% per 125 nodes, at least 5%), at least 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


_UNSCHEDULABLE_TAINT = {"key": taints.TAINT_NODE_UNSCHEDULABLE, "effect": taints.EFFECT_NO_SCHEDULE}


def filter_node(req: PodRequest, node: NodeInfo, usage: Usage) -> tuple[list[str], str]:
    """The reasons ``node`` cannot take the pod (empty if it can) and whether preemption could help."""
    static = static_filter(req, node)
    if static is not None:
        return static
    return fit_resources(req, node, usage), _RESOLVABLE


def static_filter(req: PodRequest, node: NodeInfo) -> tuple[list[str], str] | None:
    """The filters that read only the pod and the Node (NodeUnschedulable, TaintToleration, NodeAffinity): why
    the node is out whatever is bound there, or None. Pods with equal requests get equal answers."""
    if node.unschedulable and not any(taints.tolerates(t, _UNSCHEDULABLE_TAINT) for t in req.tolerations):
        return [REASON_UNSCHEDULABLE], _UNRESOLVABLE
    if node.taints:
        bad = taints.find_untolerated_taint(req.tolerations, node.taints)
        if bad is not None:
            return [f"node(s) had untolerated taint {{{bad.get('key', '')}: {bad.get('value', '')}}}"], _UNRESOLVABLE
    if any(node.labels.get(k) != v for k, v in req.node_selector.items()) or (
        req.affinity_terms is not None and not match_node_selector_terms(req.affinity_terms, node.name, node.labels)
    ):
        return [REASON_AFFINITY], _UNRESOLVABLE
    return None


def fit_resources(req: PodRequest, node: NodeInfo, usage: Usage) -> list[str]:
    """NodeResourcesFit: why what is bound to the node leaves no room for the pod (empty: it fits)."""
    reasons = []
    if usage.pods + 1 > node.pods:
        reasons.append(REASON_TOO_MANY_PODS)
    if req.milli_cpu and usage.milli_cpu + req.milli_cpu > node.milli_cpu:
        reasons.append("Insufficient cpu")
    if req.memory and usage.memory + req.memory > node.memory:
        reasons.append("Insufficient memory")
    return reasons


def score_node(req: PodRequest, node: NodeInfo, usage: Usage) -> float:
    """LeastAllocated: the mean share of cpu and memory left free once the pod is placed (0..100)."""
    alloc, used = node.milli_cpu, usage.nonzero_milli_cpu + req.nonzero_milli_cpu
    cpu = 0.0 if alloc <= 0 or used > alloc else (alloc - used) * 100.0 / alloc
    alloc, used = node.memory, usage.nonzero_memory + req.nonzero_memory
    memory = 0.0 if alloc <= 0 or used > alloc else (alloc - used) * 100.0 / alloc
    return (cpu + memory) / 2


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


def prefilter_error_message(num_nodes: int, reason: str) -> str:
    """kube-scheduler's FitError text when a PreFilter plugin rejected the pod (unresolvable on every node)."""
    if num_nodes == 0:
        return "no nodes available to schedule pods"
    return (f"0/{num_nodes} nodes are available: {reason}. preemption: 0/{num_nodes} nodes are available: "
            f"{num_nodes} {PREEMPTION_NOT_HELPFUL}.")


UNRESOLVABLE = _UNRESOLVABLE
RESOLVABLE = _RESOLVABLE


def is_schedulable_candidate(pod: Mapping[str, Any], scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> bool:
    """Unbound, for this scheduler, not being deleted and not terminal."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    return (
        not spec.get("nodeName")
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME) == scheduler_name
        and not meta(pod).get("deletionTimestamp")
        and status.get("phase") not in ("Succeeded", "Failed")
    )


def is_bound_and_active(pod: Mapping[str, Any]) -> bool:
    """Bound to a node and not terminal: its requests count against that node."""
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed")
