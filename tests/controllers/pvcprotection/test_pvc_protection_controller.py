"""The PVC protection controller against an in-memory API, after upstream's pvc_protection_controller_test.go
(TestPVCProtectionController): each case simulates PVC and pod events, drains the queues as upstream's test does
(one claim key moved into its namespace batch, then the batches processed) and compares the API actions. Then the
generic ephemeral volume cases, the per-namespace batching, and the Unused condition (gate on, as in 1.37)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import PERSISTENTVOLUMECLAIMS, PODS
from controller_manager.api.volumes import PVC_PROTECTION_FINALIZER
from controller_manager.controllers.pvcprotection import PVCProtectionController
from controller_manager.runtime.informers import Added, Deleted, Updated
from tests.controllers.pvcprotection.fakes import FakeApi, build, cache

Obj = dict[str, Any]
NS = "default"
NS2 = "namespace-2"


def pod(name: str = "pod1", namespace: str = NS, *, uid: str = "uid1", node: str = "node1", phase: str = "Pending",
        pvcs: Sequence[str] = (), empty_dir: bool = False, ephemeral: Sequence[str] = (),
        deleting_grace: int | None = None) -> Obj:
    volumes: list[Obj] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in pvcs]
    if empty_dir:
        volumes.append({"name": "emptyDir", "emptyDir": {}})
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}} for v in ephemeral]
    metadata: Obj = {"name": name, "namespace": namespace, "uid": uid}
    if deleting_grace is not None:
        metadata.update(deletionTimestamp=format_time(1_700_000_000), deletionGracePeriodSeconds=deleting_grace)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": node, "volumes": volumes}, "status": {"phase": phase}}


def pvc(name: str = "pvc1", namespace: str = NS, *, finalizer: bool = False, deleted: bool = False,
        owner_uid: str | None = None, phase: str | None = None, conditions: list[Obj] | None = None) -> Obj:
    metadata: Obj = {"name": name, "namespace": namespace}
    if finalizer:
        metadata["finalizers"] = [PVC_PROTECTION_FINALIZER]
    if deleted:
        metadata["deletionTimestamp"] = format_time(1_700_000_000)
    if owner_uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "pod1", "uid": owner_uid,
                                        "controller": True}]
    status: Obj = {}
    if phase:
        status["phase"] = phase
    if conditions is not None:
        status["conditions"] = conditions
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": {}, "status": status}


def listed(namespace: str) -> tuple[Any, ...]:
    return ("list", "pods", namespace)


def updated(name: str, namespace: str = NS, *, finalizer: bool) -> tuple[Any, ...]:
    return ("update", "persistentvolumeclaims", namespace, name, finalizer)


def summary(api: FakeApi) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for a in api.actions:
        if a.verb == "list":
            out.append((a.verb, a.resource, a.namespace))
        else:
            assert a.obj is not None
            finalizers = a.obj["metadata"].get("finalizers") or []
            out.append((a.verb, a.resource, a.namespace, a.obj["metadata"]["name"],
                        PVC_PROTECTION_FINALIZER in finalizers))
    return out


async def drain(ctrl: PVCProtectionController, api: FakeApi, expected: int, timeout: float = 10.0) -> None:
    """Upstream's loop: one claim into its batch, every batch processed; wait out backoffs for missing actions."""
    clock = ctrl.ctx.clock
    for _ in range(int(timeout / 0.001)):
        if len(ctrl.queue):
            await ctrl.process_next(ctrl.queue, ctrl.sync)
            while len(ctrl.namespace_queue):
                await ctrl.process_next(ctrl.namespace_queue, ctrl.process_namespace)
            continue
        if len(api.actions) < expected and ctrl.queue.waiting():
            clock.advance(0.001)  # type: ignore[attr-defined]
            await asyncio.sleep(0)
            continue
        return
    raise AssertionError("timed out")


@dataclass
class Case:
    initial: list[Obj] = field(default_factory=list)
    informers_late: bool = False
    fail: tuple[str, str, int] | None = None
    updated_pvcs: list[Obj] = field(default_factory=list)
    updated_pod: Obj | None = None
    deleted_pod: Obj | None = None
    expected: list[tuple[Any, ...]] = field(default_factory=list)


