"""Rolling-update arithmetic and status counting (update_test.go: TestGetUnavailableNumbers, the surge and
maxUnavailable rolling-update tests; daemon_controller_test.go's status expectations), plus the surge invariant
as a property: an old pod that is available is only deleted once its node has an available new pod."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.api.meta import format_time
from controller_manager.controllers.daemonset.rolling import (
    daemon_set_status,
    desired_node_counts,
    plan_rolling_update,
)

NOW = 1_700_000_000.0
NEW, OLD = "new", "old"


def _ds(unavailable: int | str = 1, surge: int | str = 0, min_ready: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": "ds", "namespace": "default", "generation": 2},
            "spec": {"minReadySeconds": min_ready,
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"maxUnavailable": unavailable, "maxSurge": surge}}}}


def _pod(name: str, node: str, rev: str = OLD, ready_for: float | None = 100.0, created: float = 0.0,
         deleting: bool = False) -> dict[str, Any]:
    conditions = []
    if ready_for is not None:
        conditions.append({"type": "Ready", "status": "True", "lastTransitionTime": format_time(NOW - ready_for)})
    metadata: dict[str, Any] = {"name": name, "labels": {"controller-revision-hash": rev},
                                "creationTimestamp": format_time(NOW - 1000 + created)}
    if deleting:
        metadata["deletionTimestamp"] = format_time(NOW)
    return {"metadata": metadata, "spec": {"nodeName": node}, "status": {"phase": "Running",
                                                                          "conditions": conditions}}


def _placement(*nodes: str, off: tuple[str, ...] = ()) -> dict[str, tuple[bool, bool]]:
    return {n: (n not in off, n not in off) for n in nodes}


def _old_everywhere(*nodes: str) -> dict[str, list[dict[str, Any]]]:
    return {n: [_pod(f"old-{n}", n)] for n in nodes}


@pytest.mark.parametrize(("ds", "placement", "expected"), [
    pytest.param(_ds(), {}, (0, 1, 0), id="no nodes: an int limit is not scaled"),
    pytest.param(_ds("50%"), {}, (0, 0, 0), id="no nodes: a percentage of nothing"),
    pytest.param(_ds(), _placement("a", "b"), (0, 1, 2), id="two nodes"),
    pytest.param(_ds("50%"), _placement("a", "b", "c"), (0, 2, 3), id="percent unavailable rounds up"),
    pytest.param(_ds(0, "50%"), _placement("a", "b", "c"), (2, 0, 3), id="percent surge rounds up"),
    pytest.param(_ds(0, 0), _placement("a", "b"), (0, 1, 2), id="impossible configuration defaults to one"),
    pytest.param(_ds(), _placement("a", "b", off=("b",)), (0, 1, 1), id="only nodes that should run count"),
])
def test_desired_node_counts(ds: dict[str, Any], placement: dict[str, tuple[bool, bool]],
                             expected: tuple[int, int, int]) -> None:
    assert desired_node_counts(ds, placement) == expected


def _plan(ds: dict[str, Any], node_pods: dict[str, list[dict[str, Any]]],
          placement: dict[str, tuple[bool, bool]]) -> tuple[list[str], list[str]]:
    return plan_rolling_update(ds, node_pods, placement, NEW, None, NOW)


NODES = ("a", "b", "c", "d")


@pytest.mark.parametrize(("ds", "node_pods", "expected"), [
    pytest.param(_ds(1), _old_everywhere(*NODES), (["old-a"], []), id="maxUnavailable 1: one old pod goes"),
    pytest.param(_ds(2), _old_everywhere(*NODES), (["old-a", "old-b"], []), id="maxUnavailable 2"),
    pytest.param(_ds("100%"), _old_everywhere(*NODES), (["old-a", "old-b", "old-c", "old-d"], []), id="all at once"),
    pytest.param(_ds(1), {**_old_everywhere("b", "c", "d"), "a": [_pod("new-a", "a", NEW, ready_for=None)]},
                 ([], []), id="an unavailable new pod uses the budget"),
    pytest.param(_ds(1), {**_old_everywhere("b", "c", "d"), "a": [_pod("new-a", "a", NEW)]},
                 (["old-b"], []), id="an available new pod frees the budget"),
    pytest.param(_ds(1), {**_old_everywhere("a", "c", "d"), "b": [_pod("old-b", "b", ready_for=None)]},
                 (["old-b"], []), id="an unavailable old pod is replaced and uses the budget"),
    pytest.param(_ds(1), {**_old_everywhere("a", "b", "d"), "c": []}, ([], []),
                 id="a node without a pod counts as unavailable"),
    pytest.param(_ds(1, min_ready=60), {**_old_everywhere("b", "c", "d"), "a": [_pod("new-a", "a", NEW, 30)]},
                 ([], []), id="minReadySeconds: ready for 30 s of 60 is not available"),
    pytest.param(_ds(1), {**_old_everywhere("b", "c", "d"), "a": [_pod("new-a", "a", NEW, deleting=True)]},
                 ([], []), id="deleted pods do not count as present"),
])
def test_rolling_update_without_surge(ds: dict[str, Any], node_pods: dict[str, list[dict[str, Any]]],
                                      expected: tuple[list[str], list[str]]) -> None:
    assert _plan(ds, node_pods, _placement(*NODES)) == expected


@pytest.mark.parametrize(("ds", "node_pods", "placement", "expected"), [
    pytest.param(_ds(0, 1), _old_everywhere(*NODES), _placement(*NODES), ([], ["a"]),
                 id="maxSurge 1: one new pod beside an old one"),
    pytest.param(_ds(0, 2), _old_everywhere(*NODES), _placement(*NODES), ([], ["a", "b"]), id="maxSurge 2"),
    pytest.param(_ds(0, 1), {**_old_everywhere(*NODES), "a": [_pod("old-a", "a"),
                                                              _pod("new-a", "a", NEW, ready_for=None)]},
                 _placement(*NODES), ([], []), id="waiting for the surged pod"),
    pytest.param(_ds(0, 1), {**_old_everywhere(*NODES), "a": [_pod("old-a", "a"), _pod("new-a", "a", NEW)]},
                 _placement(*NODES), (["old-a"], ["b"]), id="surged pod available: old one goes, next node surges"),
    pytest.param(_ds(0, 1, min_ready=60), {**_old_everywhere(*NODES), "a": [_pod("old-a", "a"),
                                                                            _pod("new-a", "a", NEW, 30)]},
                 _placement(*NODES), ([], []), id="minReadySeconds holds the old pod"),
    pytest.param(_ds(0, 1), {**_old_everywhere(*NODES), "c": [_pod("old-c", "c", ready_for=None)]},
                 _placement(*NODES), ([], ["c", "a"]), id="an unavailable old pod is replaced at once"),
    pytest.param(_ds(0, 1), {**_old_everywhere(*NODES), "c": [_pod("old-c", "c", ready_for=None)]},
                 _placement(*NODES, off=("c",)), (["old-c"], ["a"]),
                 id="an unavailable old pod where it should not run is deleted"),
    pytest.param(_ds(0, 1), {"a": [_pod("new-a", "a", NEW)], "b": [_pod("old-b", "b")]},
                 _placement("a", "b", off=("b",)), (["old-b"], []),
                 id="moved: the pod of a sunset node goes once more are available than desired"),
    pytest.param(_ds(0, 1), {"a": [_pod("new-a", "a", NEW, ready_for=None)], "b": [_pod("old-b", "b")]},
                 _placement("a", "b", off=("b",)), ([], []),
                 id="moved: the sunset pod stays until its replacement is available"),
    pytest.param(_ds(0, 1), {**_old_everywhere(*NODES), "a": [_pod("old-a", "a"), _pod("old-a2", "a")]},
                 _placement(*NODES), ([], []), id="excess pods on a node count as a surge"),
])
def test_rolling_update_with_surge(ds: dict[str, Any], node_pods: dict[str, list[dict[str, Any]]],
                                   placement: dict[str, tuple[bool, bool]],
                                   expected: tuple[list[str], list[str]]) -> None:
    assert _plan(ds, node_pods, placement) == expected


def test_rolling_update_refuses_pods_on_unknown_nodes_when_surging() -> None:
    with pytest.raises(LookupError):
        _plan(_ds(0, 1), {"gone": [_pod("old-x", "gone")]}, _placement("a"))


_STATES = st.sampled_from(["none", "old", "old-unavailable", "new", "new-unavailable", "both", "both-new-ready"])


def _node_pods_for(state: str, node: str) -> list[dict[str, Any]]:
    return {
        "none": [],
        "old": [_pod(f"old-{node}", node)],
        "old-unavailable": [_pod(f"old-{node}", node, ready_for=None)],
        "new": [_pod(f"new-{node}", node, NEW)],
        "new-unavailable": [_pod(f"new-{node}", node, NEW, ready_for=None)],
        "both": [_pod(f"old-{node}", node), _pod(f"new-{node}", node, NEW, ready_for=None)],
        "both-new-ready": [_pod(f"old-{node}", node), _pod(f"new-{node}", node, NEW)],
    }[state]


@settings(max_examples=200, deadline=None)
@given(states=st.lists(_STATES, min_size=1, max_size=8), surge=st.integers(1, 4))
def test_surge_never_removes_the_last_available_pod(states: list[str], surge: int) -> None:
    nodes = [f"n{i}" for i in range(len(states))]
    node_pods = {n: _node_pods_for(s, n) for n, s in zip(nodes, states, strict=True)}
    to_delete, to_create = _plan(_ds(0, surge), node_pods, _placement(*nodes))
    for node, state in zip(nodes, states, strict=True):
        if f"old-{node}" in to_delete and state != "old-unavailable":
            assert state == "both-new-ready", (node, state)
        assert f"new-{node}" not in to_delete
    surging_now = sum(1 for s in states if s == "both")
    fresh = [n for n, s in zip(nodes, states, strict=True) if s == "old" and n in to_create]
    assert surging_now + len(fresh) <= max(surge, surging_now)


def test_status_counts_each_node_by_its_oldest_pod() -> None:
    ds = _ds(min_ready=60)
    node_pods = {
        "a": [_pod("new-a", "a", NEW, ready_for=100, created=5), _pod("old-a", "a", OLD, ready_for=None, created=1)],
        "b": [_pod("new-b", "b", NEW, ready_for=10)],
        "c": [_pod("old-c", "c", OLD)],
        "x": [_pod("old-x", "x", OLD)],
    }
    placement = {**_placement("a", "b", "c", "d"), "x": (False, False)}
    counts = daemon_set_status(ds, node_pods, placement, NEW, None, NOW).as_status()
    assert counts == {"desiredNumberScheduled": 4, "currentNumberScheduled": 3, "numberMisscheduled": 1,
                      "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 1, "numberUnavailable": 3}
