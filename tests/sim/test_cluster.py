"""SimCluster as real clients see it: kubectl, the official ``kubernetes`` client and kubernetes_asyncio
against a 3-node cluster; pods created over HTTP get scheduled and run; node conveniences; survival of
dropped watches; a clean stop."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import kubernetes
import orjson
import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import config as aconfig

from controller_manager.api.resources import EVENTS, LEASES, NODES, PODS
from controller_manager.sim.cluster import SimCluster, zone_names
from controller_manager.sim.kubelet import KubeletConfig

KUBECTL = str(Path(sys.executable).parent / "kubectl")
FAST = KubeletConfig(node_status_update_frequency=0.2, lease_renew_interval=0.2)


async def eventually(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(0.01)


async def kubectl(cluster: SimCluster, tmp_path: Path, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(cluster.kubeconfig_path), "--cache-dir", str(tmp_path / "kubectl-cache"), *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, "HOME": str(tmp_path)})
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[SimCluster]:
    async with SimCluster(nodes=3, zones=2, kubelet_config=FAST, kubeconfig_path=tmp_path / "kubeconfig") as c:
        yield c


def pod_phase(cluster: SimCluster, name: str, namespace: str = "default") -> str | None:
    try:
        return cluster.api.get(PODS, namespace, name)["status"].get("phase")
    except Exception:
        return None


def test_zone_names() -> None:
    assert zone_names(3) == ["zone-a", "zone-b", "zone-c"]
    assert zone_names(28)[26:] == ["zone-aa", "zone-ab"]


async def test_kubectl_sees_three_ready_nodes_and_runs_a_pod(cluster: SimCluster, tmp_path: Path) -> None:
    code, out, err = await kubectl(cluster, tmp_path, "get", "nodes")
    assert code == 0, err
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    assert [r[0] for r in rows] == ["node-1", "node-2", "node-3"]
    assert all(r[1] == "Ready" for r in rows)
    zones = {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in cluster.api.list(NODES)[0]}
    assert zones == {"zone-a", "zone-b"}
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}
    code, _, err = await kubectl(cluster, tmp_path, "apply", "-f", "-", stdin=orjson.dumps(manifest))
    assert code == 0, err
    await eventually(lambda: pod_phase(cluster, "web") == "Running")
    code, out, err = await kubectl(cluster, tmp_path, "get", "pod", "web", "-o", "wide")
    assert code == 0, err
    assert "Running" in out
    assert "1/1" in out
    events = [e for e in cluster.api.list(EVENTS, "default")[0] if e["reason"] == "Scheduled"]
    node = cluster.api.get(PODS, "default", "web")["spec"]["nodeName"]
    assert events[0]["message"] == f"Successfully assigned default/web to {node}"
    assert events[0]["source"]["component"] == "default-scheduler"


async def test_viewer_token_reads_but_cannot_write(cluster: SimCluster) -> None:
    def work() -> tuple[list[str], int]:
        api_client = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig_path),
                                                              context="kube-sim-viewer")
        try:
            core = kubernetes.client.CoreV1Api(api_client)
            names = [n.metadata.name for n in core.list_node().items]
            try:
                core.create_namespaced_config_map("default", {"metadata": {"name": "x"}})
            except kubernetes.client.ApiException as exc:
                return names, exc.status
            return names, 201
        finally:
            api_client.close()

    names, code = await asyncio.to_thread(work)
    assert names == ["node-1", "node-2", "node-3"]
    assert code == 403


async def test_official_python_client(cluster: SimCluster) -> None:
    def work() -> tuple[list[str], str, str, list[str]]:
        api_client = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig_path))
        try:
            core = kubernetes.client.CoreV1Api(api_client)
            nodes = [n.metadata.name for n in core.list_node().items]
            created = core.create_namespaced_pod("default", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "official", "labels": {"a": "1"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            patched = core.patch_namespaced_pod("official", "default", {"metadata": {"labels": {"b": "2"}}})
            seen = []
            watch = kubernetes.watch.Watch()
            for event in watch.stream(core.list_namespaced_pod, "default", timeout_seconds=5):
                seen.append(event["type"])
                if event["object"].metadata.name == "official":
                    watch.stop()
            return nodes, created.metadata.uid, patched.metadata.labels["b"], seen
        finally:
            api_client.close()

    nodes, uid, label, seen = await asyncio.to_thread(work)
    assert nodes == ["node-1", "node-2", "node-3"]
    assert uid
    assert label == "2"
    assert seen
    assert seen[0] == "ADDED"
    await eventually(lambda: pod_phase(cluster, "official") == "Running")


async def test_kubernetes_asyncio_lists(cluster: SimCluster) -> None:
    api_client = await aconfig.new_client_from_config(config_file=str(cluster.kubeconfig_path))
    async with api_client:
        core = aclient.CoreV1Api(api_client)
        nodes = await core.list_node()
        assert sorted(n.metadata.name for n in nodes.items) == ["node-1", "node-2", "node-3"]
        namespaces = await core.list_namespace()
        assert "kube-node-lease" in {n.metadata.name for n in namespaces.items}


async def test_pods_spread_and_node_conveniences(cluster: SimCluster) -> None:
    for i in range(6):
        cluster.api.create(PODS, {"metadata": {"name": f"p{i}", "namespace": "default"},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    await eventually(lambda: all(pod_phase(cluster, f"p{i}") == "Running" for i in range(6)))
    placed = [cluster.api.get(PODS, "default", f"p{i}")["spec"]["nodeName"] for i in range(6)]
    assert sorted(placed) == ["node-1", "node-1", "node-2", "node-2", "node-3", "node-3"]

    renewed = cluster.api.get(LEASES, "kube-node-lease", "node-2")["spec"]["renewTime"]
    await cluster.stop_kubelet("node-2")
    stopped_at = cluster.api.get(LEASES, "kube-node-lease", "node-2")["spec"]["renewTime"]
    await eventually(lambda: cluster.api.get(LEASES, "kube-node-lease", "node-1")["spec"]["renewTime"] != renewed)
    await asyncio.sleep(0.5)  # several renew intervals of FAST
    assert cluster.api.get(LEASES, "kube-node-lease", "node-2")["spec"]["renewTime"] == stopped_at
    await cluster.start_kubelet("node-2")
    await eventually(lambda: cluster.api.get(LEASES, "kube-node-lease", "node-2")["spec"]["renewTime"] != stopped_at)

    await cluster.add_node("node-4")
    assert cluster.node("node-4")["metadata"]["labels"]["topology.kubernetes.io/zone"] in {"zone-a", "zone-b"}


async def test_unschedulable_pod_reports_why(cluster: SimCluster) -> None:
    cluster.api.create(PODS, {"metadata": {"name": "nowhere", "namespace": "default"},
                              "spec": {"nodeSelector": {"disk": "ssd"}, "containers": [{"name": "c", "image": "x"}]}})

    def condition() -> dict[str, Any] | None:
        for c in cluster.api.get(PODS, "default", "nowhere")["status"].get("conditions") or ():
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    cond = await eventually(condition)
    assert cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == ("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. "
                               "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    warning = [e for e in cluster.api.list(EVENTS, "default")[0] if e["reason"] == "FailedScheduling"]
    assert warning
    assert warning[0]["type"] == "Warning"
    assert warning[0]["message"] == cond["message"]
    # A node change retries it: label one node and the pod lands there.
    cluster.api.patch(NODES, None, "node-3", {"metadata": {"labels": {"disk": "ssd"}}}, "merge")
    await eventually(lambda: cluster.api.get(PODS, "default", "nowhere")["spec"].get("nodeName") == "node-3")


async def test_actors_survive_dropped_watches_and_restarts(cluster: SimCluster) -> None:
    cluster.faults.drop_watches()
    cluster.api.create(PODS, {"metadata": {"name": "after-drop", "namespace": "default"},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}})
    await eventually(lambda: pod_phase(cluster, "after-drop") == "Running")
    cluster.faults.restart(lose_history=True)
    cluster.api.create(PODS, {"metadata": {"name": "after-restart", "namespace": "default"},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}})
    await eventually(lambda: pod_phase(cluster, "after-restart") == "Running")


async def test_no_scheduler_no_kubelets(tmp_path: Path) -> None:
    async with SimCluster(nodes=3, scheduler=False, kubelets=False) as cluster:
        assert cluster.scheduler is None
        assert cluster.kubelets is None
        assert cluster.api.list(NODES)[0] == []
        assert cluster.kubeconfig_path.exists()
        path = cluster.kubeconfig_path
        config = orjson.loads(path.read_bytes())
        assert config["current-context"] == "kube-sim"
        assert config["clusters"][0]["cluster"]["server"] == cluster.url
        assert {u["user"]["token"] for u in config["users"]} == {cluster.admin_token, cluster.viewer_token}
    assert not path.exists()  # a kubeconfig in a temp dir of its own goes away with the cluster
