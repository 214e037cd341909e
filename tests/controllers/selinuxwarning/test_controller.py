"""The SELinux warning controller against in-memory caches, after upstream's selinux_warning_controller_test.go
(TestSELinuxWarningController_Sync) with CSI volumes: what each sync puts in the volume cache, the events, the
errors; then the event handlers, the re-checks a CSIDriver change triggers, and the metric."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.resources import CSIDRIVERS, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES, PODS
from controller_manager.controllers.selinuxwarning import SELinuxWarningController
from controller_manager.controllers.selinuxwarning.controller import mount_labels
from controller_manager.runtime.informers import Added, Deleted, Updated
from tests.controllers.pvcprotection.fakes import build, cache
from tests.prometheus import sample_value

Obj = dict[str, Any]
NS = "ns1"
DRIVER = "ebs.csi.aws.com"
PVC_UID = "uid1"
LABEL_CONFLICT = "If both pods land on the same node, only one of them may access the volume."


def csi_driver(selinux_mount: bool | None = True, name: str = DRIVER) -> Obj:
    spec: Obj = {} if selinux_mount is None else {"seLinuxMount": selinux_mount}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name}, "spec": spec}


def pv_bound(pv: str, claim: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
            "spec": {"accessModes": ["ReadWriteOnce"], "csi": {"driver": DRIVER, "volumeHandle": pv},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": claim, "uid": PVC_UID,
                                  "apiVersion": "v1"}},
            "status": {"phase": "Bound"}}


def pvc_bound(pv: str, claim: str) -> Obj:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": NS, "uid": PVC_UID},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": pv}, "status": {"phase": "Bound"}}


def pod(name: str, level: str = "", policy: str | None = None, *claims: tuple[str, str]) -> Obj:
    """Upstream's test pod: an emptyDir volume, one container mounting ``vol1``, the pod's SELinux level and change
    policy; ``claims`` adds (claim name, volume name) volumes, each mounted."""
    security: Obj = {}
    if level:
        security["seLinuxOptions"] = {"level": level}
    if policy:
        security["seLinuxChangePolicy"] = policy
    volumes: list[Obj] = [{"name": "emptyDir1", "emptyDir": {}}]
    mounts: list[Obj] = [{"name": "vol1", "mountPath": "/mnt"}]
    for claim, volume in claims:
        volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
        if volume != "vol1":
            mounts.append({"name": volume, "mountPath": f"/{volume}"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "container1", "image": "image1", "volumeMounts": mounts}],
                     "securityContext": security, "volumes": volumes},
            "status": {"phase": "Pending"}}


def volumes(ctrl: SELinuxWarningController) -> list[tuple[str, tuple[str, str], str, str]]:
    """(volume, pod, label, policy) the cache holds."""
    return sorted((name, p, info.label, info.change_policy)
                  for name, used in ctrl.cache._volumes.items() for p, info in used.pods.items())


def setup(*objs: tuple[Any, Obj]) -> tuple[SELinuxWarningController, Any]:
    ctrl, _api, _clock, events = build(SELinuxWarningController)
    for res, obj in objs:
        cache(ctrl, res, obj)
    return ctrl, events


UNIQUE = f"kubernetes.io/csi/{DRIVER}^pv1"
BOUND = ((PERSISTENTVOLUMECLAIMS, pvc_bound("pv1", "pvc1")), (PERSISTENTVOLUMES, pv_bound("pv1", "pvc1")),
         (CSIDRIVERS, csi_driver()))


async def test_existing_pod_with_no_volumes() -> None:
    ctrl, events = setup((PODS, pod("pod1", "s0:c1,c2")))
    await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == []
    assert events.events == []


async def test_existing_pod_with_unbound_pvc_is_retried() -> None:
    ctrl, events = setup((PODS, pod("pod1", "s0:c1,c2", None, ("non-existing-pvc", "vol1"))))
    with pytest.raises(RuntimeError, match='persistentvolumeclaim "non-existing-pvc" not found'):
        await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == []
    assert events.events == []


async def test_existing_pod_with_fully_bound_pvc() -> None:
    ctrl, events = setup(*BOUND, (PODS, pod("pod1", "s0:c1,c2", None, ("pvc1", "vol1"))))
    await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == [(UNIQUE, (NS, "pod1"), ":::s0:c1,c2", "MountOption")]
    assert ctrl.cache.pods_for_csi_driver(DRIVER) == [(NS, "pod1")]
    assert events.events == []


async def test_recursive_policy_mounts_without_a_label() -> None:
    ctrl, _ = setup(*BOUND, (PODS, pod("pod1", "s0:c1,c2", "Recursive", ("pvc1", "vol1"))))
    await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == [(UNIQUE, (NS, "pod1"), "", "Recursive")]


@pytest.mark.parametrize("driver", [pytest.param(None, id="no CSIDriver"),
                                    pytest.param(csi_driver(None), id="seLinuxMount unset"),
                                    pytest.param(csi_driver(False), id="seLinuxMount false")])
async def test_a_driver_without_selinux_mount_is_recursive(driver: Obj | None) -> None:
    objs = [BOUND[0], BOUND[1], (PODS, pod("pod1", "s0:c1,c2", None, ("pvc1", "vol1")))]
    if driver is not None:
        objs.append((CSIDRIVERS, driver))
    ctrl, _ = setup(*objs)
    await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == [(UNIQUE, (NS, "pod1"), "", "Recursive")]


async def test_a_pod_without_a_label_is_recursive() -> None:
    ctrl, _ = setup(*BOUND, (PODS, pod("pod1", "", None, ("pvc1", "vol1"))))
    await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == [(UNIQUE, (NS, "pod1"), "", "Recursive")]


async def test_conflict_events_go_to_both_pods() -> None:
    ctrl, events = setup(*BOUND, (PODS, pod("pod1", "s0:c1,c2", None, ("pvc1", "vol1"))),
                         (PODS, pod("pod2", "s0:c98,c99", None, ("pvc1", "vol1"))))
    await ctrl.sync(f"{NS}/pod1")
    await ctrl.sync(f"{NS}/pod2")
    assert sorted(events.events) == [
        ("pod1", "Normal", "SELinuxLabelConflict",
         'SELinuxLabel ":::s0:c1,c2" conflicts with pod pod2 that uses the same volume as this pod with SELinuxLabel '
         f'":::s0:c98,c99". {LABEL_CONFLICT}'),
        ("pod2", "Normal", "SELinuxLabelConflict",
         'SELinuxLabel ":::s0:c98,c99" conflicts with pod pod1 that uses the same volume as this pod with '
         f'SELinuxLabel ":::s0:c1,c2". {LABEL_CONFLICT}'),
    ]
    labels = {"property": "SELinuxLabel", "pod1_namespace": NS, "pod1_name": "pod1", "pod1_value": ":::s0:c1,c2",
              "pod2_namespace": NS, "pod2_name": "pod2", "pod2_value": ":::s0:c98,c99"}
    assert sample_value("selinux_warning_controller_selinux_volume_conflict", labels) == 1.0
    # A resync of an unchanged pod reports nothing new.
    await ctrl.sync(f"{NS}/pod2")
    assert len(events.events) == 2
    # The finished pod is forgotten: no conflict left.
    finished = pod("pod2", "s0:c98,c99", None, ("pvc1", "vol1"))
    finished["status"]["phase"] = "Succeeded"
    cache(ctrl, PODS, finished)
    await ctrl.sync(f"{NS}/pod2")
    assert volumes(ctrl) == [(UNIQUE, (NS, "pod1"), ":::s0:c1,c2", "MountOption")]
    assert sample_value("selinux_warning_controller_selinux_volume_conflict", labels) is None


async def test_conflict_with_a_pod_that_is_gone_is_reported_to_the_first_only() -> None:
    ctrl, events = setup(*BOUND, (PODS, pod("pod1", "s0:c1,c2", None, ("pvc1", "vol1"))))
    ctrl.cache.add_volume(UNIQUE, (NS, "pod2"), ":::s0:c98,c99", "MountOption", DRIVER)  # pod2 not in the informer
    await ctrl.sync(f"{NS}/pod1")
    assert [(name, reason) for name, _, reason, _ in events.events] == [("pod1", "SELinuxLabelConflict")]


async def test_deleted_pod_is_forgotten() -> None:
    ctrl, _ = setup(*BOUND)
    ctrl.cache.add_volume(UNIQUE, (NS, "pod1"), ":::s0:c1,c2", "MountOption", DRIVER)
    await ctrl.sync(f"{NS}/pod1")
    assert volumes(ctrl) == []


async def test_multiple_labels_in_one_pod() -> None:
    p = pod("pod1", "s0:c1,c2", None, ("pvc1", "vol1"))
    p["spec"]["containers"].append({"name": "container2", "image": "image1",
                                    "securityContext": {"seLinuxOptions": {"level": "s0:c3,c4"}},
                                    "volumeMounts": [{"name": "vol1", "mountPath": "/mnt"},
                                                     {"name": "emptyDir1", "mountPath": "/tmp"}]})
    p["spec"]["containers"][0]["volumeMounts"].append({"name": "emptyDir1", "mountPath": "/tmp"})
    ctrl, events = setup(*BOUND, (PODS, p))
    with pytest.raises(RuntimeError, match="multiple SELinux labels found"):
        await ctrl.sync(f"{NS}/pod1")
    assert sorted(events.events) == [
        ("pod1", "Warning", "MultipleSELinuxLabels",
         'Volume "emptyDir1" is mounted twice with different SELinux labels inside this pod'),
        ("pod1", "Warning", "MultipleSELinuxLabels",
         'Volume "vol1" is mounted twice with different SELinux labels inside this pod'),
    ]
    assert volumes(ctrl) == []


def test_mount_labels_prefer_the_containers_options() -> None:
    p = pod("pod1", "s0:c1,c2")
    p["spec"]["initContainers"] = [{"name": "init", "securityContext": {"seLinuxOptions": {"type": "t"}},
                                    "volumeMounts": [{"name": "vol1"}]}]
    p["spec"]["containers"].append({"name": "bare", "volumeMounts": [{"name": "other"}]})
    del p["spec"]["securityContext"]["seLinuxOptions"]
    assert mount_labels(p) == {"vol1": [{"type": "t"}], "other": []}


# --- event handlers ----------------------------------------------------------------------------------------


async def drain(ctrl: SELinuxWarningController) -> set[str]:
    keys: set[str] = set()
    while len(ctrl.queue):
        key = await ctrl.queue.get()
        assert key is not None
        keys.add(key)
        ctrl.queue.done(key)
    return keys


async def test_pod_events() -> None:
    ctrl, _ = setup()
    running, done = pod("pod1"), pod("pod1")
    running["status"]["phase"] = "Running"
    done["status"]["phase"] = "Failed"
    ctrl._on_pod(Added(pod("pod1")))
    assert await drain(ctrl) == {f"{NS}/pod1"}
    ctrl._on_pod(Updated(pod("pod1"), running))
    assert await drain(ctrl) == set()
    ctrl._on_pod(Updated(running, done))
    assert await drain(ctrl) == {f"{NS}/pod1"}
    ctrl._on_pod(Deleted(done))
    assert await drain(ctrl) == {f"{NS}/pod1"}


async def test_claim_and_volume_binding_requeue_their_pods() -> None:
    user = pod("user", "", None, ("pvc1", "vol1"))
    ctrl, _ = setup((PODS, user), (PODS, pod("other")))
    unbound = pvc_bound("", "pvc1")
    ctrl._on_pvc(Added(unbound))
    assert await drain(ctrl) == set()
    ctrl._on_pvc(Updated(unbound, pvc_bound("pv1", "pvc1")))
    assert await drain(ctrl) == {f"{NS}/user"}
    ctrl._on_pvc(Updated(pvc_bound("pv1", "pvc1"), pvc_bound("pv1", "pvc1")))
    assert await drain(ctrl) == set()
    ctrl._on_pvc(Added(pvc_bound("pv1", "pvc1")))
    assert await drain(ctrl) == {f"{NS}/user"}
    half = pv_bound("pv1", "pvc1")
    half["spec"]["claimRef"]["uid"] = ""
    ctrl._on_pv(Added(half))
    assert await drain(ctrl) == set()
    ctrl._on_pv(Updated(half, pv_bound("pv1", "pvc1")))
    assert await drain(ctrl) == {f"{NS}/user"}
    ctrl._on_pv(Updated(pv_bound("pv1", "pvc1"), pv_bound("pv1", "pvc1")))
    assert await drain(ctrl) == set()


async def test_csi_driver_changes_requeue_the_drivers_pods() -> None:
    ctrl, _ = setup()
    ctrl.cache.add_volume(UNIQUE, (NS, "pod1"), "", "Recursive", DRIVER)
    ctrl.cache.add_volume("kubernetes.io/csi/other^v", (NS, "pod2"), "", "Recursive", "other")
    ctrl._on_driver(Added(csi_driver(None)))
    assert await drain(ctrl) == {f"{NS}/pod1"}
    ctrl._on_driver(Updated(csi_driver(None), csi_driver(False)))
    assert await drain(ctrl) == set()  # false and unset read alike
    ctrl._on_driver(Updated(csi_driver(False), csi_driver(True)))
    assert await drain(ctrl) == {f"{NS}/pod1"}
    ctrl._on_driver(Deleted(csi_driver(False)))
    assert await drain(ctrl) == set()
    ctrl._on_driver(Deleted(csi_driver(True)))
    assert await drain(ctrl) == {f"{NS}/pod1"}
