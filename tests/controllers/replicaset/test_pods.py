"""Which pods a ReplicaSet deletes first, and which it counts (replica_set_test.go TestGetPodsToDelete)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from controller_manager.api.selectors import from_set
from controller_manager.controllers.replicaset.pods import (
    filter_claimed_pods,
    get_pods_to_delete,
    is_controlled_by,
    orphan_index,
)
from controller_manager.controllerutil.controller_utils import find_min_next_pod_availability_check, pod_keys

from .objects import new_pod, new_replica_set, terminating, with_meta

NOW = 1_700_000_000.0
RS = new_replica_set(1, {"name": "foo"})

UNSCHEDULED_PENDING = new_pod("unscheduled-pending-pod", RS, "Pending")
SCHEDULED_PENDING = new_pod("scheduled-pending-pod", RS, "Pending", node="fake-node")
RUNNING_NOT_READY = new_pod("scheduled-running-not-ready-pod", RS, "Running", node="fake-node", ready=False)
READY_ON_NODE1 = new_pod("scheduled-running-ready-pod-on-node-1", RS, "Running", node="fake-node-1")
READY_ON_NODE2 = new_pod("scheduled-running-ready-pod-on-node-2", RS, "Running", node="fake-node-2")


def _names(pods: Sequence[Mapping[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# Deletion order: unscheduled pending, scheduled pending, running not ready, ready co-located with related
# pods, ready elsewhere. (A pending pod cannot be ready.)
@pytest.mark.parametrize(("pods", "related", "diff", "expected"), [
    pytest.param([], None, 0, [], id="len(pods) = 0 (i.e., diff = 0 too)"),
    pytest.param([RUNNING_NOT_READY, READY_ON_NODE1], None, 2, [RUNNING_NOT_READY, READY_ON_NODE1],
                 id="diff = len(pods)"),
    pytest.param([READY_ON_NODE1, RUNNING_NOT_READY], None, 1, [RUNNING_NOT_READY], id="diff < len(pods)"),
    pytest.param([READY_ON_NODE1, READY_ON_NODE1, READY_ON_NODE2, RUNNING_NOT_READY, SCHEDULED_PENDING,
                  UNSCHEDULED_PENDING], None, 6,
                 [READY_ON_NODE1, READY_ON_NODE1, READY_ON_NODE2, RUNNING_NOT_READY, SCHEDULED_PENDING,
                  UNSCHEDULED_PENDING], id="various pod phases and conditions, diff = len(pods)"),
    pytest.param([READY_ON_NODE1, READY_ON_NODE1, READY_ON_NODE2, RUNNING_NOT_READY, SCHEDULED_PENDING,
                  UNSCHEDULED_PENDING], [], 6,
                 [READY_ON_NODE1, READY_ON_NODE1, READY_ON_NODE2, RUNNING_NOT_READY, SCHEDULED_PENDING,
                  UNSCHEDULED_PENDING], id="various pod phases and conditions, diff = len(pods), relatedPods empty"),
    pytest.param([SCHEDULED_PENDING, UNSCHEDULED_PENDING], None, 1, [UNSCHEDULED_PENDING],
                 id="scheduled vs unscheduled, diff < len(pods)"),
    pytest.param([READY_ON_NODE1, RUNNING_NOT_READY, RUNNING_NOT_READY], None, 2,
                 [RUNNING_NOT_READY, RUNNING_NOT_READY], id="ready vs not-ready, diff < len(pods)"),
    pytest.param([READY_ON_NODE1, READY_ON_NODE2], [READY_ON_NODE1, READY_ON_NODE2, READY_ON_NODE2], 1,
                 [READY_ON_NODE2], id="ready and colocated with another ready pod vs not colocated, diff < len(pods)"),
    pytest.param([SCHEDULED_PENDING, RUNNING_NOT_READY], None, 1, [SCHEDULED_PENDING],
                 id="pending vs running, diff < len(pods)"),
    pytest.param([READY_ON_NODE1, READY_ON_NODE2, RUNNING_NOT_READY, SCHEDULED_PENDING, UNSCHEDULED_PENDING], None,
                 3, [UNSCHEDULED_PENDING, SCHEDULED_PENDING, RUNNING_NOT_READY],
                 id="various pod phases and conditions, diff < len(pods)"),
])
def test_get_pods_to_delete(pods: list[dict[str, Any]], related: list[dict[str, Any]] | None, diff: int,
                            expected: list[dict[str, Any]]) -> None:
    chosen = get_pods_to_delete(pods, pods if related is None else related, diff, NOW)
    assert _names(chosen) == _names(expected)


def test_get_pods_to_delete_does_not_reorder_its_input() -> None:
    pods = [READY_ON_NODE1, UNSCHEDULED_PENDING]
    assert _names(get_pods_to_delete(pods, pods, 1, NOW)) == [UNSCHEDULED_PENDING["metadata"]["name"]]
    assert pods == [READY_ON_NODE1, UNSCHEDULED_PENDING]


@pytest.mark.parametrize(("pods", "expected"), [
    pytest.param([], [], id="len(pods) = 0"),
    pytest.param([new_pod("pod1", RS, "Running"), new_pod("pod2", RS, "Running")], ["default/pod1", "default/pod2"],
                 id="len(pods) > 0"),
])
def test_get_pod_keys(pods: list[dict[str, Any]], expected: list[str]) -> None:
    assert pod_keys(pods) == expected


def test_orphan_index_names_the_namespace_of_pods_without_a_controller() -> None:
    assert orphan_index(new_pod("p", RS, "Running", owned=False)) == ["default"]
    assert orphan_index(new_pod("p", RS, "Running")) == []
    not_controller = with_meta(new_pod("p", RS, "Running"),
                               ownerReferences=[{"kind": "ReplicaSet", "name": "x", "uid": "u", "controller": False}])
    assert orphan_index(not_controller) == ["default"]


def test_filter_claimed_pods_keeps_owned_matching_pods() -> None:
    other = new_replica_set(1, {"name": "foo"}, name="other")
    owned = terminating(new_pod("owned", RS, "Running"))
    relabelled = terminating(new_pod("relabelled", RS, "Running", labels={"name": "bar"}))
    someone_elses = terminating(new_pod("theirs", other, "Running"))
    orphan = terminating(new_pod("orphan", RS, "Running", owned=False))
    kept = filter_claimed_pods(RS, from_set({"name": "foo"}), [owned, relabelled, someone_elses, orphan])
    assert _names(kept) == ["owned"]
    assert is_controlled_by(owned, RS)
    assert not is_controlled_by(owned, other)


def _ready_pod(name: str, ready: bool, seconds_ago: float) -> dict[str, Any]:
    return new_pod(name, RS, "Running", ready=ready, ready_since=NOW - seconds_ago)


@pytest.mark.parametrize(("pods", "min_ready", "expected"), [
    pytest.param([_ready_pod("pod1", False, 0), _ready_pod("pod2", True, 2), _ready_pod("pod3", True, 0),
                  _ready_pod("pod4", True, 4), _ready_pod("pod5", False, 0)], 10, 6.0,
                 id="unready and ready pods: the soonest to turn available decides"),
    pytest.param([_ready_pod("pod1", False, 0), _ready_pod("pod2", True, 15), _ready_pod("pod3", True, 11),
                  _ready_pod("pod4", True, 10), _ready_pod("pod5", False, 0)], 10, None,
                 id="unready and available pods need no check"),
    pytest.param([_ready_pod("pod1", True, 2)], 0, None, id="no minReadySeconds"),
])
def test_find_min_next_pod_availability_check(pods: list[dict[str, Any]], min_ready: int,
                                              expected: float | None) -> None:
    assert find_min_next_pod_availability_check(pods, min_ready, NOW, NOW) == (
        None if expected is None else pytest.approx(expected))


def test_find_min_next_pod_availability_check_discounts_time_spent_since_evaluation() -> None:
    pods = [_ready_pod("a", True, 4), _ready_pod("b", True, 1)]
    assert find_min_next_pod_availability_check(pods, 10, NOW, NOW + 2) == pytest.approx(4.0)
    # The chosen pod turned available meanwhile: at once.
    assert find_min_next_pod_availability_check(pods, 10, NOW, NOW + 7) == 0.0
