"""Which nodes a DaemonSet's pods belong on (daemon_controller_test.go: TestNodeShouldRunDaemonPod, the tainted
node tests, TestUpdateNode's shouldIgnoreNodeUpdate cases, podByCreationTimestampAndPhase)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllers.daemonset.placement import (
    MalformedNode,
    node_should_run_daemon_pod,
    pod_creation_order_key,
    should_ignore_node_update,
)

SIMPLE_LABEL = {"name": "simple-daemon", "type": "production"}
SIMPLE_LABEL2 = {"name": "simple-daemon", "type": "test"}


def _node(name: str = "test-node", labels: dict[str, str] | None = None, taints: list[dict[str, Any]] | None = None,
          unschedulable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"unschedulable": unschedulable}
    if taints is not None:
        spec["taints"] = taints
    return {"metadata": {"name": name, "labels": labels if labels is not None else dict(SIMPLE_LABEL)},
            "spec": spec,
            "status": {"allocatable": {"memory": "100M", "cpu": "1"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _ds(**pod_spec: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "foo/bar"}], **pod_spec}
    return {"metadata": {"name": "ds", "namespace": "default"},
            "spec": {"selector": {"matchLabels": SIMPLE_LABEL},
                     "template": {"metadata": {"labels": SIMPLE_LABEL}, "spec": spec}}}


def _resources(memory: str, cpu: str) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"memory": memory, "cpu": cpu}},
                            "ports": [{"hostPort": 666, "containerPort": 666}]}]}


def _affinity(key: str, values: list[str], op: str = "In") -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": op, "values": values}]}]}}}


def _taint(key: str, effect: str, value: str = "") -> dict[str, Any]:
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def _tol(key: str, effect: str, value: str = "", operator: str = "Equal") -> dict[str, Any]:
    return {"key": key, "operator": operator, "value": value, "effect": effect}


@pytest.mark.parametrize(("ds", "node", "expected"), [
    pytest.param(_ds(), _node(), (True, True), id="ShouldRunDaemonPod"),
    pytest.param(_ds(**_resources("200M", "0.5")), _node(), (True, True),
                 id="InsufficientResourceError: resources are the scheduler's business"),
    pytest.param(_ds(nodeName="other-node"), _node(), (False, False), id="ErrPodNotMatchHostName"),
    pytest.param(_ds(nodeName="test-node"), _node(), (True, True), id="template nodeName is this node"),
    pytest.param(_ds(**_resources("50M", "0.5")), _node(), (True, True), id="ErrPodNotFitsHostPorts is ignored too"),
    pytest.param(_ds(nodeSelector=SIMPLE_LABEL2), _node(), (False, False), id="ErrNodeSelectorNotMatch"),
    pytest.param(_ds(nodeSelector=SIMPLE_LABEL), _node(), (True, True), id="node selector matches"),
    pytest.param(_ds(affinity=_affinity("type", ["test"])), _node(), (False, False), id="ErrPodAffinityNotMatch"),
    pytest.param(_ds(affinity=_affinity("type", ["production"])), _node(), (True, True), id="affinity matches"),
    pytest.param(_ds(), _node(unschedulable=True), (True, True), id="ShouldRunDaemonPodOnUnschedulableNode"),
    pytest.param(_ds(), _node(taints=[_taint("dedicated", "NoSchedule", "infra")]), (False, True),
                 id="untolerated NoSchedule: don't start, keep running"),
    pytest.param(_ds(), _node(taints=[_taint("dedicated", "NoExecute", "infra")]), (False, False),
                 id="untolerated NoExecute: don't start, don't keep"),
    pytest.param(_ds(), _node(taints=[_taint("dedicated", "PreferNoSchedule")]), (True, True),
                 id="PreferNoSchedule is ignored"),
    pytest.param(_ds(tolerations=[_tol("dedicated", "NoSchedule", "infra")]),
                 _node(taints=[_taint("dedicated", "NoSchedule", "infra")]), (True, True), id="tolerated NoSchedule"),
    pytest.param(_ds(tolerations=[_tol("dedicated", "NoSchedule", "infra")]),
                 _node(taints=[_taint("dedicated", "NoExecute", "infra")]), (False, False),
                 id="toleration of another effect does not help"),
    pytest.param(_ds(), _node(taints=[_taint("node.kubernetes.io/not-ready", "NoExecute"),
                                      _taint("node.kubernetes.io/not-ready", "NoSchedule")]), (False, True),
                 id="not-ready node: NoExecute tolerated, NoSchedule not"),
    pytest.param(_ds(), _node(taints=[_taint("node.kubernetes.io/unreachable", "NoExecute")]), (True, True),
                 id="unreachable NoExecute is tolerated by every daemon pod"),
    pytest.param(_ds(), _node(taints=[_taint("node.kubernetes.io/disk-pressure", "NoSchedule"),
                                      _taint("node.kubernetes.io/memory-pressure", "NoSchedule"),
                                      _taint("node.kubernetes.io/pid-pressure", "NoSchedule"),
                                      _taint("node.kubernetes.io/unschedulable", "NoSchedule")]), (True, True),
                 id="pressure and cordon taints are tolerated"),
    pytest.param(_ds(), _node(taints=[_taint("node.kubernetes.io/network-unavailable", "NoSchedule")]),
                 (False, True), id="network-unavailable blocks pod-network daemons"),
    pytest.param(_ds(hostNetwork=True), _node(taints=[_taint("node.kubernetes.io/network-unavailable",
                                                             "NoSchedule")]), (True, True),
                 id="network-unavailable is tolerated by host-network daemons"),
    pytest.param(_ds(affinity=_affinity("type", ["production"], "NotIn")), _node(), (False, False), id="NotIn"),
    pytest.param(_ds(affinity=_affinity("type", [], "Exists")), _node(), (True, True), id="Exists"),
    pytest.param(_ds(affinity=_affinity("gpu", [], "DoesNotExist")), _node(), (True, True), id="DoesNotExist"),
    pytest.param(_ds(affinity=_affinity("cores", ["4"], "Gt")), _node(labels={"cores": "8"}), (True, True), id="Gt"),
    pytest.param(_ds(affinity=_affinity("cores", ["4"], "Lt")), _node(labels={"cores": "8"}), (False, False),
                 id="Lt"),
    pytest.param(_ds(affinity=_affinity("type", [], "In")), _node(), (False, False),
                 id="an expression that does not parse matches nothing"),
    pytest.param(_ds(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}]}}}), _node(), (False, False), id="an empty term matches nothing"),
])
def test_node_should_run_daemon_pod(ds: dict[str, Any], node: dict[str, Any], expected: tuple[bool, bool]) -> None:
    for strategy in ({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}, {"type": "OnDelete"}):
        ds["spec"]["updateStrategy"] = strategy
        assert node_should_run_daemon_pod(node, ds) == expected


@pytest.mark.parametrize("node", [
    pytest.param({"metadata": {"name": "n", "labels": ["a"]}}, id="labels not a map"),
    pytest.param({"metadata": {"name": "n", "labels": {"a": 1}}}, id="label value not a string"),
    pytest.param({"metadata": {"name": "n"}, "spec": {"taints": "x"}}, id="taints not a list"),
    pytest.param({"metadata": {"name": "n"}, "spec": {"taints": ["x"]}}, id="taint not an object"),
    pytest.param({"metadata": {"name": "n"}, "spec": {"taints": [{"effect": "NoSchedule"}]}}, id="taint without key"),
    pytest.param({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "k", "effect": "Bogus"}]}},
                 id="unknown effect"),
])
def test_malformed_nodes_are_reported_not_guessed(node: dict[str, Any]) -> None:
    with pytest.raises(MalformedNode):
        node_should_run_daemon_pod(node, _ds())


def test_malformed_conditions_do_not_matter() -> None:
    node = _node()
    node["status"]["conditions"] = ["garbage", {"type": None}]
    assert node_should_run_daemon_pod(node, _ds()) == (True, True)


NO_SCHEDULE = [_taint("node.kubernetes.io/not-ready", "NoSchedule")]


@pytest.mark.parametrize(("old", "new", "ignored"), [
    pytest.param(_node("node1", {}), _node("node1", {}), True, id="nothing changed"),
    pytest.param(_node("node1", {}), _node("node1", {"type": "production"}), False, id="node labels changed"),
    pytest.param(_node("node1", {}, NO_SCHEDULE), _node("node1", {}), False, id="node taints changed"),
    pytest.param(_node("node1", {}), {**_node("node1", {}), "status": {"allocatable": {"memory": "200M"}}}, True,
                 id="allocatable changed"),
    pytest.param(_node("node1", {}), {**_node("node1", {}), "status": {"conditions": [
        {"type": "Ready", "status": "False"}]}}, True, id="conditions changed"),
])
def test_should_ignore_node_update(old: dict[str, Any], new: dict[str, Any], ignored: bool) -> None:
    assert should_ignore_node_update(old, new) is ignored


def test_pod_creation_order() -> None:
    def pod(name: str, created: str, node: str = "") -> dict[str, Any]:
        return {"metadata": {"name": name, "creationTimestamp": created}, "spec": {"nodeName": node}}

    pods = [pod("d", "2024-01-01T00:00:00Z"), pod("c", "2024-01-01T00:00:02Z", "n"),
            pod("b", "2024-01-01T00:00:01Z", "n"), pod("a", "2024-01-01T00:00:01Z", "n")]
    assert [p["metadata"]["name"] for p in sorted(pods, key=pod_creation_order_key)] == ["a", "b", "c", "d"]
