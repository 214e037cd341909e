"""How many replicas a metric asks for (``pkg/controller/podautoscaler/replica_calculator.go``).

Guarantees (upstream's algorithm, as a client can observe it):
- The usage ratio is current/target. Inside the tolerances (``1 - down <= ratio <= 1 + up``) the current count
  stands; otherwise the proposal is ``ceil(ratio * ready pods)``.
- Pods are grouped first: deleted or Failed pods are ignored; Pending pods are unready; pods without a metric are
  missing; for CPU, a pod within ``cpu_initialization_period`` of its start is unready while not Ready or while
  its sample predates one metric window after its last readiness change, and after that period a pod that is
  not Ready and never was (its Ready condition changed within ``delay_of_initial_readiness_status`` of its start)
  is unready. Unready pods' samples are dropped.
- With missing pods, or unready pods on a scale-up, the ratio is recomputed with missing pods at 0 on a scale-up
  and at their request (or the target, if above 100%) on a scale-down, unready pods at 0; if that brings the
  ratio within tolerance or flips the direction, the current count stands.
- Utilization is ``sum(usage) * 100 // sum(requests)`` over pods that have a sample (integer, as upstream),
  requests being the pod-level request when one is set for the resource and no container is named, else the
  sum over the (named) containers and restartable init containers; a container without the request is the
  error ``missing request for <res> in container <c> of Pod <p>``.
- Object and External metrics: ``Value`` targets scale ``ceil(ratio * ready pods)`` (or ``ceil(ratio)`` from 0
  replicas); ``AverageValue`` targets divide the total by the target (ratio measured against status replicas).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import parse_time
from controller_manager.api.pods import get_pod_ready_condition, is_pod_ready
from controller_manager.api.quantity import QuantityError, milli_value
from controller_manager.api.selectors import Selector
from controller_manager.clock import Clock
from controller_manager.controllers.podautoscaler.metrics import MetricsClient, MetricsError, PodMetric, PodMetricsInfo

__all__ = [
    "MAX_INT32",
    "MAX_INT64",
    "ReplicaCalculator",
    "Tolerances",
    "calculate_requests",
    "get_metric_usage_ratio",
    "get_resource_utilization_ratio",
    "go_label_selector",
    "group_pods",
]

Obj = Mapping[str, Any]
PodLister = Callable[[str, Selector], Sequence[Obj]]
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1


class CalculationError(MetricsError):
    """The replica count could not be computed; ``str()`` is upstream's message."""


@dataclass(frozen=True, slots=True)
class Tolerances:
    """Scale-down and scale-up tolerances on the usage ratio."""

    scale_down: float
    scale_up: float

    def __str__(self) -> str:
        return f"[down:{self.scale_down * 100:.1f}%, up:{self.scale_up * 100:.1f}%]"

    def is_within(self, ratio: float) -> bool:
        return 1.0 - self.scale_down <= ratio <= 1.0 + self.scale_up


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ceil32(value: float) -> int:
    return MAX_INT32 if value > MAX_INT32 else math.ceil(value)


def get_resource_utilization_ratio(metrics: PodMetricsInfo, requests: Mapping[str, int],
                                   target_utilization: int) -> tuple[float, int, int]:
    """(ratio, utilization %, average raw value) over pods with both a sample and a request."""
    metrics_total = requests_total = entries = 0
    for pod, metric in metrics.items():
        request = requests.get(pod)
        if request is None:
            continue  # an extraneous metric
        metrics_total += metric.value
        requests_total += request
        entries += 1
    if requests_total == 0:
        raise CalculationError("no metrics returned matched known pods")
    utilization = metrics_total * 100 // requests_total
    return utilization / target_utilization, utilization, metrics_total // entries


def get_metric_usage_ratio(metrics: PodMetricsInfo, target_usage: int) -> tuple[float, int]:
    usage = sum(m.value for m in metrics.values()) // len(metrics)
    return usage / target_usage, usage


def go_label_selector(selector: Any) -> str:
    """A ``*metav1.LabelSelector`` as Go's ``%+v`` prints it (upstream puts it in messages)."""
    if selector is None:
        return "nil"
    s = _dict(selector)
    labels = ",".join(f"{k}: {v}," for k, v in sorted(_dict(s.get("matchLabels")).items()))
    exprs = ",".join(f"{{{_dict(e).get('key')} {_dict(e).get('operator')} [{' '.join(_dict(e).get('values') or ())}]}}"
                     for e in s.get("matchExpressions") or ())
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def _name(pod: Obj) -> str:
    return str(_dict(pod.get("metadata")).get("name") or "")