CASES = {
    # PVC events
    "PVC without finalizer -> finalizer is added": Case(
        updated_pvcs=[pvc(), pvc("pvc2", NS2)],
        expected=[updated("pvc1", finalizer=True), updated("pvc2", NS2, finalizer=True)]),
    "PVC with finalizer -> no action": Case(
        updated_pvcs=[pvc(finalizer=True), pvc("pvc2", NS2, finalizer=True)]),
    "saving PVC finalizer fails -> controller retries": Case(
        updated_pvcs=[pvc()], fail=("update", "persistentvolumeclaims", 2),
        expected=[updated("pvc1", finalizer=True)] * 3),
    "deleted PVC with finalizers across different namespaces -> finalizer is removed": Case(
        updated_pvcs=[pvc(finalizer=True, deleted=True), pvc("pvc2", NS2, finalizer=True, deleted=True)],
        expected=[listed(NS), updated("pvc1", finalizer=False), listed(NS2), updated("pvc2", NS2, finalizer=False)]),
    "multiple PVCs with finalizer for the same namespace; no alive pods -> finalizer is removed": Case(
        updated_pvcs=[pvc(finalizer=True, deleted=True), pvc("pvc2", finalizer=True, deleted=True)],
        expected=[listed(NS), updated("pvc1", finalizer=False), listed(NS), updated("pvc2", finalizer=False)]),
    "finalizer removal fails -> controller retries": Case(
        updated_pvcs=[pvc(finalizer=True, deleted=True)], fail=("update", "persistentvolumeclaims", 2),
        expected=[listed(NS), updated("pvc1", finalizer=False)] * 3),
    "delete multiple PVCs of the same namespace; pod list fails for one PVC -> requeued, the next goes on": Case(
        updated_pvcs=[pvc(finalizer=True, deleted=True), pvc("pvc2", finalizer=True, deleted=True)],
        fail=("list", "pods", 1),
        expected=[listed(NS), listed(NS), updated("pvc2", finalizer=False), listed(NS),
                  updated("pvc1", finalizer=False)]),
    "deleted PVC with finalizer + pod with the PVC exists -> finalizer is not removed": Case(
        initial=[pod(pvcs=["pvc1"])], updated_pvcs=[pvc(finalizer=True, deleted=True)]),
    "deleted PVC with finalizer + pod with unrelated PVC and EmptyDir exists -> finalizer is removed": Case(
        initial=[pod(pvcs=["unrelatedPVC"], empty_dir=True)], updated_pvcs=[pvc(finalizer=True, deleted=True)],
        expected=[listed(NS), updated("pvc1", finalizer=False)]),
    "deleted multiple PVCs with finalizer (same namespace) + pod with unrelated PVC and EmptyDir exists": Case(
        initial=[pod(pvcs=["unrelatedPVC"], empty_dir=True)],
        updated_pvcs=[pvc(finalizer=True, deleted=True), pvc("pvc2", finalizer=True, deleted=True),
                      pvc("pvc3", finalizer=True, deleted=True)],
        expected=[listed(NS), updated("pvc1", finalizer=False), listed(NS), updated("pvc2", finalizer=False),
                  listed(NS), updated("pvc3", finalizer=False)]),
    "deleted PVC with finalizer + pod with the PVC finished but is not deleted -> finalizer is not removed": Case(
        initial=[pod(phase="Failed", pvcs=["pvc1"])], updated_pvcs=[pvc(finalizer=True, deleted=True)]),
    "deleted PVC with finalizer + pod with the PVC exists but is not in the cache yet -> not removed": Case(
        initial=[pod(pvcs=["pvc1"])], informers_late=True, updated_pvcs=[pvc(finalizer=True, deleted=True)],
        expected=[listed(NS)]),
    "mix of deleted PVCs with some used by a pod and some unused -> removed only for unused PVCs": Case(
        initial=[pod(pvcs=["pvc1"]), pod("pod2", "namespace-3", pvcs=["pvc3"])], informers_late=True,
        updated_pvcs=[pvc(finalizer=True, deleted=True), pvc("pvc2", finalizer=True, deleted=True),
                      pvc("pvc3", "namespace-3", finalizer=True, deleted=True)],
        expected=[listed(NS), listed(NS), updated("pvc2", finalizer=False), listed("namespace-3")]),
    # Pod events
    "updated running Pod -> no action": Case(
        initial=[pvc(finalizer=True, deleted=True)], updated_pod=pod(phase="Running", pvcs=["pvc1"])),
    "updated finished Pod -> finalizer is not removed": Case(
        initial=[pvc(finalizer=True, deleted=True)], updated_pod=pod(phase="Succeeded", pvcs=["pvc1"])),
    "updated unscheduled Pod -> finalizer is removed": Case(
        initial=[pvc(finalizer=True, deleted=True)], updated_pod=pod(node="", pvcs=["pvc1"]),
        expected=[listed(NS), updated("pvc1", finalizer=False)]),
    "deleted running Pod -> finalizer is removed": Case(
        initial=[pvc(finalizer=True, deleted=True)], deleted_pod=pod(phase="Running", pvcs=["pvc1"]),
        expected=[listed(NS), updated("pvc1", finalizer=False)]),
    "pod delete and create with same namespaced name seen as an update, old pod used deleted PVC -> removed": Case(
        initial=[pvc(finalizer=True, deleted=True)], deleted_pod=pod(pvcs=["pvc1"]), updated_pod=pod(uid="uid2"),
        expected=[listed(NS), updated("pvc1", finalizer=False)]),
    "pod delete and create with same namespaced name seen as an update, old pod used non-deleted PVC": Case(
        initial=[pvc(finalizer=True)], deleted_pod=pod(pvcs=["pvc1"]), updated_pod=pod(uid="uid2")),
    "pod delete and create with same namespaced name seen as an update, both pods reference deleted PVC": Case(
        initial=[pvc(finalizer=True, deleted=True)], deleted_pod=pod(pvcs=["pvc1"]),
        updated_pod=pod(uid="uid2", pvcs=["pvc1"])),
    "pod update from unscheduled to scheduled, deleted PVC is referenced -> finalizer is not removed": Case(
        initial=[pvc(finalizer=True, deleted=True)], deleted_pod=pod(node="", pvcs=["pvc1"]),
        updated_pod=pod(pvcs=["pvc1"])),
    # Generic ephemeral volumes: the claim <pod>-<volume> is used only when the pod controls it.
    "deleted ephemeral PVC owned by a running pod -> finalizer is not removed": Case(
        initial=[pod(ephemeral=["scratch"])],
        updated_pvcs=[pvc("pod1-scratch", finalizer=True, deleted=True, owner_uid="uid1")]),
    "deleted ephemeral-named PVC not owned by the pod -> finalizer is removed": Case(
        initial=[pod(ephemeral=["scratch"])],
        updated_pvcs=[pvc("pod1-scratch", finalizer=True, deleted=True, owner_uid="someone-else")],
        expected=[listed(NS), updated("pod1-scratch", finalizer=False)]),
    "deleted ephemeral PVC of a pod force-deleted (grace 0) -> finalizer is removed": Case(
        initial=[pod(ephemeral=["scratch"], deleting_grace=0)],
        updated_pvcs=[pvc("pod1-scratch", finalizer=True, deleted=True, owner_uid="uid1")],
        expected=[listed(NS), updated("pod1-scratch", finalizer=False)]),
    "deleted ephemeral PVC of a pod terminating with grace -> finalizer is not removed": Case(
        initial=[pod(ephemeral=["scratch"], deleting_grace=30)],
        updated_pvcs=[pvc("pod1-scratch", finalizer=True, deleted=True, owner_uid="uid1")]),
    "deleted pod with an ephemeral volume -> its PVC's finalizer is removed": Case(
        initial=[pvc("pod1-scratch", finalizer=True, deleted=True, owner_uid="uid1")],
        deleted_pod=pod(phase="Running", ephemeral=["scratch"]),
        expected=[listed(NS), updated("pod1-scratch", finalizer=False)]),
}


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
async def test_pvc_protection_controller(case: Case) -> None:
    ctrl, api, _, _ = build(PVCProtectionController)
    informer_objs: list[Obj] = list(case.updated_pvcs)
    api_objs: list[Obj] = list(case.updated_pvcs)
    if case.updated_pod is not None:
        informer_objs.append(case.updated_pod)
        api_objs.append(case.updated_pod)
    api_objs += case.initial
    if not case.informers_late:
        informer_objs += case.initial
    for obj in api_objs:
        api.put(PODS if obj["kind"] == "Pod" else PERSISTENTVOLUMECLAIMS, obj)
    for obj in informer_objs:
        cache(ctrl, PODS if obj["kind"] == "Pod" else PERSISTENTVOLUMECLAIMS, obj)
    if case.fail is not None:
        api.fail(*case.fail)

    for claim in case.updated_pvcs:
        ctrl._on_pvc(Added(claim))
    old, new = case.deleted_pod, case.updated_pod
    if old is not None and new is not None and old["metadata"]["name"] == new["metadata"]["name"]:
        ctrl._on_pod(Updated(old, new))
    elif new is not None:
        ctrl._on_pod(Added(new))
    elif old is not None:
        ctrl._on_pod(Deleted(old))

    await drain(ctrl, api, len(case.expected))
    assert summary(api) == case.expected


