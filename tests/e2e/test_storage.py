"""Persistent storage end to end: the kube-sim command (its simulated CSI driver, default StorageClass
``standard``, provisioner, attacher, resizer and volume-waiting kubelets, nodes over two zones) and the
controller-manager's volume controllers as processes, driven by real kubectl and the official client.

What a user of a cluster sees, as issue 16 lists it:
- a StatefulSet's volumeClaimTemplates get Bound claims from dynamic provisioning (default class), and each pod
  runs only after its volume's VolumeAttachment is attached and the node lists the volume in
  ``status.volumesAttached``; deleting the StatefulSet with ``whenDeleted: Delete`` removes the claims and, their
  reclaim policy Delete, the volumes;
- a claim in use is not deleted while its pod runs (``kubernetes.io/pvc-protection``), and an expandable claim
  grows (capacity in status follows the request);
- a ``WaitForFirstConsumer`` claim is provisioned in the zone of the node its pod was scheduled to.

Orderings ("attached before Running", "claim gone only after its pod") are read from kube-sim's
resourceVersions, one counter for every write as etcd's revision: a watch records the revision of each change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from controller_manager.sim.storage import DEFAULT_DRIVER
from tests.e2e.conftest import (
    ApiWatch,
    Kubectl,
    KubeSim,
    Processes,
    start_kube_sim,
    start_manager,
    wait_for_default_service_account,
    wait_until,
)

# Short-lived pods and a handful of volumes: the light group.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]

CONTROLLERS = ",".join((
    "serviceaccount", "statefulset", "garbagecollector", "persistentvolume-binder", "attachdetach",
    "persistentvolume-expander", "pvc-protection", "pv-protection",
))
DELAY = "0.2"  # seconds the simulated provisioner / attacher take
TIMEOUT = 30.0


@pytest.fixture
async def sim(processes: Processes) -> KubeSim:
    return await start_kube_sim(processes, nodes=4, extra=(
        "--zones", "2", "--storage-provision-delay", DELAY, "--storage-attach-delay", DELAY))


class History(ApiWatch):
    """Every change of one resource, in order, with the resourceVersion it was written at."""

    def __init__(self, sim: KubeSim, path: str) -> None:
        super().__init__(sim, path, "", lambda _: 0)
        self.changes: list[tuple[int, bool, dict[str, Any]]] = []  # (resourceVersion, deleted, object)

    def _observe(self, obj: dict[str, Any], deleted: bool = False) -> None:
        super()._observe(obj, deleted)
        self.changes.append((int(obj["metadata"]["resourceVersion"]), deleted, obj))

    async def __aenter__(self) -> History:
        await super().__aenter__()
        return self

    def first(self, name: str, test: Any) -> int | None:
        """The resourceVersion of the first change of ``name`` for which ``test(obj, deleted)`` holds."""
        for rv, deleted, obj in self.changes:
            if obj["metadata"]["name"] == name and test(obj, deleted):
                return rv
        return None


def attachment_name(handle: str, node: str) -> str:
    """The attach/detach controller's VolumeAttachment name for a CSI volume on a node."""
    return "csi-" + hashlib.sha256(f"{handle}{DEFAULT_DRIVER}{node}".encode()).hexdigest()


def unique_name(handle: str) -> str:
    return f"kubernetes.io/csi/{DEFAULT_DRIVER}^{handle}"


def manifest(directory: Path, *objects: dict[str, Any]) -> str:
    path = directory / f"manifest-{len(list(directory.glob('manifest-*')))}.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return str(path)


