"""The node lifecycle controller on a FakeClock against an in-memory API: health, NoExecute tainting paced per
zone (after upstream's TestMonitorNodeHealth*, TestApplyNoExecuteTaints, zone disruption tests),
condition taints (TestTaintsNodeByCondition) and bad input."""

from __future__ import annotations

from typing import Any

import pytest

from bench.walks import StoreWalks
from controller_manager.api.meta import format_time
from controller_manager.api.resources import NODES, PODS
from controller_manager.controllers.nodelifecycle import NodeLifecycleController

from .fakes import T0, FakeClient, Recorded, build, node, pod, seed

OPTIONS = {"node_monitor_grace_period": 50.0, "node_startup_grace_period": 60.0, "node_eviction_rate": 0.1,
           "secondary_node_eviction_rate": 0.01, "large_cluster_size_threshold": 50,
           "unhealthy_zone_threshold": 0.55}


def taints(client: FakeClient, name: str) -> list[tuple[str, str]]:
    obj = client.objects[("nodes", name)]
    return [(t["key"], t["effect"]) for t in (obj.get("spec") or {}).get("taints") or ()]


def heartbeat(ctrl: NodeLifecycleController, client: FakeClient, *names: str, status: str = "True") -> None:
    """The kubelets of ``names`` post status now (server and cache)."""
    now = ctrl.clock.now()
    for name in names:
        current = client.objects[("nodes", name)]
        conditions = [c for c in current["status"]["conditions"] if c["type"] != "Ready"]
        old = next((c for c in current["status"]["conditions"] if c["type"] == "Ready"), {})
        since = old.get("lastTransitionTime") if old.get("status") == status else format_time(now)
        conditions.append({"type": "Ready", "status": status, "lastHeartbeatTime": format_time(now),
                           "lastTransitionTime": since, "reason": "KubeletReady", "message": "ok"})
        seed(ctrl, client, NODES, {**current, "status": {**current["status"], "conditions": conditions}})


def make(nodes: list[dict[str, Any]], options: dict[str, Any] | None = None
         ) -> tuple[NodeLifecycleController, FakeClient, Any, Recorded]:
    ctrl, client, clock, events = build(NodeLifecycleController, {**OPTIONS, **(options or {})})
    seed(ctrl, client, NODES, *nodes)
    return ctrl, client, clock, events


async def tick(ctrl: NodeLifecycleController, clock: Any, seconds: float, *, alive: tuple[str, ...] = ()) -> None:
    """Advance time, let ``alive`` nodes heartbeat, run a monitor pass and a NoExecute tainting pass."""
    clock.advance(seconds)
    heartbeat(ctrl, ctrl.client, *alive)  # type: ignore[arg-type]
    await ctrl.monitor_node_health()
    await ctrl.do_no_execute_tainting_pass()