async def test_claims_of_one_namespace_share_one_live_pod_list() -> None:
    ctrl, api, _, _ = build(PVCProtectionController)
    claims = [pvc(f"pvc{i}", finalizer=True, deleted=True) for i in range(3)] + [
        pvc("other", NS2, finalizer=True, deleted=True)]
    for claim in claims:
        api.put(PERSISTENTVOLUMECLAIMS, claim)
        cache(ctrl, PERSISTENTVOLUMECLAIMS, claim)
        ctrl._on_pvc(Added(claim))
    # The main worker moves every key into its namespace's batch before a namespace worker runs.
    while len(ctrl.queue):
        await ctrl.process_next(ctrl.queue, ctrl.sync)
    assert len(ctrl.namespace_queue) == 2
    while len(ctrl.namespace_queue):
        await ctrl.process_next(ctrl.namespace_queue, ctrl.process_namespace)
    assert summary(api) == [listed(NS), updated("pvc0", finalizer=False), updated("pvc1", finalizer=False),
                            updated("pvc2", finalizer=False), listed(NS2), updated("other", NS2, finalizer=False)]


def unused(status: str, at: str = "2023-11-14T22:13:20Z") -> Obj:
    used = status == "False"
    return {"type": "Unused", "status": status, "lastProbeTime": None, "lastTransitionTime": at,
            "reason": "PodUsingPVC" if used else "NoPodsUsingPVC",
            "message": "A pod is currently referencing this PVC" if used else
            "No pods are currently referencing this PVC"}


