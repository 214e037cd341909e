"""Pod predicates as pkg/api/v1/pod/util.go and controller_utils.go define them."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.pods import (
    count_terminating_pods,
    filter_active_pods,
    filter_terminating_pods,
    get_pod_condition,
    is_pod_active,
    is_pod_available,
    is_pod_ready,
    is_pod_terminal,
    is_pod_terminating,
    pod_key,
    pod_ready_since,
    split_active_and_terminating,
)

NOW = 1_700_000_000.0


def pod(
    phase: str | None = "Running",
    ready: str | None = None,
    ready_since: float | None = None,
    deleting: bool = False,
    name: str = "p",
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if ready is not None:
        cond: dict[str, Any] = {"type": "Ready", "status": ready}
        if ready_since is not None:
            cond["lastTransitionTime"] = format_time(ready_since)
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}, cond]
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"metadata": meta, "status": status}


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        pytest.param(pod(), False, id="no conditions"),
        pytest.param(pod(ready="True"), True, id="ready true"),
        pytest.param(pod(ready="False"), False, id="ready false"),
        pytest.param(pod(ready="Unknown"), False, id="ready unknown"),
        pytest.param({}, False, id="empty object"),
    ],
)
def test_is_pod_ready(p: dict[str, Any], expected: bool) -> None:
    assert is_pod_ready(p) is expected


@pytest.mark.parametrize(
    ("p", "min_ready", "expected"),
    [
        # TestIsPodAvailable (pkg/api/v1/pod/util_test.go)
        pytest.param(pod(ready="False"), 0, False, id="not ready"),
        pytest.param(pod(ready="True", ready_since=NOW), 1, False, id="ready but within minReadySeconds"),
        pytest.param(pod(ready="True", ready_since=NOW), 0, True, id="ready and minReadySeconds 0"),
        pytest.param(pod(ready="True", ready_since=NOW - 51), 50, True, id="ready for longer than minReadySeconds"),
        pytest.param(pod(ready="True", ready_since=NOW - 50), 50, False, id="exactly minReadySeconds is not before"),
        pytest.param(pod(ready="True"), 5, False, id="no transition time never becomes available"),
        pytest.param(pod(ready="True"), 0, True, id="no transition time with minReadySeconds 0"),
    ],
)
def test_is_pod_available(p: dict[str, Any], min_ready: int, expected: bool) -> None:
    assert is_pod_available(p, min_ready, NOW) is expected


@pytest.mark.parametrize(
    ("p", "active", "terminal", "terminating"),
    [
        pytest.param(pod("Pending"), True, False, False, id="pending"),
        pytest.param(pod("Running"), True, False, False, id="running"),
        pytest.param(pod(None), True, False, False, id="no phase"),
        pytest.param(pod("Unknown"), True, False, False, id="unknown"),
        pytest.param(pod("Succeeded"), False, True, False, id="succeeded"),
        pytest.param(pod("Failed"), False, True, False, id="failed"),
        pytest.param(pod("Running", deleting=True), False, False, True, id="running being deleted"),
        pytest.param(pod("Failed", deleting=True), False, True, False, id="failed being deleted"),
    ],
)
def test_phase_predicates(p: dict[str, Any], active: bool, terminal: bool, terminating: bool) -> None:
    assert is_pod_active(p) is active
    assert is_pod_terminal(p) is terminal
    assert is_pod_terminating(p) is terminating


def test_count_and_filter_terminating_pods() -> None:
    # TestCountTerminatingPods: 7 pods, two terminal, two being deleted while not terminal.
    pods = [pod("Succeeded"), pod("Failed"), pod("Pending", deleting=True), pod("Running", deleting=True)]
    pods += [pod("Running", name=f"r{i}") for i in range(3)]
    assert count_terminating_pods(pods) == 2
    assert len(filter_terminating_pods(pods)) == 2


def test_filter_active_pods_keeps_order() -> None:
    # TestActivePodFiltering
    pods = [pod("Succeeded", name="pod-1"), pod("Failed", name="pod-2")]
    pods += [pod(None, name=f"pod-{i}") for i in (3, 4, 5)]
    assert [p["metadata"]["name"] for p in filter_active_pods(pods)] == ["pod-3", "pod-4", "pod-5"]


def test_split_active_and_terminating_is_both_filters_in_one_pass() -> None:
    pods = [pod("Succeeded", name="done"), pod("Failed", name="failed", deleting=True)]
    pods += [pod("Running", name="going", deleting=True), pod("Pending", name="p1"), pod(None, name="p2")]
    pods += [pod("Unknown", name="gone-too", deleting=True), pod("Running", name="r1")]
    active, terminating = split_active_and_terminating(pods)
    assert active == filter_active_pods(pods)
    assert terminating == filter_terminating_pods(pods)
    assert [p["metadata"]["name"] for p in active] == ["p1", "p2", "r1"]
    assert [p["metadata"]["name"] for p in terminating] == ["going", "gone-too"]


def test_ready_since_and_conditions() -> None:
    p = pod(ready="True", ready_since=NOW - 10)
    assert pod_ready_since(p) == NOW - 10
    assert pod_ready_since(pod(ready="False", ready_since=NOW)) is None
    assert get_pod_condition(p, "PodScheduled") == {"type": "PodScheduled", "status": "True"}
    assert get_pod_condition(p, "ContainersReady") is None
    assert pod_key(p) == "ns/p"
