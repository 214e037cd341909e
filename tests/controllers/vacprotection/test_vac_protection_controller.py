"""The VolumeAttributesClass protection controller against an in-memory API, after upstream's
vac_protection_controller_test.go: the finalizer is added, and removed from a class being deleted only when no
PersistentVolume or claim (spec, current status or modification target) names it."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, VOLUMEATTRIBUTESCLASSES
from controller_manager.api.volumes import VAC_PROTECTION_FINALIZER
from controller_manager.controllers.vacprotection import VACProtectionController
from controller_manager.runtime.informers import Added, Deleted, Updated
from tests.controllers.pvcprotection.fakes import build, cache
from tests.controllers.pvprotection.test_pv_protection_controller import drain

Obj = dict[str, Any]


def vac(*, finalizer: bool = False, deleted: bool = False) -> Obj:
    metadata: Obj = {"name": "vac1"}
    if finalizer:
        metadata["finalizers"] = [VAC_PROTECTION_FINALIZER]
    if deleted:
        metadata["deletionTimestamp"] = format_time(1_700_000_000)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": metadata,
            "driverName": "csi.example.com"}


def pvc(spec: str | None = None, current: str | None = None, target: str | None = None) -> Obj:
    status: Obj = {}
    if current:
        status["currentVolumeAttributesClassName"] = current
    if target:
        status["modifyVolumeStatus"] = {"targetVolumeAttributesClassName": target, "status": "InProgress"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "pvc1", "namespace": "default"},
            "spec": {"volumeAttributesClassName": spec} if spec else {}, "status": status}


def pv(name: str | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"volumeAttributesClassName": name} if name else {}}


@pytest.mark.parametrize(("users", "updated", "fail", "expected"), [
    pytest.param([], vac(), 0, [True], id="VAC without finalizer -> finalizer is added"),
    pytest.param([], vac(finalizer=True), 0, [], id="VAC with finalizer -> no action"),
    pytest.param([], vac(), 2, [True] * 3, id="saving VAC finalizer fails -> controller retries"),
    pytest.param([], vac(finalizer=True, deleted=True), 0, [False], id="deleted VAC, unused -> finalizer is removed"),
    pytest.param([], vac(finalizer=True, deleted=True), 2, [False] * 3,
                 id="finalizer removal fails -> controller retries"),
    pytest.param([pv("vac1")], vac(finalizer=True, deleted=True), 0, [], id="deleted VAC used by a PV -> kept"),
    pytest.param([pvc(spec="vac1")], vac(finalizer=True, deleted=True), 0, [],
                 id="deleted VAC in a PVC's spec -> kept"),
    pytest.param([pvc(current="vac1")], vac(finalizer=True, deleted=True), 0, [],
                 id="deleted VAC in a PVC's current status -> kept"),
    pytest.param([pvc(target="vac1")], vac(finalizer=True, deleted=True), 0, [],
                 id="deleted VAC a PVC is being modified to -> kept"),
    pytest.param([pvc(spec="other"), pv("other")], vac(finalizer=True, deleted=True), 0, [False],
                 id="deleted VAC, users of another class only -> finalizer is removed"),
])
async def test_vac_protection_controller(users: list[Obj], updated: Obj, fail: int, expected: list[bool]) -> None:
    ctrl, api, _, _ = build(VACProtectionController)
    for user in users:
        cache(ctrl, PERSISTENTVOLUMECLAIMS if user["kind"] == "PersistentVolumeClaim" else PERSISTENTVOLUMES, user)
    api.put(VOLUMEATTRIBUTESCLASSES, updated)
    cache(ctrl, VOLUMEATTRIBUTESCLASSES, updated)
    if fail:
        api.fail("update", "volumeattributesclasses", fail)
    ctrl._on_vac(Added(updated))
    await drain(ctrl, api, len(expected))
    assert [VAC_PROTECTION_FINALIZER in (a.obj or {})["metadata"].get("finalizers", []) for a in api.actions] == \
        expected


async def test_a_user_letting_go_of_a_class_requeues_it() -> None:
    ctrl, _, _, _ = build(VACProtectionController)
    # Added users never free a class; an update dropping a name, or a deletion, does.
    ctrl.pvc_informer._dispatch(Added(pvc(spec="a")))  # type: ignore[attr-defined]
    assert len(ctrl.queue) == 0
    ctrl.pvc_informer._dispatch(Updated(pvc(spec="a", current="b"), pvc(spec="a")))  # type: ignore[attr-defined]
    ctrl.pv_informer._dispatch(Deleted(pv("c")))  # type: ignore[attr-defined]
    keys = set()
    while len(ctrl.queue):
        key = await ctrl.queue.get()
        assert key is not None
        keys.add(key)
        ctrl.queue.done(key)
    assert keys == {"b", "c"}
