"""The taint eviction controller on a FakeClock against an in-memory API, after upstream's taint_eviction_test.go
tables (TestCreatePod, TestUpdatePod, TestUpdateNode, TestDeletePod) plus restart-surviving deadlines."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import NODES, PODS
from controller_manager.controllers.tainteviction import TaintEvictionController
from controller_manager.controllers.tainteviction.controller import (
    eviction_start,
    get_matching_tolerations,
    get_min_toleration_time,
)
from tests.controllers.nodelifecycle.fakes import T0, FakeClient, build, cache, node, pod, seed

NOEXEC = {"key": "testTaint1", "value": "test1", "effect": "NoExecute"}
NOEXEC2 = {"key": "testTaint2", "value": "test2", "effect": "NoExecute"}
NOSCHED = {"key": "testTaint1", "value": "test1", "effect": "NoSchedule"}


def tol(key: str = "testTaint1", value: str = "test1", seconds: int | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": "Equal", "value": value, "effect": "NoExecute"}
    if seconds is not None:
        t["tolerationSeconds"] = seconds
    return t


async def drain(ctrl: TaintEvictionController) -> None:
    while len(ctrl.queue):
        key = await ctrl.queue.get()
        assert key is not None
        try:
            try:
                await ctrl.sync(key)
            except Exception:
                ctrl.queue.add_rate_limited(key)
        finally:
            ctrl.queue.done(key)


def deleted(client: FakeClient) -> list[str]:
    return [key for verb, key in client.verbs("pods") if verb == "delete"]


def make(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[TaintEvictionController, FakeClient, Any,
                                                                          Any]:
    ctrl, client, clock, events = build(TaintEvictionController)
    seed(ctrl, client, NODES, *nodes)
    seed(ctrl, client, PODS, *pods)
    return ctrl, client, clock, events


@pytest.mark.parametrize(("the_pod", "taints", "expect_delete"), [
    pytest.param(pod("p", ""), [NOEXEC], False, id="not scheduled"),
    pytest.param(pod("p", "n"), [], False, id="scheduled on untainted node"),
    pytest.param(pod("p", "n"), [NOEXEC], True, id="scheduled on tainted node"),
    pytest.param(pod("p", "n"), [NOSCHED], False, id="NoSchedule taints do not evict"),
    pytest.param(pod("p", "n", tolerations=[tol(seconds=100)]), [NOEXEC], False, id="finite toleration"),
    pytest.param(pod("p", "n", tolerations=[tol()]), [NOEXEC], False, id="infinite toleration"),
    pytest.param(pod("p", "n", tolerations=[tol(key="other")]), [NOEXEC], True, id="toleration of another taint"),
    pytest.param(pod("p", "n", tolerations=[tol()]), [NOEXEC, NOEXEC2], True, id="only one of two tolerated"),
    pytest.param(pod("p", "n", tolerations=[tol(seconds=0)]), [NOEXEC], True, id="zero toleration seconds"),
])
async def test_create_pod(the_pod: dict[str, Any], taints: list[dict[str, Any]], expect_delete: bool) -> None:
    ctrl, client, _clock, events = make([node("n", taints=taints)], [the_pod])
    ctrl.handle_node_update("n")
    ctrl.handle_pod_update("default/p")
    await drain(ctrl)
    assert (deleted(client) == ["default/p"]) is expect_delete
    if expect_delete:
        assert ("p", "Normal", "TaintManagerEviction", "Marking for deletion Pod default/p") in events.events
        patch = next(body for verb, plural, key, body in client.writes if verb == "patch/status")
        cond = patch["status"]["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
            "DisruptionTarget", "True", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")
        assert next(opts for verb, plural, key, opts in client.writes if verb == "delete")["uid"] == "uid-p"


async def test_finite_toleration_deletes_when_it_runs_out() -> None:
    ctrl, client, clock, _events = make([node("n")], [pod("p", "n", tolerations=[tol(seconds=100)])])
    ctrl.handle_node_update("n")
    tainted = node("n", taints=[{**NOEXEC, "timeAdded": format_time(clock.now())}])
    seed(ctrl, client, NODES, tainted)
    ctrl.handle_node_update("n")
    clock.advance(99)
    await drain(ctrl)
    assert deleted(client) == []
    clock.advance(1)
    await drain(ctrl)
    assert deleted(client) == ["default/p"]


async def test_removing_the_taint_cancels_with_an_event() -> None:
    taint = {**NOEXEC, "timeAdded": format_time(T0)}
    ctrl, client, clock, events = make([node("n", taints=[taint])], [pod("p", "n", tolerations=[tol(seconds=100)])])
    ctrl.handle_node_update("n")
    clock.advance(50)
    seed(ctrl, client, NODES, node("n"))
    ctrl.handle_node_update("n")
    assert ("p", "Normal", "TaintManagerEviction", "Cancelling deletion of Pod default/p") in events.events
    clock.advance(100)
    await drain(ctrl)
    assert deleted(client) == []


async def test_pod_update_that_tolerates_forever_cancels() -> None:
    taint = {**NOEXEC, "timeAdded": format_time(T0)}
    ctrl, client, clock, events = make([node("n", taints=[taint])], [pod("p", "n", tolerations=[tol(seconds=100)])])
    ctrl.handle_node_update("n")
    seed(ctrl, client, PODS, pod("p", "n", tolerations=[tol()]))
    ctrl.handle_pod_update("default/p")
    clock.advance(200)
    await drain(ctrl)
    assert deleted(client) == []
    assert events.reasons() == ["TaintManagerEviction"]


async def test_deleted_pod_cancels() -> None:
    taint = {**NOEXEC, "timeAdded": format_time(T0)}
    ctrl, client, clock, _events = make([node("n", taints=[taint])], [pod("p", "n", tolerations=[tol(seconds=100)])])
    ctrl.handle_node_update("n")
    ctrl.pod_informer.store._remove("default/p")
    ctrl.handle_pod_update("default/p")
    clock.advance(200)
    await drain(ctrl)
    assert deleted(client) == []


async def test_adding_an_untolerated_taint_deletes_at_once() -> None:
    ctrl, client, _clock, _events = make([node("n", taints=[NOEXEC])], [pod("p", "n", tolerations=[tol(seconds=300)])])
    ctrl.handle_node_update("n")
    await drain(ctrl)
    assert deleted(client) == []
    seed(ctrl, client, NODES, node("n", taints=[NOEXEC, NOEXEC2]))
    ctrl.handle_node_update("n")
    await drain(ctrl)
    assert deleted(client) == ["default/p"]


async def test_deadline_survives_a_restart_through_time_added() -> None:
    # The taint was added 90 s before this (fresh) controller started; the pod tolerates it for 100 s.
    taint = {**NOEXEC, "timeAdded": format_time(T0 - 90)}
    ctrl, client, clock, _events = make([node("n", taints=[taint])],
                                       [pod("p", "n", tolerations=[tol(seconds=100)], created=T0 - 600)])
    ctrl.handle_node_update("n")
    clock.advance(9)
    await drain(ctrl)
    assert deleted(client) == []
    clock.advance(1)
    await drain(ctrl)
    assert deleted(client) == ["default/p"]


async def test_failed_deletes_are_retried_then_given_up() -> None:
    from controller_manager.client.errors import ServerError

    ctrl, client, clock, events = make([node("n", taints=[NOEXEC])], [pod("p", "n")])
    client.fail[("delete", "pods")] = ServerError(500, "InternalError", "boom")
    ctrl.handle_node_update("n")
    for _ in range(10):
        clock.advance(2)
        await drain(ctrl)
    assert [v for v, _ in client.verbs("pods")].count("delete") == 5
    assert ctrl.evictions.get_worker("default/p") is None
    assert events.reasons() == ["TaintManagerEviction"]  # one "Marking for deletion", not one per try


async def test_pod_already_gone_is_done() -> None:
    ctrl, client, _clock, _events = make([node("n", taints=[NOEXEC])], [pod("p", "n")])
    del client.objects[("pods", "default/p")]
    cache(ctrl.pod_informer, pod("p", "n"))
    ctrl.handle_node_update("n")
    await drain(ctrl)
    assert ctrl.evictions.get_worker("default/p") is None


@pytest.mark.parametrize(("tolerations", "expected"), [
    pytest.param([], 0.0, id="none"),
    pytest.param([tol()], -1.0, id="forever"),
    pytest.param([tol(seconds=10), tol(seconds=5), tol()], 5.0, id="shortest"),
    pytest.param([tol(seconds=10), tol(seconds=-3)], 0.0, id="negative is zero"),
])
def test_min_toleration_time(tolerations: list[dict[str, Any]], expected: float) -> None:
    assert get_min_toleration_time(tolerations) == expected


def test_matching_tolerations() -> None:
    assert get_matching_tolerations([], []) == (True, [])
    assert get_matching_tolerations([NOEXEC], []) == (False, [])
    assert get_matching_tolerations([NOEXEC, NOEXEC2], [tol(), tol(key="testTaint2", value="test2")])[0]
    assert get_matching_tolerations([NOEXEC, NOEXEC2], [tol()]) == (False, [])


@pytest.mark.parametrize(("taints", "created", "expected"), [
    pytest.param([NOEXEC], T0 - 600, T0, id="no timeAdded: now"),
    pytest.param([{**NOEXEC, "timeAdded": format_time(T0 - 90)}], T0 - 600, T0 - 90, id="from timeAdded"),
    pytest.param([{**NOEXEC, "timeAdded": format_time(T0 - 90)}, {**NOEXEC2, "timeAdded": format_time(T0 - 30)}],
                 T0 - 600, T0 - 90, id="earliest taint"),
    pytest.param([{**NOEXEC, "timeAdded": format_time(T0 - 90)}], T0 - 20, T0 - 20, id="pod came later"),
    pytest.param([{**NOEXEC, "timeAdded": format_time(T0 + 90)}], T0 - 600, T0, id="future timeAdded: now"),
    pytest.param([{**NOEXEC, "timeAdded": "garbage"}], T0 - 600, T0, id="bad timeAdded: now"),
])
def test_eviction_start(taints: list[dict[str, Any]], created: float, expected: float) -> None:
    assert eviction_start(taints, pod("p", "n", created=created), T0) == expected
