"""The StatefulSet controller in-process against kube-sim (scheduler and kubelets on), judged through the API: a
watch on the pods records the order of creations and deletions as the API server serialised them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import is_being_deleted
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import (
    CONTROLLERREVISIONS,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    STATEFULSETS,
)
from controller_manager.client.errors import NotFound
from controller_manager.controllers.persistentvolume import PersistentVolumeBinderController
from controller_manager.controllers.statefulset import StatefulSetController
from tests.controllers.harness import Harness, controller_harness, wait_for

LABELS = {"app": "web"}


def stateful_set(name: str = "web", *, replicas: int = 3, image: str = "nginx:1", claims: bool = True,
                 policy: str | None = None, ordinals_start: int | None = None,
                 pod_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": "web",
        "selector": {"matchLabels": LABELS},
        "template": {"metadata": {"labels": LABELS, "annotations": pod_annotations or {}},
                     "spec": {"containers": [{"name": "nginx", "image": image}]}},
    }
    if claims:
        spec["volumeClaimTemplates"] = [{
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    if policy is not None:
        spec["podManagementPolicy"] = policy
    if ordinals_start is not None:
        spec["ordinals"] = {"start": ordinals_start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


@dataclass
class PodLog:
    """What a pod watch saw, in the API server's order."""

    created: list[str] = field(default_factory=list)
    terminating: list[str] = field(default_factory=list)
    # For each creation: the names of the pods that were Running and Ready at that moment.
    ready_at_creation: dict[str, set[str]] = field(default_factory=dict)
    _ready: set[str] = field(default_factory=set)
    _seen_deleting: set[str] = field(default_factory=set)

    def observe(self, type_: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        uid = pod["metadata"]["uid"]
        if type_ == "ADDED":
            self.created.append(name)
            self.ready_at_creation[name] = set(self._ready)
        if type_ == "DELETED" or is_being_deleted(pod):
            self._ready.discard(name)
            if uid not in self._seen_deleting:
                self._seen_deleting.add(uid)
                self.terminating.append(name)
            return
        running = (pod.get("status") or {}).get("phase") == "Running"
        if running and is_pod_ready(pod):
            self._ready.add(name)
        else:
            self._ready.discard(name)


@contextlib.asynccontextmanager
async def pod_log(h: Harness) -> AsyncIterator[PodLog]:
    log = PodLog()
    _, rv = await h.client.list_all(PODS, "default")
    started = asyncio.Event()

    async def run() -> None:
        async with h.client.watch(PODS, "default", resource_version=rv, allow_bookmarks=False) as stream:
            started.set()
            async for event in stream:
                log.observe(event.type, event.object)

    task = asyncio.create_task(run(), name="test:pod-watch")
    await asyncio.wait_for(started.wait(), 5)
    try:
        yield log
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_ready(h: Harness, name: str, replicas: int, *, timeout: float = 30.0) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        sts = await h.client.get(STATEFULSETS, name, "default")
        status = sts.get("status") or {}
        if (status.get("observedGeneration", 0) >= sts["metadata"]["generation"]
                and status.get("replicas") == replicas and status.get("readyReplicas", 0) == replicas
                and status.get("updatedReplicas", 0) == replicas
                and status.get("currentRevision") == status.get("updateRevision")):
            pods = [p for p in await h.pods(selector="app=web")
                    if not is_being_deleted(p) and p["metadata"]["name"].startswith(f"{name}-")]
            if len(pods) == replicas:
                return sts
        return None

    return await wait_for(check, timeout=timeout, what=f"StatefulSet {name} with {replicas} ready replicas")


async def test_ordered_creation_with_claims_then_rolling_update_then_scale_down() -> None:
    async with controller_harness(StatefulSetController, PersistentVolumeBinderController, nodes=2) as h, \
            pod_log(h) as log:
        # No provisioner here: static volumes for the claims, bound by the persistentvolume-binder; the
        # scheduler binds a pod only once its claim is bound.
        for i in range(3):
            await h.client.create(PERSISTENTVOLUMES, {
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"disk-{i}"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "csi": {"driver": "csi.example.com", "volumeHandle": f"disk-{i}"}}})
        await h.client.create(STATEFULSETS, stateful_set(), "default")
        sts = await wait_ready(h, "web", 3)

        # Created one at a time, in ordinal order, each only once its predecessors were Running and Ready.
        assert log.created == ["web-0", "web-1", "web-2"]
        assert log.ready_at_creation == {"web-0": set(), "web-1": {"web-0"}, "web-2": {"web-0", "web-1"}}
        status = sts["status"]
        assert status["readyReplicas"] == status["currentReplicas"] == status["availableReplicas"] == 3
        assert status["collisionCount"] == 0
        revision = status["updateRevision"]
        assert revision.startswith("web-")

        by_name = {p["metadata"]["name"]: p for p in await h.pods(selector="app=web")}
        for ordinal in range(3):
            pod = by_name[f"web-{ordinal}"]
            labels = pod["metadata"]["labels"]
            assert labels["statefulset.kubernetes.io/pod-name"] == f"web-{ordinal}"
            assert labels["apps.kubernetes.io/pod-index"] == str(ordinal)
            assert labels["controller-revision-hash"] == revision
            assert pod["spec"]["hostname"] == f"web-{ordinal}"
            assert pod["spec"]["subdomain"] == "web"
            assert {"name": "data", "persistentVolumeClaim": {"claimName": f"data-web-{ordinal}"}} in (
                pod["spec"]["volumes"])
            assert pod["metadata"]["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]
        claim_objects = {c["metadata"]["name"]: c for c in await h.list_objects(PERSISTENTVOLUMECLAIMS)}
        assert sorted(claim_objects) == ["data-web-0", "data-web-1", "data-web-2"]
        assert claim_objects["data-web-0"]["metadata"]["labels"] == LABELS
        assert "ownerReferences" not in claim_objects["data-web-0"]["metadata"]  # Retain/Retain

        messages = [e["message"] for e in await h.events_for("web")]
        assert "create Claim data-web-0 Pod web-0 in StatefulSet web success" in messages
        assert "create Pod web-0 in StatefulSet web successful" in messages

        # An image update replaces the pods from the highest ordinal down, one at a time.
        patch = {"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}}}
        await h.client.patch(STATEFULSETS, "web", patch, "default", patch_type="strategic")
        sts = await wait_ready(h, "web", 3)
        assert log.terminating == ["web-2", "web-1", "web-0"]
        new_revision = sts["status"]["updateRevision"]
        assert new_revision != revision
        assert sts["status"]["currentRevision"] == new_revision
        pods = await h.pods(selector="app=web")
        assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods} == {new_revision}
        assert {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:2"}
        revisions = await h.list_objects(CONTROLLERREVISIONS)
        assert sorted((r["revision"], r["metadata"]["name"]) for r in revisions) == [(1, revision),
                                                                                     (2, new_revision)]

        # Scaling down deletes the highest ordinals first and keeps their claims.
        await h.client.patch(STATEFULSETS, "web", {"spec": {"replicas": 1}}, "default", patch_type="merge")
        await wait_ready(h, "web", 1)
        assert log.terminating[3:] == ["web-2", "web-1"]
        claims = {c["metadata"]["name"] for c in await h.list_objects(PERSISTENTVOLUMECLAIMS)}
        assert claims == {"data-web-0", "data-web-1", "data-web-2"}


async def test_parallel_creates_all_at_once_and_start_ordinal_shifts_names() -> None:
    async with controller_harness(StatefulSetController, nodes=2) as h, pod_log(h) as log:
        # Pods turn ready only a second after they start: Parallel must not wait for that.
        sts = stateful_set(policy="Parallel", claims=False, ordinals_start=5,
                           pod_annotations={"sim.controller-manager.io/ready-after-seconds": "1"})
        await h.client.create(STATEFULSETS, sts, "default")
        await wait_ready(h, "web", 3)
        assert sorted(log.created) == ["web-5", "web-6", "web-7"]
        assert log.ready_at_creation == {"web-5": set(), "web-6": set(), "web-7": set()}
        pods = await h.pods(selector="app=web")
        assert {p["metadata"]["labels"]["apps.kubernetes.io/pod-index"] for p in pods} == {"5", "6", "7"}


async def test_failed_pod_is_replaced_under_its_name() -> None:
    async with controller_harness(StatefulSetController, nodes=1) as h:
        await h.client.create(STATEFULSETS, stateful_set(replicas=2, claims=False), "default")
        await wait_ready(h, "web", 2)
        old = await h.client.get(PODS, "web-1", "default")
        status = {**old["status"], "phase": "Failed"}
        await h.client.update_status(PODS, {**old, "status": status})

        async def replaced() -> bool:
            try:
                pod = await h.client.get(PODS, "web-1", "default")
            except NotFound:  # between the failed pod's deletion and its replacement
                return False
            return pod["metadata"]["uid"] != old["metadata"]["uid"] and is_pod_ready(pod)

        await wait_for(replaced, timeout=20, what="web-1 recreated")
        await wait_ready(h, "web", 2)


async def test_adopts_orphans_and_releases_pods_that_stop_matching() -> None:
    async with controller_harness(StatefulSetController, nodes=1, start=False) as h:
        orphan: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "web-0", "namespace": "default", "labels": {**LABELS, "extra": "x"}},
                  "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}
        orphan_uid = (await h.client.create(PODS, orphan, "default"))["metadata"]["uid"]
        stranger = {**orphan, "metadata": {**orphan["metadata"], "name": "other-0"}}
        await h.client.create(PODS, stranger, "default")  # matches the selector, but is not a member by name
        old_revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                        "metadata": {"name": "web-old", "namespace": "default", "labels": LABELS},
                        "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 1}
        await h.client.create(CONTROLLERREVISIONS, old_revision, "default")
        sts = await h.client.create(STATEFULSETS, stateful_set(replicas=2, claims=False), "default")
        await h.start()
        await wait_ready(h, "web", 2)
        # The orphan was adopted and given its identity labels (an "update" of the pod); lacking the revision
        # label, it was then replaced by the rolling update, as upstream replaces it.
        messages = [e["message"] for e in await h.events_for("web")]
        assert "update Pod web-0 in StatefulSet web successful" in messages
        assert "delete Pod web-0 in StatefulSet web successful" in messages
        web0 = await h.client.get(PODS, "web-0", "default")
        assert web0["metadata"]["uid"] != orphan_uid
        assert web0["metadata"]["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]
        assert "ownerReferences" not in (await h.client.get(PODS, "other-0", "default"))["metadata"]

        # A pod relabelled out of the selector is released, and its ordinal gets a new pod... under the same
        # name it cannot, so the set waits: exactly upstream's behaviour.
        await h.client.patch(PODS, "web-1", {"metadata": {"labels": {"app": "elsewhere"}}}, "default",
                             patch_type="merge")

        async def released() -> bool:
            pod = await h.client.get(PODS, "web-1", "default")
            return not pod["metadata"].get("ownerReferences")

        await wait_for(released, what="web-1 released")
        revisions = sorted(await h.list_objects(CONTROLLERREVISIONS), key=lambda r: r["revision"])
        assert next(r["metadata"]["name"] for r in revisions) == "web-old"  # adopted, then kept as history
        assert [r["revision"] for r in revisions] == [1, 2]
        assert {r["metadata"]["ownerReferences"][0]["uid"] for r in revisions} == {sts["metadata"]["uid"]}


async def test_workers_flag() -> None:
    async with controller_harness(StatefulSetController, nodes=1, start=False,
                                  options={"concurrent_statefulset_syncs": 3}) as h:
        await h.start()
        ctrl = h.controller(StatefulSetController)
        assert ctrl.workers() == 3
        assert ctrl.queue.name == "statefulset"
