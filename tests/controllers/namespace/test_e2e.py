"""The namespace controller in-process against kube-sim, driven by real ``kubectl`` and the API:
deleting a namespace deletes everything in it, then the namespace; finalizers and failures hold it
``Terminating`` with the conditions upstream sets, until they are resolved."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from controller_manager.api.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    PODS,
    REPLICASETS,
    SECRETS,
)
from controller_manager.client import Forbidden, NotFound
from controller_manager.controllers.deployment.controller import DeploymentController
from controller_manager.controllers.namespace import NamespaceController
from controller_manager.controllers.namespace.conditions import (
    CONDITION_TYPES,
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
    OK_REASONS,
    get_condition,
)
from controller_manager.controllers.replicaset import ReplicaSetController
from tests.controllers.harness import Harness, controller_harness, wait_for

Obj = dict[str, Any]
KUBECTL = str(Path(sys.executable).parent / "kubectl")
HOLD = "example.com/hold"


class QuickNamespaceController(NamespaceController):
    """Upstream's controller with a shorter HA grace period, so the tests that do not measure it run faster."""

    deletion_grace_period: ClassVar[float] = 0.3


async def kubectl(h: Harness, home: Path, *args: str, timeout: float = 60.0) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(h.cluster.kubeconfig_path), "--cache-dir", str(home / "cache"), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "HOME": str(home)})
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def create_namespace(h: Harness, name: str) -> None:
    await h.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def configmap(name: str, namespace: str, *, finalizers: tuple[str, ...] = ()) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def deployment(name: str, namespace: str, replicas: int = 2) -> Obj:
    # A short grace period: a pod's default 30 s would (rightly) make the controller wait 16 s to look again.
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "nginx:1"}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}}


def bare_pod(name: str, namespace: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "busybox"}]}}


async def namespace_or_none(h: Harness, name: str) -> Obj | None:
    try:
        return await h.client.get(NAMESPACES, name)
    except NotFound:
        return None


async def wait_gone(h: Harness, name: str, timeout: float = 20.0) -> None:
    async def gone() -> bool:
        return await namespace_or_none(h, name) is None

    await wait_for(gone, timeout=timeout, what=f"namespace {name} to be gone")


async def wait_condition(h: Harness, name: str, type_: str, status: str, timeout: float = 15.0) -> Obj:
    async def check() -> Obj | None:
        ns = await namespace_or_none(h, name)
        found = get_condition(((ns or {}).get("status") or {}).get("conditions"), type_)
        return dict(found) if found is not None and found.get("status") == status else None

    return await wait_for(check, timeout=timeout, what=f"{type_}={status} on namespace {name}")


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    async with controller_harness(NamespaceController, DeploymentController, ReplicaSetController) as h:
        yield h


@pytest.fixture
async def quick() -> AsyncIterator[Harness]:
    async with controller_harness(QuickNamespaceController) as h:
        yield h


async def test_kubectl_delete_namespace_deletes_its_workloads_then_the_namespace(harness: Harness,
                                                                                 tmp_path: Path) -> None:
    h = harness
    await create_namespace(h, "team")
    await h.client.create(DEPLOYMENTS, deployment("web", "team"))
    await h.client.create(CONFIGMAPS, configmap("settings", "team"))
    await h.client.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token",
                                                                                       "namespace": "team"},
                                    "stringData": {"k": "v"}})
    await h.client.create(PODS, bare_pod("solo", "team"))

    async def all_running() -> bool:
        pods = await h.pods("team")
        return len(pods) == 3 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    await wait_for(all_running, what="the deployment's pods and the bare pod running")

    # kubectl waits until the namespace is gone (it polls it), as against a real cluster.
    deleting = asyncio.create_task(kubectl(h, tmp_path, "delete", "namespace", "team", "--timeout=60s"),
                                   name="test:kubectl-delete")
    try:
        async def terminating() -> bool:
            ns = await namespace_or_none(h, "team")
            return ns is not None and ns["status"].get("phase") == "Terminating"

        await wait_for(terminating, what="namespace team Terminating")
        # Within the controller's grace period the namespace is still there, and closed to new content.
        with pytest.raises(Forbidden, match="unable to create new content in namespace team because it is being "
                                            "terminated"):
            await h.client.create(CONFIGMAPS, configmap("late", "team"))
        assert await namespace_or_none(h, "team") is not None
        code, out = await deleting
    finally:
        if not deleting.done():
            deleting.cancel()
            await asyncio.gather(deleting, return_exceptions=True)
    assert code == 0, out
    assert 'namespace "team" deleted' in out
    assert await namespace_or_none(h, "team") is None
    for res in (PODS, CONFIGMAPS, SECRETS, DEPLOYMENTS, REPLICASETS):
        assert await h.list_objects(res, "team") == [], res.plural
    # Other namespaces are untouched.
    assert await namespace_or_none(h, "default") is not None


