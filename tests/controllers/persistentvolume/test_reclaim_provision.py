"""Upstream's ``delete_test.go``, ``recycle_test.go`` and ``provision_test.go`` tables, for what this port has:

- deletion through an in-tree plugin (upstream's mock deleter), the external deleter (CSI volumes, volumes an
  external provisioner made, volumes migrated to CSI), the in-tree finalizer (HonorPVReclaimPolicy, GA);
- recycling refused: no recycler plugin exists, so where upstream's mock recycler would scrub the volume it is
  marked Failed with "No recycler plugin found for the volume!" (upstream's 6-3); the cases where the volume is
  gone, re-used or busy before the operation starts behave as upstream's;
- provisioning by external provisioners (the annotations, ExternalProvisioning, CSI migration of in-tree
  provisioner names); in-tree provisioning cases need an in-tree provisioner, which kube-controller-manager only
  has with ``--enable-hostpath-provisioner`` (not ported), so only their failure paths apply (11-2, 11-18)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.client.errors import AlreadyExists
from controller_manager.controllers.persistentvolume.binder import Binder
from controller_manager.controllers.persistentvolume.helpers import (
    ANN_BETA_STORAGE_PROVISIONER,
    ANN_MIGRATED_TO,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    PV_DELETION_IN_TREE_PROTECTION_FINALIZER,
    claim_key,
)
from controller_manager.controllers.persistentvolume.helpers import (
    ANN_BIND_COMPLETED as BIND_COMPLETED,
)
from controller_manager.controllers.persistentvolume.helpers import (
    ANN_BOUND_BY_CONTROLLER as BOUND_BY_CONTROLLER,
)
from controller_manager.controllers.persistentvolume.helpers import (
    ANN_DYNAMICALLY_PROVISIONED as DYNAMICALLY_PROVISIONED,
)

from .framework import (
    CLASS_EMPTY,
    CLASS_EXTERNAL,
    CLASS_EXTERNAL_WAIT,
    CLASS_GOLD,
    CLASS_SILVER,
    CLASS_UNKNOWN_INTERNAL,
    MOCK_PLUGIN,
    NAMESPACE,
    NO_EVENTS,
    Case,
    FakeApi,
    MockPlugin,
    ProvisionCall,
    ReactorError,
    TestCall,
    new_claim,
    new_volume,
    run_multisync_test,
    run_sync_test,
    storage_class,
    sync_claim,
    sync_volume,
    with_claim_annotation,
    with_deletion_timestamp,
    with_finalizers,
    with_message,
    with_volume_annotation,
)

V = new_volume
C = new_claim
RETAIN, DELETE, RECYCLE = "Retain", "Delete", "Recycle"
AVAILABLE, BOUND, PENDING, RELEASED, FAILED = "Available", "Bound", "Pending", "Released", "Failed"
GCE_DRIVER = "pd.csi.storage.gke.io"
Obj = dict[str, Any]


def external_volume(name: str, capacity: str, claim_uid: str, claim_name: str, phase: str, policy: str,
                    klass: str, driver: str, *anns: str) -> Obj:
    """``newExternalProvisionedVolume``: a CSI volume of ``driver``."""
    volume = new_volume(name, capacity, claim_uid, claim_name, phase, policy, klass, *anns)
    del volume["spec"]["gcePersistentDisk"]
    volume["spec"]["csi"] = {"driver": driver, "volumeHandle": "1-2-3"}
    if DYNAMICALLY_PROVISIONED in anns:
        volume["metadata"]["annotations"][DYNAMICALLY_PROVISIONED] = driver
    return volume


def injected(test: TestCall, inject: Any) -> TestCall:
    """``wrapTestWithInjectedOperation``: ``inject(binder, api)`` runs when the operation is about to start."""
    async def call(binder: Binder, api: FakeApi, case: Case) -> None:
        async def hook(name: str) -> None:
            inject(binder, api)
        binder.pre_operation_hook = hook
        await test(binder, api, case)
    return call


def _delete_volume(name: str) -> Any:
    def inject(binder: Binder, api: FakeApi) -> None:
        api.volumes.pop(name, None)
    return inject


def _add_claim_bound_to_volume(claim: Obj) -> Any:
    def inject(binder: Binder, api: FakeApi) -> None:
        # pvtesting's AddClaimBoundToVolume: the claim appears and its volume is marked Bound.
        api.claims[claim_key(claim)] = copy.deepcopy(claim)
        binder.claims[claim_key(claim)] = copy.deepcopy(claim)
        volume = api.volumes.get(claim["spec"]["volumeName"])
        if volume is not None:
            volume["status"]["phase"] = BOUND
    return inject


def _make_available(name: str, *, keep_claim: bool) -> Any:
    def inject(binder: Binder, api: FakeApi) -> None:
        volume = api.volumes[name]
        if keep_claim:
            volume["spec"]["claimRef"].pop("uid", None)
        else:
            volume["spec"].pop("claimRef", None)
            volume["metadata"].pop("annotations", None)
        volume["status"]["phase"] = AVAILABLE
    return inject


def delete_cases() -> list[Case]:
    ok = [MockPlugin([None])]
    return [
        Case("8-1 - successful delete",
             [V("volume8-1", "1Gi", "uid8-1", "claim8-1", BOUND, DELETE, CLASS_EMPTY, BOUND_BY_CONTROLLER)], [],
             [], [], NO_EVENTS, sync_volume, plugins=ok),
        Case("8-2 - successful delete with prebound volume",
             [V("volume8-2", "1Gi", "uid8-2", "claim8-2", BOUND, DELETE, CLASS_EMPTY)], [],
             [], [], NO_EVENTS, sync_volume, plugins=[MockPlugin([None])]),
        Case("8-3 - plugin not found",
             [V("volume8-3", "1Gi", "uid8-3", "claim8-3", BOUND, DELETE, CLASS_EMPTY)],
             with_message('error getting deleter volume plugin for volume "volume8-3": no volume plugin matched',
                          [V("volume8-3", "1Gi", "uid8-3", "claim8-3", FAILED, DELETE, CLASS_EMPTY)]),
             [], [], ["Warning VolumeFailedDelete"], sync_volume),
        Case("8-4 - newDeleter returns error",
             [V("volume8-4", "1Gi", "uid8-4", "claim8-4", BOUND, DELETE, CLASS_EMPTY)],
             with_message('failed to create deleter for volume "volume8-4": Mock plugin error: no deleteCalls '
                          "configured", [V("volume8-4", "1Gi", "uid8-4", "claim8-4", FAILED, DELETE, CLASS_EMPTY)]),
             [], [], ["Warning VolumeFailedDelete"], sync_volume, plugins=[MockPlugin([])]),
        Case("8-5 - delete returns error",
             [V("volume8-5", "1Gi", "uid8-5", "claim8-5", BOUND, DELETE, CLASS_EMPTY)],
             with_message("Mock delete error", [V("volume8-5", "1Gi", "uid8-5", "claim8-5", FAILED, DELETE,
                                                  CLASS_EMPTY)]),
             [], [], ["Warning VolumeFailedDelete"], sync_volume,
             plugins=[MockPlugin([RuntimeError("Mock delete error")])]),
        Case("8-6 - volume is deleted before deleting",
             [V("volume8-6", "1Gi", "uid8-6", "claim8-6", BOUND, DELETE, CLASS_EMPTY)], [], [], [], NO_EVENTS,
             injected(sync_volume, _delete_volume("volume8-6")), plugins=[MockPlugin([])]),
        Case("8-7 - volume is bound before deleting",
             [V("volume8-7", "1Gi", "uid8-7", "claim8-7", BOUND, DELETE, CLASS_EMPTY, BOUND_BY_CONTROLLER)],
             [V("volume8-7", "1Gi", "uid8-7", "claim8-7", BOUND, DELETE, CLASS_EMPTY, BOUND_BY_CONTROLLER)],
             [], [C("claim8-7", "uid8-7", "10Gi", "volume8-7", BOUND, None)], NO_EVENTS,
             injected(sync_volume, _add_claim_bound_to_volume(C("claim8-7", "uid8-7", "10Gi", "volume8-7", BOUND,
                                                                None))),
             plugins=[MockPlugin([])]),
        Case("8-9 - prebound volume is deleted while the claim exists",
             [V("volume8-9", "1Gi", "uid8-9", "claim8-9", BOUND, DELETE, CLASS_EMPTY)], [],
             [C("claim8-9", "uid8-9-x", "10Gi", "", PENDING, None)],
             [C("claim8-9", "uid8-9-x", "10Gi", "", PENDING, None)], NO_EVENTS, sync_volume,
             plugins=[MockPlugin([None])]),
        Case("8-10-1 - external deleter when volume is dynamic provisioning",
             with_volume_annotation(DYNAMICALLY_PROVISIONED, "external.io/test", [
                 external_volume("volume8-10-1", "1Gi", "uid10-1-1", "claim10-1-1", BOUND, DELETE, CLASS_EMPTY,
                                 GCE_DRIVER, BOUND_BY_CONTROLLER)]),
             with_volume_annotation(DYNAMICALLY_PROVISIONED, "external.io/test", [
                 external_volume("volume8-10-1", "1Gi", "uid10-1-1", "claim10-1-1", RELEASED, DELETE, CLASS_EMPTY,
                                 GCE_DRIVER, BOUND_BY_CONTROLLER)]),
             [], [], NO_EVENTS, sync_volume),
        Case("8-10-2 - external deleter when volume is static provisioning",
             [external_volume("volume8-10-2", "1Gi", "uid10-1-2", "claim10-1-2", BOUND, DELETE, CLASS_EMPTY,
                              GCE_DRIVER, BOUND_BY_CONTROLLER)],
             [external_volume("volume8-10-2", "1Gi", "uid10-1-2", "claim10-1-2", RELEASED, DELETE, CLASS_EMPTY,
                              GCE_DRIVER, BOUND_BY_CONTROLLER)],
             [], [], NO_EVENTS, sync_volume),
        Case("8-10-3 - external deleter when volume is migrated",
             with_volume_annotation(ANN_MIGRATED_TO, GCE_DRIVER, with_volume_annotation(
                 DYNAMICALLY_PROVISIONED, "kubernetes.io/gce-pd",
                 [V("volume8-10-3", "1Gi", "uid10-1-3", "claim10-1-3", BOUND, DELETE, CLASS_EMPTY,
                    DYNAMICALLY_PROVISIONED)])),
             with_volume_annotation(ANN_MIGRATED_TO, GCE_DRIVER, with_volume_annotation(
                 DYNAMICALLY_PROVISIONED, "kubernetes.io/gce-pd",
                 [V("volume8-10-3", "1Gi", "uid10-1-3", "claim10-1-3", RELEASED, DELETE, CLASS_EMPTY,
                    DYNAMICALLY_PROVISIONED)])),
             [], [], NO_EVENTS, sync_volume),
        Case("8-11 - two PVs provisioned for a single claim",
             [V("volume8-11-1", "1Gi", "uid8-11", "claim8-11", BOUND, DELETE, CLASS_EMPTY, DYNAMICALLY_PROVISIONED),
              V("volume8-11-2", "1Gi", "uid8-11", "claim8-11", BOUND, DELETE, CLASS_EMPTY, DYNAMICALLY_PROVISIONED)],
             [V("volume8-11-2", "1Gi", "uid8-11", "claim8-11", BOUND, DELETE, CLASS_EMPTY, DYNAMICALLY_PROVISIONED)],
             [C("claim8-11", "uid8-11", "10Gi", "volume8-11-2", BOUND, None)],
             [C("claim8-11", "uid8-11", "10Gi", "volume8-11-2", BOUND, None)], NO_EVENTS, sync_volume,
             plugins=[MockPlugin([None])]),
        Case("8-12 - two PVs externally provisioned for a single claim",
             [with_volume_annotation(DYNAMICALLY_PROVISIONED, "external.io/test", [
                 external_volume("volume8-12-1", "1Gi", "uid8-12", "claim8-12", BOUND, DELETE, CLASS_EMPTY,
                                 GCE_DRIVER, DYNAMICALLY_PROVISIONED)])[0],
              external_volume("volume8-12-2", "1Gi", "uid8-12", "claim8-12", BOUND, DELETE, CLASS_EMPTY, GCE_DRIVER,
                              DYNAMICALLY_PROVISIONED)],
             [with_volume_annotation(DYNAMICALLY_PROVISIONED, "external.io/test", [
                 external_volume("volume8-12-1", "1Gi", "uid8-12", "claim8-12", RELEASED, DELETE, CLASS_EMPTY,
                                 GCE_DRIVER, DYNAMICALLY_PROVISIONED)])[0],
              external_volume("volume8-12-2", "1Gi", "uid8-12", "claim8-12", BOUND, DELETE, CLASS_EMPTY, GCE_DRIVER,
                              DYNAMICALLY_PROVISIONED)],
             [C("claim8-12", "uid8-12", "10Gi", "volume8-12-2", BOUND, None)],
             [C("claim8-12", "uid8-12", "10Gi", "volume8-12-2", BOUND, None)], NO_EVENTS, sync_volume),
        Case("8-13 - volume has deletion timestamp and processed",
             with_finalizers([PV_DELETION_IN_TREE_PROTECTION_FINALIZER], with_deletion_timestamp(
                 [V("volume8-13", "1Gi", "uid8-13", "claim8-13", BOUND, DELETE, CLASS_EMPTY, BOUND_BY_CONTROLLER)])),
             [], [], [], NO_EVENTS, sync_volume, plugins=[MockPlugin([None])]),
    ]


@pytest.mark.parametrize("case", delete_cases(), ids=str)
async def test_delete_sync(case: Case) -> None:
    await run_sync_test(case)


async def test_delete_multi_sync() -> None:
    """9-1: the deleter fails once; the controller tries again and the volume goes."""
    case = Case("9-1 - delete returns error",
                with_finalizers([PV_DELETION_IN_TREE_PROTECTION_FINALIZER],
                                [V("volume9-1", "1Gi", "uid9-1", "claim9-1", BOUND, DELETE, CLASS_EMPTY)]),
                [], [], [], ["Warning VolumeFailedDelete"], sync_volume,
                plugins=[MockPlugin([RuntimeError("Mock delete error"), None])])
    await run_multisync_test(case)


def running_pod(name: str, claim: str, phase: str = "Running") -> Obj:
    return {"metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"volumes": [{"name": "vol", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": phase}}


def recycle_cases() -> list[Case]:
    no_recycler = "No recycler plugin found for the volume!"
    return [
        Case("6-3 - plugin not found",
             [V("volume6-3", "1Gi", "uid6-3", "claim6-3", BOUND, RECYCLE, CLASS_EMPTY)],
             with_message(no_recycler, [V("volume6-3", "1Gi", "uid6-3", "claim6-3", FAILED, RECYCLE, CLASS_EMPTY)]),
             [], [], ["Warning VolumeFailedRecycle"], sync_volume),
        Case("6-6 - volume is deleted before recycling",
             [V("volume6-6", "1Gi", "uid6-6", "claim6-6", BOUND, RECYCLE, CLASS_EMPTY)], [], [], [], NO_EVENTS,
             injected(sync_volume, _delete_volume("volume6-6"))),
        Case("6-7 - volume is deleted before recycling",
             [V("volume6-7", "1Gi", "uid6-7", "claim6-7", BOUND, RECYCLE, CLASS_EMPTY, BOUND_BY_CONTROLLER)],
             [V("volume6-7", "1Gi", "", "", AVAILABLE, RECYCLE, CLASS_EMPTY)], [], [], NO_EVENTS,
             injected(sync_volume, _make_available("volume6-7", keep_claim=False))),
        Case("6-8 - prebound volume is deleted before recycling",
             [V("volume6-8", "1Gi", "uid6-8", "claim6-8", BOUND, RECYCLE, CLASS_EMPTY)],
             [V("volume6-8", "1Gi", "", "claim6-8", AVAILABLE, RECYCLE, CLASS_EMPTY)], [], [], NO_EVENTS,
             injected(sync_volume, _make_available("volume6-8", keep_claim=True))),
        Case("6-10 - unknown reclaim policy",
             [V("volume6-10", "1Gi", "uid6-10", "claim6-10", BOUND, "Unknown", CLASS_EMPTY)],
             with_message("Volume has unrecognized PersistentVolumeReclaimPolicy",
                          [V("volume6-10", "1Gi", "uid6-10", "claim6-10", FAILED, "Unknown", CLASS_EMPTY)]),
             [], [], ["Warning VolumeUnknownReclaimPolicy"], sync_volume),
        Case("6-11 - used by running pod",
             [V("volume6-11", "1Gi", "uid6-11", "runningClaim", BOUND, RECYCLE, CLASS_EMPTY)],
             [V("volume6-11", "1Gi", "uid6-11", "runningClaim", RELEASED, RECYCLE, CLASS_EMPTY)],
             [], [], ["Normal VolumeFailedRecycle Volume is used by pods: default/runningPod"], sync_volume),
        Case("6-12 - used by completed pod (no recycler: Failed)",
             [V("volume6-12", "1Gi", "uid6-12", "completedClaim", BOUND, RECYCLE, CLASS_EMPTY)],
             with_message(no_recycler, [V("volume6-12", "1Gi", "uid6-12", "completedClaim", FAILED, RECYCLE,
                                          CLASS_EMPTY)]),
             [], [], ["Warning VolumeFailedRecycle"], sync_volume),
    ]


PODS = [running_pod("runningPod", "runningClaim"), running_pod("completedPod", "completedClaim", "Succeeded")]


@pytest.mark.parametrize("case", recycle_cases(), ids=str)
async def test_recycle_sync(case: Case) -> None:
    await run_sync_test(case, pods=PODS)


CLASSES = [
    storage_class("gold", MOCK_PLUGIN),
    storage_class("silver", MOCK_PLUGIN),
    storage_class("copper", MOCK_PLUGIN, mode="WaitForFirstConsumer"),
    storage_class("external", "vendor.com/my-volume"),
    storage_class("external-wait", "vendor.com/my-volume-wait", mode="WaitForFirstConsumer"),
    storage_class("unknown-internal", "kubernetes.io/unknown"),
    storage_class("csi", "mydriver.csi.k8s.io"),
    storage_class("migrated", "kubernetes.io/gce-pd"),
]


def _claims_with(anns: dict[str, str], claims: list[Obj]) -> list[Obj]:
    for name, value in anns.items():
        with_claim_annotation(name, value, claims)
    return claims


def provision_cases() -> list[Case]:
    external = {ANN_STORAGE_PROVISIONER: "vendor.com/my-volume", ANN_BETA_STORAGE_PROVISIONER: "vendor.com/my-volume"}
    data_source = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "test-snap"}

    def with_data_source(claims: list[Obj]) -> list[Obj]:
        claims[0]["spec"]["dataSource"] = dict(data_source)
        claims[0]["spec"]["dataSourceRef"] = dict(data_source)
        return claims

    return [
        Case("11-2 - plugin not found", [], [],
             [C("claim11-2", "uid11-2", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-2", "uid11-2", "1Gi", "", PENDING, CLASS_GOLD)],
             ["Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/mock-volume"], sync_claim),
        Case("11-6 - provisioning when there is a volume available",
             [V("volume11-6", "1Gi", "", "", AVAILABLE, RETAIN, CLASS_GOLD)],
             [V("volume11-6", "1Gi", "uid11-6", "claim11-6", BOUND, RETAIN, CLASS_GOLD, BOUND_BY_CONTROLLER)],
             [C("claim11-6", "uid11-6", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-6", "uid11-6", "1Gi", "volume11-6", BOUND, CLASS_GOLD, BOUND_BY_CONTROLLER, BIND_COMPLETED)],
             NO_EVENTS, sync_claim),
        Case("11-14 - fail due to non-existing class", [], [],
             [C("claim11-14", "uid11-14", "1Gi", "", PENDING, "non-existing")],
             [C("claim11-14", "uid11-14", "1Gi", "", PENDING, "non-existing")],
             ['Warning ProvisioningFailed storageclass.storage.k8s.io "non-existing" not found'], sync_claim),
        Case("11-15 - no provisioning with class=''", [], [],
             [C("claim11-15", "uid11-15", "1Gi", "", PENDING, CLASS_EMPTY)],
             [C("claim11-15", "uid11-15", "1Gi", "", PENDING, CLASS_EMPTY)],
             ["Normal FailedBinding no persistent volumes available for this claim and no storage class is set"],
             sync_claim),
        Case("11-16 - no provisioning with class=nil", [], [],
             [C("claim11-15", "uid11-15", "1Gi", "", PENDING, None)],
             [C("claim11-15", "uid11-15", "1Gi", "", PENDING, None)],
             ["Normal FailedBinding"], sync_claim),
        Case("11-17 - external provisioner", [], [],
             [C("claim11-17", "uid11-17", "1Gi", "", PENDING, CLASS_EXTERNAL)],
             _claims_with(external, [C("claim11-17", "uid11-17", "1Gi", "", PENDING, CLASS_EXTERNAL)]),
             ["Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner "
              "'vendor.com/my-volume' or manually by the system administrator. If volume creation is delayed, please "
              "verify that the provisioner is running and correctly registered."], sync_claim),
        Case("11-18 - unknown internal provisioner", [], [],
             [C("claim11-18", "uid11-18", "1Gi", "", PENDING, CLASS_UNKNOWN_INTERNAL)],
             [C("claim11-18", "uid11-18", "1Gi", "", PENDING, CLASS_UNKNOWN_INTERNAL)],
             ["Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/unknown"], sync_claim),
        Case("11-21 - external provisioner for CSI migration", [], [],
             [C("claim11-21", "uid11-21", "1Gi", "", PENDING, "migrated")],
             # Upstream's fake migration manager calls every plugin migrated, so its claim also gets migrated-to;
             # the real one only knows in-tree names, and the claim is annotated with the CSI driver's.
             _claims_with({ANN_STORAGE_PROVISIONER: GCE_DRIVER, ANN_BETA_STORAGE_PROVISIONER: GCE_DRIVER},
                          [C("claim11-21", "uid11-21", "1Gi", "", PENDING, "migrated")]),
             ["Normal ExternalProvisioning"], sync_claim),
        Case("11-22 - external provisioner with volume available",
             [V("volume11-22", "1Gi", "", "", AVAILABLE, RETAIN, CLASS_EXTERNAL)],
             [V("volume11-22", "1Gi", "uid11-22", "claim11-22", BOUND, RETAIN, CLASS_EXTERNAL, BOUND_BY_CONTROLLER)],
             [C("claim11-22", "uid11-22", "1Gi", "", PENDING, CLASS_EXTERNAL)],
             [C("claim11-22", "uid11-22", "1Gi", "volume11-22", BOUND, CLASS_EXTERNAL, BOUND_BY_CONTROLLER,
                BIND_COMPLETED)],
             NO_EVENTS, sync_claim),
        Case("11-24 - skip finding PV and wait external provisioner for PVC annotated with AnnSelectedNode",
             [V("volume11-24", "1Gi", "", "", AVAILABLE, DELETE, CLASS_EXTERNAL_WAIT)],
             [V("volume11-24", "1Gi", "", "", AVAILABLE, DELETE, CLASS_EXTERNAL_WAIT)],
             with_claim_annotation(ANN_SELECTED_NODE, "node1",
                                   [C("claim11-24", "uid11-24", "1Gi", "", PENDING, CLASS_EXTERNAL_WAIT)]),
             _claims_with({ANN_SELECTED_NODE: "node1", ANN_STORAGE_PROVISIONER: "vendor.com/my-volume-wait",
                           ANN_BETA_STORAGE_PROVISIONER: "vendor.com/my-volume-wait"},
                          [C("claim11-24", "uid11-24", "1Gi", "", PENDING, CLASS_EXTERNAL_WAIT)]),
             ["Normal ExternalProvisioning"], sync_claim),
        Case("11-26 - csi with data source", [], [],
             with_claim_annotation(ANN_STORAGE_PROVISIONER, "mydriver.csi.k8s.io", with_data_source(
                 [C("claim11-26", "uid11-26", "1Gi", "", PENDING, "csi")])),
             with_claim_annotation(ANN_STORAGE_PROVISIONER, "mydriver.csi.k8s.io", with_data_source(
                 [C("claim11-26", "uid11-26", "1Gi", "", PENDING, "csi")])),
             ["Normal ExternalProvisioning"], sync_claim),
        Case("claim annotated with a migrated in-tree provisioner gets migrated-to", [], [],
             with_claim_annotation(ANN_STORAGE_PROVISIONER, "kubernetes.io/gce-pd",
                                   [C("claim-old", "uid-old", "1Gi", "", PENDING, CLASS_EXTERNAL)]),
             _claims_with({ANN_STORAGE_PROVISIONER: "vendor.com/my-volume",
                           ANN_BETA_STORAGE_PROVISIONER: "vendor.com/my-volume"},
                          [C("claim-old", "uid-old", "1Gi", "", PENDING, CLASS_EXTERNAL)]),
             ["Normal ExternalProvisioning"], sync_claim),
        Case("WaitForFirstConsumer - no pod", [], [],
             [C("claim-wffc", "uid-wffc", "1Gi", "", PENDING, CLASS_EXTERNAL_WAIT)],
             [C("claim-wffc", "uid-wffc", "1Gi", "", PENDING, CLASS_EXTERNAL_WAIT)],
             ["Normal WaitForFirstConsumer waiting for first consumer to be created before binding"], sync_claim),
        Case("WaitForFirstConsumer - pod not scheduled", [], [],
             [C("claim-pod", "uid-pod", "1Gi", "", PENDING, CLASS_EXTERNAL_WAIT)],
             [C("claim-pod", "uid-pod", "1Gi", "", PENDING, CLASS_EXTERNAL_WAIT)],
             ["Normal WaitForPodScheduled waiting for pod web-0 to be scheduled"], sync_claim),
    ]


@pytest.mark.parametrize("case", provision_cases(), ids=str)
async def test_provision_sync(case: Case) -> None:
    await run_sync_test(case, CLASSES, pods=[running_pod("web-0", "claim-pod", "Pending")])


def _add_volume(volume: Obj) -> Any:
    def inject(binder: Binder, api: FakeApi) -> None:
        binder.volumes[volume["metadata"]["name"]] = copy.deepcopy(volume)
        api.volumes[volume["metadata"]["name"]] = copy.deepcopy(volume)
    return inject


def provision_multisync_cases() -> list[Case]:
    def external(claims: list[Obj]) -> list[Obj]:
        return _claims_with({ANN_STORAGE_PROVISIONER: "vendor.com/my-volume",
                             ANN_BETA_STORAGE_PROVISIONER: "vendor.com/my-volume"}, claims)

    return [
        Case("12-2 - external provisioner with volume provisioned success", [],
             [V("pvc-uid12-2", "1Gi", "uid12-2", "claim12-2", BOUND, RETAIN, CLASS_EXTERNAL, BOUND_BY_CONTROLLER)],
             [C("claim12-2", "uid12-2", "1Gi", "", PENDING, CLASS_EXTERNAL)],
             external([C("claim12-2", "uid12-2", "1Gi", "pvc-uid12-2", BOUND, CLASS_EXTERNAL, BOUND_BY_CONTROLLER,
                         BIND_COMPLETED)]),
             ["Normal ExternalProvisioning"],
             injected(sync_claim, _add_volume(V("pvc-uid12-2", "1Gi", "", "", AVAILABLE, RETAIN, CLASS_EXTERNAL)))),
        Case("12-3 - external provisioner with volume to be provisioned", [], [],
             [C("claim12-3", "uid12-3", "1Gi", "", PENDING, CLASS_EXTERNAL)],
             external([C("claim12-3", "uid12-3", "1Gi", "", PENDING, CLASS_EXTERNAL)]),
             ["Normal ExternalProvisioning"], sync_claim),
        Case("12-4 - external provisioner with volume provisioned/bound success", [],
             [V("pvc-uid12-4", "1Gi", "uid12-4", "claim12-4", BOUND, RETAIN, CLASS_EXTERNAL, BOUND_BY_CONTROLLER)],
             [C("claim12-4", "uid12-4", "1Gi", "", PENDING, CLASS_EXTERNAL)],
             external([C("claim12-4", "uid12-4", "1Gi", "pvc-uid12-4", BOUND, CLASS_EXTERNAL, BOUND_BY_CONTROLLER,
                         BIND_COMPLETED)]),
             ["Normal ExternalProvisioning"],
             injected(sync_claim, _add_volume(V("pvc-uid12-4", "1Gi", "uid12-4", "claim12-4", BOUND, RETAIN,
                                                CLASS_EXTERNAL, BOUND_BY_CONTROLLER)))),
    ]


@pytest.mark.parametrize("case", provision_multisync_cases(), ids=str)
async def test_provision_multi_sync(case: Case) -> None:
    await run_multisync_test(case, CLASSES)


async def test_disabling_dynamic_provisioner() -> None:
    """With --enable-dynamic-provisioning=false a claim with a class is not provisioned: nothing is written."""
    api = FakeApi()
    claim = C("claim-off", "uid-off", "1Gi", "", PENDING, CLASS_EXTERNAL)
    api.add([], [claim])
    from .framework import new_binder
    binder, recorder = new_binder(api, CLASSES)
    binder.enable_dynamic_provisioning = False
    binder.claims[claim_key(claim)] = claim
    await binder.sync_claim(claim)
    await binder.operations.wait_idle()
    assert recorder.events == []
    assert "annotations" not in api.claims[claim_key(claim)]["metadata"]


# --- in-tree provisioning (upstream's mock provisioner; kube-controller-manager's is host-path) -------------------

CLASS1_PARAMETERS = {"param1": "value1"}
CLASS2_PARAMETERS = {"param2": "value2"}
PROVISION1_SUCCESS = ProvisionCall(CLASS1_PARAMETERS)
PROVISION1_ERROR = ProvisionCall(CLASS1_PARAMETERS, RuntimeError("Mock provisioner error"))
PROVISION2_SUCCESS = ProvisionCall(CLASS2_PARAMETERS)

IN_TREE_CLASSES = [
    storage_class("gold", MOCK_PLUGIN, parameters=CLASS1_PARAMETERS),
    storage_class("silver", MOCK_PLUGIN, parameters=CLASS2_PARAMETERS),
    storage_class("copper", MOCK_PLUGIN, mode="WaitForFirstConsumer", parameters=CLASS1_PARAMETERS),
    storage_class("unsupported-mountoptions", MOCK_PLUGIN, parameters=CLASS1_PARAMETERS, mountOptions=["foo"]),
]
PROVISIONED = (BOUND_BY_CONTROLLER, DYNAMICALLY_PROVISIONED)
ANNOTATED = (ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER)


def _create_errors(*messages: str) -> list[ReactorError]:
    return [ReactorError("create", "persistentvolumes", RuntimeError(m)) for m in messages]


FIVE_CREATE_ERRORS = _create_errors(*(f"Mock creation error{i}" for i in range(1, 6)))


def in_tree_cases() -> list[Case]:
    def provisioned(name: str, uid: str, claim: str, klass: str, *, finalizer: bool = True) -> list[Obj]:
        volumes = [V(name, "1Gi", uid, claim, BOUND, DELETE, klass, *PROVISIONED)]
        return with_finalizers([PV_DELETION_IN_TREE_PROTECTION_FINALIZER], volumes) if finalizer else volumes

    return [
        Case("11-1 - successful provision with storage class 1", [],
             provisioned("pvc-uid11-1", "uid11-1", "claim11-1", CLASS_GOLD),
             [C("claim11-1", "uid11-1", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-1", "uid11-1", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ["Normal ProvisioningSucceeded Successfully provisioned volume pvc-uid11-1 using "
              "kubernetes.io/mock-volume"], sync_claim, plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])]),
        Case("11-2 - plugin not found (in-tree)", [], [],
             [C("claim11-2", "uid11-2", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-2", "uid11-2", "1Gi", "", PENDING, CLASS_GOLD)], ["Warning ProvisioningFailed"], sync_claim),
        Case("11-3 - newProvisioner failure", [], [],
             [C("claim11-3", "uid11-3", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-3", "uid11-3", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ["Warning ProvisioningFailed Failed to create provisioner: Mock plugin error: no provisionCalls "
              "configured"], sync_claim, plugins=[MockPlugin()]),
        Case("11-4 - provision failure", [], [],
             [C("claim11-4", "uid11-4", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-4", "uid11-4", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ['Warning ProvisioningFailed Failed to provision volume with StorageClass "gold": Mock provisioner '
              "error"], sync_claim, plugins=[MockPlugin(provision_calls=[PROVISION1_ERROR])]),
        Case("11-7 - claim is bound before provisioning", [],
             [V("pvc-uid11-7", "1Gi", "uid11-7", "claim11-7", BOUND, DELETE, CLASS_GOLD, *PROVISIONED)],
             [C("claim11-7", "uid11-7", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-7", "uid11-7", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)], NO_EVENTS,
             injected(sync_claim, _add_volume(V("pvc-uid11-7", "1Gi", "uid11-7", "claim11-7", BOUND, DELETE,
                                                CLASS_GOLD, *PROVISIONED))),
             plugins=[MockPlugin()]),
        Case("11-8 - cannot save provisioned volume", [],
             provisioned("pvc-uid11-8", "uid11-8", "claim11-8", CLASS_GOLD),
             [C("claim11-8", "uid11-8", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-8", "uid11-8", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ["Normal ProvisioningSucceeded"], sync_claim, errors=_create_errors("Mock creation error"),
             plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])]),
        Case("11-9 - cannot save provisioned volume, delete succeeds", [], [],
             [C("claim11-9", "uid11-9", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-9", "uid11-9", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ["Warning ProvisioningFailed Error creating provisioned PV object for claim default/claim11-9: Mock "
              "creation error5. Deleting the volume."], sync_claim, errors=list(FIVE_CREATE_ERRORS),
             plugins=[MockPlugin([None], [PROVISION1_SUCCESS])]),
        Case("11-10 - cannot save provisioned volume, no delete plugin found", [], [],
             [C("claim11-10", "uid11-10", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-10", "uid11-10", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ["Warning ProvisioningFailed", "Warning ProvisioningCleanupFailed"], sync_claim,
             errors=list(FIVE_CREATE_ERRORS), plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])]),
        Case("11-11 - cannot save provisioned volume, deleter fails", [], [],
             [C("claim11-11", "uid11-11", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-11", "uid11-11", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)],
             ["Warning ProvisioningFailed", "Warning ProvisioningCleanupFailed Error cleaning provisioned volume for "
              "claim default/claim11-11: Mock deletion error1. Please delete manually."], sync_claim,
             errors=list(FIVE_CREATE_ERRORS),
             plugins=[MockPlugin([RuntimeError(f"Mock deletion error{i}") for i in range(1, 6)],
                                 [PROVISION1_SUCCESS])]),
        Case("11-13 - successful provision with storage class 2", [],
             provisioned("pvc-uid11-13", "uid11-13", "claim11-13", CLASS_SILVER),
             [C("claim11-13", "uid11-13", "1Gi", "", PENDING, CLASS_SILVER)],
             [C("claim11-13", "uid11-13", "1Gi", "", PENDING, CLASS_SILVER, *ANNOTATED)],
             ["Normal ProvisioningSucceeded"], sync_claim, plugins=[MockPlugin(provision_calls=[PROVISION2_SUCCESS])]),
        Case("11-19 - provisioned volume saved but API server crashed", [], [],
             [C("claim11-19", "uid11-19", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-19", "uid11-19", "1Gi", "", PENDING, CLASS_GOLD, *ANNOTATED)], NO_EVENTS, sync_claim,
             errors=[ReactorError("create", "persistentvolumes", RuntimeError("Mock creation error1")),
                     ReactorError("create", "persistentvolumes",
                                  AlreadyExists(409, "AlreadyExists", 'persistentvolumes "" already exists'))],
             plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])]),
        Case("11-20 - unsupported storageClass.mountOptions", [], [],
             [C("claim11-20", "uid11-20", "1Gi", "", PENDING, "unsupported-mountoptions")],
             [C("claim11-20", "uid11-20", "1Gi", "", PENDING, "unsupported-mountoptions", *ANNOTATED)],
             ['Warning ProvisioningFailed Mount options are not supported by the provisioner but StorageClass '
              '"unsupported-mountoptions" has mount options [foo]'], sync_claim,
             plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])]),
        Case("11-23 - skip finding PV and provision for PVC annotated with AnnSelectedNode",
             [V("volume11-23", "1Gi", "", "", AVAILABLE, DELETE, "copper")],
             [V("volume11-23", "1Gi", "", "", AVAILABLE, DELETE, "copper"),
              *provisioned("pvc-uid11-23", "uid11-23", "claim11-23", "copper")],
             with_claim_annotation(ANN_SELECTED_NODE, "node1",
                                   [C("claim11-23", "uid11-23", "1Gi", "", PENDING, "copper")]),
             with_claim_annotation(ANN_SELECTED_NODE, "node1",
                                   [C("claim11-23", "uid11-23", "1Gi", "", PENDING, "copper", *ANNOTATED)]),
             ["Normal ProvisioningSucceeded"], sync_claim,
             plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])], nodes=["node1"]),
        Case("11-25 - failed in-tree provision with data source", [], [],
             [C("claim11-25", "uid11-25", "1Gi", "", PENDING, CLASS_GOLD)],
             [C("claim11-25", "uid11-25", "1Gi", "", PENDING, CLASS_GOLD)],
             ['Warning ProvisioningFailed plugin "kubernetes.io/mock-volume" is not a CSI plugin. Only CSI plugin '
              "can provision a claim with a datasource"],
             sync_claim, plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])]),
        Case("provision fails: the selected node is removed for the scheduler to choose again", [], [],
             with_claim_annotation(ANN_SELECTED_NODE, "node1",
                                   [C("claim-resched", "uid-resched", "1Gi", "", PENDING, "copper")]),
             [C("claim-resched", "uid-resched", "1Gi", "", PENDING, "copper", *ANNOTATED)],
             ['Warning ProvisioningFailed Failed to provision volume with StorageClass "copper": Mock provisioner '
              "error"], sync_claim, plugins=[MockPlugin(provision_calls=[PROVISION1_ERROR])], nodes=["node1"]),
    ]


def _with_data_source(case: Case) -> Case:
    if case.name.startswith("11-25"):
        for claim in (*case.initial_claims, *case.expected_claims):
            claim["spec"]["dataSource"] = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                           "name": "test-snap"}
    return case


@pytest.mark.parametrize("case", [_with_data_source(c) for c in in_tree_cases()], ids=str)
async def test_in_tree_provision_sync(case: Case) -> None:
    await run_sync_test(case, IN_TREE_CLASSES)


async def test_in_tree_provision_multi_sync() -> None:
    """12-1: provisioned, then bound by the next syncs."""
    case = Case("12-1 - successful provision", [],
                [V("pvc-uid12-1", "1Gi", "uid12-1", "claim12-1", BOUND, DELETE, CLASS_GOLD, *PROVISIONED)],
                [C("claim12-1", "uid12-1", "1Gi", "", PENDING, CLASS_GOLD)],
                [C("claim12-1", "uid12-1", "1Gi", "pvc-uid12-1", BOUND, CLASS_GOLD, BOUND_BY_CONTROLLER,
                   BIND_COMPLETED, *ANNOTATED)],
                NO_EVENTS, sync_claim, plugins=[MockPlugin(provision_calls=[PROVISION1_SUCCESS])])
    case.expected_volumes = with_finalizers([PV_DELETION_IN_TREE_PROTECTION_FINALIZER], case.expected_volumes)
    await run_multisync_test(case, IN_TREE_CLASSES)
