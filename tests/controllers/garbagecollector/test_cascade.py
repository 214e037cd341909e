"""Real ``kubectl delete`` against kube-sim with the Deployment, ReplicaSet and garbage collector controllers
running in-process: background, foreground and orphan cascades as a user sees them, and a collector restart in
the middle of a foreground deletion."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controller_manager.api.meta import meta
from controller_manager.api.resources import DEPLOYMENTS, PODS, REPLICASETS, Resource
from controller_manager.client.errors import NotFound
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.harness import Harness, controller_harness, wait_for

KUBECTL = str(Path(sys.executable).parent / "kubectl")
GC_OPTIONS = {"concurrent_gc_syncs": 5}


class Kubectl:
    def __init__(self, h: Harness, home: Path) -> None:
        self.kubeconfig = str(h.cluster.kubeconfig_path)
        self.home = home

    async def ok(self, *args: str, stdin: bytes | None = None, timeout: float = 60.0) -> str:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.home / "cache"), "-n", "default", *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "HOME": str(self.home)})
        try:
            out, _ = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode == 0, f"kubectl {' '.join(args)} failed ({proc.returncode}): {out.decode()}"
        return out.decode()


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    async with controller_harness(DeploymentController, ReplicaSetController, GarbageCollector,
                                  options=GC_OPTIONS) as harness:
        await wait_for_gc(harness)
        yield harness


async def wait_for_gc(h: Harness) -> None:
    gc = h.controller(GarbageCollector)

    async def ready() -> bool:
        return gc.is_synced() and gc.workers_started

    await wait_for(ready, timeout=20, what="the garbage collector's monitors to sync")


def manifest(name: str, replicas: int = 2) -> bytes:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
    }).encode()


async def rollout(h: Harness, kubectl: Kubectl, name: str, replicas: int = 2) -> tuple[list[Any], list[Any]]:
    await kubectl.ok("create", "-f", "-", stdin=manifest(name, replicas))

    async def ready() -> tuple[list[Any], list[Any]] | None:
        rss = await h.list_objects(REPLICASETS, label_selector=f"app={name}")
        pods = [p for p in await h.pods(selector=f"app={name}") if (p.get("status") or {}).get("phase") == "Running"]
        return (rss, pods) if len(rss) == 1 and len(pods) == replicas else None

    return await wait_for(ready, timeout=20, what=f"{name} to roll out")


async def gone(h: Harness, res: Resource, name: str) -> bool:
    try:
        await h.client.get(res, name, "default")
    except NotFound:
        return True
    return False


async def test_background_cascade_deletes_replicasets_and_pods(h: Harness, tmp_path: Path) -> None:
    kubectl = Kubectl(h, tmp_path)
    await rollout(h, kubectl, "bg")
    await kubectl.ok("delete", "deployment", "bg")

    async def all_gone() -> bool:
        return not await h.list_objects(REPLICASETS, label_selector="app=bg") and not await h.pods(selector="app=bg")

    await wait_for(all_gone, timeout=20, what="ReplicaSets and Pods of bg to be collected")


async def test_foreground_cascade_deletes_the_deployment_last(h: Harness, tmp_path: Path) -> None:
    kubectl = Kubectl(h, tmp_path)
    rss, pods = await rollout(h, kubectl, "fg")
    owned = {meta(o)["uid"] for o in (*rss, *pods)}
    deployment = await h.client.get(DEPLOYMENTS, "fg", "default")
    order: list[str] = []

    async def watch(res: Resource) -> None:
        _, rv = await h.client.list_all(res, "default")
        async with h.client.watch(res, "default", resource_version=rv) as stream:
            async for ev in stream:
                if ev.type == "DELETED":
                    order.append(str(meta(ev.object).get("uid")))

    watchers = [asyncio.create_task(watch(r), name=f"watch-{r.plural}") for r in (DEPLOYMENTS, REPLICASETS, PODS)]
    try:
        await asyncio.sleep(0.2)  # let the watches open before the delete
        await kubectl.ok("delete", "deployment", "fg", "--cascade=foreground", "--timeout=30s")
        deployment_uid = meta(deployment)["uid"]

        async def deployment_deleted() -> bool:
            return deployment_uid in order

        await wait_for(deployment_deleted, timeout=10, what="the Deployment's DELETED event")
    finally:
        for w in watchers:
            w.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    # Every owned object was deleted, each before the Deployment itself.
    assert owned <= set(order[:order.index(deployment_uid)])
    assert await gone(h, DEPLOYMENTS, "fg")


async def test_orphan_cascade_leaves_replicasets_and_pods_without_the_reference(h: Harness, tmp_path: Path) -> None:
    kubectl = Kubectl(h, tmp_path)
    rss, pods = await rollout(h, kubectl, "orph")
    deployment_uid = meta(await h.client.get(DEPLOYMENTS, "orph", "default"))["uid"]
    await kubectl.ok("delete", "deployment", "orph", "--cascade=orphan", "--timeout=30s")
    assert await gone(h, DEPLOYMENTS, "orph")
    left = await h.list_objects(REPLICASETS, label_selector="app=orph")
    assert [meta(r)["uid"] for r in left] == [meta(r)["uid"] for r in rss]
    assert all(ref["uid"] != deployment_uid for r in left for ref in meta(r).get("ownerReferences") or ())
    live_pods = await h.pods(selector="app=orph")
    assert {meta(p)["uid"] for p in live_pods} == {meta(p)["uid"] for p in pods}
    # The pods still belong to their (live) ReplicaSet.
    assert all(meta(p)["ownerReferences"][0]["uid"] == meta(left[0])["uid"] for p in live_pods)


async def test_restart_mid_foreground_deletion_completes(h: Harness, tmp_path: Path) -> None:
    kubectl = Kubectl(h, tmp_path)
    await rollout(h, kubectl, "keep", replicas=1)
    await rollout(h, kubectl, "rs", replicas=2)
    keep_pods = {meta(p)["uid"] for p in await h.pods(selector="app=keep")}
    # Stop the collector, then ask for a foreground delete: nothing can act on it until the new one runs.
    await h.stop()
    await h.client.delete(DEPLOYMENTS, "rs", "default", propagation_policy="Foreground")
    dep = await h.client.get(DEPLOYMENTS, "rs", "default")
    assert "foregroundDeletion" in meta(dep)["finalizers"]
    await h.start()
    gc = h.controller(GarbageCollector)

    async def progressed() -> bool:
        return gc.is_synced() and bool(await h.list_objects(REPLICASETS, label_selector="app=rs")) and any(
            meta(r).get("deletionTimestamp") for r in await h.list_objects(REPLICASETS, label_selector="app=rs"))

    await wait_for(progressed, timeout=20, what="the ReplicaSet to start its foreground deletion")
    # Crash in the middle (no drain), then a fresh collector finishes the job.
    await h.restart(graceful=False)

    async def finished() -> bool:
        return await gone(h, DEPLOYMENTS, "rs") and not await h.list_objects(REPLICASETS, label_selector="app=rs") \
            and not await h.pods(selector="app=rs")

    await wait_for(finished, timeout=30, what="the foreground deletion to finish after the restart")
    # What still has a live owner was not touched.
    assert {meta(p)["uid"] for p in await h.pods(selector="app=keep")} == keep_pods
    assert await h.list_objects(REPLICASETS, label_selector="app=keep")
