"""The DaemonSet controller's pure helpers (daemonset_util_test.go: TestIsPodUpdated, TestCreatePodTemplate,
TestReplaceDaemonSetPodNodeNameNodeAffinity, TestGetTargetNodeName; plus the tolerations every daemon pod gets
and the surge/unavailability arithmetic)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllers.daemonset.util import (
    CONTROLLER_REVISION_HASH_LABEL,
    TEMPLATE_GENERATION_LABEL,
    TargetNodeError,
    add_or_update_daemon_pod_tolerations,
    allows_surge,
    create_pod_template,
    get_target_node_name,
    get_template_generation,
    is_pod_updated,
    replace_node_name_affinity,
    surge_count,
    unavailable_count,
)

HASH = "55555"
GEN = 12345
LABELS = {TEMPLATE_GENERATION_LABEL: str(GEN), CONTROLLER_REVISION_HASH_LABEL: HASH}
LABELS_NO_HASH = {TEMPLATE_GENERATION_LABEL: str(GEN)}


def _pod(labels: dict[str, str] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "pod1", "namespace": "default"}
    if labels is not None:
        metadata["labels"] = labels
    return {"metadata": metadata, "spec": {"nodeName": "node1", "containers": [{"image": "foo/bar"}]}}


@pytest.mark.parametrize(("generation", "labels", "hash_", "updated"), [
    pytest.param(GEN, LABELS, HASH, True, id="templateGeneration and hash both match"),
    pytest.param(GEN, LABELS, HASH + "123", True, id="templateGeneration matches, hash doesn't"),
    pytest.param(GEN, LABELS_NO_HASH, HASH, True, id="templateGeneration matches, no hash label, has hash"),
    pytest.param(GEN, LABELS_NO_HASH, "", True, id="templateGeneration matches, no hash label, no hash"),
    pytest.param(GEN, LABELS, "", True, id="templateGeneration matches, has hash label, no hash"),
    pytest.param(12350, LABELS, HASH, True, id="templateGeneration doesn't match, hash does"),
    pytest.param(12350, LABELS, HASH + "123", False, id="templateGeneration and hash don't match"),
    pytest.param(GEN, {}, "", False, id="empty labels, no hash"),
    pytest.param(GEN, {}, HASH, False, id="empty labels"),
    pytest.param(GEN, None, HASH, False, id="no labels"),
    pytest.param(None, LABELS_NO_HASH, "", False, id="no template generation, no hash"),
])
def test_is_pod_updated(generation: int | None, labels: dict[str, str] | None, hash_: str, updated: bool) -> None:
    assert is_pod_updated(_pod(labels), hash_, generation) is updated


@pytest.mark.parametrize(("generation", "hash_", "expect_hash_label"), [
    pytest.param(1, "", False, id="no hash"),
    pytest.param(2, "3242341807", True, id="hash"),
])
def test_create_pod_template(generation: int, hash_: str, expect_hash_label: bool) -> None:
    template: dict[str, Any] = {}
    new = create_pod_template(template, generation, hash_)
    labels: dict[str, str] = new["metadata"]["labels"]
    assert labels[TEMPLATE_GENERATION_LABEL] == str(generation)
    assert (labels.get(CONTROLLER_REVISION_HASH_LABEL) == hash_) if expect_hash_label else (
        CONTROLLER_REVISION_HASH_LABEL not in labels)
    assert template == {}  # never mutated


def test_create_pod_template_keeps_the_template_and_adds_tolerations() -> None:
    template: dict[str, Any] = {"metadata": {"labels": {"app": "x"}},
                                "spec": {"containers": [{"name": "c", "image": "i"}]}}
    new = create_pod_template(template, None, "abc")
    assert new["metadata"]["labels"] == {"app": "x", CONTROLLER_REVISION_HASH_LABEL: "abc"}
    assert len(new["spec"]["tolerations"]) == 6
    assert "tolerations" not in template["spec"]


def _not_ready(seconds: int | None = None, operator: str = "Exists") -> dict[str, Any]:
    tol: dict[str, Any] = {"key": "node.kubernetes.io/not-ready", "operator": operator, "effect": "NoExecute"}
    if seconds is not None:
        tol["tolerationSeconds"] = seconds
    return tol


DAEMON_TOLERATIONS = [
    _not_ready(),
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
NETWORK = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}
USER = {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({}, DAEMON_TOLERATIONS, id="every daemon pod"),
    pytest.param({"hostNetwork": True}, [*DAEMON_TOLERATIONS, NETWORK], id="host network: network-unavailable too"),
    pytest.param({"tolerations": [USER]}, [USER, *DAEMON_TOLERATIONS], id="user tolerations come first"),
    pytest.param({"tolerations": [_not_ready(300)]}, DAEMON_TOLERATIONS,
                 id="a timed not-ready toleration becomes unbounded, in place"),
    pytest.param({"tolerations": [USER, _not_ready(300, "Equal")]}, [USER, _not_ready(300, "Equal"),
                                                                    *DAEMON_TOLERATIONS],
                 id="another operator is another toleration"),
])
def test_daemon_pod_tolerations(spec: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert add_or_update_daemon_pod_tolerations(spec) == expected


def _name_in(*names: str, op: str = "In", key: str = "metadata.name") -> dict[str, Any]:
    return {"matchFields": [{"key": key, "operator": op, "values": list(names)}]}


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


HOSTNAME_TERM = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["host_1"]}]}
PREFERRED = [{"weight": 1, "preference": HOSTNAME_TERM}]


@pytest.mark.parametrize(("affinity", "expected"), [
    pytest.param(None, _required(_name_in("host_1")), id="no affinity"),
    pytest.param(_required(HOSTNAME_TERM), _required(_name_in("host_1")), id="hostname expression replaced"),
    pytest.param({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED}},
                 {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": PREFERRED,
                                   **_required(_name_in("host_1"))["nodeAffinity"]}}, id="preferred terms kept"),
    pytest.param(_required(_name_in("host_1", "host_2")), _required(_name_in("host_1")), id="two names -> one"),
    pytest.param(_required({"matchExpressions": [{"key": "hostname", "operator": "In", "values": ["host_1"]}]},
                           _name_in("host_2")), _required(_name_in("host_1")), id="several terms -> one"),
    pytest.param(_required(_name_in("host_2", op="NotIn")), _required(_name_in("host_1")), id="NotIn replaced"),
    pytest.param(_required(_name_in("bar", key="metadata.foo")), _required(_name_in("host_1")),
                 id="unknown field key replaced"),
    pytest.param({"podAffinity": {"x": 1}}, {"podAffinity": {"x": 1}, **_required(_name_in("host_1"))},
                 id="other affinities kept"),
])
def test_replace_node_name_affinity(affinity: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    assert replace_node_name_affinity(affinity, "host_1") == expected


@pytest.mark.parametrize(("spec", "node"), [
    pytest.param({"nodeName": "node-1"}, "node-1", id="spec.nodeName"),
    pytest.param({"affinity": _required(_name_in("node-1"))}, "node-1", id="node affinity"),
    pytest.param({"affinity": _required(_name_in("node-1", "node-2"))}, None, id="two names: error"),
    pytest.param({}, None, id="neither: error"),
    pytest.param({"affinity": _required()}, None, id="no terms: error"),
])
def test_get_target_node_name(spec: dict[str, Any], node: str | None) -> None:
    pod = {"metadata": {"name": "pod", "namespace": "default"}, "spec": spec}
    if node is None:
        with pytest.raises(TargetNodeError):
            get_target_node_name(pod)
    else:
        assert get_target_node_name(pod) == node


def _ds(strategy: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"updateStrategy": strategy}}


def _rolling(unavailable: int | str | None = 1, surge: int | str | None = None) -> dict[str, Any]:
    rolling: dict[str, Any] = {}
    if unavailable is not None:
        rolling["maxUnavailable"] = unavailable
    if surge is not None:
        rolling["maxSurge"] = surge
    return _ds({"type": "RollingUpdate", "rollingUpdate": rolling})


@pytest.mark.parametrize(("ds", "total", "surge", "unavailable"), [
    pytest.param(_ds({"type": "OnDelete"}), 10, 0, 0, id="OnDelete counts nothing"),
    pytest.param(_ds({"type": "RollingUpdate"}), 10, 0, 0, id="no rollingUpdate block"),
    pytest.param(_rolling(1), 10, 0, 1, id="defaults"),
    pytest.param(_rolling(0, 2), 10, 2, 0, id="int surge"),
    pytest.param(_rolling("25%", None), 10, 0, 3, id="percent unavailable rounds up"),
    pytest.param(_rolling(0, "10%"), 15, 2, 0, id="percent surge rounds up"),
    pytest.param(_rolling(0, "100%"), 3, 3, 0, id="all at once"),
    pytest.param(_rolling("50%", 0), 0, 0, 0, id="no nodes"),
])
def test_surge_and_unavailable_counts(ds: dict[str, Any], total: int, surge: int, unavailable: int) -> None:
    assert surge_count(ds, total) == surge
    assert unavailable_count(ds, total) == unavailable
    assert allows_surge(ds) is (surge_count(ds, 1) > 0)


def test_bad_limits_raise() -> None:
    with pytest.raises(ValueError, match="invalid type: string is not a percentage"):
        surge_count(_rolling(0, "abc"), 3)
    with pytest.raises(ValueError, match="invalid value"):
        unavailable_count(_rolling("x%"), 3)
    assert allows_surge(_rolling(0, "abc")) is False


@pytest.mark.parametrize(("annotations", "expected"), [
    pytest.param(None, None, id="absent"),
    pytest.param({"deprecated.daemonset.template.generation": "7"}, 7, id="parsed"),
])
def test_get_template_generation(annotations: dict[str, str] | None, expected: int | None) -> None:
    assert get_template_generation({"metadata": {"annotations": annotations}}) == expected


def test_get_template_generation_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="invalid syntax"):
        get_template_generation({"metadata": {"annotations": {"deprecated.daemonset.template.generation": "x"}}})