UNUSED_CASES = {
    "bound PVC, no pod -> Unused=True": ([], pvc(finalizer=True, phase="Bound"), unused("True")),
    "bound PVC, unscheduled pending pod -> Unused=False": (
        [pod(node="", pvcs=["pvc1"])], pvc(finalizer=True, phase="Bound"), unused("False")),
    "bound PVC, running pod -> Unused=False": (
        [pod(phase="Running", pvcs=["pvc1"])], pvc(finalizer=True, phase="Bound"), unused("False")),
    "bound PVC, only a succeeded pod -> Unused=True": (
        [pod(phase="Succeeded", pvcs=["pvc1"])], pvc(finalizer=True, phase="Bound"), unused("True")),
    "bound PVC already Unused=True and still unused -> no write": (
        [], pvc(finalizer=True, phase="Bound", conditions=[unused("True", "2020-01-01T00:00:00Z")]), None),
    "bound PVC Unused=True, now used -> Unused=False": (
        [pod(pvcs=["pvc1"])], pvc(finalizer=True, phase="Bound", conditions=[unused("True", "2020-01-01T00:00:00Z")]),
        unused("False")),
    "pending PVC -> no condition": ([], pvc(finalizer=True, phase="Pending"), None),
    "deleted bound PVC used by a pod -> no condition": (
        [pod(pvcs=["pvc1"])], pvc(finalizer=True, deleted=True, phase="Bound"), None),
}


@pytest.mark.parametrize(("pods", "claim", "condition"), UNUSED_CASES.values(), ids=list(UNUSED_CASES))
async def test_unused_condition(pods: list[Obj], claim: Obj, condition: Obj | None) -> None:
    ctrl, api, _, _ = build(PVCProtectionController)
    for obj in [*pods, claim]:
        res = PODS if obj["kind"] == "Pod" else PERSISTENTVOLUMECLAIMS
        api.put(res, obj)
        cache(ctrl, res, obj)
    await ctrl.process_pvc(NS, "pvc1")
    writes = [a for a in api.writes() if a.verb == "update/status"]
    if condition is None:
        assert writes == []
        return
    assert len(writes) == 1
    assert writes[0].obj is not None
    assert writes[0].obj["status"]["conditions"] == [condition]


async def test_unused_condition_off_without_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PVCProtectionController, "unused_since_time", False)
    ctrl, api, _, _ = build(PVCProtectionController)
    claim = pvc(finalizer=True, phase="Bound")
    api.put(PERSISTENTVOLUMECLAIMS, claim)
    cache(ctrl, PERSISTENTVOLUMECLAIMS, claim)
    ctrl._on_pvc(Added(claim))
    assert len(ctrl.queue) == 0  # nothing to do for a claim with its finalizer
    await ctrl.process_pvc(NS, "pvc1")
    # A running pod's event enqueues nothing either: it cannot free a claim.
    ctrl._on_pod(Added(pod(phase="Running", pvcs=["pvc1"])))
    assert len(ctrl.queue) == 0
    assert api.actions == []


async def test_pod_events_enqueue_their_claims_for_the_unused_condition() -> None:
    ctrl, _, _, _ = build(PVCProtectionController)
    ctrl._on_pod(Added(pod(phase="Running", pvcs=["a", "b"], ephemeral=["scratch"])))
    keys = set()
    while len(ctrl.queue):
        key = await ctrl.queue.get()
        assert key is not None
        keys.add(key)
        ctrl.queue.done(key)
    assert keys == {"default/a", "default/b", "default/pod1-scratch"}
