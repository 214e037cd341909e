"""persistentvolume-binder-controller end to end: the controller runs as the manager runs it (informers, queues,
events) against kube-sim, and everything is observed through the API as a client sees it."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from controller_manager.api.resources import NODES as NODES_RES
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, PODS, STORAGECLASSES
from controller_manager.client.errors import NotFound
from controller_manager.controllers.persistentvolume import PersistentVolumeBinderController
from controller_manager.controllers.pvcprotection import PVCProtectionController
from controller_manager.controllers.pvprotection import PVProtectionController
from tests.controllers.harness import Harness, controller_harness, wait_for

# As in a cluster: kube-sim's admission puts the protection finalizers on every claim and volume, so deleting
# one completes only with the protection controllers beside the binder.
BINDING = (PersistentVolumeBinderController, PVCProtectionController, PVProtectionController)

OPTIONS = {"pvclaimbinder_sync_period": 1.0}
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"


def volume(name: str, size: str, klass: str, policy: str = "Retain") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": klass,
                     "persistentVolumeReclaimPolicy": policy,
                     "csi": {"driver": "csi.example.com", "volumeHandle": name}}}


def claim(name: str, size: str, klass: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if klass is not None:
        spec["storageClassName"] = klass
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


async def _get(h: Harness, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
    return await h.client.get(res, name, namespace)


async def test_static_binding_then_retain_releases_the_volume() -> None:
    async with controller_harness(*BINDING, nodes=1, options=OPTIONS) as h:
        await h.client.create(PERSISTENTVOLUMES, volume("pv-big", "10Gi", "manual"))
        await h.client.create(PERSISTENTVOLUMES, volume("pv-small", "2Gi", "manual"))
        await h.client.create(PERSISTENTVOLUMES, volume("pv-other-class", "1Gi", "other"))
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("data", "1Gi", "manual"))

        async def bound() -> dict[str, Any] | None:
            pvc = await _get(h, PERSISTENTVOLUMECLAIMS, "data", "default")
            return pvc if pvc.get("status", {}).get("phase") == "Bound" else None

        pvc = await wait_for(bound, what="claim Bound")
        assert pvc["spec"]["volumeName"] == "pv-small"  # the smallest volume of the class that fits
        assert pvc["metadata"]["annotations"] == {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}
        assert pvc["status"]["capacity"] == {"storage": "2Gi"}
        assert pvc["status"]["accessModes"] == ["ReadWriteOnce"]

        async def pv_bound() -> dict[str, Any] | None:
            pv = await _get(h, PERSISTENTVOLUMES, "pv-small")
            return pv if pv.get("status", {}).get("phase") == "Bound" else None

        pv = await wait_for(pv_bound, what="volume Bound")
        ref = pv["spec"]["claimRef"]
        assert (ref["kind"], ref["namespace"], ref["name"], ref["uid"]) == (
            "PersistentVolumeClaim", "default", "data", pvc["metadata"]["uid"])
        assert pv["metadata"]["annotations"] == {BOUND_BY_CONTROLLER: "yes"}
        assert pv["status"]["lastPhaseTransitionTime"]
        for name in ("pv-big", "pv-other-class"):
            assert (await _get(h, PERSISTENTVOLUMES, name))["status"]["phase"] == "Available"

        await h.client.delete(PERSISTENTVOLUMECLAIMS, "data", "default")

        async def released() -> dict[str, Any] | None:
            pv = await _get(h, PERSISTENTVOLUMES, "pv-small")
            return pv if pv.get("status", {}).get("phase") == "Released" else None

        pv = await wait_for(released, what="volume Released")
        assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]  # Retain: kept, still pointing at it
        # A new claim of the same name does not get the released volume back.
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("data", "1Gi", "manual"))
        again = await wait_for(bound, what="new claim Bound")
        assert again["spec"]["volumeName"] == "pv-big"


async def test_prebinding_by_volume_name_and_by_claim_ref() -> None:
    async with controller_harness(*BINDING, nodes=1, options=OPTIONS) as h:
        await h.client.create(PERSISTENTVOLUMES, volume("wanted", "5Gi", ""))
        reserved = volume("reserved", "5Gi", "")
        reserved["spec"]["claimRef"] = {"namespace": "default", "name": "owner"}
        await h.client.create(PERSISTENTVOLUMES, reserved)
        asks = claim("asks", "1Gi", "")
        asks["spec"]["volumeName"] = "wanted"
        await h.client.create(PERSISTENTVOLUMECLAIMS, asks)
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("owner", "1Gi", ""))

        async def phases() -> tuple[str, str] | None:
            a = await _get(h, PERSISTENTVOLUMECLAIMS, "asks", "default")
            o = await _get(h, PERSISTENTVOLUMECLAIMS, "owner", "default")
            got = (a.get("status", {}).get("phase"), o.get("status", {}).get("phase"))
            return got if got == ("Bound", "Bound") else None

        await wait_for(phases, what="both claims Bound")
        asks_now = await _get(h, PERSISTENTVOLUMECLAIMS, "asks", "default")
        owner_now = await _get(h, PERSISTENTVOLUMECLAIMS, "owner", "default")
        # The user chose the volume: only bind-completed on the claim, bound-by-controller on the volume.
        assert asks_now["metadata"]["annotations"] == {BIND_COMPLETED: "yes"}
        assert (await _get(h, PERSISTENTVOLUMES, "wanted"))["metadata"]["annotations"] == {BOUND_BY_CONTROLLER: "yes"}
        # The volume chose the claim: the controller set the claim's volumeName, the volume keeps no annotation.
        assert owner_now["spec"]["volumeName"] == "reserved"
        assert owner_now["metadata"]["annotations"] == {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}
        assert "annotations" not in (await _get(h, PERSISTENTVOLUMES, "reserved"))["metadata"]


async def test_claim_without_class_or_volume_gets_failed_binding_event() -> None:
    async with controller_harness(*BINDING, nodes=1, options=OPTIONS) as h:
        # storageClassName "" (explicitly no class: neither admission nor the binder gives it the default one).
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("lonely", "1Gi", ""))

        async def event() -> list[dict[str, Any]] | None:
            return [e for e in await h.events_for("lonely") if e["reason"] == "FailedBinding"] or None

        events = await wait_for(event, what="FailedBinding event")
        assert events[0]["type"] == "Normal"
        assert events[0]["message"] == "no persistent volumes available for this claim and no storage class is set"
        assert events[0]["source"]["component"] == "persistentvolume-controller"
        pvc = await _get(h, PERSISTENTVOLUMECLAIMS, "lonely", "default")
        assert pvc["status"]["phase"] == "Pending"


async def test_wait_for_first_consumer_claim_is_provisioned_on_the_scheduled_node() -> None:
    async with controller_harness(*BINDING, nodes=2, options=OPTIONS) as h:
        await h.client.create(STORAGECLASSES, {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "wffc"},
            "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"})
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("data", "1Gi", "wffc"))

        async def waiting_event() -> list[dict[str, Any]] | None:
            return [e for e in await h.events_for("data") if e["reason"] == "WaitForFirstConsumer"] or None

        events = await wait_for(waiting_event, what="WaitForFirstConsumer event")
        assert events[0]["message"] == "waiting for first consumer to be created before binding"

        await h.client.create(PODS, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})

        async def annotated() -> dict[str, str] | None:
            pvc = await _get(h, PERSISTENTVOLUMECLAIMS, "data", "default")
            anns = pvc["metadata"].get("annotations") or {}
            return anns if STORAGE_PROVISIONER in anns and SELECTED_NODE in anns else None

        anns = await wait_for(annotated, what="selected-node and storage-provisioner annotations")
        assert anns[STORAGE_PROVISIONER] == anns[BETA_STORAGE_PROVISIONER] == "csi.example.com"
        nodes = [n["metadata"]["name"] for n in await h.list_objects(NODES_RES, None)]
        assert anns[SELECTED_NODE] in nodes

        async def external_event() -> list[dict[str, Any]] | None:
            return [e for e in await h.events_for("data") if e["reason"] == "ExternalProvisioning"] or None

        external = await wait_for(external_event, what="ExternalProvisioning event")
        assert external[0]["message"].startswith(
            "Waiting for a volume to be created either by the external provisioner 'csi.example.com' or manually by "
            "the system administrator.")
        # No provisioner runs here: the pod waits, unbound, for its claim.
        assert not (await _get(h, PODS, "app", "default"))["spec"].get("nodeName")

        # The volume a provisioner would create: bound to the claim; the binder completes the binding and the
        # scheduler then binds the pod to the selected node.
        pv = volume("pvc-provisioned", "1Gi", "wffc", "Delete")
        pvc = await _get(h, PERSISTENTVOLUMECLAIMS, "data", "default")
        pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                                  "name": "data", "uid": pvc["metadata"]["uid"]}
        pv["metadata"]["annotations"] = {"pv.kubernetes.io/provisioned-by": "csi.example.com"}
        await h.client.create(PERSISTENTVOLUMES, pv)

        async def scheduled() -> str | None:
            return (await _get(h, PODS, "app", "default"))["spec"].get("nodeName") or None

        assert await wait_for(scheduled, timeout=20.0, what="pod bound") == anns[SELECTED_NODE]
        pvc = await _get(h, PERSISTENTVOLUMECLAIMS, "data", "default")
        assert (pvc["status"]["phase"], pvc["spec"]["volumeName"]) == ("Bound", "pvc-provisioned")

        # Reclaim Delete of an externally provisioned volume: Released, left to the external deleter.
        await h.client.delete(PODS, "app", "default", grace_period_seconds=0)
        await h.client.delete(PERSISTENTVOLUMECLAIMS, "data", "default")

        async def released() -> bool:
            try:
                pv = await _get(h, PERSISTENTVOLUMES, "pvc-provisioned")
            except NotFound:
                return False
            return pv.get("status", {}).get("phase") == "Released"

        await wait_for(released, what="provisioned volume Released")


async def test_lost_claim_and_refused_recycle() -> None:
    async with controller_harness(*BINDING, nodes=1, options=OPTIONS) as h:
        await h.client.create(PERSISTENTVOLUMES, volume("keep", "1Gi", "a"))
        await h.client.create(PERSISTENTVOLUMES, volume("scrub", "1Gi", "b", "Recycle"))
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("loses", "1Gi", "a"))
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("recycled", "1Gi", "b"))

        async def phase(res: Any, name: str, want: str, namespace: str | None = None) -> bool:
            try:
                obj = await _get(h, res, name, namespace)
            except NotFound:
                return False
            return bool(obj.get("status", {}).get("phase") == want)

        for name in ("loses", "recycled"):
            await wait_for(lambda name=name: phase(PERSISTENTVOLUMECLAIMS, name, "Bound", "default"),  # type: ignore[misc]
                           what=f"{name} Bound")
        # The bound volume goes away: the claim is Lost, with a Warning. (pv-protection keeps a Bound volume
        # while it is bound: an administrator forcing it away removes the finalizer.)
        await h.client.delete(PERSISTENTVOLUMES, "keep")
        await h.client.patch(PERSISTENTVOLUMES, "keep", {"metadata": {"finalizers": None}})
        await wait_for(lambda: phase(PERSISTENTVOLUMECLAIMS, "loses", "Lost", "default"), what="claim Lost")
        lost = [e for e in await h.events_for("loses") if e["reason"] == "ClaimLost"]
        assert [(e["type"], e["message"]) for e in lost] == [
            ("Warning", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")]
        # Recycle is refused: the released volume fails with upstream's event.
        await h.client.delete(PERSISTENTVOLUMECLAIMS, "recycled", "default")
        await wait_for(lambda: phase(PERSISTENTVOLUMES, "scrub", "Failed"), what="recycled volume Failed")
        pv = await _get(h, PERSISTENTVOLUMES, "scrub")
        assert pv["status"]["message"] == "No recycler plugin found for the volume!"
        events = [e for e in await h.events_for("scrub", namespace="default") if e["reason"] == "VolumeFailedRecycle"]
        assert [(e["type"], e["message"]) for e in events] == [
            ("Warning", "No recycler plugin found for the volume!")]


async def test_hostpath_provisioner_provisions_and_deletes() -> None:
    """--enable-hostpath-provisioner: a /tmp directory per claim, the PV bound to it, deleted with the claim."""
    options = {**OPTIONS, "enable_hostpath_provisioner": True}
    async with controller_harness(*BINDING, nodes=1, options=options) as h:
        await h.client.create(STORAGECLASSES, {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "hostpath"},
            "provisioner": "kubernetes.io/host-path"})
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("scratch", "1Gi", "hostpath"))

        async def bound() -> dict[str, Any] | None:
            pvc = await _get(h, PERSISTENTVOLUMECLAIMS, "scratch", "default")
            return pvc if pvc.get("status", {}).get("phase") == "Bound" else None

        pvc = await wait_for(bound, what="claim Bound")
        name = f"pvc-{pvc['metadata']['uid']}"
        assert pvc["spec"]["volumeName"] == name
        assert pvc["metadata"]["annotations"][STORAGE_PROVISIONER] == "kubernetes.io/host-path"
        pv = await _get(h, PERSISTENTVOLUMES, name)
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "kubernetes.io/host-path"
        # The binder's own, then the one StorageObjectInUseProtection admission adds.
        assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-controller", "kubernetes.io/pv-protection"]
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
        path = pv["spec"]["hostPath"]["path"]
        assert path.startswith("/tmp/hostpath_pv/")
        assert await asyncio.to_thread(os.path.isdir, path)
        events = [e for e in await h.events_for("scratch") if e["reason"] == "ProvisioningSucceeded"]
        assert events[0]["message"] == f"Successfully provisioned volume {name} using kubernetes.io/host-path"

        await h.client.delete(PERSISTENTVOLUMECLAIMS, "scratch", "default")

        async def gone() -> bool:
            try:
                await _get(h, PERSISTENTVOLUMES, name)
            except NotFound:
                return True
            return False

        await wait_for(gone, what="provisioned volume deleted")
        assert not await asyncio.to_thread(os.path.exists, path)
