"""The real kubectl against a live emulator: discovery, create, apply (twice), watch, scale, annotate, label,
describe, events, delete."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller_manager.sim.apiserver import ApiServer, ApiServerOptions
from tests.sim.apiserver.kubectl_harness import Kubectl, serve

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: c
        image: nginx
"""


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with serve(ApiServer(options=ApiServerOptions()), tmp_path) as k:
        yield k


async def test_get_namespaces(kubectl: Kubectl) -> None:
    out = await kubectl("get", "ns")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "AGE"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["default", "Active"], ["kube-node-lease", "Active"], ["kube-public", "Active"], ["kube-system", "Active"]]


async def test_deployment_workflow(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(DEPLOYMENT.format(replicas=2))
    assert "deployment.apps/web created" in await kubectl("apply", "-f", str(manifest))
    manifest.write_text(DEPLOYMENT.format(replicas=3))
    assert "deployment.apps/web configured" in await kubectl("apply", "-f", str(manifest))
    assert await kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}") == "3"

    watch = await kubectl.start("get", "deploy", "web", "-w", "--output-watch-events")
    assert watch.stdout is not None
    try:
        header = await asyncio.wait_for(watch.stdout.readline(), 10)
        assert header.split()[:2] == [b"EVENT", b"NAME"]
        first = await asyncio.wait_for(watch.stdout.readline(), 10)
        assert first.split()[:3] == [b"ADDED", b"web", b"0/3"]
        await kubectl("scale", "deploy", "web", "--replicas=5")
        second = await asyncio.wait_for(watch.stdout.readline(), 10)
        assert second.split()[:3] == [b"MODIFIED", b"web", b"0/5"]
    finally:
        watch.kill()
        await watch.wait()

    await kubectl("annotate", "deploy", "web", "team=blue")
    await kubectl("label", "deploy", "web", "tier=front")
    got = await kubectl("get", "deploy", "web", "-o",
                        "jsonpath={.spec.replicas} {.metadata.annotations.team} {.metadata.labels.tier} "
                        "{.metadata.generation}")
    assert got == "5 blue front 4"
    described = await kubectl("describe", "deploy", "web")
    assert "Replicas:               5 desired" in described
    assert "deployment.apps \"web\" deleted" in await kubectl("delete", "deploy", "web")
    assert await kubectl("get", "deploy", "-o", "name") == ""


async def test_create_pod_events_and_describe(kubectl: Kubectl) -> None:
    await kubectl("create", "-f", "-", stdin="""apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: nginx}]
""")
    uid = await kubectl("get", "pod", "p", "-o", "jsonpath={.metadata.uid}")
    await kubectl("create", "-f", "-", stdin=f"""apiVersion: v1
kind: Event
metadata: {{name: p.1}}
involvedObject: {{kind: Pod, name: p, namespace: default, uid: {uid}, apiVersion: v1}}
reason: Scheduled
message: assigned default/p to node-1
type: Normal
source: {{component: default-scheduler}}
firstTimestamp: "2026-01-01T00:00:00Z"
lastTimestamp: "2026-01-01T00:00:00Z"
count: 1
""")
    events = await kubectl("get", "events")
    assert "Scheduled" in events
    assert "pod/p" in events
    described = await kubectl("describe", "pod", "p")
    assert "Status:           Pending" in described
    assert "assigned default/p to node-1" in described
    assert 'pod "p" deleted' in await kubectl("delete", "pod", "p")