def group_pods(pods: Sequence[Obj], metrics: PodMetricsInfo, resource: str, cpu_initialization_period: float,
               delay_of_initial_readiness_status: float, now: float) -> tuple[int, set[str], set[str], set[str]]:
    """(ready pod count, unready pods, missing pods, ignored pods) — groupPods."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        name = _name(pod)
        status = _dict(pod.get("status"))
        if _dict(pod.get("metadata")).get("deletionTimestamp") is not None or status.get("phase") == "Failed":
            ignored.add(name)
            continue
        if status.get("phase") == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == "cpu" and _cpu_unready(pod, metric, cpu_initialization_period,
                                              delay_of_initial_readiness_status, now):
            unready.add(name)
            continue
        ready += 1
    return ready, unready, missing, ignored


def _cpu_unready(pod: Obj, metric: PodMetric, init_period: float, readiness_delay: float, now: float) -> bool:
    condition = get_pod_ready_condition(pod)
    start = parse_time(_dict(pod.get("status")).get("startTime"))
    if condition is None or start is None:
        return True
    transition = parse_time(condition.get("lastTransitionTime")) or 0.0
    not_ready = condition.get("status") == "False"
    if start + init_period > now:
        # still initialising: unready, or no full metric window since the last readiness change
        return not_ready or metric.timestamp < transition + metric.window
    # never been ready since it started
    return not_ready and start + readiness_delay > transition


def _request(container: Obj, resource: str) -> int | None:
    requests = _dict(_dict(container.get("resources")).get("requests"))
    if resource not in requests:
        return None
    try:
        return milli_value(requests[resource])
    except (QuantityError, ValueError):
        return None


def _pod_level_requests(pod: Obj) -> Mapping[str, Any]:
    return _dict(_dict(_dict(pod.get("spec")).get("resources")).get("requests"))


def calculate_requests(pods: Sequence[Obj], container: str, resource: str) -> dict[str, int]:
    """Each pod's request of ``resource`` in milli-units (calculateRequests)."""
    out: dict[str, int] = {}
    for pod in pods:
        name = _name(pod)
        pod_level = _pod_level_requests(pod)
        if pod_level and not container:  # pod-level resources (KEP-2837) win unless a container is named
            if resource not in pod_level:
                raise CalculationError(f"missing pod-level request for {resource} in Pod {name}")
            try:
                out[name] = milli_value(pod_level[resource])
            except (QuantityError, ValueError) as err:
                raise CalculationError(str(err)) from err
            continue
        spec = _dict(pod.get("spec"))
        containers = [_dict(c) for c in spec.get("containers") or ()]
        containers += [_dict(c) for c in spec.get("initContainers") or () if _dict(c).get("restartPolicy") == "Always"]
        total = 0
        found = False
        for c in containers:
            if not container or container == c.get("name"):
                request = _request(c, resource)
                if request is None:
                    raise CalculationError(f"missing request for {resource} in container {c.get('name')} of Pod "
                                           f"{name}")
                total += request
            if container and container == c.get("name"):
                found = True
                break
        if container and not found:
            raise CalculationError(f"container {container} not found in Pod {name}")
        out[name] = total
    return out


