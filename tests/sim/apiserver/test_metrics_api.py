"""metrics.k8s.io/v1beta1 from simulated usage, and kubectl top against it."""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import NODES, PODS
from controller_manager.sim.apiserver import ApiServer
from tests.sim.apiserver.conftest import Client, pod
from tests.sim.apiserver.test_kubectl import Kubectl, kubectl  # noqa: F401

METRICS = "/apis/metrics.k8s.io/v1beta1"


def running_pod(api: ApiServer, name: str, node: str = "n1", *, annotations: dict[str, str] | None = None,
                cpu: str | None = None, memory: str | None = None, labels: dict[str, str] | None = None) -> None:
    body: dict[str, Any] = pod(name, labels=labels, node=node)
    if annotations:
        body["metadata"]["annotations"] = annotations
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    if requests:
        body["spec"]["containers"][0]["resources"] = {"requests": requests}
    created = api.create(PODS, body, "default")
    created["status"] = {**created["status"], "phase": "Running"}
    api.update(PODS, created, subresource="status")


def node(api: ApiServer, name: str) -> None:
    api.create(NODES, {"metadata": {"name": name}, "status": {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}})


async def test_discovery_and_pod_metrics(api: ApiServer, client: Client) -> None:
    status, doc = await client.get(METRICS)
    assert status == 200
    assert {r["name"]: r["verbs"] for r in doc["resources"]} == {"nodes": ["get", "list"], "pods": ["get", "list"]}
    running_pod(api, "web", cpu="250m", memory="128Mi", labels={"app": "web"})
    running_pod(api, "busy", annotations={"sim.controller-manager.io/cpu-millicores": "1500",
                                          "sim.controller-manager.io/memory-bytes": "1073741824"})
    api.create(PODS, pod("pending"), "default")
    status, listed = await client.get(f"{METRICS}/namespaces/default/pods")
    assert status == 200
    assert listed["kind"] == "PodMetricsList"
    usage = {m["metadata"]["name"]: m["containers"][0]["usage"] for m in listed["items"]}
    assert usage == {"busy": {"cpu": "1500m", "memory": "1048576Ki"}, "web": {"cpu": "250m", "memory": "131072Ki"}}
    status, one = await client.get(f"{METRICS}/namespaces/default/pods/web")
    assert (one["kind"], one["window"], one["metadata"]["labels"]) == ("PodMetrics", "10s", {"app": "web"})
    status, body = await client.get(f"{METRICS}/namespaces/default/pods/pending")
    assert status == 404
    assert body["message"] == 'podmetrics.metrics.k8s.io "pending" not found'
    status, selected = await client.get(f"{METRICS}/namespaces/default/pods", params={"labelSelector": "app=web"})
    assert [m["metadata"]["name"] for m in selected["items"]] == ["web"]


async def test_node_metrics_sum_running_pods(api: ApiServer, client: Client) -> None:
    node(api, "n1")
    node(api, "n2")
    running_pod(api, "a", "n1", cpu="100m", memory="64Mi")
    running_pod(api, "b", "n1", cpu="300m", memory="64Mi")
    status, listed = await client.get(f"{METRICS}/nodes")
    assert status == 200
    usage = {m["metadata"]["name"]: m["usage"] for m in listed["items"]}
    assert usage == {"n1": {"cpu": "400m", "memory": "131072Ki"}, "n2": {"cpu": "0", "memory": "0Ki"}}
    status, one = await client.get(f"{METRICS}/nodes/n1")
    assert one["kind"] == "NodeMetrics"
    assert (await client.call("POST", f"{METRICS}/nodes", {}))[0] == 405


async def test_kubectl_top(kubectl: Kubectl) -> None:  # noqa: F811
    await kubectl("apply", "-f", "-", stdin="""apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  capacity: {cpu: "4", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {sim.controller-manager.io/cpu-millicores: "500", sim.controller-manager.io/memory-bytes: "268435456"}
spec:
  nodeName: n1
  containers: [{name: c, image: nginx}]
""")
    await kubectl("patch", "pod", "web", "--subresource=status", "--type=merge", "-p",
                  '{"status": {"phase": "Running"}}')
    pods = (await kubectl("top", "pods")).splitlines()
    assert pods[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert pods[1].split() == ["web", "500m", "256Mi"]
    nodes = (await kubectl("top", "nodes")).splitlines()
    assert nodes[0].split()[:3] == ["NAME", "CPU(cores)", "CPU(%)"]
    assert nodes[1].split()[:5] == ["n1", "500m", "12%", "256Mi", "3%"]
