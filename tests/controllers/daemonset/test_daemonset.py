"""The DaemonSet controller in-process against kube-sim (scheduler and kubelets on), judged through the API:
pods per node as nodes come, get tainted and relabelled; rolling updates with maxSurge and maxUnavailable;
OnDelete; history; failed and duplicate daemon pods; bad input."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from controller_manager.api.meta import format_time, is_being_deleted
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import CONTROLLERREVISIONS, DAEMONSETS, NODES, PODS
from controller_manager.controllers.daemonset import DaemonSetController
from tests.controllers.audit import conflicts, describe, writes
from tests.controllers.harness import Harness, controller_harness, wait_for

LABELS = {"app": "agent"}


def daemon_set(name: str = "agent", *, node_selector: dict[str, str] | None = None,
               strategy: dict[str, Any] | None = None, image: str = "agent:1", min_ready: int = 0,
               history_limit: int | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "agent", "image": image}]}
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    spec: dict[str, Any] = {"selector": {"matchLabels": LABELS}, "minReadySeconds": min_ready,
                            "template": {"metadata": {"labels": LABELS, "annotations": annotations or {}},
                                         "spec": pod_spec}}
    if strategy is not None:
        spec["updateStrategy"] = strategy
    if history_limit is not None:
        spec["revisionHistoryLimit"] = history_limit
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def node_of(pod: dict[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


async def live_pods(h: Harness) -> list[dict[str, Any]]:
    return [p for p in await h.pods(selector="app=agent") if not is_being_deleted(p)]


async def wait_rolled_out(h: Harness, name: str = "agent", *, desired: int, timeout: float = 20.0
                          ) -> dict[str, Any]:
    """Status says every desired node runs an available, updated pod, and the pods agree."""

    async def check() -> dict[str, Any] | None:
        ds = await h.client.get(DAEMONSETS, name, "default")
        status = ds.get("status") or {}
        if status.get("observedGeneration", 0) < ds["metadata"]["generation"]:
            return None
        if not (status.get("desiredNumberScheduled") == status.get("updatedNumberScheduled")
                == status.get("numberAvailable") == status.get("currentNumberScheduled") == desired):
            return None
        pods = await h.pods(selector="app=agent")
        if len(pods) != desired or len({node_of(p) for p in pods}) != desired:
            return None
        return ds

    return await wait_for(check, timeout=timeout, what=f"DaemonSet {name} rolled out on {desired} nodes")


async def patch_node(h: Harness, node: str, patch: dict[str, Any]) -> None:
    await h.client.patch(NODES, node, patch, patch_type="merge")


async def test_one_pod_per_node_follows_nodes_taints_and_labels() -> None:
    async with controller_harness(DaemonSetController, nodes=3) as h:
        await h.client.create(DAEMONSETS, daemon_set(), "default")
        ds = await wait_rolled_out(h, desired=3)
        pods = await live_pods(h)
        assert sorted(map(node_of, pods)) == ["node-1", "node-2", "node-3"]
        pod = pods[0]
        affinity = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert affinity == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node_of(pod)]}]}]}
        assert {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"} in (
            pod["spec"]["tolerations"])
        assert pod["metadata"]["ownerReferences"][0]["uid"] == ds["metadata"]["uid"]
        revisions = await h.list_objects(CONTROLLERREVISIONS)
        assert len(revisions) == 1
        assert revisions[0]["revision"] == 1
        hash_ = revisions[0]["metadata"]["labels"]["controller-revision-hash"]
        assert revisions[0]["metadata"]["name"] == f"agent-{hash_}"
        assert all(p["metadata"]["labels"]["controller-revision-hash"] == hash_ for p in pods)
        assert all(p["metadata"]["labels"]["pod-template-generation"] == "1" for p in pods)

        # A new node gets a pod.
        await h.cluster.add_node("node-4")
        await wait_rolled_out(h, desired=4)

        # A NoExecute taint the pods do not tolerate removes the pod there; desired shrinks.
        no_execute = {"key": "dedicated", "value": "db", "effect": "NoExecute"}
        await patch_node(h, "node-2", {"spec": {"taints": [no_execute]}})
        await wait_rolled_out(h, desired=3)
        assert "node-2" not in map(node_of, await live_pods(h))
        # A NoSchedule taint keeps the running pod, no longer desired there: counted misscheduled.
        await patch_node(h, "node-3", {"spec": {"taints": [{"key": "dedicated", "value": "db",
                                                             "effect": "NoSchedule"}]}})

        async def kept_but_not_desired() -> dict[str, Any] | None:
            status = (await h.client.get(DAEMONSETS, "agent", "default")).get("status") or {}
            return status if (status.get("desiredNumberScheduled") == 2
                              and status.get("numberMisscheduled") == 1) else None

        await wait_for(kept_but_not_desired, what="NoSchedule taint: pod kept, counted misscheduled")
        assert "node-3" in map(node_of, await live_pods(h))
        # Taints gone: back everywhere.
        await patch_node(h, "node-2", {"spec": {"taints": None}})
        await patch_node(h, "node-3", {"spec": {"taints": None}})
        await wait_rolled_out(h, desired=4)

        # A node selector: only labelled nodes; labelling and unlabelling moves the pods.
        ds = await h.client.get(DAEMONSETS, "agent", "default")
        ds["spec"]["template"]["spec"]["nodeSelector"] = {"role": "edge"}
        await h.client.update(DAEMONSETS, ds)
        await patch_node(h, "node-1", {"metadata": {"labels": {"role": "edge"}}})
        await wait_rolled_out(h, desired=1)
        assert [node_of(p) for p in await live_pods(h)] == ["node-1"]
        await patch_node(h, "node-4", {"metadata": {"labels": {"role": "edge"}}})
        await patch_node(h, "node-1", {"metadata": {"labels": {"role": None}}})
        await wait_rolled_out(h, desired=1)
        assert [node_of(p) for p in await live_pods(h)] == ["node-4"]

        reasons = {e["reason"] for e in await h.events_for("agent")}
        assert {"SuccessfulCreate", "SuccessfulDelete"} <= reasons


@contextlib.asynccontextmanager
async def watching_ready_pods(h: Harness, nodes: list[str]) -> AsyncIterator[list[str]]:
    """Poll the pods through the API all along; collects every moment a node had no ready live daemon pod."""
    gaps: list[str] = []
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            pods = await live_pods(h)
            ready = {node_of(p) for p in pods if is_pod_ready(p)}
            gaps.extend(f"{n} (pods: {[(p['metadata']['name'], node_of(p)) for p in pods]})"
                        for n in nodes if n not in ready)
            await asyncio.sleep(0.01)

    task = asyncio.create_task(watch(), name="test:watch-ready-pods")
    try:
        yield gaps
    finally:
        stop.set()
        await task


async def test_rolling_update_with_max_surge_keeps_a_ready_pod_on_every_node() -> None:
    async with controller_harness(DaemonSetController, nodes=3) as h:
        surge = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
        # New pods take a while to turn ready, so a careless update would leave nodes without one.
        slow = {"sim.controller-manager.io/ready-after-seconds": "0.3"}
        await h.client.create(DAEMONSETS, daemon_set(strategy=surge, annotations=slow, history_limit=1), "default")
        await wait_rolled_out(h, desired=3)
        for image in ("agent:2", "agent:3"):
            async with watching_ready_pods(h, ["node-1", "node-2", "node-3"]) as gaps:
                ds = await h.client.get(DAEMONSETS, "agent", "default")
                ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
                await h.client.update(DAEMONSETS, ds)
                ds = await wait_rolled_out(h, desired=3)
            assert gaps == []
            pods = await live_pods(h)
            assert {p["spec"]["containers"][0]["image"] for p in pods} == {image}
        # revisionHistoryLimit 1: the current revision and one old one.
        revisions = sorted(await h.list_objects(CONTROLLERREVISIONS), key=lambda r: r["revision"])
        assert [r["revision"] for r in revisions] == [2, 3]
        assert ds["status"]["updatedNumberScheduled"] == 3
        assert ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "3"


async def test_rolling_update_with_max_unavailable_and_rollback_reuses_the_revision() -> None:
    async with controller_harness(DaemonSetController, nodes=4) as h:
        await h.client.create(DAEMONSETS, daemon_set(strategy={"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": "50%"}}), "default")
        await wait_rolled_out(h, desired=4)
        first = (await h.list_objects(CONTROLLERREVISIONS))[0]["metadata"]["name"]
        for image in ("agent:2", "agent:1"):
            ds = await h.client.get(DAEMONSETS, "agent", "default")
            ds["spec"]["template"]["spec"]["containers"][0]["image"] = image
            await h.client.update(DAEMONSETS, ds)
            await wait_rolled_out(h, desired=4)
        revisions = {r["metadata"]["name"]: r["revision"] for r in await h.list_objects(CONTROLLERREVISIONS)}
        assert len(revisions) == 2
        assert revisions[first] == 3


async def test_on_delete_updates_only_deleted_pods() -> None:
    async with controller_harness(DaemonSetController, nodes=3) as h:
        await h.client.create(DAEMONSETS, daemon_set(strategy={"type": "OnDelete"}), "default")
        await wait_rolled_out(h, desired=3)
        ds = await h.client.get(DAEMONSETS, "agent", "default")
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
        await h.client.update(DAEMONSETS, ds)

        async def observed() -> dict[str, Any] | None:
            got = await h.client.get(DAEMONSETS, "agent", "default")
            return got if (got.get("status") or {}).get("observedGeneration") == 2 else None

        status = (await wait_for(observed, what="generation 2 observed"))["status"]
        assert status.get("updatedNumberScheduled", 0) == 0  # omitempty: a real server leaves a zero out
        victim = next(p for p in await live_pods(h) if node_of(p) == "node-2")
        await h.client.delete(PODS, victim["metadata"]["name"], "default")

        async def one_updated() -> dict[str, Any] | None:
            got = await h.client.get(DAEMONSETS, "agent", "default")
            pods = await live_pods(h)
            images = {node_of(p): p["spec"]["containers"][0]["image"] for p in pods}
            ok = ((got.get("status") or {}).get("updatedNumberScheduled") == 1 and len(pods) == 3
                  and images.get("node-2") == "agent:2")
            return got if ok else None

        await wait_for(one_updated, what="only the deleted pod replaced with the new template")
        images = sorted(p["spec"]["containers"][0]["image"] for p in await live_pods(h))
        assert images == ["agent:1", "agent:1", "agent:2"]


async def test_failed_pod_is_replaced_and_duplicates_keep_the_oldest() -> None:
    async with controller_harness(DaemonSetController, nodes=2) as h:
        await h.client.create(DAEMONSETS, daemon_set(), "default")
        await wait_rolled_out(h, desired=2)
        pod = next(p for p in await live_pods(h) if node_of(p) == "node-1")
        failed = {**pod, "status": {**pod["status"], "phase": "Failed"}}
        await h.client.update_status(PODS, failed)

        async def replaced() -> list[dict[str, Any]] | None:
            pods = await live_pods(h)
            on_node = [p for p in pods if node_of(p) == "node-1"]
            ok = len(on_node) == 1 and on_node[0]["metadata"]["uid"] != pod["metadata"]["uid"]
            return pods if ok else None

        await wait_for(replaced, what="failed daemon pod deleted and recreated")
        events = await h.events_for("agent")
        assert any(e["reason"] == "FailedDaemonPod" and e["type"] == "Warning"
                   and f"Found failed daemon pod default/{pod['metadata']['name']} on node node-1" in e["message"]
                   for e in events)

        # An orphan matching the selector on node-2 is adopted, and as the newer of two it is deleted.
        keeper = next(p for p in await live_pods(h) if node_of(p) == "node-2")
        orphan = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "stray", "namespace": "default", "labels": dict(LABELS)},
                  "spec": {"nodeName": "node-2", "containers": [{"name": "agent", "image": "agent:1"}]}}
        await h.client.create(PODS, orphan, "default")

        async def deduplicated() -> bool:
            names = {p["metadata"]["name"] for p in await live_pods(h) if node_of(p) == "node-2"}
            return names == {keeper["metadata"]["name"]}

        await wait_for(deduplicated, what="the newer duplicate deleted")
        await wait_rolled_out(h, desired=2)


async def test_bad_input_is_reported_and_survived() -> None:
    async with controller_harness(DaemonSetController, nodes=2) as h:
        # Selecting no node at all is a valid, quiet DaemonSet.
        await h.client.create(DAEMONSETS, daemon_set("nowhere", node_selector={"role": "none"}), "default")

        async def zero_status() -> dict[str, Any] | None:
            ds = await h.client.get(DAEMONSETS, "nowhere", "default")
            status = ds.get("status") or {}
            return status if status.get("observedGeneration") == 1 else None

        status = await wait_for(zero_status, what="status of a DaemonSet selecting no node")
        assert status["desiredNumberScheduled"] == 0
        assert "numberUnavailable" not in status  # omitempty: a real server leaves a zero out
        assert await h.pods(selector="app=agent") == []
        # Garbage in node conditions does not matter; the controller keeps working afterwards.
        node = await h.client.get(NODES, "node-1")
        node["status"]["conditions"] = [*node["status"]["conditions"], {"type": "Weird", "status": "Sideways",
                                                                          "lastHeartbeatTime": format_time(0)}]
        await h.client.update_status(NODES, node)
        await h.client.create(DAEMONSETS, daemon_set("agent"), "default")
        await wait_rolled_out(h, desired=2)
        assert all(c.health() is None for c in h.controllers)


async def test_syncs_wait_for_the_cache_to_show_their_own_writes_no_conflicts(tmp_path: Path) -> None:
    # The DaemonSet and pod watches lag the controller's writes by 0.5 s while daemon pods keep changing: without
    # read-your-own-writes each pod event syncs the DaemonSet from a copy older than its last status write, and
    # that status update fails with 409 Conflict. Counted from kube-sim's audit log.
    audit = tmp_path / "audit.log"
    async with controller_harness(DaemonSetController, nodes=4, start=False, audit_log_path=audit) as h:
        h.cluster.faults.slow_watch(0.5, resources=["daemonsets", "pods"])
        await h.start()
        await h.client.create(DAEMONSETS, daemon_set(), "default")
        await wait_rolled_out(h, desired=4)
        for pod in await live_pods(h):
            await h.client.delete(PODS, pod["metadata"]["name"], "default")
            await asyncio.sleep(0.1)
        await wait_rolled_out(h, desired=4)
    status_writes = writes(audit, "daemonsets", "status")
    assert len(status_writes) >= 4  # statuses were written along the way
    assert conflicts(status_writes) == [], describe(status_writes)
    # Never two daemon pods for one node: no create the API server refused or a later sync had to undo.
    assert len(writes(audit, "pods", verbs=("create",))) == 8
