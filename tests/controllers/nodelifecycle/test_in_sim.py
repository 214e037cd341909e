"""Node lifecycle + taint eviction (+ the ReplicaSet controller) in-process against kube-sim, with short periods:
a node whose kubelet stops goes Unknown and gets tainted, its pods are evicted after their tolerationSeconds and
replaced elsewhere; the kubelet resumes and the taints go. Everything asserted is what a client sees."""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import EVENTS, NODES, PODS, REPLICASETS
from controller_manager.controllers.nodelifecycle import NodeLifecycleController
from controller_manager.controllers.podgc import PodGCController
from controller_manager.controllers.replicaset import ReplicaSetController
from controller_manager.controllers.tainteviction import TaintEvictionController
from controller_manager.sim.kubelet import KUBELET_ANNOTATION
from tests.controllers.harness import controller_harness, wait_for

FAST = {"node_monitor_period": 0.3, "node_monitor_grace_period": 2.0, "node_startup_grace_period": 3.0,
        "node_eviction_rate": 10.0, "secondary_node_eviction_rate": 0.01, "large_cluster_size_threshold": 50,
        "unhealthy_zone_threshold": 0.55}


def replica_set(replicas: int, toleration_seconds: int) -> dict[str, Any]:
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": toleration_seconds}
                   for key in ("node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready")]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                           "tolerations": tolerations}}}}


def taint_keys(n: dict[str, Any]) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in (n.get("spec") or {}).get("taints") or ()}


def ready_status(n: dict[str, Any]) -> str | None:
    return next((c.get("status") for c in n["status"].get("conditions") or () if c["type"] == "Ready"), None)


async def test_stopped_kubelet_node_is_tainted_pods_evicted_and_replaced_then_recovers() -> None:
    async with controller_harness(NodeLifecycleController, TaintEvictionController, ReplicaSetController,
                                  PodGCController, nodes=3, options=FAST) as h:
        await h.client.create(REPLICASETS, replica_set(6, toleration_seconds=1), "default")

        async def running() -> list[dict[str, Any]] | None:
            pods = [p for p in await h.pods(selector="app=web") if p["status"].get("phase") == "Running"
                    and not p["metadata"].get("deletionTimestamp")]
            return pods if len(pods) == 6 else None

        pods = await wait_for(running, what="6 running pods")
        victim = pods[0]["spec"]["nodeName"]
        doomed = {p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] == victim}
        await h.client.patch(NODES, victim, {"metadata": {"annotations": {KUBELET_ANNOTATION: "stopped"}}})

        async def tainted() -> dict[str, Any] | None:
            n = await h.client.get(NODES, victim)
            ok = ready_status(n) == "Unknown" and ("node.kubernetes.io/unreachable", "NoExecute") in taint_keys(n)
            return n if ok else None

        # grace (2 s) + monitor period + the pass that queues it; well within the deadline.
        n = await wait_for(tainted, timeout=10, what="node Unknown and tainted unreachable")
        conditions = {c["type"]: c for c in n["status"]["conditions"]}
        assert conditions["Ready"]["reason"] == "NodeStatusUnknown"
        assert conditions["MemoryPressure"]["status"] == "Unknown"

        async def replaced() -> list[dict[str, Any]] | None:
            all_pods = await h.pods(selector="app=web")
            gone = all(p["metadata"].get("deletionTimestamp") for p in all_pods if p["metadata"]["name"] in doomed)
            healthy = [p for p in all_pods if p["spec"].get("nodeName") not in (None, "", victim)
                       and p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
            return healthy if gone and len(healthy) == 6 else None

        await wait_for(replaced, timeout=15, what="pods evicted and replaced on other nodes")
        no_schedule = taint_keys(await h.client.get(NODES, victim))
        assert ("node.kubernetes.io/unreachable", "NoSchedule") in no_schedule
        events = await h.list_objects(EVENTS, "default")
        messages = {(e["reason"], e["message"]) for e in events}
        for name in doomed:
            assert ("TaintManagerEviction", f"Marking for deletion Pod default/{name}") in messages
        assert ("NodeNotReady", f"Node {victim} status is now: NodeNotReady") in messages
        evicted = await h.client.list(PODS, "default")
        for p in evicted["items"]:
            if p["metadata"]["name"] in doomed:
                target = [c for c in p["status"].get("conditions") or () if c["type"] == "DisruptionTarget"]
                assert target
                assert target[0]["reason"] == "DeletionByTaintManager"

        await h.client.patch(NODES, victim, {"metadata": {"annotations": {KUBELET_ANNOTATION: "running"}}})

        async def recovered() -> bool:
            n = await h.client.get(NODES, victim)
            return ready_status(n) == "True" and not {k for k, _ in taint_keys(n)} & {
                "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}

        await wait_for(recovered, timeout=10, what="taints removed after the kubelet resumed")


async def test_condition_taints_follow_unschedulable_and_survive_bad_nodes() -> None:
    async with controller_harness(NodeLifecycleController, nodes=2, options=FAST) as h:
        await h.client.patch(NODES, "node-1", {"spec": {"unschedulable": True}})

        async def has_taint() -> bool:
            n = await h.client.get(NODES, "node-1")
            return ("node.kubernetes.io/unschedulable", "NoSchedule") in taint_keys(n)

        await wait_for(has_taint, what="unschedulable taint")
        await h.client.patch(NODES, "node-1", {"spec": {"unschedulable": False}})

        async def no_taint() -> bool:
            return not await has_taint()

        await wait_for(no_taint, what="unschedulable taint removed")
        # A node with odd contents (no labels, a condition of an unknown type) is handled without a crash.
        await h.client.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "odd"},
                                      "status": {"conditions": [{"type": "Weird", "status": "Maybe"}]}})

        async def registered() -> bool:
            events = await h.list_objects(EVENTS, "default")
            return any(e["reason"] == "RegisteredNode" and e["involvedObject"]["name"] == "odd" for e in events)

        await wait_for(registered, what="odd node registered")
        for ctrl in h.controllers:
            assert ctrl.health() is None
