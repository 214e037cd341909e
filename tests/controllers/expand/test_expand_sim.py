"""The expander with kube-sim's external-resizer, as a client sees it: a bound CSI claim on an expandable class
whose request grows gets the ExternalExpanding event, then the resizer grows the volume and the claim's
capacity (Resizing while it works, VolumeResizeSuccessful at the end)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, STORAGECLASSES
from controller_manager.client.errors import Forbidden
from controller_manager.controllers.expand import ExpandController
from tests.controllers.harness import controller_harness, wait_for

NS = "default"
DRIVER = "csi.sim.example.com"


async def test_an_expandable_claim_grows() -> None:
    async with controller_harness(ExpandController, nodes=1) as h:
        await h.client.create(STORAGECLASSES, {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "expandable"},
            "provisioner": DRIVER, "allowVolumeExpansion": True})
        claim = await h.client.create(PERSISTENTVOLUMECLAIMS, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "expandable", "volumeName": "pv-data",
                     "resources": {"requests": {"storage": "1Gi"}}}}, NS)
        # Bound by hand, as the PV binder and a provisioner would have left it.
        pv = await h.client.create(PERSISTENTVOLUMES, {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "expandable",
                     "csi": {"driver": DRIVER, "volumeHandle": "vol-1"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": "data",
                                  "uid": claim["metadata"]["uid"]}}})
        await h.client.update_status(PERSISTENTVOLUMES, {**pv, "status": {"phase": "Bound"}})
        claim = await h.client.update_status(PERSISTENTVOLUMECLAIMS, {**claim, "status": {
            "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}})

        h.cluster.resizer.delay = 0.5  # the driver's ControllerExpandVolume takes a while
        await h.client.patch(PERSISTENTVOLUMECLAIMS, "data", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
                             NS)

        async def grown() -> dict[str, Any] | None:
            current = await h.client.get(PERSISTENTVOLUMECLAIMS, "data", NS)
            return current if (current.get("status") or {}).get("capacity", {}).get("storage") == "2Gi" else None

        async def in_progress() -> bool:
            current = await h.client.get(PERSISTENTVOLUMECLAIMS, "data", NS)
            status = current.get("status") or {}
            return (status.get("allocatedResourceStatuses") == {"storage": "ControllerResizeInProgress"}
                    and any(c["type"] == "Resizing" and c["status"] == "True" for c in status.get("conditions") or ())
                    and status["capacity"] == {"storage": "1Gi"})

        await wait_for(in_progress, what="the resize in progress")
        done = await wait_for(grown, what="the claim's capacity grown to 2Gi")
        assert (await h.client.get(PERSISTENTVOLUMES, "pv-data"))["spec"]["capacity"] == {"storage": "2Gi"}
        status = done["status"]
        assert status["allocatedResources"] == {"storage": "2Gi"}
        assert "allocatedResourceStatuses" not in status
        assert not any(c["type"] == "Resizing" for c in status.get("conditions") or ())

        async def reasons() -> list[str] | None:
            found = [(e["reason"], e["source"]["component"], e["message"]) for e in await h.events_for("data")]
            wanted = {"ExternalExpanding", "Resizing", "VolumeResizeSuccessful"}
            return found if wanted <= {r for r, _, _ in found} else None

        events = await wait_for(reasons, what="the expansion events")
        assert ("ExternalExpanding", "volume_expand", "waiting for an external controller to expand this PVC") in events
        assert ("Resizing", f"external-resizer {DRIVER}", "External resizer is resizing volume pv-data") in events
        assert ("VolumeResizeSuccessful", f"external-resizer {DRIVER}", "Resize volume succeeded") in events
        # A CSI volume's claim is not annotated: its driver's resizer recognises it by the volume.
        assert "volume.kubernetes.io/storage-resizer" not in (done["metadata"].get("annotations") or {})


async def test_a_csi_migrated_volume_is_handed_to_its_drivers_resizer() -> None:
    async with controller_harness(ExpandController, nodes=1) as h:
        await h.client.create(STORAGECLASSES, {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp2"},
            "provisioner": "kubernetes.io/aws-ebs", "allowVolumeExpansion": True})
        claim = await h.client.create(PERSISTENTVOLUMECLAIMS, {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "old"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp2", "volumeName": "pv-old",
                     "resources": {"requests": {"storage": "1Gi"}}}}, NS)
        pv = await h.client.create(PERSISTENTVOLUMES, {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-old"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "gp2",
                     "awsElasticBlockStore": {"volumeID": "vol-0abc", "fsType": "ext4"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": "old",
                                  "uid": claim["metadata"]["uid"]}}})
        await h.client.update_status(PERSISTENTVOLUMES, {**pv, "status": {"phase": "Bound"}})
        await h.client.update_status(PERSISTENTVOLUMECLAIMS, {**claim, "status": {
            "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}})
        await h.client.patch(PERSISTENTVOLUMECLAIMS, "old", {"spec": {"resources": {"requests": {"storage": "3Gi"}}}},
                             NS)

        async def grown() -> dict[str, Any] | None:
            current = await h.client.get(PERSISTENTVOLUMECLAIMS, "old", NS)
            return current if (current.get("status") or {}).get("capacity", {}).get("storage") == "3Gi" else None

        done = await wait_for(grown, what="the migrated volume's claim grown by the EBS driver's resizer")
        assert done["metadata"]["annotations"]["volume.kubernetes.io/storage-resizer"] == "ebs.csi.aws.com"
        events = [(e["reason"], e["message"]) for e in await h.events_for("old")]
        assert ("ExternalExpanding", "CSI migration enabled for kubernetes.io/aws-ebs; waiting for external "
                "resizer to expand the pvc") in events


async def test_growing_a_claim_needs_an_expandable_class() -> None:
    async with controller_harness(ExpandController, nodes=1) as h:
        for name, allow in (("fixed", None), ("grows", True)):
            sc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                  "metadata": {"name": name}, "provisioner": DRIVER}
            if allow is not None:
                sc["allowVolumeExpansion"] = allow
            await h.client.create(STORAGECLASSES, sc)
        for name, sc_name in (("a", "fixed"), ("b", "grows"), ("c", "missing")):
            await h.client.create(PERSISTENTVOLUMECLAIMS, {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc_name,
                         "resources": {"requests": {"storage": "1Gi"}}}}, NS)
        grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
        for name in ("a", "c"):
            with pytest.raises(Forbidden) as refused:
                await h.client.patch(PERSISTENTVOLUMECLAIMS, name, grow, NS)
            assert str(refused.value) == (
                f'persistentvolumeclaims "{name}" is forbidden: only dynamically provisioned pvc can be resized and '
                "the storageclass that provisions the pvc must support resize")
        await h.client.patch(PERSISTENTVOLUMECLAIMS, "b", grow, NS)
        # Shrinking (or leaving the request alone) is not this plugin's business.
        await h.client.patch(PERSISTENTVOLUMECLAIMS, "a", {"metadata": {"labels": {"x": "y"}}}, NS)
