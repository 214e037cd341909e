"""The attach/detach controller against kube-sim with its simulated CSI driver: a pod using a claim bound to a
static CSI PersistentVolume gets a VolumeAttachment, starts only once the simulated external-attacher has
attached it and the node lists it in ``volumesAttached``; deleting the pod detaches it."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any

from controller_manager.api.resources import (
    CSIDRIVERS,
    CSINODES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    STORAGECLASSES,
    VOLUMEATTACHMENTS,
)
from controller_manager.client.errors import NotFound
from controller_manager.controllers.attachdetach import AttachDetachController
from controller_manager.manager.rbac import rules_for
from controller_manager.sim.apiserver import requestinfo
from controller_manager.sim.apiserver.requestinfo import RequestInfo
from controller_manager.sim.storage import ATTACH_ERROR_ANNOTATION, DEFAULT_DRIVER, StorageConfig
from tests.controllers.harness import Harness, controller_harness, wait_for
from tests.packaging.test_rbac_coverage import allows

NS = "default"
STORAGE = StorageConfig(provision_delay=0.1, delete_delay=0.1, attach_delay=0.5, detach_delay=0.2)


def attachment_name(handle: str, node: str) -> str:
    return "csi-" + hashlib.sha256(f"{handle}{DEFAULT_DRIVER}{node}".encode()).hexdigest()


async def bound_claim(h: Harness, name: str, handle: str, *, access_modes: tuple[str, ...] = ("ReadWriteOnce",),
                      pv_annotations: dict[str, str] | None = None) -> str:
    """A claim bound to a static CSI PV, bound by hand as the PV controller would bind it (bind-completed: the
    scheduler binds a pod only once its claims are fully bound). Returns the PV name."""
    pv_name = f"pv-{name}"
    claim = await h.client.create(PERSISTENTVOLUMECLAIMS, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": list(access_modes), "storageClassName": "", "volumeName": pv_name,
                 "resources": {"requests": {"storage": "1Gi"}}}})
    await h.client.create(PERSISTENTVOLUMES, {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "annotations": pv_annotations or {}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": list(access_modes), "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain",
                 "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": name,
                              "uid": claim["metadata"]["uid"]},
                 "csi": {"driver": DEFAULT_DRIVER, "volumeHandle": handle}}})
    pv = await h.client.get(PERSISTENTVOLUMES, pv_name)
    await h.client.update_status(PERSISTENTVOLUMES, {**pv, "status": {"phase": "Bound"}})
    claim = await h.client.get(PERSISTENTVOLUMECLAIMS, name, NS)
    await h.client.update_status(PERSISTENTVOLUMECLAIMS, {**claim, "status": {
        "phase": "Bound", "accessModes": list(access_modes), "capacity": {"storage": "1Gi"}}})
    return pv_name


def pod_using(name: str, claim: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.example/app:1"}],
                            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


@contextlib.asynccontextmanager
async def first_running(h: Harness, handle: str) -> AsyncIterator[dict[str, Any]]:
    """Records, when a pod is first seen Running, its node's volumesAttached and its VolumeAttachment then."""
    seen: dict[str, Any] = {}
    _, rv = await h.client.list_all(PODS, NS)
    started = asyncio.Event()

    async def run() -> None:
        async with h.client.watch(PODS, NS, resource_version=rv, allow_bookmarks=False) as stream:
            started.set()
            async for event in stream:
                pod = event.object
                name = pod["metadata"]["name"]
                if (pod.get("status") or {}).get("phase") == "Running" and name not in seen:
                    node = pod["spec"]["nodeName"]
                    attached = (await h.client.get(NODES, node)).get("status", {}).get("volumesAttached")
                    try:
                        va = await h.client.get(VOLUMEATTACHMENTS, attachment_name(handle, node))
                    except NotFound:
                        va = None
                    seen[name] = {"volumesAttached": attached, "attachment": va}

    task = asyncio.create_task(run(), name="test:pod-watch")
    await asyncio.wait_for(started.wait(), 5)
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_simulated_driver_publishes_its_objects() -> None:
    async with controller_harness(nodes=2, storage=STORAGE) as h:
        driver = await h.client.get(CSIDRIVERS, DEFAULT_DRIVER)
        assert driver["spec"]["attachRequired"] is True
        standard = await h.client.get(STORAGECLASSES, "standard")
        assert standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
        assert standard["provisioner"] == DEFAULT_DRIVER

        async def csi_nodes() -> list[dict[str, Any]] | None:
            items = await h.list_objects(CSINODES, None)
            return items if len(items) == 2 else None

        for csi_node in await wait_for(csi_nodes, what="a CSINode per node"):
            node = await h.client.get(NODES, csi_node["metadata"]["name"])
            assert csi_node["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
            assert csi_node["spec"]["drivers"] == [{"name": DEFAULT_DRIVER, "nodeID": node["metadata"]["name"],
                                                     "topologyKeys": ["topology.kubernetes.io/zone"]}]
            annotation = node["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"]
            assert annotation == "true"


async def test_a_pod_starts_only_once_its_volume_is_attached_and_deleting_it_detaches() -> None:
    seen_requests: list[RequestInfo] = []

    def record(request: Any) -> float:
        seen_requests.append(requestinfo.parse(request.method, request.path, request.query))
        return 0.0

    async with controller_harness(AttachDetachController, nodes=2, storage=STORAGE, start=False) as h:
        h.cluster.faults.set_latency(record)
        await h.start()
        await bound_claim(h, "data", "vol-1")
        unique = f"kubernetes.io/csi/{DEFAULT_DRIVER}^vol-1"
        async with first_running(h, "vol-1") as seen:
            await h.client.create(PODS, pod_using("app", "data"))

            async def running() -> dict[str, Any] | None:
                pod = await h.client.get(PODS, "app", NS)
                return pod if (pod.get("status") or {}).get("phase") == "Running" else None

            pod = await wait_for(running, timeout=30, what="the pod to run")
            await wait_for(lambda: _value("app" in seen), what="the watch to see it")
        node = pod["spec"]["nodeName"]
        name = attachment_name("vol-1", node)
        # When the pod first ran, its volume was attached and reported attached on its node.
        assert seen["app"]["volumesAttached"] == [{"name": unique, "devicePath": ""}]
        va = seen["app"]["attachment"]
        assert va["status"]["attached"] is True
        assert va["spec"] == {"attacher": DEFAULT_DRIVER, "nodeName": node,
                              "source": {"persistentVolumeName": "pv-data"}}
        assert va["metadata"]["finalizers"] == ["external-attacher/csi-sim-controller-manager-io"]
        node_status = (await h.client.get(NODES, node))["status"]
        assert node_status["volumesInUse"] == [unique]
        events = [(e["reason"], e["message"], e["source"]["component"]) for e in await h.events_for("app")]
        assert ("SuccessfulAttachVolume", 'AttachVolume.Attach succeeded for volume "pv-data" ',
                "attachdetach-controller") in events

        await h.client.delete(PODS, "app", NS)

        async def detached() -> bool:
            try:
                await h.client.get(VOLUMEATTACHMENTS, name)
                return False
            except NotFound:
                status = (await h.client.get(NODES, node))["status"]
                return "volumesAttached" not in status and "volumesInUse" not in status

        await wait_for(detached, timeout=30, what="the volume to be detached")
        await h.stop()
        h.cluster.faults.set_latency(None)
    # Every request the controller sent (the test's own are in it too, all allowed to the controller) is one its
    # ClusterRole allows; among them the VolumeAttachment writes and the node status patches.
    controller = [i for i in seen_requests if i.is_resource and (i.verb, i.resource) in {
        ("create", "volumeattachments"), ("delete", "volumeattachments"), ("patch", "nodes"), ("get", "nodes"),
        ("watch", "volumeattachments"), ("watch", "csidrivers"), ("watch", "csinodes"), ("create", "events")}]
    rules = rules_for([AttachDetachController.name])
    assert {(i.verb, i.resource, i.subresource) for i in controller} >= {
        ("create", "volumeattachments", ""), ("delete", "volumeattachments", ""), ("patch", "nodes", "status"),
        ("watch", "volumeattachments", ""), ("watch", "csidrivers", ""), ("watch", "csinodes", ""),
        ("create", "events", "")}
    assert [i for i in controller if not allows(rules, i)] == []


async def test_a_pod_waits_while_the_attacher_reports_an_error() -> None:
    async with controller_harness(AttachDetachController, nodes=1, storage=STORAGE) as h:
        await bound_claim(h, "broken", "vol-2", pv_annotations={ATTACH_ERROR_ANNOTATION: "rpc error: busy"})
        await h.client.create(PODS, pod_using("app", "broken", node="node-1"))

        async def failed() -> list[str] | None:
            messages = [e["message"] for e in await h.events_for("app") if e["reason"] == "FailedAttachVolume"]
            return messages or None

        assert (await wait_for(failed, timeout=30, what="FailedAttachVolume"))[0] == (
            'AttachVolume.Attach failed for volume "pv-broken" : rpc error: busy')
        pod = await h.client.get(PODS, "app", NS)
        assert pod["status"]["phase"] == "Pending"
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert waiting["reason"] == "ContainerCreating"
        node = await h.client.get(NODES, "node-1")
        assert "volumesAttached" not in node["status"]


async def test_an_exclusive_volume_in_use_elsewhere_is_a_multi_attach_error() -> None:
    async with controller_harness(AttachDetachController, nodes=2, storage=STORAGE) as h:
        await bound_claim(h, "data", "vol-3")
        await h.client.create(PODS, pod_using("first", "data", node="node-1"))

        async def running() -> bool:
            return (await h.client.get(PODS, "first", NS)).get("status", {}).get("phase") == "Running"

        await wait_for(running, timeout=30, what="the first pod to run")
        await h.client.create(PODS, pod_using("second", "data", node="node-2"))

        async def multi_attach() -> list[str] | None:
            messages = [e["message"] for e in await h.events_for("second") if e["reason"] == "FailedAttachVolume"]
            return messages or None

        assert await wait_for(multi_attach, timeout=30, what="the Multi-Attach error") == [
            'Multi-Attach error for volume "pv-data" Volume is already used by pod(s) first']
        # Once the first pod is gone (and its node stops using the volume), the volume moves.
        await h.client.delete(PODS, "first", NS)

        async def second_running() -> bool:
            return (await h.client.get(PODS, "second", NS)).get("status", {}).get("phase") == "Running"

        await wait_for(second_running, timeout=30, what="the second pod to run on the other node")
        with contextlib.suppress(NotFound):
            va = await h.client.get(VOLUMEATTACHMENTS, attachment_name("vol-3", "node-1"))
            raise AssertionError(f"the old attachment is still there: {va}")


async def _value(value: bool) -> bool:
    return value