async def get(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(await kubectl.ok("get", *args, "-o", "json"))
    return out


async def exists(kubectl: Kubectl, *args: str) -> bool:
    code, out = await kubectl("get", *args, "-o", "name")
    assert code == 0 or "NotFound" in out, out
    return code == 0


async def events(kubectl: Kubectl, name: str) -> list[str]:
    out = await kubectl.ok("get", "events", "--field-selector", f"involvedObject.name={name}",
                           "-o", "jsonpath={range .items[*]}{.reason}|{.message}{\"\\n\"}{end}")
    return [line for line in out.splitlines() if line]


def storage_class(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": DEFAULT_DRIVER, "reclaimPolicy": "Delete", **fields}


def claim(name: str, size: str = "1Gi", storage_class_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def pod(name: str, claim_name: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx"}], "terminationGracePeriodSeconds": 1,
                            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def running(obj: dict[str, Any], deleted: bool) -> bool:
    return not deleted and (obj.get("status") or {}).get("phase") == "Running"


def attached(obj: dict[str, Any], deleted: bool) -> bool:
    return not deleted and bool((obj.get("status") or {}).get("attached"))


def bound(obj: dict[str, Any], deleted: bool) -> bool:
    return not deleted and (obj.get("status") or {}).get("phase") == "Bound"


def gone(obj: dict[str, Any], deleted: bool) -> bool:
    return deleted


async def wait_gone(kubectl: Kubectl, kind: str, names: Iterable[str]) -> None:
    names = list(names)

    async def none_left() -> bool:
        for name in names:
            if await exists(kubectl, kind, name):
                return False
        return True

    await wait_until(none_left, timeout=TIMEOUT, what=f"{kind} {names} to be deleted")


async def test_statefulset_claims_are_provisioned_attached_and_deleted_with_it(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    await start_manager(processes, sim, f"--controllers={CONTROLLERS}")
    await wait_for_default_service_account(kubectl)
    async with History(sim, "/api/v1/namespaces/default/pods") as pods, \
            History(sim, "/apis/storage.k8s.io/v1/volumeattachments") as attachments, \
            History(sim, "/api/v1/namespaces/default/persistentvolumeclaims") as claims:
        await kubectl.ok("apply", "-f", manifest(tmp_path, {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "default"},
            "spec": {
                "replicas": 2, "serviceName": "db", "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "db"}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                "template": {"metadata": {"labels": {"app": "db"}},
                             "spec": {"terminationGracePeriodSeconds": 1,
                                      "containers": [{"name": "db", "image": "postgres",
                                                      "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            }}))
        out = await kubectl.ok("rollout", "status", "statefulset/db", "--timeout=60s")
        # rollingUpdate.partition defaults to 0 (as kube-apiserver defaults it): kubectl reports a partitioned
        # roll out.
        assert out.splitlines()[-1] == "partitioned roll out complete: 2 new pods have been updated...", out

        volumes: list[str] = []
        for ordinal in (0, 1):
            pod_name, claim_name = f"db-{ordinal}", f"data-db-{ordinal}"
            pvc = await get(kubectl, "pvc", claim_name)
            assert pvc["status"]["phase"] == "Bound"
            assert pvc["spec"]["storageClassName"] == "standard"  # the default class, set at admission
            assert pvc["metadata"]["labels"] == {"app": "db"}
            assert pvc["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == DEFAULT_DRIVER
            assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
            assert "kubernetes.io/pvc-protection" in pvc["metadata"]["finalizers"]
            assert pvc["status"]["capacity"] == {"storage": "1Gi"}
            pv_name = pvc["spec"]["volumeName"]
            volumes.append(pv_name)
            pv = await get(kubectl, "pv", pv_name)
            assert pv["status"]["phase"] == "Bound"
            assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
            assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
            assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == DEFAULT_DRIVER
            handle = pv["spec"]["csi"]["volumeHandle"]

            p = await get(kubectl, "pod", pod_name)
            node = p["spec"]["nodeName"]
            va_name = attachment_name(handle, node)
            va = await get(kubectl, "volumeattachment", va_name)
            assert va["spec"] == {"attacher": DEFAULT_DRIVER, "nodeName": node,
                                  "source": {"persistentVolumeName": pv_name}}
            assert va["status"]["attached"] is True
            status = (await get(kubectl, "node", node))["status"]
            assert {"name": unique_name(handle), "devicePath": ""} in status["volumesAttached"]
            assert unique_name(handle) in status["volumesInUse"]
            # Bound, then attached, then started: never Running before its volume was attached.
            ran, attach, bind = (pods.first(pod_name, running), attachments.first(va_name, attached),
                                 claims.first(claim_name, bound))
            assert bind is not None, claim_name
            assert attach is not None, va_name
            assert ran is not None, pod_name
            assert bind < attach < ran, (bind, attach, ran)
            assert any(e.startswith("SuccessfulAttachVolume|AttachVolume.Attach succeeded for volume "
                                    f'"{pv_name}"') for e in await events(kubectl, pod_name))
            assert f"ProvisioningSucceeded|Successfully provisioned volume {pv_name}" in await events(
                kubectl, claim_name)

        # whenDeleted: Delete: the claims are owned by the StatefulSet, so they go with it, and their volumes
        # (reclaim Delete) after them.
        owner = (await get(kubectl, "pvc", "data-db-0"))["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"]) for o in owner] == [("StatefulSet", "db")]
        await kubectl.ok("delete", "statefulset", "db")
        await wait_gone(kubectl, "pod", ["db-0", "db-1"])
        await wait_gone(kubectl, "pvc", ["data-db-0", "data-db-1"])
        await wait_gone(kubectl, "pv", volumes)

        async def detached() -> bool:
            listed = await get(kubectl, "volumeattachments")
            return not listed["items"]

        await wait_until(detached, timeout=TIMEOUT, what="the VolumeAttachments to go")
        for ordinal in (0, 1):
            # A claim in use outlives its pod's removal only by the protection finalizer's wait.
            pod_gone, claim_gone = pods.first(f"db-{ordinal}", gone), claims.first(f"data-db-{ordinal}", gone)
            assert pod_gone is not None, f"db-{ordinal}"
            assert claim_gone is not None, f"data-db-{ordinal}"
            assert pod_gone < claim_gone, (pod_gone, claim_gone)


async def test_a_claim_in_use_grows_and_is_kept_until_its_pod_goes(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    await start_manager(processes, sim, f"--controllers={CONTROLLERS}")
    await wait_for_default_service_account(kubectl)
    await kubectl.ok("apply", "-f", manifest(
        tmp_path, storage_class("expandable", allowVolumeExpansion=True), claim("grow", "1Gi", "expandable"),
        pod("user", "grow")))
    await kubectl.ok("wait", "--for=jsonpath={.status.phase}=Running", "pod/user", "--timeout=60s")
    pvc = await get(kubectl, "pvc", "grow")
    assert pvc["status"]["capacity"] == {"storage": "1Gi"}
    pv_name = pvc["spec"]["volumeName"]

    # An expandable claim grows: request 2Gi, the volume and then the claim's status capacity follow.
    await kubectl.ok("patch", "pvc", "grow", "--type=merge",
                     "-p", '{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}')
    await kubectl.ok("wait", "--for=jsonpath={.status.capacity.storage}=2Gi", "pvc/grow", "--timeout=30s")
    pv = await get(kubectl, "pv", pv_name)
    assert pv["spec"]["capacity"] == {"storage": "2Gi"}
    pvc = await get(kubectl, "pvc", "grow")
    assert pvc["status"]["phase"] == "Bound"
    # No resize condition is left; the protection controller's Unused condition says a pod uses it.
    conditions = {c["type"]: (c["status"], c["reason"]) for c in pvc["status"]["conditions"]}
    assert conditions == {"Unused": ("False", "PodUsingPVC")}, pvc["status"]
    assert pvc["status"]["allocatedResources"] == {"storage": "2Gi"}
    reasons = [e.partition("|")[0] for e in await events(kubectl, "grow")]
    assert {"Resizing", "VolumeResizeSuccessful"} <= set(reasons), reasons

    # A claim in use is not deleted while its pod runs: it waits, Terminating, on its protection finalizer.
    await kubectl.ok("delete", "pvc", "grow", "--wait=false")
    code, out = await kubectl("wait", "--for=delete", "pvc/grow", "--timeout=3s")
    assert code != 0, out
    assert "timed out" in out, out
    pvc = await get(kubectl, "pvc", "grow")
    assert pvc["metadata"].get("deletionTimestamp")
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert pvc["status"]["phase"] == "Bound"
    listed = await kubectl.ok("get", "pvc", "grow")
    assert listed.splitlines()[1].split()[1] == "Terminating", listed
    assert (await get(kubectl, "pod", "user"))["status"]["phase"] == "Running"

    await kubectl.ok("delete", "pod", "user", "--wait=false")
    await kubectl.ok("wait", "--for=delete", "pvc/grow", "--timeout=30s")
    await wait_gone(kubectl, "pv", [pv_name])


async def test_wait_for_first_consumer_claims_are_provisioned_in_their_pods_zone(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    await start_manager(processes, sim, f"--controllers={CONTROLLERS}")
    await wait_for_default_service_account(kubectl)
    nodes = (await get(kubectl, "nodes"))["items"]
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes}
    # One node in each zone, so a provisioner ignoring the selected node cannot pass by luck.
    targets = {zone: name for name, zone in sorted(zone_of.items(), reverse=True)}
    assert len(targets) == 2, zone_of

    await kubectl.ok("apply", "-f", manifest(
        tmp_path, storage_class("zonal", volumeBindingMode="WaitForFirstConsumer"),
        *(claim(f"local-{zone}", storage_class_name="zonal") for zone in targets)))

    async def waiting_for_consumer() -> bool:
        for zone in targets:
            if "WaitForFirstConsumer|waiting for first consumer to be created before binding" not in await events(
                    kubectl, f"local-{zone}"):
                return False
        return True

    await wait_until(waiting_for_consumer, timeout=TIMEOUT, what="the WaitForFirstConsumer events")
    for zone in targets:
        pvc = await get(kubectl, "pvc", f"local-{zone}")
        assert pvc["status"]["phase"] == "Pending", pvc
        assert not pvc["spec"].get("volumeName"), pvc

    await kubectl.ok("apply", "-f", manifest(
        tmp_path, *(pod(f"in-{zone}", f"local-{zone}", node) for zone, node in targets.items())))
    for zone, node in targets.items():
        await kubectl.ok("wait", "--for=jsonpath={.status.phase}=Running", f"pod/in-{zone}", "--timeout=60s")
        pvc = await get(kubectl, "pvc", f"local-{zone}")
        assert pvc["status"]["phase"] == "Bound"
        assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
        pv = await get(kubectl, "pv", pvc["spec"]["volumeName"])
        assert pv["spec"]["nodeAffinity"] == {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}
        assert (await get(kubectl, "pod", f"in-{zone}"))["spec"]["nodeName"] == node
