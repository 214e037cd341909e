"""kube-sim's scheduler with the VolumeBinding plugin, against an in-process API server on a fake clock:
unbound Immediate claims keep a pod pending, WaitForFirstConsumer claims get the selected node or a matching
volume pre-bound on the chosen node, the pod is bound only once its claims are, volume node affinity filters
nodes, and a failed provisioning sends the pod back to scheduling."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from controller_manager.api.resources import (
    EVENTS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    STORAGECLASSES,
)
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer
from controller_manager.sim.kubelet import KubeletConfig, node_object
from controller_manager.sim.scheduler import Scheduler

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"


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
    def __init__(self, api: ApiServer, clock: FakeClock) -> None:
        self.api = api
        self.clock = clock
        self.index = 0

    def add_node(self, name: str, zone: str = "zone-a") -> None:
        self.api.create(NODES, node_object(name, self.index, zone, KubeletConfig(), time.time()))
        self.index += 1

    def add_class(self, name: str, mode: str, provisioner: str = "csi.example.com", **extra: Any) -> None:
        self.api.create(STORAGECLASSES, {"metadata": {"name": name}, "provisioner": provisioner,
                                         "volumeBindingMode": mode, **extra})

    def add_claim(self, name: str, klass: str, size: str = "1Gi", **spec: Any) -> None:
        self.api.create(PERSISTENTVOLUMECLAIMS, {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                     "storageClassName": klass, **spec}})

    def add_volume(self, name: str, klass: str, size: str = "1Gi", node: str | None = None) -> None:
        spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                                "storageClassName": klass, "csi": {"driver": "csi.example.com", "volumeHandle": name}}
        if node is not None:
            spec["local"] = {"path": "/mnt/disks/" + name}
            del spec["csi"]
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        self.api.create(PERSISTENTVOLUMES, {"metadata": {"name": name}, "spec": spec})
        self.set_volume_phase(name, "Available")

    def set_volume_phase(self, name: str, phase: str) -> None:
        volume = self.api.get(PERSISTENTVOLUMES, None, name)
        volume["status"] = {"phase": phase}
        self.api.update(PERSISTENTVOLUMES, volume, subresource="status")

    def add_pod(self, name: str, claim: str) -> None:
        self.api.create(PODS, {"metadata": {"name": name, "namespace": "default"},
                               "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})

    def claim(self, name: str) -> dict[str, Any]:
        return self.api.get(PERSISTENTVOLUMECLAIMS, "default", name)

    def volume(self, name: str) -> dict[str, Any]:
        return self.api.get(PERSISTENTVOLUMES, None, name)

    def node_of(self, name: str) -> str | None:
        return self.api.get(PODS, "default", name)["spec"].get("nodeName")

    def scheduled_condition(self, name: str) -> dict[str, Any] | None:
        for c in self.api.get(PODS, "default", name)["status"].get("conditions") or ():
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.api.list(EVENTS, "default")[0] if e["reason"] == reason]

    def bind_claim(self, claim_name: str, volume_name: str) -> None:
        """What the PV controller does: both sides point at each other, bind-completed."""
        claim = self.claim(claim_name)
        volume = self.volume(volume_name)
        volume["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim_name,
                                      "uid": claim["metadata"]["uid"], "apiVersion": "v1"}
        self.api.update(PERSISTENTVOLUMES, volume)
        self.set_volume_phase(volume_name, "Bound")
        claim = self.claim(claim_name)
        claim["spec"]["volumeName"] = volume_name
        claim["metadata"].setdefault("annotations", {})[BIND_COMPLETED] = "yes"
        self.api.update(PERSISTENTVOLUMECLAIMS, claim)

    async def tick(self, seconds: float = 1.0) -> None:
        await asyncio.sleep(0.01)
        self.clock.advance(seconds)
        await asyncio.sleep(0.01)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    clock = FakeClock()
    api = ApiServer(clock)
    scheduler = Scheduler(api, clock, retry_interval=3600.0)
    task = asyncio.create_task(scheduler.run(), name="test-scheduler")
    try:
        yield Cluster(api, clock)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        api.close_all_watches()


async def test_unbound_immediate_claim_keeps_the_pod_pending_until_bound(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_class("fast", "Immediate")
    cluster.add_claim("data", "fast")
    cluster.add_pod("p", "data")
    condition = await eventually(lambda: cluster.scheduled_condition("p"))
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == ("0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
                                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                                    "scheduling.")
    assert cluster.node_of("p") is None
    assert [e["message"] for e in cluster.events("FailedScheduling")] == [condition["message"]]
    assert SELECTED_NODE not in (cluster.claim("data")["metadata"].get("annotations") or {})
    cluster.add_volume("pv1", "fast")
    cluster.bind_claim("data", "pv1")
    assert await eventually(lambda: cluster.node_of("p")) == "n1"


async def test_missing_claim_is_reported(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_pod("p", "nope")
    condition = await eventually(lambda: cluster.scheduled_condition("p"))
    assert condition["message"] == ('0/1 nodes are available: persistentvolumeclaim "nope" not found. preemption: '
                                    "0/1 nodes are available: 1 Preemption is not helpful for scheduling.")


async def test_wait_for_first_consumer_claim_gets_the_selected_node_and_the_pod_waits(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_class("wffc", "WaitForFirstConsumer")
    cluster.add_claim("data", "wffc")
    cluster.add_pod("p", "data")
    annotations = await eventually(lambda: cluster.claim("data")["metadata"].get("annotations"))
    assert annotations == {SELECTED_NODE: "n1"}
    await cluster.tick()
    assert cluster.node_of("p") is None  # PreBind waits for the claim to be bound
    # The external provisioner creates a volume; the PV controller binds the claim.
    cluster.add_volume("pvc-1", "wffc")
    cluster.bind_claim("data", "pvc-1")
    await cluster.tick()
    assert await eventually(lambda: cluster.node_of("p")) == "n1"
    assert len(cluster.events("Scheduled")) == 1


async def test_wait_for_first_consumer_prebinds_a_local_volume_on_its_node(cluster: Cluster) -> None:
    for name in ("n1", "n2"):
        cluster.add_node(name)
    cluster.add_class("local", "WaitForFirstConsumer", provisioner="kubernetes.io/no-provisioner")
    cluster.add_volume("local-n2", "local", node="n2")
    cluster.add_claim("data", "local")
    cluster.add_pod("p", "data")
    ref = await eventually(lambda: cluster.volume("local-n2")["spec"].get("claimRef"))
    assert (ref["name"], ref["uid"]) == ("data", cluster.claim("data")["metadata"]["uid"])
    assert cluster.volume("local-n2")["metadata"]["annotations"] == {BOUND_BY_CONTROLLER: "yes"}
    assert SELECTED_NODE not in (cluster.claim("data")["metadata"].get("annotations") or {})
    cluster.bind_claim("data", "local-n2")
    await cluster.tick()
    assert await eventually(lambda: cluster.node_of("p")) == "n2"


async def test_no_volume_and_no_provisioner_is_a_bind_conflict(cluster: Cluster) -> None:
    for name in ("n1", "n2"):
        cluster.add_node(name)
    cluster.add_class("local", "WaitForFirstConsumer", provisioner="kubernetes.io/no-provisioner")
    cluster.add_claim("data", "local")
    cluster.add_pod("p", "data")
    condition = await eventually(lambda: cluster.scheduled_condition("p"))
    assert condition["message"] == (
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. preemption: 0/2 "
        "nodes are available: 2 Preemption is not helpful for scheduling.")


async def test_allowed_topologies_choose_the_node(cluster: Cluster) -> None:
    cluster.add_node("n1", zone="zone-a")
    cluster.add_node("n2", zone="zone-b")
    cluster.add_class("zonal", "WaitForFirstConsumer", allowedTopologies=[{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["zone-b"]}]}])
    cluster.add_claim("data", "zonal")
    cluster.add_pod("p", "data")
    annotations = await eventually(lambda: cluster.claim("data")["metadata"].get("annotations"))
    assert annotations == {SELECTED_NODE: "n2"}


async def test_bound_volume_node_affinity_filters_nodes(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_class("fast", "Immediate")
    cluster.add_volume("pv-n9", "fast", node="n9")
    cluster.add_claim("data", "fast")
    cluster.bind_claim("data", "pv-n9")
    cluster.add_pod("p", "data")
    condition = await eventually(lambda: cluster.scheduled_condition("p"))
    assert condition["message"] == (
        "0/1 nodes are available: 1 node(s) had volume node affinity conflict. preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling.")
    cluster.add_node("n9")
    assert await eventually(lambda: cluster.node_of("p")) == "n9"


async def test_failed_provisioning_sends_the_pod_back(cluster: Cluster) -> None:
    cluster.add_node("n1")
    cluster.add_class("wffc", "WaitForFirstConsumer")
    cluster.add_claim("data", "wffc")
    cluster.add_pod("p", "data")
    await eventually(lambda: cluster.claim("data")["metadata"].get("annotations"))
    # The provisioner gives up: it removes the selected node (rescheduleProvisioning).
    claim = copy.deepcopy(cluster.claim("data"))
    del claim["metadata"]["annotations"][SELECTED_NODE]
    cluster.api.update(PERSISTENTVOLUMECLAIMS, claim)
    await cluster.tick()
    failed = await eventually(lambda: cluster.events("FailedScheduling"))
    assert failed[0]["message"] == ('running PreBind plugin "VolumeBinding": binding volumes: provisioning failed '
                                    'for PVC "data"')
    condition = cluster.scheduled_condition("p")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "SchedulerError")
    # Scheduled again: the claim gets the node once more.
    assert await eventually(lambda: (cluster.claim("data")["metadata"].get("annotations") or {}).get(
        SELECTED_NODE)) == "n1"
