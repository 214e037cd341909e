"""What a created object is charged, as upstream's quota evaluators count it (cases after pods_test.go and
services_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api import quota
from controller_manager.api.resource_lists import Amount, add, render
from controller_manager.api.resources import CONFIGMAPS, DEPLOYMENTS, PERSISTENTVOLUMECLAIMS, PODS, SERVICES


def container(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
              **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "i", "resources": resources, **extra}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), phase: str = "Pending",
        **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": list(containers), "initContainers": list(init), **spec},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("obj", "want"), [
    pytest.param(pod(container("a")), {"count/pods": "1", "pods": "1"}, id="best-effort"),
    pytest.param(pod(container("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "2"})),
                 {"count/pods": "1", "pods": "1", "cpu": "1", "requests.cpu": "1", "limits.cpu": "2",
                  "memory": "1Gi", "requests.memory": "1Gi"}, id="requests-and-limits"),
    pytest.param(pod(container("a", {"cpu": "100m"}), container("b", {"cpu": "200m"})),
                 {"count/pods": "1", "pods": "1", "cpu": "300m", "requests.cpu": "300m"}, id="containers-summed"),
    pytest.param(pod(container("a", {"cpu": "100m"}), init=(container("i", {"cpu": "2"}),)),
                 {"count/pods": "1", "pods": "1", "cpu": "2", "requests.cpu": "2"}, id="init-container-floor"),
    pytest.param(pod(container("a", {"cpu": "1"}), init=(container("s", {"cpu": "500m"}, restartPolicy="Always"),)),
                 {"count/pods": "1", "pods": "1", "cpu": "1500m", "requests.cpu": "1500m"}, id="sidecar-added"),
    pytest.param(pod(container("a", {"cpu": "1"}), overhead={"cpu": "250m"}),
                 {"count/pods": "1", "pods": "1", "cpu": "1250m", "requests.cpu": "1250m"}, id="overhead"),
    pytest.param(pod(container("a", {"hugepages-2Mi": "4Mi", "example.com/gpu": "1"})),
                 {"count/pods": "1", "pods": "1", "hugepages-2Mi": "4Mi", "requests.hugepages-2Mi": "4Mi",
                  "requests.example.com/gpu": "1"}, id="hugepages-and-extended"),
    pytest.param(pod(container("a", {"cpu": "1"}), phase="Succeeded"), {"count/pods": "1"}, id="terminal"),
])
def test_pod_usage(obj: dict[str, Any], want: dict[str, str]) -> None:
    assert render(quota.usage(PODS, obj)) == want


@pytest.mark.parametrize(("spec", "want"), [
    pytest.param({"type": "ClusterIP", "ports": [{"port": 80}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "0"},
                 id="cluster-ip"),
    pytest.param({"type": "NodePort", "ports": [{"port": 80}, {"port": 81}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "0", "services.nodeports": "2"},
                 id="node-port"),
    pytest.param({"type": "LoadBalancer", "ports": [{"port": 80}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"},
                 id="load-balancer"),
    pytest.param({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                  "ports": [{"port": 80}, {"port": 81, "nodePort": 30001}]},
                 {"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"},
                 id="load-balancer-without-node-ports"),
])
def test_service_usage(spec: dict[str, Any], want: dict[str, str]) -> None:
    assert render(quota.usage(SERVICES, {"spec": spec})) == want


def test_claim_and_object_counts() -> None:
    pvc = {"spec": {"storageClassName": "gold", "resources": {"requests": {"storage": "10Gi"}}}}
    assert render(quota.usage(PERSISTENTVOLUMECLAIMS, pvc)) == {
        "count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1",
        "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1", "requests.storage": "10Gi",
        "gold.storageclass.storage.k8s.io/requests.storage": "10Gi"}
    assert render(quota.usage(CONFIGMAPS, {})) == {"count/configmaps": "1", "configmaps": "1"}
    assert render(quota.usage(DEPLOYMENTS, {})) == {"count/deployments.apps": "1"}


def test_matching_resources() -> None:
    hard = ["pods", "requests.cpu", "services", "count/deployments.apps", "configmaps", "requests.example.com/gpu",
            "requests.hugepages-1Gi"]
    assert quota.matching_resources(PODS, hard) == ["pods", "requests.cpu", "requests.example.com/gpu",
                                                    "requests.hugepages-1Gi"]
    assert quota.matching_resources(SERVICES, hard) == ["services"]
    assert quota.matching_resources(DEPLOYMENTS, hard) == ["count/deployments.apps"]
    assert quota.matching_resources(CONFIGMAPS, hard) == ["configmaps"]


def _resized(status_cpu: str, allocated_cpu: str, *conditions: dict[str, str]) -> dict[str, Any]:
    p = pod(container("a", {"cpu": "1"}), phase="Running")
    p["status"]["containerStatuses"] = [{"name": "a", "resources": {"requests": {"cpu": status_cpu}},
                                         "allocatedResources": {"cpu": allocated_cpu}}]
    if conditions:
        p["status"]["conditions"] = list(conditions)
    return p


@pytest.mark.parametrize(("obj", "cpu"), [
    pytest.param(_resized("2", "1500m"), "2", id="kubelet-reports-more"),
    pytest.param(_resized("500m", "500m"), "1", id="spec-is-more"),
    pytest.param(_resized("500m", "750m", {"type": "PodResizePending", "reason": "Infeasible"}), "750m",
                 id="infeasible-resize-takes-the-status"),
])
def test_pod_usage_with_in_place_resize(obj: dict[str, Any], cpu: str) -> None:
    assert render(quota.usage(PODS, obj))["requests.cpu"] == cpu


def test_pod_level_resources_replace_the_containers() -> None:
    p = pod(container("a", {"cpu": "1", "memory": "1Gi"}), resources={"requests": {"cpu": "3"}})
    assert render(quota.usage(PODS, p))["requests.cpu"] == "3"
    assert render(quota.usage(PODS, p))["requests.memory"] == "1Gi"


def test_pod_past_deletion_grace_period() -> None:
    p = pod(container("a", {"cpu": "1"}), phase="Running")
    p["metadata"].update(deletionTimestamp="2023-11-14T22:13:20Z", deletionGracePeriodSeconds=30)
    deleted_at = 1_700_000_000.0
    assert "pods" in quota.usage(PODS, p, deleted_at + 30)  # not after the grace period yet
    assert render(quota.usage(PODS, p, deleted_at + 31)) == {"count/pods": "1"}
    assert "pods" in quota.usage(PODS, p)  # admission: no clock, a new pod


@pytest.mark.parametrize(("obj", "qos"), [
    pytest.param(pod(container("a")), "BestEffort", id="nothing"),
    pytest.param(pod(container("a", {"cpu": "0"})), "BestEffort", id="zero-requests-ignored"),
    pytest.param(pod(container("a", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})), "Guaranteed",
                 id="guaranteed"),
    pytest.param(pod(container("a", {"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1024Mi"})),
                 "Guaranteed", id="equal-by-value"),
    pytest.param(pod(container("a", {"cpu": "1"}, {"cpu": "2", "memory": "1Gi"})), "Burstable", id="burstable"),
    pytest.param(pod(container("a", {"cpu": "100m"}), resources={"requests": {"cpu": "1", "memory": "1Gi"},
                                                                  "limits": {"cpu": "1", "memory": "1Gi"}}),
                 "Guaranteed", id="pod-level-replaces-containers"),
    pytest.param(pod(container("a"), resources={"limits": {"cpu": "1", "memory": "1Gi"}}), "Burstable",
                 id="pod-level-limits-without-requests"),
    pytest.param({**pod(container("a")), "status": {"qosClass": "Burstable"}}, "Burstable", id="status-wins"),
])
def test_pod_qos(obj: dict[str, Any], qos: str) -> None:
    assert quota.pod_qos(obj) == qos


def test_sum_from_zero_takes_the_other_format() -> None:
    zero = {"memory": Amount.of(0)}
    assert render(add(zero, {"memory": Amount.of("1Gi")})) == {"memory": "1Gi"}
    assert render(add({"memory": Amount.of("1Gi")}, {"memory": Amount.of("1000")})) == {"memory": "1073742824"}
