"""The metrics client (upstream's metrics/client_test.go cases): PodMetrics summed per pod or read per container,
pods with an incomplete sample left out, and the custom/external metrics APIs' paths, selectors and errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api import selectors
from controller_manager.clock import FakeClock
from controller_manager.controllers.podautoscaler.metrics import (
    MetricsError,
    PodMetric,
    RestMetricsClient,
    pod_metrics_from_list,
)

T0 = "2026-01-01T00:00:00Z"
T0_SECONDS = 1767225600.0


def item(name: str, containers: list[tuple[str, dict[str, str]]], window: str = "30s") -> dict[str, Any]:
    return {"metadata": {"name": name}, "timestamp": T0, "window": window,
            "containers": [{"name": c, "usage": usage} for c, usage in containers]}


@pytest.mark.parametrize(("items", "container", "want"), [
    pytest.param([item("a", [("c1", {"cpu": "100m"}), ("c2", {"cpu": "200m"})])], "",
                 {"a": PodMetric(T0_SECONDS, 30.0, 300)}, id="containers summed"),
    pytest.param([item("a", [("c1", {"cpu": "100m"}), ("c2", {"cpu": "200m"})])], "c2",
                 {"a": PodMetric(T0_SECONDS, 30.0, 200)}, id="one container"),
    pytest.param([item("a", [("c1", {"cpu": "100m"}), ("c2", {"memory": "1Ki"})])], "", {},
                 id="a container without the resource drops the pod"),
    pytest.param([item("a", [])], "", {}, id="no containers: no sample"),
    pytest.param([item("a", [("c1", {"cpu": "1"})]), item("b", [("c1", {"cpu": "1"})])], "nope", {},
                 id="missing container: no sample"),
    pytest.param([item("a", [("c1", {"cpu": "1500m"})], window="1m0s")], "",
                 {"a": PodMetric(T0_SECONDS, 60.0, 1500)}, id="window and cores"),
])
def test_pod_metrics_from_list(items: list[dict[str, Any]], container: str, want: dict[str, PodMetric]) -> None:
    assert pod_metrics_from_list(items, "cpu", container) == want


@dataclass
class FakeClient:
    groups: list[str]
    answers: dict[str, Any] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str] | None]] = field(default_factory=list)

    async def request(self, method: str, path: str, *, params: dict[str, str] | None = None, **_: Any) -> Any:
        self.requests.append((path, params))
        if path == "/apis":
            return {"groups": [{"name": g, "versions": [{"version": "v1beta2"}, {"version": "v1beta1"}],
                                "preferredVersion": {"version": "v1beta2"}} for g in self.groups]}
        return self.answers[path]


async def _resource_for_kind(api_version: str, kind: str) -> str:
    return {"Deployment": "deployments", "Service": "services"}[kind]


async def test_custom_metrics_for_pods_and_objects() -> None:
    client = FakeClient(["custom.metrics.k8s.io"], {
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps": {"items": [
            {"describedObject": {"kind": "Pod", "name": "p0"}, "timestamp": T0, "windowSeconds": 30,
             "value": "10"},
            {"describedObject": {"kind": "Pod", "name": "p1"}, "timestamp": T0, "value": "1500m"}]},
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/services/web/qps": {"items": [
            {"describedObject": {"kind": "Service", "name": "web"}, "timestamp": T0, "value": "20"}]},
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/metrics/qps": {"items": [
            {"describedObject": {"kind": "Namespace", "name": "ns"}, "timestamp": T0, "value": "3"}]},
    })
    metrics = RestMetricsClient(client, FakeClock(), _resource_for_kind)  # type: ignore[arg-type]
    got, timestamp = await metrics.get_raw_metric("qps", "ns", selectors.parse("app=web"), selectors.parse("x=y"))
    assert got == {"p0": PodMetric(T0_SECONDS, 30.0, 10000), "p1": PodMetric(T0_SECONDS, 60.0, 1500)}
    assert timestamp == T0_SECONDS
    assert client.requests[-1] == ("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps",
                                   {"labelSelector": "app=web", "metricLabelSelector": "x=y"})
    assert await metrics.get_object_metric("qps", "ns", {"apiVersion": "v1", "kind": "Service", "name": "web"},
                                           selectors.parse("")) == (20000, T0_SECONDS)
    assert await metrics.get_object_metric("qps", "ns", {"apiVersion": "v1", "kind": "Namespace", "name": "x"},
                                           selectors.parse("")) == (3000, T0_SECONDS)
    assert [p for p, _ in client.requests].count("/apis") == 1  # discovery is cached


async def test_custom_metrics_api_absent() -> None:
    metrics = RestMetricsClient(FakeClient(["apps"]), FakeClock(), _resource_for_kind)  # type: ignore[arg-type]
    with pytest.raises(MetricsError, match=r"^unable to fetch metrics from custom metrics API: no custom metrics API "
                                           r"\(custom.metrics.k8s.io\) registered$"):
        await metrics.get_raw_metric("qps", "ns", selectors.parse(""), selectors.parse(""))


async def test_external_metrics_and_empty_answers() -> None:
    client = FakeClient([], {
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue": {"items": [
            {"metricName": "queue", "timestamp": T0, "value": "7"}, {"metricName": "queue", "timestamp": T0,
                                                                       "value": "500m"}]},
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/empty": {"items": []},
        "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods": {"items": []},
    })
    metrics = RestMetricsClient(client, FakeClock())  # type: ignore[arg-type]
    assert await metrics.get_external_metric("queue", "ns", selectors.parse("a=b")) == ([7000, 500], T0_SECONDS)
    assert client.requests[-1][1] == {"labelSelector": "a=b"}
    with pytest.raises(MetricsError, match=r"^no metrics returned from external metrics API$"):
        await metrics.get_external_metric("empty", "ns", selectors.parse(""))
    with pytest.raises(MetricsError, match=r"^no metrics returned from resource metrics API$"):
        await metrics.get_resource_metric("cpu", "ns", selectors.parse(""), "")
