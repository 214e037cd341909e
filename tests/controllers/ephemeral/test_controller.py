"""The ephemeral volume controller against an in-memory API, after upstream's controller_test.go (TestSyncHandler):
the claims that exist afterwards, whether the sync failed, and the create metrics; then the event handlers."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PODS
from controller_manager.controllers.ephemeral import EphemeralVolumeController
from controller_manager.runtime.informers import Added, Deleted, Updated
from tests.controllers.pvcprotection.fakes import build, cache
from tests.prometheus import sample_value

Obj = dict[str, Any]
NS = "my-namespace"
CLAIM = "test-pod-ephemeral-volume"


def make_pod(*, ephemeral: bool = True, deleted: bool = False, template: Obj | None = None) -> Obj:
    volumes = [{"name": "ephemeral-volume", "ephemeral": {"volumeClaimTemplate": template or {}}}] if ephemeral else []
    metadata: Obj = {"name": "test-pod", "namespace": NS, "uid": "uidpod1"}
    if deleted:
        metadata["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"volumes": volumes}}


def owner(controller: bool = True) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "name": "test-pod", "uid": "uidpod1", "controller": controller,
            "blockOwnerDeletion": True}


def make_pvc(name: str = CLAIM, namespace: str = NS, ref: Obj | None = None) -> Obj:
    metadata: Obj = {"name": name, "namespace": namespace}
    if ref is not None:
        metadata["ownerReferences"] = [ref]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": {}}


def metric(name: str) -> float:
    return sample_value(name) or 0.0


def claims(api: Any) -> list[Obj]:
    """The stored claims as upstream's test compares them: namespace, name, owners, labels, annotations, spec."""
    out = []
    for (plural, _), obj in sorted(api.objects.items()):
        if plural == "persistentvolumeclaims":
            m = obj["metadata"]
            out.append({"namespace": m["namespace"], "name": m["name"], "owners": m.get("ownerReferences"),
                        "labels": m.get("labels"), "annotations": m.get("annotations"), "spec": obj["spec"]})
    return out


def expected(name: str = CLAIM, namespace: str = NS, ref: Obj | None = None, **extra: Any) -> Obj:
    return {"namespace": namespace, "name": name, "owners": [ref] if ref else None, "labels": None,
            "annotations": None, "spec": {}, **extra}


@pytest.mark.parametrize(("pods", "pvcs", "expected_pvcs", "error", "created", "failed"), [
    pytest.param([make_pod()], [], [expected(ref=owner())], False, 1, 0, id="create"),
    pytest.param([], [], [], False, 0, 0, id="no-such-pod"),
    pytest.param([make_pod(deleted=True)], [], [], False, 0, 0, id="pod-deleted"),
    pytest.param([make_pod(ephemeral=False)], [], [], False, 0, 0, id="no-volumes"),
    pytest.param([make_pod()], [make_pvc(namespace="not-my-namespace")],
                 [expected(ref=owner()), expected(namespace="not-my-namespace")], False, 1, 0,
                 id="create-with-other-PVC"),
    pytest.param([make_pod()], [make_pvc()], [expected()], True, 0, 0, id="wrong-PVC-owner"),
    pytest.param([make_pod()], [], [], True, 1, 1, id="create-conflict"),
])
async def test_sync_handler(pods: list[Obj], pvcs: list[Obj], expected_pvcs: list[Obj], error: bool,
                            created: int, failed: int) -> None:
    ctrl, api, _, _ = build(EphemeralVolumeController)
    for obj in pods:
        api.put(PODS, obj)
        cache(ctrl, PODS, obj)
    for obj in pvcs:
        api.put(PERSISTENTVOLUMECLAIMS, obj)
        cache(ctrl, PERSISTENTVOLUMECLAIMS, obj)
    if failed:
        api.fail("create", "persistentvolumeclaims", failed)
    before = (metric("ephemeral_volume_controller_create_total"),
              metric("ephemeral_volume_controller_create_failures_total"))
    try:
        await ctrl.sync(f"{NS}/test-pod")
    except Exception:
        assert error, "unexpected error"
    else:
        assert not error, "unexpected success"
    assert sorted(claims(api), key=lambda c: (c["namespace"], c["name"])) == expected_pvcs
    assert metric("ephemeral_volume_controller_create_total") - before[0] == created
    assert metric("ephemeral_volume_controller_create_failures_total") - before[1] == failed


async def test_the_claim_copies_the_template_metadata_and_spec() -> None:
    ctrl, api, _, _ = build(EphemeralVolumeController)
    spec = {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
            "resources": {"requests": {"storage": "1Gi"}}}
    pod = make_pod(template={"metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}}, "spec": spec})
    cache(ctrl, PODS, pod)
    await ctrl.sync(f"{NS}/test-pod")
    assert claims(api) == [expected(ref=owner(), labels={"app": "x"}, annotations={"a": "b"}, spec=spec)]


async def test_a_foreign_claim_gets_the_pod_a_warning() -> None:
    ctrl, _, _, events = build(EphemeralVolumeController)
    cache(ctrl, PODS, make_pod())
    cache(ctrl, PERSISTENTVOLUMECLAIMS, make_pvc(ref={**owner(), "uid": "someone"}))
    with pytest.raises(Exception, match=f"pod {NS}/test-pod, ephemeral volume ephemeral-volume: PVC "):
        await ctrl.sync(f"{NS}/test-pod")
    assert events.events == [("test-pod", "Warning", "FailedBinding",
                              f"ephemeral volume ephemeral-volume: PVC {NS}/{CLAIM} was not created for pod "
                              f"{NS}/test-pod (pod is not owner)")]


async def test_pods_are_queued_when_added_and_when_their_claim_is_deleted() -> None:
    ctrl, _, _, _ = build(EphemeralVolumeController)
    pod = make_pod()
    ctrl._on_pod(Updated(pod, pod))  # the spec is immutable: updates bring nothing
    ctrl._on_pod(Added(make_pod(ephemeral=False)))
    ctrl._on_pod(Added(make_pod(deleted=True)))
    assert len(ctrl.queue) == 0
    ctrl._on_pod(Added(pod))
    assert len(ctrl.queue) == 1
    key = await ctrl.queue.get()
    assert key == f"{NS}/test-pod"
    ctrl.queue.done(key)
    cache(ctrl, PODS, pod)
    ctrl._on_pvc(Deleted(make_pvc("unrelated")))
    assert len(ctrl.queue) == 0
    ctrl._on_pvc(Deleted(make_pvc(ref=owner())))
    assert len(ctrl.queue) == 1
