"""util_test.go's volume-spec cases (without the in-tree migration ones), the pod PVC index, the node status
patch, and the volume util's IsPodTerminated."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from controller_manager.api.csi import attachment_name, is_pod_terminated, split_unique_volume_name
from controller_manager.controllers.attachdetach.cache import DesiredStateOfWorld
from controller_manager.controllers.attachdetach.controller import pod_pvc_index
from controller_manager.controllers.attachdetach.statusupdater import volumes_attached_patch
from controller_manager.controllers.attachdetach.util import (
    SpecError,
    attachable,
    create_volume_spec,
    determine_volume_action,
    process_pod_volumes,
)

from .fakes import DRIVER, Log


def claim(name: str = "claim", *, phase: str = "Bound", volume: str = "pv", uid: str = "claim-uid",
          owner: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": owner, "controller": True}]
    return {"metadata": metadata, "spec": {"volumeName": volume}, "status": {"phase": phase}}


def pv(name: str = "pv", *, claim_uid: str | None = "claim-uid", csi: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"]}
    if claim_uid is not None:
        spec["claimRef"] = {"namespace": "ns", "name": "claim", "uid": claim_uid}
    if csi:
        spec["csi"] = {"driver": DRIVER, "volumeHandle": "h1"}
    else:
        spec["hostPath"] = {"path": "/data"}
    return {"metadata": {"name": name}, "spec": spec}


def pod(volumes: list[dict[str, Any]], *, node: str = "node", phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"nodeName": node, "volumes": volumes}, "status": {"phase": phase}}


PVC_VOLUME = {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}}


def stores(*objs: dict[str, Any]) -> dict[str, Any]:
    return {(f"{o['metadata']['namespace']}/" if "namespace" in o["metadata"] else "") + o["metadata"]["name"]: o
            for o in objs}


def test_create_volume_spec_from_a_bound_claim() -> None:
    got = create_volume_spec(PVC_VOLUME, pod([PVC_VOLUME]), stores(claim()), stores(pv()))
    assert got is not None
    assert (got.name, got.driver, got.volume_handle, got.access_modes) == ("pv", DRIVER, "h1", ("ReadWriteOnce",))
    assert got.unique_name == f"kubernetes.io/csi/{DRIVER}^h1"


@pytest.mark.parametrize(("claims", "volumes", "error"), [
    ({}, stores(pv()), "failed to find PVC ns/claim in PVCInformer cache"),
    (stores(claim(phase="Pending")), stores(pv()), 'has non-bound phase ("Pending")'),
    (stores(claim()), {}, 'failed to find PV "pv" in PVInformer cache'),
    (stores(claim()), stores(pv(claim_uid=None)), "has a nil pv.Spec.ClaimRef"),
    (stores(claim()), stores(pv(claim_uid="other")), 'does not point to claim.UID ("claim-uid")'),
], ids=["no claim", "unbound claim", "no volume", "volume not bound", "volume bound elsewhere"])
def test_create_volume_spec_errors(claims: dict[str, Any], volumes: dict[str, Any], error: str) -> None:
    with pytest.raises(SpecError, match="error processing PVC ns/claim") as info:
        create_volume_spec(PVC_VOLUME, pod([PVC_VOLUME]), claims, volumes)
    assert error in str(info.value)


def test_volumes_that_are_not_csi_persistent_volumes_are_not_attachable() -> None:
    assert create_volume_spec(PVC_VOLUME, pod([PVC_VOLUME]), stores(claim()), stores(pv(csi=False))) is None
    inline = {"name": "inline", "csi": {"driver": DRIVER}}
    assert create_volume_spec(inline, pod([inline]), {}, {}) is None


def test_generic_ephemeral_volumes_use_the_pods_claim() -> None:
    volume = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    owned = claim("p-scratch", owner="pod-uid")
    owned_pv = pv()
    owned_pv["spec"]["claimRef"]["name"] = "p-scratch"
    got = create_volume_spec(volume, pod([volume]), stores(owned), stores(owned_pv))
    assert got is not None
    assert got.name == "pv"
    with pytest.raises(SpecError, match="was not created for pod ns/p"):
        create_volume_spec(volume, pod([volume]), stores(claim("p-scratch", owner="someone")), stores(owned_pv))


def test_attachable_follows_the_csi_driver() -> None:
    volume = create_volume_spec(PVC_VOLUME, pod([PVC_VOLUME]), stores(claim()), stores(pv()))
    assert volume is not None
    assert attachable(volume, {})  # no CSIDriver object: attach is required
    assert attachable(volume, {DRIVER: {"spec": {"attachRequired": True}}})
    assert not attachable(volume, {DRIVER: {"spec": {"attachRequired": False}}})


def test_determine_volume_action() -> None:
    assert determine_volume_action(None, True)
    assert determine_volume_action(pod([]), True)  # no volumes: the default
    assert determine_volume_action(pod([PVC_VOLUME]), True)
    assert not determine_volume_action(pod([PVC_VOLUME], phase="Succeeded"), True)
    assert not determine_volume_action(pod([PVC_VOLUME], phase="Failed"), True)


@pytest.mark.parametrize(("pod_obj", "terminated"), [
    ({"status": {"phase": "Running"}}, False),
    ({"status": {"phase": "Succeeded"}}, True),
    ({"metadata": {"deletionTimestamp": "t"}, "status": {"phase": "Running", "containerStatuses": [
        {"state": {"running": {}}}]}}, False),
    ({"metadata": {"deletionTimestamp": "t"}, "status": {"phase": "Running", "containerStatuses": [
        {"state": {"terminated": {"exitCode": 0}}}, {"state": {"waiting": {}}}]}}, True),
    ({"metadata": {"deletionTimestamp": "t"}, "status": {"phase": "Pending"}}, True),
])
def test_is_pod_terminated(pod_obj: dict[str, Any], terminated: bool) -> None:
    assert is_pod_terminated(pod_obj) is terminated


def test_process_pod_volumes_adds_and_removes_on_managed_nodes_only() -> None:
    dsw = DesiredStateOfWorld()
    p = pod([PVC_VOLUME])
    process_pod_volumes(p, True, dsw, stores(claim()), stores(pv()), {}, Log())
    assert dsw.volumes_to_attach() == []  # the node is not managed
    dsw.add_node("node")
    process_pod_volumes(p, True, dsw, stores(claim()), stores(pv()), {}, Log())
    [volume] = dsw.volumes_to_attach()
    assert volume.scheduled_pods == [p]
    process_pod_volumes(p, False, dsw, stores(claim()), stores(pv()), {}, Log())
    assert dsw.volumes_to_attach() == []
    process_pod_volumes(p, True, dsw, stores(claim()), stores(pv()), {DRIVER: {"spec": {"attachRequired": False}}},
                        Log())
    assert dsw.volumes_to_attach() == []


def test_pod_pvc_index() -> None:
    volumes = [PVC_VOLUME, {"name": "scratch", "ephemeral": {}}, {"name": "cfg", "configMap": {"name": "c"}}]
    assert pod_pvc_index(pod(volumes)) == ["ns/claim", "ns/p-scratch"]


def test_volumes_attached_patch() -> None:
    node = {"metadata": {"uid": "u"}, "status": {"volumesAttached": [{"name": "a", "devicePath": ""}]}}
    assert volumes_attached_patch(node, [{"name": "a", "devicePath": ""}]) is None
    assert volumes_attached_patch(node, []) == {"metadata": {"uid": "u"}, "status": {"volumesAttached": None}}
    both = [{"name": "a", "devicePath": ""}, {"name": "b", "devicePath": ""}]
    assert volumes_attached_patch(node, both) == {"metadata": {"uid": "u"}, "status": {"volumesAttached": both}}


def test_csi_names() -> None:
    # The attacher's name for the attachment: csi- and the hex sha256 of handle, driver and node, concatenated.
    assert attachment_name("h1", "csi.example.com", "node1") == (
        "csi-" + hashlib.sha256(b"h1csi.example.comnode1").hexdigest())
    assert split_unique_volume_name("kubernetes.io/csi/csi.example.com^h1") == ("csi.example.com", "h1")
    assert split_unique_volume_name("kubernetes.io/gce-pd/disk") is None
