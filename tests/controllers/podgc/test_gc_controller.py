"""The pod garbage collector on a FakeClock against an in-memory API, after upstream's gc_controller_test.go
tables (TestGCTerminated, TestGCOrphaned, TestGCUnscheduledTerminating, TestGCTerminating)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.walks import StoreWalks
from controller_manager.api.resources import NODES, PODS
from controller_manager.controllers.podgc import PodGCController
from tests.controllers.nodelifecycle.fakes import T0, FakeClient, build, node, pod, seed


def deleted(client: FakeClient) -> list[str]:
    return sorted(key.split("/", 1)[1] for verb, key in client.verbs("pods") if verb == "delete")


def status_patches(client: FakeClient) -> dict[str, Any]:
    return {key.split("/", 1)[1]: body for verb, plural, key, body in client.writes if verb == "patch/status"}


def make(threshold: int, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[PodGCController,
                                                                                            FakeClient, Any]:
    ctrl, client, clock, _ = build(PodGCController, {"terminated_pod_gc_threshold": threshold})
    seed(ctrl, client, NODES, *nodes)
    seed(ctrl, client, PODS, *pods)
    return ctrl, client, clock


def terminated(name: str, phase: str = "Failed", age: float = 0.0, reason: str | None = None) -> dict[str, Any]:
    return pod(name, "node", phase=phase, created=T0 - 1000 + age, reason=reason)


@pytest.mark.parametrize(("pods", "threshold", "expected"), [
    pytest.param([terminated("a", age=1), terminated("b", "Succeeded", age=2)], 1, ["a"], id="oldest first"),
    pytest.param([terminated("a", age=1), terminated("b", "Succeeded", age=2)], 0, [], id="threshold 0 disables"),
    pytest.param([terminated("a", age=1), terminated("b", age=2)], 5, [], id="below the threshold"),
    pytest.param([terminated("a", age=1), terminated("b", age=2), terminated("c", age=3)], 1, ["a", "b"],
                 id="two over"),
    pytest.param([terminated("a", age=1), terminated("b", age=2), terminated("c", age=3, reason="Evicted")], 2,
                 ["c"], id="evicted first"),
    pytest.param([terminated("a", age=1), pod("r", "node", phase="Running"), pod("p", "node", phase="Pending")],
                 0 + 1, [], id="running and pending pods do not count"),
    pytest.param([terminated("b", age=1), terminated("a", age=1)], 1, ["a"], id="same age: by name"),
])
async def test_gc_terminated(pods: list[dict[str, Any]], threshold: int, expected: list[str]) -> None:
    ctrl, client, _ = make(threshold, [node("node")], pods)
    await ctrl.gc()
    assert deleted(client) == expected
    assert status_patches(client) == {}  # terminal pods are deleted as they are
    assert all(opts.get("grace_period_seconds") == 0 for verb, plural, key, opts in client.writes if verb == "delete")


async def test_gc_orphaned_after_quarantine_and_a_live_check() -> None:
    ctrl, client, clock = make(12500, [node("present")], [pod("a", "gone"), pod("b", "present"),
                                                          pod("c", "late-in-cache")])
    # "late-in-cache" exists on the server but the informer has not seen it yet.
    client.put("nodes", node("late-in-cache"))
    await ctrl.gc()
    assert deleted(client) == []
    clock.advance(20)
    await ctrl.gc()
    assert deleted(client) == []
    clock.advance(20)
    await ctrl.gc()
    assert deleted(client) == ["a"]
    cond = status_patches(client)["a"]["status"]
    assert cond["phase"] == "Failed"
    assert {k: cond["conditions"][0][k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
        "message": "PodGC: node no longer exists"}


async def test_gc_orphaned_node_that_shows_up_is_spared() -> None:
    ctrl, client, clock = make(12500, [], [pod("a", "slow")])
    await ctrl.gc()
    seed(ctrl, client, NODES, node("slow"))
    clock.advance(40)
    await ctrl.gc()
    assert deleted(client) == []


async def test_gc_unscheduled_terminating() -> None:
    ctrl, client, _ = make(12500, [node("node")], [pod("a", "", deleting=True, phase="Pending"),
                                                    pod("b", "", phase="Pending"),
                                                    pod("c", "node", deleting=True)])
    await ctrl.gc()
    assert deleted(client) == ["a"]
    assert status_patches(client)["a"]["status"] == {"phase": "Failed"}


@pytest.mark.parametrize(("the_node", "expected"), [
    pytest.param(node("node", ready="False", taints=[{"key": "node.kubernetes.io/out-of-service",
                                                      "effect": "NoExecute"}]), ["a"], id="out of service"),
    pytest.param(node("node", ready="True", taints=[{"key": "node.kubernetes.io/out-of-service",
                                                     "effect": "NoExecute"}]), [], id="ready node"),
    pytest.param(node("node", ready="False"), [], id="not ready without the taint"),
])
async def test_gc_terminating(the_node: dict[str, Any], expected: list[str]) -> None:
    ctrl, client, _ = make(12500, [the_node], [pod("a", "node", deleting=True), pod("b", "node")])
    await ctrl.gc()
    assert deleted(client) == expected


async def test_failures_are_logged_and_left_for_the_next_pass() -> None:
    from controller_manager.client.errors import ServerError

    ctrl, client, _ = make(1, [node("node")], [terminated("a", age=1), terminated("b", age=2)])
    client.fail[("delete", "pods")] = ServerError(500, "InternalError", "boom")
    await ctrl.gc()
    del client.fail[("delete", "pods")]
    await ctrl.gc()
    assert ("pods", "default/a") not in client.objects


async def test_sync_requeues_every_check_period() -> None:
    ctrl, _, _ = make(12500, [], [])
    result = await ctrl.sync("@gc")
    assert result is not None
    assert result.requeue_after == 20.0


async def test_a_pass_walks_its_candidates_not_every_pod() -> None:
    # 200 running pods on a live node and two candidates: the pass reads the terminated and terminating pods
    # and the node names pods are bound to, never the running pods themselves (O(candidates), not O(pods)).
    running = [pod(f"r{i}", "node", phase="Running") for i in range(200)]
    doomed = terminated("t", age=1)
    ctrl, client, _ = make(1, [node("node")], [*running, doomed, terminated("u", age=2)])
    with StoreWalks() as walks:
        await ctrl.gc()
    assert deleted(client) == ["t"]
    assert walks.objects == 2 + 2  # two terminated pods, one node, one node name pods are bound to
