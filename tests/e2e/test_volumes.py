"""The attach/detach controller as it runs, driven by real kubectl against the kube-sim command (its simulated
CSI driver on by default): a pod using a claim bound to a static CSI volume gets a VolumeAttachment, runs once
the volume is attached and listed in its node's ``volumesAttached``, and deleting it detaches the volume."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from controller_manager.sim.storage import DEFAULT_DRIVER
from tests.e2e.conftest import Kubectl, KubeSim, Processes, start_manager, wait_for_default_service_account, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("e2e-light")]


def _manifest(directory: Path, name: str, obj: dict[str, object]) -> str:
    path = directory / f"{name}.json"
    path.write_text(json.dumps(obj))
    return str(path)


async def _json(kubectl: Kubectl, *args: str) -> dict[str, object]:
    out = await kubectl.ok("get", *args, "-o", "json")
    parsed: dict[str, object] = json.loads(out)
    return parsed


async def test_a_pods_csi_volume_is_attached_before_it_runs_and_detached_after(
        processes: Processes, sim: KubeSim, kubectl: Kubectl, tmp_path: Path) -> None:
    await start_manager(processes, sim, "--controllers=attachdetach,serviceaccount")
    await wait_for_default_service_account(kubectl)
    await kubectl.ok("create", "-f", _manifest(tmp_path, "claim", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        # bind-completed, as the PV controller leaves a claim it bound: the scheduler binds a pod only once its
        # claims are fully bound (upstream's VolumeBinding isPVCFullyBound).
        "metadata": {"name": "data", "namespace": "default",
                     "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": "static",
                 "resources": {"requests": {"storage": "1Gi"}}}}))
    uid = (await kubectl.ok("get", "pvc", "data", "-o", "jsonpath={.metadata.uid}")).strip()
    await kubectl.ok("create", "-f", _manifest(tmp_path, "pv", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "static"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "claimRef": {"namespace": "default", "name": "data", "uid": uid},
                 "csi": {"driver": DEFAULT_DRIVER, "volumeHandle": "disk-1"}}}))
    # No PV controller runs here: bind the pair as it would.
    await kubectl.ok("patch", "pv", "static", "--subresource=status", "--type=merge",
                     "-p", '{"status":{"phase":"Bound"}}')
    await kubectl.ok("patch", "pvc", "data", "--subresource=status", "--type=merge",
                     "-p", '{"status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"1Gi"}}}')
    await kubectl.ok("create", "-f", _manifest(tmp_path, "pod", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}))

    async def running() -> bool:
        return (await kubectl.ok("get", "pod", "app", "-o", "jsonpath={.status.phase}")).strip() == "Running"

    await wait_until(running, timeout=60.0)
    node = (await kubectl.ok("get", "pod", "app", "-o", "jsonpath={.spec.nodeName}")).strip()
    name = "csi-" + hashlib.sha256(f"disk-1{DEFAULT_DRIVER}{node}".encode()).hexdigest()
    attachment = await _json(kubectl, "volumeattachment", name)
    assert attachment["status"] == {"attached": True}
    assert attachment["spec"] == {"attacher": DEFAULT_DRIVER, "nodeName": node,
                                  "source": {"persistentVolumeName": "static"}}
    status = (await _json(kubectl, "node", node))["status"]
    unique = f"kubernetes.io/csi/{DEFAULT_DRIVER}^disk-1"
    assert isinstance(status, dict)
    assert status["volumesAttached"] == [{"name": unique, "devicePath": ""}]
    assert status["volumesInUse"] == [unique]
    events = await kubectl.ok("get", "events", "--field-selector", "involvedObject.name=app",
                              "-o", "jsonpath={range .items[*]}{.reason}|{.message}{\"\\n\"}{end}")
    assert 'SuccessfulAttachVolume|AttachVolume.Attach succeeded for volume "static" ' in events, events

    await kubectl.ok("delete", "pod", "app")

    async def detached() -> bool:
        code, _ = await kubectl("get", "volumeattachment", name)
        attached = await kubectl.ok("get", "node", node, "-o", "jsonpath={.status.volumesAttached}")
        return code != 0 and not attached.strip()

    await wait_until(detached, timeout=60.0)

