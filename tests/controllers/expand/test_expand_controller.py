"""The volume expand controller against an in-memory API, after upstream's expand_controller_test.go
(TestSyncHandler): which claims get the resizer annotation, which only the ExternalExpanding event, which fail."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES
from controller_manager.controllers.expand import ExpandController
from controller_manager.controllers.expand.controller import ANN_PRE_RESIZE_CAPACITY, RESIZER_ANNOTATION
from controller_manager.runtime.informers import Added, Deleted, Updated
from tests.controllers.pvcprotection.fakes import build, cache

Obj = dict[str, Any]


def fake_pv(name: str, plugin: str, size: str, claim_uid: str, **annotations: str) -> Obj:
    spec: Obj = {"claimRef": {"namespace": "default"}, "capacity": {"storage": size}}
    if claim_uid:
        spec["claimRef"]["uid"] = claim_uid
    if "csi" in plugin:
        spec["csi"] = {"driver": plugin, "volumeHandle": name}
    else:
        spec["awsElasticBlockStore"] = {"volumeID": name, "fsType": "ext4"}
    metadata: Obj = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": metadata, "spec": spec}


def fake_pvc(name: str, volume: str, status_size: str, request_size: str, uid: str) -> Obj:
    spec: Obj = {"resources": {"requests": {"storage": request_size}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": spec, "status": {"phase": "Bound", "capacity": {"storage": status_size}}}


CASES = {
    "when pvc has no PV binding": (None, fake_pvc("no-pv-pvc", "", "1Gi", "1Gi", ""), True, None, None),
    "when pvc and pv has everything for in-tree plugin": (
        fake_pv("vol-3", "kubernetes.io/aws-ebs", "1Gi", "good-pvc-vol-3"),
        fake_pvc("good-pvc", "vol-3", "1Gi", "2Gi", "good-pvc-vol-3"), False, "ebs.csi.aws.com",
        ("Normal", "ExternalExpanding",
         "CSI migration enabled for kubernetes.io/aws-ebs; waiting for external resizer to expand the pvc")),
    "if pv has pre-resize capacity annotation, the in-tree volume is still handed to its CSI resizer": (
        fake_pv("vol-4", "kubernetes.io/aws-ebs", "2Gi", "good-pvc-vol-4", **{ANN_PRE_RESIZE_CAPACITY: "1Gi"}),
        fake_pvc("good-pvc", "vol-4", "2Gi", "2Gi", "good-pvc-vol-4"), False, "ebs.csi.aws.com", None),
    "for csi plugin without migration path": (
        fake_pv("vol-5", "com.csi.ceph", "1Gi", "ceph-csi-pvc-vol-6"),
        fake_pvc("ceph-csi-pvc", "vol-5", "1Gi", "2Gi", "ceph-csi-pvc-vol-6"), False, None,
        ("Normal", "ExternalExpanding", "waiting for an external controller to expand this PVC")),
    "request not above capacity -> nothing": (
        fake_pv("vol-6", "com.csi.ceph", "2Gi", "uid-6"), fake_pvc("same", "vol-6", "2Gi", "2Gi", "uid-6"),
        False, None, None),
    "volume bound to another claim -> error": (
        fake_pv("vol-7", "com.csi.ceph", "1Gi", "someone-else"), fake_pvc("other", "vol-7", "1Gi", "2Gi", "uid-7"),
        True, None, None),
}


@pytest.mark.parametrize(("pv", "pvc", "error", "annotation", "event"), CASES.values(), ids=list(CASES))
async def test_sync_handler(pv: Obj | None, pvc: Obj, error: bool, annotation: str | None,
                            event: tuple[str, str, str] | None) -> None:
    ctrl, api, _, events = build(ExpandController)
    if pv is not None:
        api.put(PERSISTENTVOLUMES, pv)
    api.put(PERSISTENTVOLUMECLAIMS, pvc)
    cache(ctrl, PERSISTENTVOLUMECLAIMS, pvc)
    key = f"default/{pvc['metadata']['name']}"
    try:
        await ctrl.sync(key)
    except Exception:
        assert error, "unexpected error"
    else:
        assert not error, "unexpected success"
    stored = api.objects[("persistentvolumeclaims", key)]
    assert (stored["metadata"].get("annotations") or {}).get(RESIZER_ANNOTATION) == annotation
    if annotation is not None:
        assert [a.verb for a in api.writes()] == ["patch/status"]
    else:
        assert api.writes() == []
    if event is not None:
        assert [e[1:] for e in events.events] == [event]


async def test_the_annotation_is_written_once() -> None:
    ctrl, api, _, _ = build(ExpandController)
    api.put(PERSISTENTVOLUMES, fake_pv("vol", "kubernetes.io/aws-ebs", "1Gi", "uid"))
    pvc = fake_pvc("c", "vol", "1Gi", "2Gi", "uid")
    pvc["metadata"]["annotations"] = {RESIZER_ANNOTATION: "ebs.csi.aws.com"}
    cache(ctrl, PERSISTENTVOLUMECLAIMS, pvc)
    await ctrl.sync("default/c")
    assert api.writes() == []


def test_bound_claims_are_queued_on_add_delete_and_growth_only() -> None:
    ctrl, _, _, _ = build(ExpandController)
    small = fake_pvc("c", "vol", "1Gi", "1Gi", "uid")
    pending = {**small, "status": {"phase": "Pending"}}
    ctrl._on_pvc(Added(pending))
    assert len(ctrl.queue) == 0
    ctrl._on_pvc(Updated(small, small))
    assert len(ctrl.queue) == 0
    ctrl._on_pvc(Updated(small, fake_pvc("c", "vol", "1Gi", "2Gi", "uid")))
    assert len(ctrl.queue) == 1
    ctrl._on_pvc(Updated(small, fake_pvc("c2", "vol", "3Gi", "1Gi", "uid")))  # capacity grew
    ctrl._on_pvc(Deleted(fake_pvc("c3", "vol", "1Gi", "1Gi", "uid")))
    assert len(ctrl.queue) == 3