async def test_silent_node_goes_unknown_is_tainted_and_its_pods_marked_not_ready() -> None:
    ctrl, client, clock, events = make([node("node-1"), node("node-2"), node("node-3")])
    seed(ctrl, client, PODS, pod("p1", "node-1"), pod("p2", "node-2"))
    await ctrl.monitor_node_health()
    assert events.reasons().count("RegisteredNode") == 3
    assert ("node-1", "Normal", "RegisteredNode", "Node node-1 event: Registered Node node-1 in Controller") \
        in events.events
    await tick(ctrl, clock, 30, alive=("node-2", "node-3"))
    assert client.verbs("nodes") == []
    await tick(ctrl, clock, 21, alive=("node-2", "node-3"))  # 51 s without a heartbeat from node-1

    written = client.objects[("nodes", "node-1")]["status"]["conditions"]
    ready = next(c for c in written if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert ("node-1", "Normal", "NodeNotReady", "Node node-1 status is now: NodeNotReady") in events.events
    p1 = client.objects[("pods", "default/p1")]
    assert next(c for c in p1["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    assert ("p1", "Warning", "NodeNotReady", "Node is not ready") in events.events
    assert next(c for c in client.objects[("pods", "default/p2")]["status"]["conditions"])["status"] == "True"
    # The pass that wrote Unknown acted on the Ready it observed (True); the next one queues and taints it.
    assert taints(client, "node-1") == []
    await tick(ctrl, clock, 5, alive=("node-2", "node-3"))
    assert taints(client, "node-1") == [("node.kubernetes.io/unreachable", "NoExecute")]
    added = client.objects[("nodes", "node-1")]["spec"]["taints"][0]["timeAdded"]
    assert added == format_time(clock.now())
    # The node update runs the condition pass: Ready Unknown -> unreachable:NoSchedule too.
    await ctrl.do_no_schedule_tainting_pass("node-1")
    assert sorted(taints(client, "node-1")) == [("node.kubernetes.io/unreachable", "NoExecute"),
                                                ("node.kubernetes.io/unreachable", "NoSchedule")]

    # A later pass changes nothing more (one status write, one taint per outage).
    writes = len(client.writes)
    await tick(ctrl, clock, 5, alive=("node-2", "node-3"))
    assert len(client.writes) == writes

    # The kubelet comes back: NoExecute taints go at once, the condition pass drops the NoSchedule one.
    await tick(ctrl, clock, 5, alive=("node-1", "node-2", "node-3"))
    assert taints(client, "node-1") == [("node.kubernetes.io/unreachable", "NoSchedule")]
    await ctrl.do_no_schedule_tainting_pass("node-1")
    assert taints(client, "node-1") == []


async def test_not_ready_kubelet_gets_not_ready_taint_and_swaps_to_unreachable() -> None:
    ctrl, client, clock, _events = make([node("node-1"), node("node-2")])
    await ctrl.monitor_node_health()
    await tick(ctrl, clock, 5, alive=("node-2",))
    heartbeat(ctrl, client, "node-1", status="False")
    await tick(ctrl, clock, 5, alive=("node-2",))
    assert taints(client, "node-1") == [("node.kubernetes.io/not-ready", "NoExecute")]
    # Silent for the grace period: Unknown, and the not-ready taint is swapped for unreachable at once.
    await tick(ctrl, clock, 51, alive=("node-2",))
    await tick(ctrl, clock, 5, alive=("node-2",))
    assert taints(client, "node-1") == [("node.kubernetes.io/unreachable", "NoExecute")]
    assert client.objects[("nodes", "node-1")]["spec"]["taints"][0]["timeAdded"] == format_time(clock.now())


async def test_startup_grace_for_a_node_that_never_posted_status() -> None:
    ctrl, client, clock, _events = make([node("new", ready=None, created=T0), node("old")])
    await ctrl.monitor_node_health()
    await tick(ctrl, clock, 55, alive=("old",))
    assert "Ready" not in {c["type"] for c in client.objects[("nodes", "new")]["status"]["conditions"]}
    await tick(ctrl, clock, 10, alive=("old",))
    await tick(ctrl, clock, 5, alive=("old",))
    conds = {c["type"]: c for c in client.objects[("nodes", "new")]["status"]["conditions"]}
    assert conds["Ready"]["reason"] == "NodeStatusNeverUpdated"
    assert taints(client, "new") == [("node.kubernetes.io/unreachable", "NoExecute")]


def zone_nodes(zone: str, count: int) -> list[dict[str, Any]]:
    return [node(f"{zone}-{i}", zone=zone) for i in range(count)]


def tainted(client: FakeClient, names: list[str]) -> list[str]:
    return [n for n in names if ("node.kubernetes.io/unreachable", "NoExecute") in taints(client, n)]


async def test_fully_disrupted_zone_is_tainted_at_the_normal_rate_while_another_zone_is_healthy() -> None:
    down = zone_nodes("zone-a", 4)
    up = zone_nodes("zone-b", 2)
    ctrl, client, clock, _events = make(down + up)
    names = [n["metadata"]["name"] for n in down]
    alive = tuple(n["metadata"]["name"] for n in up)
    await ctrl.monitor_node_health()
    await tick(ctrl, clock, 51, alive=alive)
    await tick(ctrl, clock, 5, alive=alive)
    # 0.1 nodes/s with a burst of 1: one now, then one per 10 s.
    assert len(tainted(client, names)) == 1
    for expected in (1, 2, 2, 3, 3, 4, 4):
        clock.advance(5)
        await ctrl.do_no_execute_tainting_pass()
        assert len(tainted(client, names)) == expected


@pytest.mark.parametrize(("large_threshold", "after_200s"), [
    pytest.param(50, 0, id="small zone: partial disruption stops tainting"),
    pytest.param(5, 3, id="large zone: secondary rate 0.01/s"),
])
async def test_partially_disrupted_zone(large_threshold: int, after_200s: int) -> None:
    nodes = zone_nodes("zone-a", 10)
    ctrl, client, clock, _events = make(nodes, {"large_cluster_size_threshold": large_threshold})
    names = [n["metadata"]["name"] for n in nodes]
    down, alive = names[:6], tuple(names[6:])  # 6 of 10 >= 0.55
    await ctrl.monitor_node_health()
    await tick(ctrl, clock, 51, alive=alive)
    # The zone went partial in the pass that saw the nodes go Unknown, before any was queued: from then on
    # at most 0.01 nodes/s (one at once with the fresh bucket's token, one per 100 s), or none in a small zone.
    for _ in range(45):
        await tick(ctrl, clock, 5, alive=alive)
    assert len(tainted(client, down)) == after_200s


async def test_master_disruption_mode_when_every_zone_is_down() -> None:
    nodes = zone_nodes("zone-a", 3) + zone_nodes("zone-b", 3)
    ctrl, client, clock, _events = make(nodes)
    names = [n["metadata"]["name"] for n in nodes]
    await ctrl.monitor_node_health()
    # zone-a goes down first: its nodes get tainted at the normal rate.
    await tick(ctrl, clock, 30, alive=tuple(names[3:]))
    await tick(ctrl, clock, 21, alive=tuple(names[3:]))
    await tick(ctrl, clock, 5, alive=tuple(names[3:]))
    assert tainted(client, names) == ["zone-a-0"]
    # Then zone-b: every zone fully disrupted -> all NoExecute taints removed and tainting stops.
    await tick(ctrl, clock, 60)
    assert tainted(client, names) == []
    for _ in range(10):
        await tick(ctrl, clock, 10)
    assert tainted(client, names) == []
    assert set(ctrl.zone_states.values()) == {"FullDisruption"}
    # One node back: out of disruption mode. Tainting resumes at the normal rate per zone, starting from a
    # drained bucket (the swap from "never" keeps it drained): nothing for 10 s, then one node per zone.
    await tick(ctrl, clock, 5, alive=("zone-b-0",))
    assert tainted(client, names) == []
    assert ctrl.zone_states == {"region-1:\x00:zone-a": "FullDisruption", "region-1:\x00:zone-b": "Normal"}
    await tick(ctrl, clock, 5, alive=("zone-b-0",))
    assert tainted(client, names) == []
    await tick(ctrl, clock, 5, alive=("zone-b-0",))
    assert len(tainted(client, names)) == 2
    assert "zone-b-0" not in tainted(client, names)


COND_FALSE = {"type": "MemoryPressure", "status": "False"}


@pytest.mark.parametrize(("the_node", "expected"), [
    pytest.param(node("n"), [], id="healthy"),
    pytest.param(node("n", conditions=[{"type": "MemoryPressure", "status": "True"},
                                       {"type": "DiskPressure", "status": "True"},
                                       {"type": "PIDPressure", "status": "True"}]),
                 [("node.kubernetes.io/memory-pressure", "NoSchedule"), ("node.kubernetes.io/disk-pressure",
                                                                         "NoSchedule"),
                  ("node.kubernetes.io/pid-pressure", "NoSchedule")], id="pressure"),
    pytest.param(node("n", conditions=[{"type": "NetworkUnavailable", "status": "True"}]),
                 [("node.kubernetes.io/network-unavailable", "NoSchedule")], id="network unavailable"),
    pytest.param(node("n", ready="False"), [("node.kubernetes.io/not-ready", "NoSchedule")], id="not ready"),
    pytest.param(node("n", ready="Unknown"), [("node.kubernetes.io/unreachable", "NoSchedule")], id="unknown"),
    pytest.param(node("n", unschedulable=True), [("node.kubernetes.io/unschedulable", "NoSchedule")],
                 id="unschedulable"),
    pytest.param(node("n", taints=[{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"},
                                   {"key": "user", "value": "x", "effect": "NoSchedule"}],
                      conditions=[COND_FALSE]),
                 [("user", "NoSchedule")], id="stale condition taint removed, others kept"),
])
async def test_taints_node_by_condition(the_node: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    ctrl, client, _clock, _events = make([the_node])
    await ctrl.do_no_schedule_tainting_pass("n")
    assert taints(client, "n") == expected


async def test_beta_labels_follow_stable_ones() -> None:
    ctrl, client, _clock, _events = make([node("n", labels={"kubernetes.io/os": "linux",
                                                          "beta.kubernetes.io/os": "windows",
                                                          "kubernetes.io/arch": "amd64"})])
    await ctrl.reconcile_node_labels("n")
    labels = client.objects[("nodes", "n")]["metadata"]["labels"]
    assert (labels["beta.kubernetes.io/os"], labels["beta.kubernetes.io/arch"]) == ("linux", "amd64")


async def test_pod_bound_to_a_not_ready_node_is_marked_not_ready() -> None:
    ctrl, client, clock, _events = make([node("node-1"), node("node-2")])
    await ctrl.monitor_node_health()
    await tick(ctrl, clock, 51, alive=("node-2",))
    seed(ctrl, client, PODS, pod("late", "node-1"), pod("fine", "node-2"))
    await ctrl.process_pod("default/late")
    await ctrl.process_pod("default/fine")
    assert client.verbs("pods") == [("patch/status", "default/late")]


async def test_failed_pod_update_is_retried_on_the_next_pass() -> None:
    from controller_manager.client.errors import ServerError

    ctrl, client, clock, _events = make([node("node-1"), node("node-2")])
    seed(ctrl, client, PODS, pod("p1", "node-1"))
    await ctrl.monitor_node_health()
    client.fail[("patch", "pods")] = ServerError(500, "InternalError", "boom")
    await tick(ctrl, clock, 51, alive=("node-2",))
    assert "node-1" in ctrl.nodes_to_retry
    del client.fail[("patch", "pods")]
    await tick(ctrl, clock, 5, alive=("node-2",))
    assert "node-1" not in ctrl.nodes_to_retry
    p1 = client.objects[("pods", "default/p1")]
    assert next(c for c in p1["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"


@pytest.mark.parametrize("bad", [
    pytest.param({"spec": {"taints": ["garbage", {"key": "k"}, None]}}, id="malformed taints"),
    pytest.param({"status": {"conditions": ["garbage", {"type": "Ready"}, 7]}}, id="malformed conditions"),
    pytest.param({"status": {"conditions": "nope"}, "spec": {"taints": "nope"}}, id="wrong types"),
    pytest.param({"metadata": {"name": "bad", "labels": None}}, id="no labels"),
])
async def test_bad_nodes_are_survived(bad: dict[str, Any]) -> None:
    base = node("bad")
    broken = {**base, **{k: {**base.get(k, {}), **v} for k, v in bad.items()}}
    ctrl, _client, clock, events = make([broken, node("good")])
    await ctrl.monitor_node_health()
    await ctrl.do_no_schedule_tainting_pass("bad")
    await tick(ctrl, clock, 51, alive=("good",))
    await ctrl.do_no_schedule_tainting_pass("bad")
    await ctrl.reconcile_node_labels("bad")
    assert ("good", "Normal", "RegisteredNode", "Node good event: Registered Node good in Controller") in events.events


async def test_a_monitor_pass_over_healthy_nodes_walks_no_pods() -> None:
    # A pass reads each node's pods only when it must mark them not ready: over healthy nodes with 50 pods each
    # it walks the node list alone (it used to list every node's pods, every pod in the cluster, each 5 s).
    names = [f"node-{i}" for i in range(4)]
    ctrl, client, clock, _ = make([node(n) for n in names])
    seed(ctrl, client, PODS, *(pod(f"p{n}-{i}", n) for n in names for i in range(50)))
    await ctrl.monitor_node_health()
    clock.advance(5)
    heartbeat(ctrl, client, *names)
    with StoreWalks() as walks:
        await ctrl.monitor_node_health()
    assert walks.objects == len(names)
    assert client.verbs("pods") == []
