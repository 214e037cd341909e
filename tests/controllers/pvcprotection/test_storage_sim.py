"""The storage protection and ephemeral volume controllers in-process against kube-sim, as a client sees them:
a claim in use stays Terminating until its pod is gone; its Unused condition follows its pods; a generic ephemeral
volume gets a claim owned by its pod, which the garbage collector deletes with the pod; a bound volume and a
VolumeAttributesClass in use are kept until released."""

from __future__ import annotations

from typing import Any

from controller_manager.api.pods import is_pod_ready
from controller_manager.api.resources import (
    PERSISTENTVOLUMECLAIMS,
    PERSISTENTVOLUMES,
    PODS,
    VOLUMEATTRIBUTESCLASSES,
)
from controller_manager.client.errors import NotFound
from controller_manager.controllers.ephemeral import EphemeralVolumeController
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.controllers.pvcprotection import PVCProtectionController
from controller_manager.controllers.pvprotection import PVProtectionController
from controller_manager.controllers.vacprotection import VACProtectionController
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"
Obj = dict[str, Any]


def claim(name: str, vac: str | None = None) -> Obj:
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if vac:
        spec["volumeAttributesClassName"] = vac
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def pod(name: str, volumes: list[Obj]) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "volumes": volumes,
                     "terminationGracePeriodSeconds": 1}}


async def gone(h: Harness, res: Any, name: str, namespace: str | None = NS) -> bool:
    try:
        await h.client.get(res, name, namespace)
    except NotFound:
        return True
    return False


async def running(h: Harness, name: str) -> bool:
    return is_pod_ready(await h.client.get(PODS, name, NS))


def unused(obj: Obj) -> str | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Unused":
            return str(cond["status"])
    return None


async def test_a_claim_in_use_stays_terminating_until_its_pod_is_gone() -> None:
    async with controller_harness(PVCProtectionController, nodes=1) as h:
        created = await h.client.create(PERSISTENTVOLUMECLAIMS, claim("data"), NS)
        # StorageObjectInUseProtection admission: the finalizer is there from the start.
        assert created["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
        await h.client.update_status(PERSISTENTVOLUMECLAIMS, {**created, "status": {"phase": "Bound"}})

        async def unused_is(status: str) -> bool:
            return unused(await h.client.get(PERSISTENTVOLUMECLAIMS, "data", NS)) == status

        await wait_for(lambda: unused_is("True"), what="Unused=True on the bound claim")
        await h.client.create(PODS, pod("user", [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]), NS)
        await wait_for(lambda: running(h, "user"), what="the pod running")
        await wait_for(lambda: unused_is("False"), what="Unused=False while the pod uses the claim")
        cond = next(c for c in (await h.client.get(PERSISTENTVOLUMECLAIMS, "data", NS))["status"]["conditions"]
                    if c["type"] == "Unused")
        assert (cond["reason"], cond["message"]) == ("PodUsingPVC", "A pod is currently referencing this PVC")

        await h.client.delete(PERSISTENTVOLUMECLAIMS, "data", NS)
        # Give the controller every chance to (wrongly) let it go: several syncs of the claim happen meanwhile.
        for _ in range(3):
            await h.restart()
            terminating = await h.client.get(PERSISTENTVOLUMECLAIMS, "data", NS)
            assert terminating["metadata"]["deletionTimestamp"]
            assert terminating["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]

        await h.client.delete(PODS, "user", NS)
        await wait_for(lambda: gone(h, PERSISTENTVOLUMECLAIMS, "data"), timeout=20,
                       what="the claim deleted once its pod is gone")


async def test_a_generic_ephemeral_volume_gets_a_claim_owned_by_its_pod() -> None:
    async with controller_harness(EphemeralVolumeController, PVCProtectionController, GarbageCollector,
                                  nodes=1) as h:
        template = {"metadata": {"labels": {"tier": "scratch"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
        created = await h.client.create(PODS, pod("app", [{"name": "tmp", "ephemeral": {
            "volumeClaimTemplate": template}}]), NS)

        async def claim_made() -> Obj | None:
            try:
                return await h.client.get(PERSISTENTVOLUMECLAIMS, "app-tmp", NS)
            except NotFound:
                return None

        made = await wait_for(claim_made, what="the ephemeral volume's claim")
        assert made["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Pod", "name": "app", "uid": created["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
        assert made["metadata"]["labels"] == {"tier": "scratch"}
        assert made["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
        assert made["spec"]["resources"] == template["spec"]["resources"]

        await h.client.delete(PODS, "app", NS)
        await wait_for(lambda: gone(h, PODS, "app"), timeout=20, what="the pod gone")
        await wait_for(lambda: gone(h, PERSISTENTVOLUMECLAIMS, "app-tmp"), timeout=20,
                       what="the garbage collector deleting the claim with its pod")


async def test_a_foreign_claim_of_the_ephemeral_name_is_left_alone() -> None:
    async with controller_harness(EphemeralVolumeController, nodes=1) as h:
        await h.client.create(PERSISTENTVOLUMECLAIMS, claim("app-tmp"), NS)
        await h.client.create(PODS, pod("app", [{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]), NS)

        async def warned() -> list[Obj]:
            return [e for e in await h.events_for("app") if e.get("reason") == "FailedBinding"]

        events = await wait_for(warned, what="the FailedBinding warning")
        assert events[0]["type"] == "Warning"
        assert events[0]["message"] == ("ephemeral volume tmp: PVC default/app-tmp was not created for pod "
                                        "default/app (pod is not owner)")
        assert events[0]["source"]["component"] == "ephemeral_volume"
        assert not (await h.client.get(PERSISTENTVOLUMECLAIMS, "app-tmp", NS))["metadata"].get("ownerReferences")


async def test_a_bound_volume_and_a_class_in_use_are_kept() -> None:
    async with controller_harness(PVProtectionController, VACProtectionController, nodes=1) as h:
        pv = await h.client.create(PERSISTENTVOLUMES, {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"},
                     "volumeAttributesClassName": "gold"}})
        assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
        await h.client.update_status(PERSISTENTVOLUMES, {**pv, "status": {"phase": "Bound"}})
        await h.client.create(VOLUMEATTRIBUTESCLASSES, {
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": {"name": "gold"},
            "driverName": "csi.example.com", "parameters": {"iops": "3000"}})

        async def protected() -> bool:
            vac = await h.client.get(VOLUMEATTRIBUTESCLASSES, "gold")
            return vac["metadata"].get("finalizers") == ["kubernetes.io/vac-protection"]

        await wait_for(protected, what="the class's finalizer")
        await h.client.delete(VOLUMEATTRIBUTESCLASSES, "gold")
        await h.client.delete(PERSISTENTVOLUMES, "pv1")
        await h.restart()  # a fresh look at both: still in use
        assert (await h.client.get(PERSISTENTVOLUMES, "pv1"))["metadata"]["deletionTimestamp"]
        assert (await h.client.get(VOLUMEATTRIBUTESCLASSES, "gold"))["metadata"]["deletionTimestamp"]

        current = await h.client.get(PERSISTENTVOLUMES, "pv1")
        await h.client.update_status(PERSISTENTVOLUMES, {**current, "status": {"phase": "Released"}})
        await wait_for(lambda: gone(h, PERSISTENTVOLUMES, "pv1", None), what="the released volume deleted")
        await wait_for(lambda: gone(h, VOLUMEATTRIBUTESCLASSES, "gold", None),
                       what="the class deleted once no volume names it")