class ReplicaCalculator:
    """The metrics client, a pod lister and the readiness settings; one instance per controller."""

    def __init__(self, metrics: MetricsClient, pods: PodLister, clock: Clock, *, cpu_initialization_period: float,
                 delay_of_initial_readiness_status: float) -> None:
        self.metrics = metrics
        self.pods = pods
        self.clock = clock
        self.cpu_initialization_period = cpu_initialization_period
        self.delay_of_initial_readiness_status = delay_of_initial_readiness_status

    def _list_pods(self, namespace: str, selector: Selector) -> Sequence[Obj]:
        pods = self.pods(namespace, selector)
        if not pods:
            raise CalculationError("no pods returned by selector while calculating replica count")
        return pods

    def _group(self, pods: Sequence[Obj], metrics: PodMetricsInfo,
               resource: str) -> tuple[int, set[str], set[str]]:
        ready, unready, missing, ignored = group_pods(pods, metrics, resource, self.cpu_initialization_period,
                                                      self.delay_of_initial_readiness_status, self.clock.now())
        for name in ignored | unready:
            metrics.pop(name, None)
        if not metrics:
            raise CalculationError("did not receive metrics for targeted pods (pods might be unready)")
        return ready, unready, missing

    async def get_resource_replicas(self, current_replicas: int, target_utilization: int, resource: str,
                                    tolerances: Tolerances, namespace: str, selector: Selector,
                                    container: str) -> tuple[int, int, int, float]:
        """(replicas, utilization %, raw average usage, timestamp) for a Utilization target."""
        try:
            metrics, timestamp = await self.metrics.get_resource_metric(resource, namespace, selector, container)
        except MetricsError as err:
            raise CalculationError(f"unable to get metrics for resource {resource}: {err}") from err
        metrics = dict(metrics)
        pods = self._list_pods(namespace, selector)
        ready, unready, missing = self._group(pods, metrics, resource)
        requests = calculate_requests(pods, container, resource)
        ratio, utilization, raw = get_resource_utilization_ratio(metrics, requests, target_utilization)

        scale_up_with_unready = bool(unready) and ratio > 1.0
        if not scale_up_with_unready and not missing:
            if tolerances.is_within(ratio):
                return current_replicas, utilization, raw, timestamp
            return math.ceil(ratio * ready), utilization, raw, timestamp

        if missing:
            if ratio < 1.0:  # scale-down: missing pods use their request (or the target, above 100%)
                fallback = max(100, target_utilization)
                for name in missing:
                    metrics[name] = PodMetric(0.0, 0.0, requests.get(name, 0) * fallback // 100)
            elif ratio > 1.0:
                for name in missing:
                    metrics[name] = PodMetric(0.0, 0.0, 0)
        if scale_up_with_unready:
            for name in unready:
                metrics[name] = PodMetric(0.0, 0.0, 0)

        new_ratio, _, _ = get_resource_utilization_ratio(metrics, requests, target_utilization)
        return self._settle(current_replicas, ratio, new_ratio, len(metrics), tolerances), utilization, raw, \
            timestamp

    @staticmethod
    def _settle(current: int, ratio: float, new_ratio: float, count: int, tolerances: Tolerances) -> int:
        if tolerances.is_within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
            return current  # too small a change, or the direction flipped
        proposal = math.ceil(new_ratio * count)
        if (new_ratio < 1.0 and proposal > current) or (new_ratio > 1.0 and proposal < current):
            return current
        return proposal

    async def get_raw_resource_replicas(self, current_replicas: int, target_usage: int, resource: str,
                                        tolerances: Tolerances, namespace: str, selector: Selector,
                                        container: str) -> tuple[int, int, float]:
        """(replicas, average usage, timestamp) for an AverageValue resource target."""
        try:
            metrics, timestamp = await self.metrics.get_resource_metric(resource, namespace, selector, container)
        except MetricsError as err:
            raise CalculationError(f"unable to get metrics for resource {resource}: {err}") from err
        replicas, usage = self._plain_replicas(dict(metrics), current_replicas, target_usage, tolerances, namespace,
                                               selector, resource)
        return replicas, usage, timestamp

    async def get_metric_replicas(self, current_replicas: int, target_usage: int, metric_name: str,
                                  tolerances: Tolerances, namespace: str, selector: Selector,
                                  metric_selector: Selector) -> tuple[int, int, float]:
        """(replicas, average usage, timestamp) for a Pods metric."""
        try:
            metrics, timestamp = await self.metrics.get_raw_metric(metric_name, namespace, selector, metric_selector)
        except MetricsError as err:
            raise CalculationError(f"unable to get metric {metric_name}: {err}") from err
        replicas, usage = self._plain_replicas(dict(metrics), current_replicas, target_usage, tolerances, namespace,
                                               selector, "")
        return replicas, usage, timestamp

    def _plain_replicas(self, metrics: PodMetricsInfo, current_replicas: int, target_usage: int,
                        tolerances: Tolerances, namespace: str, selector: Selector, resource: str) -> tuple[int, int]:
        pods = self._list_pods(namespace, selector)
        ready, unready, missing = self._group(pods, metrics, resource)
        ratio, usage = get_metric_usage_ratio(metrics, target_usage)
        scale_up_with_unready = bool(unready) and ratio > 1.0
        if not scale_up_with_unready and not missing:
            if tolerances.is_within(ratio):
                return current_replicas, usage
            return math.ceil(ratio * ready), usage
        if missing:
            if ratio < 1.0:
                for name in missing:
                    metrics[name] = PodMetric(0.0, 0.0, target_usage)
            elif ratio > 1.0:
                for name in missing:
                    metrics[name] = PodMetric(0.0, 0.0, 0)
        if scale_up_with_unready:
            for name in unready:
                metrics[name] = PodMetric(0.0, 0.0, 0)
        new_ratio, _ = get_metric_usage_ratio(metrics, target_usage)
        return self._settle(current_replicas, ratio, new_ratio, len(metrics), tolerances), usage

    def _ready_pods_count(self, namespace: str, selector: Selector) -> int:
        pods = self._list_pods(namespace, selector)
        return sum(1 for p in pods if _dict(p.get("status")).get("phase") == "Running" and is_pod_ready(p))

    def _usage_ratio_replica_count(self, current_replicas: int, ratio: float, tolerances: Tolerances,
                                   namespace: str, selector: Selector) -> int:
        if current_replicas == 0:
            return math.ceil(ratio)  # scaling from zero: only the ratio counts
        if tolerances.is_within(ratio):
            return current_replicas
        try:
            ready = self._ready_pods_count(namespace, selector)
        except CalculationError as err:
            raise CalculationError(f"unable to calculate ready pods: {err}") from err
        return _ceil32(ratio * ready)

    async def get_object_metric_replicas(self, current_replicas: int, target_usage: int, metric_name: str,
                                         tolerances: Tolerances, namespace: str, object_ref: Mapping[str, Any],
                                         selector: Selector, metric_selector: Selector) -> tuple[int, int, float]:
        try:
            usage, _ = await self.metrics.get_object_metric(metric_name, namespace, object_ref, metric_selector)
        except MetricsError as err:
            raise CalculationError(f"unable to get metric {metric_name}: {object_ref.get('kind')} on {namespace} "
                                   f"{object_ref.get('name')}/{err}") from err
        replicas = self._usage_ratio_replica_count(current_replicas, usage / target_usage, tolerances, namespace,
                                                   selector)
        return replicas, usage, 0.0  # upstream leaves this timestamp unset

    async def get_object_per_pod_metric_replicas(self, status_replicas: int, target_average_usage: int,
                                                 metric_name: str, tolerances: Tolerances, namespace: str,
                                                 object_ref: Mapping[str, Any],
                                                 metric_selector: Selector) -> tuple[int, int, float]:
        try:
            usage, timestamp = await self.metrics.get_object_metric(metric_name, namespace, object_ref,
                                                                    metric_selector)
        except MetricsError as err:
            raise CalculationError(f"unable to get metric {metric_name}: {object_ref.get('kind')} on {namespace} "
                                   f"{object_ref.get('name')}/{err}") from err
        replicas = status_replicas
        ratio = usage / (target_average_usage * replicas) if replicas else math.inf
        if not tolerances.is_within(ratio):
            replicas = math.ceil(usage / target_average_usage)
        average = math.ceil(usage / status_replicas) if status_replicas else usage
        return replicas, average, timestamp

    async def get_external_metric_replicas(self, current_replicas: int, target_usage: int, metric_name: str,
                                           tolerances: Tolerances, namespace: str,
                                           metric_selector: Mapping[str, Any] | None, metric_label_selector: Selector,
                                           pod_selector: Selector) -> tuple[int, int, float]:
        try:
            values, _ = await self.metrics.get_external_metric(metric_name, namespace, metric_label_selector)
        except MetricsError as err:
            raise CalculationError(f"unable to get external metric {namespace}/{metric_name}/"
                                   f"{go_label_selector(metric_selector)}: {err}") from err
        usage = min(sum(values), MAX_INT64)
        replicas = self._usage_ratio_replica_count(current_replicas, usage / target_usage, tolerances, namespace,
                                                   pod_selector)
        return replicas, usage, 0.0

    async def get_external_per_pod_metric_replicas(self, status_replicas: int, target_usage_per_pod: int,
                                                   metric_name: str, tolerances: Tolerances, namespace: str,
                                                   metric_selector: Mapping[str, Any] | None,
                                                   metric_label_selector: Selector) -> tuple[int, int, float]:
        try:
            values, timestamp = await self.metrics.get_external_metric(metric_name, namespace, metric_label_selector)
        except MetricsError as err:
            raise CalculationError(f"unable to get external metric {namespace}/{metric_name}/"
                                   f"{go_label_selector(metric_selector)}: {err}") from err
        usage = min(sum(values), MAX_INT64)
        replicas = status_replicas
        ratio = usage / (target_usage_per_pod * replicas) if replicas else math.inf
        if not tolerances.is_within(ratio):
            replicas = _ceil32(usage / target_usage_per_pod)
        average = MAX_INT64 if usage >= MAX_INT64 else (math.ceil(usage / status_replicas) if status_replicas
                                                        else usage)
        return replicas, average, timestamp