async def test_a_finalizer_keeps_the_namespace_terminating_until_it_is_removed(quick: Harness) -> None:
    h = quick
    await create_namespace(h, "held")
    await h.client.create(CONFIGMAPS, configmap("plain", "held"))
    await h.client.create(CONFIGMAPS, configmap("stuck", "held", finalizers=(HOLD,)))
    await h.client.delete(NAMESPACES, "held")

    remaining = await wait_condition(h, "held", CONTENT_REMAINING, "True")
    assert remaining["reason"] == "SomeResourcesRemain"
    assert remaining["message"] == "Some resources are remaining: configmaps. has 1 resource instances"
    ns = await h.client.get(NAMESPACES, "held")
    finalizers = get_condition(ns["status"]["conditions"], FINALIZERS_REMAINING)
    assert finalizers is not None
    assert (finalizers["status"], finalizers["reason"]) == ("True", "SomeFinalizerRemain")
    assert finalizers["message"] == f"Some finalizers are remaining: {HOLD} in 1 resource instances"
    assert ns["status"]["phase"] == "Terminating"
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    # What could be deleted was; the held object is marked, waiting for its finalizer.
    left = await h.list_objects(CONFIGMAPS, "held")
    assert [c["metadata"]["name"] for c in left] == ["stuck"]
    assert left[0]["metadata"].get("deletionTimestamp")

    await h.client.patch(CONFIGMAPS, "stuck", {"metadata": {"finalizers": None}}, "held")
    # The controller looks again 15 // 2 + 1 = 8 s after it saw the finalizer at the latest (sooner when
    # its own condition update comes back as an event).
    await wait_gone(h, "held", timeout=20.0)


async def test_a_restarted_controller_finishes_a_deletion_it_started(quick: Harness) -> None:
    h = quick
    await create_namespace(h, "moving")
    await h.client.create(CONFIGMAPS, configmap("plain", "moving"))
    await h.client.create(CONFIGMAPS, configmap("stuck", "moving", finalizers=(HOLD,)))
    await h.client.delete(NAMESPACES, "moving")
    await wait_condition(h, "moving", FINALIZERS_REMAINING, "True")
    await h.restart(graceful=False)
    await h.client.patch(CONFIGMAPS, "stuck", {"metadata": {"finalizers": None}}, "moving")
    await wait_gone(h, "moving")
    assert await h.list_objects(CONFIGMAPS, "moving") == []


async def test_a_failing_resource_is_reported_and_retried_until_it_succeeds(quick: Harness) -> None:
    h = quick
    await create_namespace(h, "flaky")
    await h.client.create(CONFIGMAPS, configmap("a", "flaky"))
    rule = h.cluster.faults.fail(403, verbs=["deletecollection"], resources=["configmaps"])
    await h.client.delete(NAMESPACES, "flaky")

    failure = await wait_condition(h, "flaky", CONTENT_FAILURE, "True")
    assert failure["reason"] == "ContentDeletionFailed"
    assert failure["message"] == "Failed to delete all resource types, 1 remaining: injected fault (403)"
    assert await namespace_or_none(h, "flaky") is not None

    h.cluster.faults.rules.remove(rule)
    await wait_gone(h, "flaky")


async def test_conditions_turn_back_to_ok_once_the_content_is_gone(quick: Harness) -> None:
    h = quick
    await create_namespace(h, "both")
    await h.client.create(CONFIGMAPS, configmap("stuck", "both", finalizers=(HOLD,)))
    # A second finalizer on the namespace keeps it around after ours is removed, so its final
    # conditions can be read.
    ns = await h.client.get(NAMESPACES, "both")
    ns["spec"]["finalizers"] = ["kubernetes", "example.com/keep"]
    await h.client.request("PUT", NAMESPACES.path(None, "both", "finalize"), body=ns)
    await h.client.delete(NAMESPACES, "both")
    await wait_condition(h, "both", FINALIZERS_REMAINING, "True")
    await h.client.patch(CONFIGMAPS, "stuck", {"metadata": {"finalizers": None}}, "both")

    async def released() -> Obj | None:
        current = await namespace_or_none(h, "both")
        return current if current and current["spec"].get("finalizers") == ["example.com/keep"] else None

    final = await wait_for(released, timeout=20.0, what="the kubernetes finalizer removed")
    conditions = final["status"]["conditions"]
    assert [c["type"] for c in conditions] == list(CONDITION_TYPES)
    for c in conditions:
        assert (c["status"], c["reason"]) == ("False", OK_REASONS[c["type"]]), c
    assert final["status"]["phase"] == "Terminating"


async def test_namespaces_that_are_not_deleted_are_left_alone(quick: Harness) -> None:
    h = quick
    await create_namespace(h, "live")
    await h.client.create(CONFIGMAPS, configmap("keep", "live"))
    await create_namespace(h, "doomed")
    await h.client.create(CONFIGMAPS, configmap("drop", "doomed"))
    await h.client.delete(NAMESPACES, "doomed")
    await wait_gone(h, "doomed")
    live = await h.client.get(NAMESPACES, "live")
    assert live["status"].get("phase") == "Active"
    assert "conditions" not in live["status"]
    assert [c["metadata"]["name"] for c in await h.list_objects(CONFIGMAPS, "live")] == ["keep"]

