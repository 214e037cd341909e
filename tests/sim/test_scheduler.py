"""kube-sim's scheduler against an in-process API server: binding, spreading, events, the Unschedulable
condition, retries when capacity frees up, priorities, gates and speed (the filters themselves are
tabled in test_predicates.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller_manager.api.resources import EVENTS, NODES, PODS, PRIORITYCLASSES
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.kubelet import KubeletConfig, node_object
from controller_manager.sim.scheduler import Scheduler

# ----------------------------------------------------------------------------- the actor, in-process


async def eventually(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(0.002)


class Cluster:
    def __init__(self, api: ApiServer, scheduler: Scheduler) -> None:
        self.api = api
        self.scheduler = scheduler
        self.index = 0

    def add_node(self, name: str, **config: Any) -> None:
        self.api.create(NODES, node_object(name, self.index, "zone-a", KubeletConfig(**config), time.time()))
        self.index += 1

    def add_pod(self, name: str, **spec: Any) -> None:
        self.api.create(PODS, {"metadata": {"name": name, "namespace": "default"},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}})

    def node_of(self, name: str) -> str | None:
        return self.api.get(PODS, "default", name)["spec"].get("nodeName")

    def scheduled_condition(self, name: str) -> dict[str, Any] | None:
        for c in self.api.get(PODS, "default", name)["status"].get("conditions") or ():
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list(EVENTS, "default")[0] if e["reason"] == reason]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    api = ApiServer(FakeClock())
    scheduler = Scheduler(api, api.clock)
    task = asyncio.create_task(scheduler.run(), name="test-scheduler")
    try:
        yield Cluster(api, scheduler)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        api.close_all_watches()


async def test_binds_spreads_and_records_events(cluster: Cluster) -> None:
    for name in ("n1", "n2", "n3"):
        cluster.add_node(name)
    for i in range(6):
        cluster.add_pod(f"p{i}")
    await eventually(lambda: all(cluster.node_of(f"p{i}") for i in range(6)))
    assert sorted(cluster.node_of(f"p{i}") or "" for i in range(6)) == ["n1", "n1", "n2", "n2", "n3", "n3"]
    assert cluster.node_of("p0") == "n1"  # ties broken by name
    pod = cluster.api.get(PODS, "default", "p0")
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in pod["status"]["conditions"])
    scheduled = {e["involvedObject"]["name"]: e for e in cluster.events("Scheduled")}
    assert scheduled["p0"]["message"] == "Successfully assigned default/p0 to n1"
    assert scheduled["p0"]["type"] == "Normal"
    assert scheduled["p0"]["source"] == {"component": "default-scheduler"}
    assert scheduled["p0"]["involvedObject"]["uid"] == pod["metadata"]["uid"]


async def test_unschedulable_condition_event_and_retry_on_node_change(cluster: Cluster) -> None:
    cluster.add_node("n1", cpu="1")
    cluster.add_pod("big", **{"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}]})
    cond = await eventually(lambda: cluster.scheduled_condition("big"))
    assert cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                               "1 No preemption victims found for incoming pod.")
    assert cond["lastTransitionTime"]
    failed = await eventually(lambda: cluster.events("FailedScheduling"))
    assert failed[0]["type"] == "Warning"
    assert failed[0]["message"] == cond["message"]
    cluster.add_node("n2", cpu="8")
    await eventually(lambda: cluster.node_of("big") == "n2")
    assert len(cluster.events("FailedScheduling")) == 1  # one event per distinct message


async def test_freed_capacity_retries_pending_pods(cluster: Cluster) -> None:
    cluster.add_node("n1", pods="1")
    cluster.add_pod("first")
    await eventually(lambda: cluster.node_of("first") == "n1")
    cluster.add_pod("second")
    cond = await eventually(lambda: cluster.scheduled_condition("second"))
    assert cond["message"].startswith("0/1 nodes are available: 1 Too many pods.")
    cluster.api.delete(PODS, "default", "first", grace_period_seconds=0)
    await eventually(lambda: cluster.node_of("second") == "n1")


async def test_terminal_pods_do_not_count(cluster: Cluster) -> None:
    cluster.add_node("n1", pods="1")
    cluster.add_pod("done")
    await eventually(lambda: cluster.node_of("done") == "n1")
    cluster.add_pod("next")
    await eventually(lambda: cluster.scheduled_condition("next"))
    cluster.api.patch(PODS, "default", "done", {"status": {"phase": "Succeeded"}}, "merge", subresource="status")
    await eventually(lambda: cluster.node_of("next") == "n1")


async def test_daemon_style_pod_lands_on_its_node_and_tolerations_matter(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_node("n2")
    cluster.api.patch(NODES, None, "n2", {"spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}},
                      "merge")
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}
    cluster.add_pod("daemon", affinity=affinity)
    cond = await eventually(lambda: cluster.scheduled_condition("daemon"))
    assert cond["message"].startswith("0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                                      "1 node(s) had untolerated taint {dedicated: }.")
    cluster.add_pod("daemon-tolerant", affinity=affinity, tolerations=[{"operator": "Exists"}])
    await eventually(lambda: cluster.node_of("daemon-tolerant") == "n2")


async def test_other_schedulers_and_gated_pods_are_left_alone(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_pod("custom", schedulerName="my-scheduler")
    cluster.add_pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    cluster.add_pod("normal")
    await eventually(lambda: cluster.node_of("normal") == "n1")
    cond = await eventually(lambda: cluster.scheduled_condition("gated"))
    assert cond["reason"] == "SchedulingGated"
    assert cluster.node_of("custom") is None
    assert cluster.scheduled_condition("custom") is None
    cluster.api.patch(PODS, "default", "gated", {"spec": {"schedulingGates": None}}, "merge")
    await eventually(lambda: cluster.node_of("gated") == "n1")


async def test_higher_priority_first(cluster: Cluster) -> None:
    for name, value in (("low", 1), ("high", 100)):  # a pod's priority comes from its class (Priority admission)
        cluster.api.create(PRIORITYCLASSES, {"metadata": {"name": name}, "value": value})
    cluster.add_pod("low", priorityClassName="low")
    cluster.add_pod("high", priorityClassName="high")
    await eventually(lambda: cluster.scheduled_condition("low") and cluster.scheduled_condition("high"))
    assert cluster.scheduled_condition("high")["message"] == "no nodes available to schedule pods"  # type: ignore[index]
    cluster.add_node("n1", pods="1")
    await eventually(lambda: cluster.node_of("high") == "n1")
    assert cluster.node_of("low") is None


async def test_a_thousand_pods_bind_fast(cluster: Cluster) -> None:
    for i in range(5):
        cluster.add_node(f"n{i}", pods="300")
    start = time.perf_counter()
    for i in range(1000):
        cluster.add_pod(f"p{i}")
    await eventually(lambda: cluster.scheduler.scheduled == 1000, timeout=30)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, elapsed
    per_node = {f"n{i}": 0 for i in range(5)}
    for p in cluster.api.list(PODS, "default")[0]:
        per_node[p["spec"]["nodeName"]] += 1
    assert set(per_node.values()) == {200}


async def test_large_clusters_sample_nodes_where_the_last_pod_stopped(cluster: Cluster) -> None:
    # 250 nodes: each pod's filtering stops at 120 feasible ones (kube-scheduler's adaptive percentage: 48%),
    # starting where the previous pod's stopped; the best of those wins (the emptiest, then the first name).
    for i in range(250):
        cluster.add_node(f"n{i:03d}", pods="2")
    for i in range(4):
        cluster.add_pod(f"p{i}")
        await eventually(lambda i=i: cluster.node_of(f"p{i}"))
    assert [cluster.node_of(f"p{i}") for i in range(4)] == ["n000", "n120", "n001", "n110"]
    for i in range(4, 501):
        cluster.add_pod(f"p{i}")
    await eventually(lambda: cluster.scheduler.scheduled == 500 and cluster.scheduled_condition("p500"), timeout=30)
    # A pod that fits nowhere was checked against every node, not a sample.
    assert cluster.scheduled_condition("p500")["message"].startswith(  # type: ignore[index]
        "0/250 nodes are available: 250 Too many pods.")
