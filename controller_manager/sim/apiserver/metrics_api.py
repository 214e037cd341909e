"""The resource metrics API (``metrics.k8s.io/v1beta1``, as metrics-server serves it) from simulated usage, so
``kubectl top`` and an HPA controller have numbers to read.

Guarantees:
- A Running pod's usage is its ``sim.controller-manager.io/cpu-millicores`` and ``.../memory-bytes`` annotations
  (the pod's total, split evenly over its containers, the remainder to the first), else each container's
  requests (0 when it has none). Pods that are not Running have no metrics (metrics-server reports only what
  the kubelet runs): get answers 404 ``podmetrics.metrics.k8s.io "x" not found``, as metrics-server does.
- A node's usage is the sum of its Running pods' usage.
- Lists honour the namespace, label selectors (pods: the pod's labels; nodes: the node's) and field selectors on
  ``metadata.name``/``metadata.namespace``. Items carry the object's name, namespace, labels and a creation
  time of now, ``timestamp`` now and ``window: 10s``; cpu as a canonical quantity (``250m``) and memory in Ki
  (``131072Ki``), as metrics-server writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from controller_manager.api import selectors
from controller_manager.api.meta import format_time
from controller_manager.api.quantity import canonicalize, milli_value, value
from controller_manager.api.resources import NODES, PODS, Resource
from controller_manager.sim.apiserver import errors

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
CPU_ANNOTATION = "sim.controller-manager.io/cpu-millicores"
MEMORY_ANNOTATION = "sim.controller-manager.io/memory-bytes"
POD_METRICS = Resource(GROUP, VERSION, "pods", "PodMetrics", True, verbs=("get", "list"))
NODE_METRICS = Resource(GROUP, VERSION, "nodes", "NodeMetrics", False, verbs=("get", "list"))
RESOURCES = (NODE_METRICS, POD_METRICS)
WINDOW = "10s"


def _dict(value_: Any) -> Mapping[str, Any]:
    return value_ if isinstance(value_, Mapping) else {}


def _int_annotation(annotations: Mapping[str, Any], key: str) -> int | None:
    try:
        return max(0, int(str(annotations[key]))) if key in annotations else None
    except ValueError:
        return None


def _split(total: int, parts: int) -> list[int]:
    share, rest = divmod(total, parts)
    return [share + (rest if i == 0 else 0) for i in range(parts)]


def container_usage(pod: Mapping[str, Any]) -> list[tuple[str, int, int]]:
    """(container name, millicores, bytes) of each container of a running pod."""
    containers = [_dict(c) for c in _dict(pod.get("spec")).get("containers") or ()]
    if not containers:
        return []
    annotations = _dict(_dict(pod.get("metadata")).get("annotations"))
    cpu_total = _int_annotation(annotations, CPU_ANNOTATION)
    memory_total = _int_annotation(annotations, MEMORY_ANNOTATION)
    cpu = _split(cpu_total, len(containers)) if cpu_total is not None else [
        _request(c, "cpu", milli=True) for c in containers]
    memory = _split(memory_total, len(containers)) if memory_total is not None else [
        _request(c, "memory", milli=False) for c in containers]
    return [(str(c.get("name") or ""), cpu[i], memory[i]) for i, c in enumerate(containers)]


def _request(container: Mapping[str, Any], name: str, *, milli: bool) -> int:
    quantity = _dict(_dict(container.get("resources")).get("requests")).get(name)
    if quantity is None:
        return 0
    try:
        return milli_value(quantity) if milli else value(quantity)
    except ValueError:
        return 0


def _usage(millicores: int, memory: int) -> Obj:
    return {"cpu": canonicalize(f"{millicores * 1_000_000}n"),
            "memory": f"{memory // 1024}Ki" if memory % 1024 == 0 else str(memory)}


def _running(pod: Mapping[str, Any]) -> bool:
    return _dict(pod.get("status")).get("phase") == "Running"


def _meta(obj: Mapping[str, Any], now: str) -> Obj:
    meta = _dict(obj.get("metadata"))
    out: Obj = {"name": meta.get("name")}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    out["creationTimestamp"] = now
    if meta.get("labels"):
        out["labels"] = meta["labels"]
    return out


def pod_metrics(pod: Mapping[str, Any], now: str) -> Obj:
    containers = [{"name": name, "usage": _usage(cpu, memory)} for name, cpu, memory in container_usage(pod)]
    return {"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": _meta(pod, now),
            "timestamp": now, "window": WINDOW, "containers": containers}


def node_metrics(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: str) -> Obj:
    name = _dict(node.get("metadata")).get("name")
    cpu = memory = 0
    for pod in pods:
        if _dict(pod.get("spec")).get("nodeName") == name and _running(pod):
            for _, c, m in container_usage(pod):
                cpu += c
                memory += m
    return {"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}", "metadata": _meta(node, now),
            "timestamp": now, "window": WINDOW, "usage": _usage(cpu, memory)}


def get(api: ApiServer, res: Resource, namespace: str | None, name: str) -> Obj:
    now = format_time(api.clock.now())
    if res.plural == "pods":
        pod = api.stored_object(PODS, namespace, name)
        if pod is None or not _running(pod):
            raise errors.not_found(GROUP, "podmetrics", name)
        return pod_metrics(pod, now)
    node = api.stored_object(NODES, None, name)
    if node is None:
        raise errors.not_found(GROUP, "nodemetrics", name)
    pods, _ = api.list(PODS, field_selector=f"spec.nodeName={name}")
    return node_metrics(node, pods, now)


def list_metrics(api: ApiServer, res: Resource, namespace: str | None, label_selector: str | None,
                 field_selector: str | None) -> Obj:
    now = format_time(api.clock.now())
    labels = selectors.parse(label_selector) if label_selector else None
    if res.plural == "pods":
        pods, rv = api.list(PODS, namespace, field_selector=field_selector or None)
        items = [pod_metrics(p, now) for p in pods
                 if _running(p) and (labels is None or labels.matches(_dict(p.get("metadata")).get("labels")))]
        kind = "PodMetricsList"
    else:
        nodes, rv = api.list(NODES, field_selector=field_selector or None)
        all_pods, _ = api.list(PODS)
        items = [node_metrics(n, all_pods, now) for n in nodes
                 if labels is None or labels.matches(_dict(n.get("metadata")).get("labels"))]
        kind = "NodeMetricsList"
    return {"kind": kind, "apiVersion": f"{GROUP}/{VERSION}", "metadata": {"resourceVersion": rv}, "items": items}
