"""kube-sim's simulated CSI driver: its objects, external-provisioner, external-attacher, and the kubelets'
volume handling, driven in-process (no controller-manager: the tests play the PV controller and the
attach/detach controller where needed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from controller_manager.api.csi import attachment_name, unique_volume_name
from controller_manager.api.resources import (
    EVENTS,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    STORAGECLASSES,
    VOLUMEATTACHMENTS,
)
from controller_manager.sim.cluster import SimCluster
from controller_manager.sim.kubelet import KubeletConfig
from controller_manager.sim.storage import ATTACH_ERROR_ANNOTATION, DEFAULT_DRIVER, StorageConfig

T = TypeVar("T")
NS = "default"
FAST = KubeletConfig(node_status_update_frequency=0.5, lease_renew_interval=1.0, termination_delay=0.05,
                     events=False)
STORAGE = StorageConfig(provision_delay=0.05, delete_delay=0.05, attach_delay=0.05, detach_delay=0.05,
                        volume_poll=0.05)
PROVISIONER = "volume.kubernetes.io/storage-provisioner"


async def eventually(check: Callable[[], T | None], what: str, timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def holds(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return False
        await asyncio.sleep(0.02)
    return True


def get(api: Any, res: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] = api.get(res, namespace, name)
    except Exception:
        return None
    return obj


def claim(name: str, *, class_name: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    if class_name is not None:
        spec["storageClassName"] = class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}}, "spec": spec}


async def test_the_default_class_gets_claims_and_the_provisioner_makes_their_volumes() -> None:
    async with SimCluster(nodes=1, kubelet_config=FAST, storage=STORAGE) as cluster:
        api = cluster.api
        created = api.create(PERSISTENTVOLUMECLAIMS, claim("data"), NS)
        assert created["spec"]["storageClassName"] == "standard"  # DefaultStorageClass admission
        assert await holds(lambda: not api.list(PERSISTENTVOLUMES)[0], 0.3)  # no provisioner annotation yet
        api.patch(PERSISTENTVOLUMECLAIMS, NS, "data", {"metadata": {"annotations": {PROVISIONER: DEFAULT_DRIVER}}},
                  "merge")
        uid = created["metadata"]["uid"]
        pv = await eventually(lambda: get(api, PERSISTENTVOLUMES, None, f"pvc-{uid}"), "the PV")
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == DEFAULT_DRIVER
        assert pv["metadata"]["finalizers"] == ["external-provisioner.volume.kubernetes.io/finalizer"]
        spec = pv["spec"]
        assert spec["capacity"] == {"storage": "2Gi"}
        assert spec["claimRef"]["uid"] == uid
        assert spec["claimRef"]["name"] == "data"
        assert spec["persistentVolumeReclaimPolicy"] == "Delete"
        assert spec["storageClassName"] == "standard"
        assert spec["csi"]["driver"] == DEFAULT_DRIVER
        assert spec["csi"]["volumeHandle"] == f"vol-{uid}"
        assert "nodeAffinity" not in spec
        events = [(e["reason"], e["message"]) for e in api.list(EVENTS, NS)[0]
                  if e["involvedObject"]["name"] == "data"]
        assert events == [("Provisioning", 'External provisioner is provisioning volume for claim "default/data"'),
                          ("ProvisioningSucceeded", f"Successfully provisioned volume pvc-{uid}")]
        # A Released volume of a Delete class is deleted, its finalizer first removed.
        api.update(PERSISTENTVOLUMES, {**pv, "status": {"phase": "Released"}}, subresource="status")
        await eventually(lambda: get(api, PERSISTENTVOLUMES, None, f"pvc-{uid}") is None, "the PV to be deleted")


async def test_wait_for_first_consumer_claims_are_provisioned_in_the_selected_nodes_zone() -> None:
    async with SimCluster(nodes=2, zones=2, kubelet_config=FAST, storage=STORAGE) as cluster:
        api = cluster.api
        api.create(STORAGECLASSES, {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                    "metadata": {"name": "zonal"}, "provisioner": DEFAULT_DRIVER,
                                    "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain"})
        created = api.create(PERSISTENTVOLUMECLAIMS, claim("zonal", class_name="zonal",
                                                           annotations={PROVISIONER: DEFAULT_DRIVER}), NS)
        uid = created["metadata"]["uid"]
        assert await holds(lambda: get(api, PERSISTENTVOLUMES, None, f"pvc-{uid}") is None, 0.3)
        api.patch(PERSISTENTVOLUMECLAIMS, NS, "zonal",
                  {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-2"}}}, "merge")
        pv = await eventually(lambda: get(api, PERSISTENTVOLUMES, None, f"pvc-{uid}"), "the PV")
        assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}]}}
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert "finalizers" not in pv["metadata"]


async def test_the_attacher_attaches_fails_and_detaches_volume_attachments() -> None:
    async with SimCluster(nodes=1, kubelet_config=FAST, storage=STORAGE) as cluster:
        api = cluster.api
        api.create(PERSISTENTVOLUMES, {"apiVersion": "v1", "kind": "PersistentVolume",
                                       "metadata": {"name": "bad", "annotations": {ATTACH_ERROR_ANNOTATION: "boom"}},
                                       "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                "csi": {"driver": DEFAULT_DRIVER, "volumeHandle": "bad"}}})
        for name, pv_name in (("good", "good"), ("bad", "bad")):
            api.create(VOLUMEATTACHMENTS, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                           "metadata": {"name": name},
                                           "spec": {"attacher": DEFAULT_DRIVER, "nodeName": "node-1",
                                                    "source": {"persistentVolumeName": pv_name}}})
        good = await eventually(lambda: (v := get(api, VOLUMEATTACHMENTS, None, "good")) and
                                (v.get("status") or {}).get("attached") and v, "the attachment")
        assert good["metadata"]["finalizers"] == ["external-attacher/csi-sim-controller-manager-io"]
        bad = await eventually(lambda: (v := get(api, VOLUMEATTACHMENTS, None, "bad")) and
                               (v.get("status") or {}).get("attachError") and v, "the attach error")
        assert bad["status"]["attached"] is False
        assert bad["status"]["attachError"]["message"] == "boom"
        api.delete(VOLUMEATTACHMENTS, None, "good")
        await eventually(lambda: get(api, VOLUMEATTACHMENTS, None, "good") is None, "the detach")
        # Another driver's attachments are not this attacher's.
        api.create(VOLUMEATTACHMENTS, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                       "metadata": {"name": "other"},
                                       "spec": {"attacher": "other.csi.example.com", "nodeName": "node-1",
                                                "source": {"persistentVolumeName": "x"}}})
        def untouched() -> bool:
            other = get(api, VOLUMEATTACHMENTS, None, "other") or {}
            return not (other.get("status") or {}).get("attached") and not other["metadata"].get("finalizers")

        assert await holds(untouched, 0.3)


async def test_kubelets_start_a_pod_only_once_its_volumes_are_ready_and_report_them_in_use() -> None:
    async with SimCluster(nodes=1, kubelet_config=FAST, storage=STORAGE) as cluster:
        api = cluster.api
        created = api.create(PERSISTENTVOLUMECLAIMS, claim("data", class_name=""), NS)
        api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": NS},
                          "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "img"}],
                                   "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}},
                   NS)

        def phase() -> str:
            return str((api.get(PODS, NS, "app").get("status") or {}).get("phase"))

        def node_status() -> dict[str, Any]:
            return dict(api.get(NODES, None, "node-1").get("status") or {})

        # The claim is not bound: the pod waits, and no volume is in use yet.
        assert await holds(lambda: phase() == "Pending", 0.3)
        assert "volumesInUse" not in node_status()
        # Bind it (the PV controller's work) to a CSI volume: now the node reports it in use, and the pod waits
        # for the attach/detach controller.
        api.create(PERSISTENTVOLUMES, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
                                       "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                                                "claimRef": {"namespace": NS, "name": "data",
                                                             "uid": created["metadata"]["uid"]},
                                                "csi": {"driver": DEFAULT_DRIVER, "volumeHandle": "h"}}})
        stored = api.get(PERSISTENTVOLUMECLAIMS, NS, "data")
        api.update(PERSISTENTVOLUMECLAIMS, {**stored, "spec": {**stored["spec"], "volumeName": "pv"}})
        stored = api.get(PERSISTENTVOLUMECLAIMS, NS, "data")
        api.update(PERSISTENTVOLUMECLAIMS, {**stored, "status": {"phase": "Bound"}}, subresource="status")
        unique = unique_volume_name(DEFAULT_DRIVER, "h")
        await eventually(lambda: node_status().get("volumesInUse") == [unique], "volumesInUse")
        assert await holds(lambda: phase() == "Pending", 0.3)
        # Play the attach/detach controller: the VolumeAttachment, then volumesAttached.
        name = attachment_name("h", DEFAULT_DRIVER, "node-1")
        api.create(VOLUMEATTACHMENTS, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                                       "metadata": {"name": name},
                                       "spec": {"attacher": DEFAULT_DRIVER, "nodeName": "node-1",
                                                "source": {"persistentVolumeName": "pv"}}})
        await eventually(lambda: (api.get(VOLUMEATTACHMENTS, None, name).get("status") or {}).get("attached"),
                         "the attachment")
        assert await holds(lambda: phase() == "Pending", 0.3)  # not reported attached on the node yet
        api.patch(NODES, None, "node-1", {"status": {"volumesAttached": [{"name": unique, "devicePath": ""}]}},
                  "strategic", subresource="status")
        await eventually(lambda: phase() == "Running", "the pod to run")
        # The pod goes: its volume is no longer in use.
        api.delete(PODS, NS, "app")
        await eventually(lambda: "volumesInUse" not in node_status(), "volumesInUse to empty")


async def test_without_storage_kubelets_ignore_volumes() -> None:
    async with SimCluster(nodes=1, kubelet_config=FAST) as cluster:
        api = cluster.api
        api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": NS},
                          "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "img"}],
                                   "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "none"}}]}},
                   NS)
        await eventually(lambda: (api.get(PODS, NS, "app").get("status") or {}).get("phase") == "Running", "run")
        assert api.list(STORAGECLASSES)[0] == []
        assert "volumesInUse" not in (api.get(NODES, None, "node-1").get("status") or {})


