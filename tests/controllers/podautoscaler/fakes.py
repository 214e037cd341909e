"""Fakes for the HPA's unit tables: a metrics client answering from a table (PodMetrics built as metrics-server
writes them, read back through the real parser), and upstream's test pods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time
from controller_manager.api.selectors import Selector
from controller_manager.controllers.podautoscaler.metrics import (
    MetricsError,
    PodMetric,
    PodMetricsInfo,
    pod_metrics_from_list,
)

NAMESPACE = "test-namespace"
POD_PREFIX = "test-pod"
CONTAINERS_PER_POD = 2


def milli(value: int) -> str:
    return f"{value}m"


def pod_metrics(names: Sequence[str], levels: Sequence[int], resource: str, timestamp: float,
                window: str = "1m0s") -> list[dict[str, Any]]:
    """PodMetrics items: each pod's containers all at ``level`` milli-units."""
    return [{"metadata": {"name": name, "namespace": NAMESPACE, "labels": {"name": POD_PREFIX}},
             "timestamp": format_time(timestamp), "window": window,
             "containers": [{"name": f"container{i}", "usage": {resource: milli(level)}}
                            for i in range(CONTAINERS_PER_POD)]}
            for name, level in zip(names, levels, strict=False)]


@dataclass
class FakeMetrics:
    """A MetricsClient from a table; ``errors`` make a kind of read fail with that message."""

    resource_items: list[dict[str, Any]] | None = None
    custom_levels: list[int] | None = None
    object_level: int | None = None
    external_levels: list[int] | None = None
    timestamp: float = 0.0
    errors: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, Any]] = field(default_factory=list)

    async def get_resource_metric(self, resource: str, namespace: str, selector: Selector,
                                  container: str) -> tuple[PodMetricsInfo, float]:
        self.calls.append(("resource", (resource, namespace, str(selector), container)))
        if "resource" in self.errors:
            raise MetricsError(self.errors["resource"])
        if self.resource_items is None:
            raise MetricsError("unable to fetch metrics from resource metrics API: no pod resource metrics "
                               "specified in test client")
        if not self.resource_items:
            raise MetricsError("no metrics returned from resource metrics API")
        return pod_metrics_from_list(self.resource_items, resource, container), self.timestamp

    async def get_raw_metric(self, metric_name: str, namespace: str, selector: Selector,
                             metric_selector: Selector) -> tuple[PodMetricsInfo, float]:
        self.calls.append(("pods", (metric_name, namespace, str(selector), str(metric_selector))))
        if "custom" in self.errors:
            raise MetricsError(self.errors["custom"])
        levels = self.custom_levels or []
        if not levels:
            raise MetricsError("no metrics returned from custom metrics API")
        return ({f"{POD_PREFIX}-{i}": PodMetric(self.timestamp, 60.0, level) for i, level in enumerate(levels)},
                self.timestamp)

    async def get_object_metric(self, metric_name: str, namespace: str, object_ref: Mapping[str, Any],
                                metric_selector: Selector) -> tuple[int, float]:
        self.calls.append(("object", (metric_name, namespace, dict(object_ref), str(metric_selector))))
        if "custom" in self.errors:
            raise MetricsError(self.errors["custom"])
        assert self.object_level is not None
        return self.object_level, self.timestamp

    async def get_external_metric(self, metric_name: str, namespace: str,
                                  selector: Selector) -> tuple[list[int], float]:
        self.calls.append(("external", (metric_name, namespace, str(selector))))
        if "external" in self.errors:
            raise MetricsError(self.errors["external"])
        levels = self.external_levels or []
        if not levels:
            raise MetricsError("no metrics returned from external metrics API")
        return list(levels), self.timestamp


def make_pod(i: int, *, ready: str = "True", phase: str = "Running", start: float = 0.0, deleted: bool = False,
             request: str | None = None, resource: str = "cpu", ready_since: float | None = None) -> dict[str, Any]:
    """One of upstream's test pods: two containers, each requesting ``request`` of ``resource`` (if given)."""
    condition: dict[str, Any] = {"type": "Ready", "status": ready}
    if ready_since is not None:
        condition["lastTransitionTime"] = format_time(ready_since)
    containers = [{"name": f"container{c}", "image": "i"} for c in range(CONTAINERS_PER_POD)]
    if request is not None:
        for c in containers:
            c["resources"] = {"requests": {resource: request}}
    meta: dict[str, Any] = {"name": f"{POD_PREFIX}-{i}", "namespace": NAMESPACE, "labels": {"name": POD_PREFIX}}
    if deleted:
        meta["deletionTimestamp"] = format_time(start + 1)
    return {"metadata": meta, "spec": {"containers": containers},
            "status": {"phase": phase, "startTime": format_time(start), "conditions": [condition]}}
