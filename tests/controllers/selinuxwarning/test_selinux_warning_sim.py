"""The SELinux warning controller against kube-sim with its simulated CSI driver: two pods sharing a volume with
different SELinux levels conflict only once the driver's CSIDriver says it mounts with ``-o context``
(``seLinuxMount: true``), and then both pods get the event."""

from __future__ import annotations

from typing import Any

from controller_manager.api.resources import CSIDRIVERS, EVENTS, PODS
from controller_manager.controllers.selinuxwarning import SELinuxWarningController
from controller_manager.sim.storage import DEFAULT_DRIVER, StorageConfig
from tests.controllers.attachdetach.test_attachdetach_sim import bound_claim
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"
STORAGE = StorageConfig(provision_delay=0.1, delete_delay=0.1, attach_delay=0.1, detach_delay=0.1)


def pod(name: str, level: str, claim: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"securityContext": {"seLinuxOptions": {"level": level}},
                     "containers": [{"name": "c", "image": "registry.example/app:1",
                                     "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}


async def reasons(h: Harness, name: str) -> list[str]:
    return [str(e.get("reason")) for e in await h.events_for(name, NS)]


async def test_label_conflicts_are_reported_once_the_driver_mounts_with_context() -> None:
    async with controller_harness(SELinuxWarningController, storage=STORAGE) as h:
        await bound_claim(h, "shared", "disk-1", access_modes=("ReadWriteMany",))
        await h.client.create(PODS, pod("one", "s0:c1,c2", "shared"), NS)
        await h.client.create(PODS, pod("two", "s0:c98,c99", "shared"), NS)
        ctrl = h.controller(SELinuxWarningController)

        async def both_seen() -> bool:
            return sorted(ctrl.cache.pods_for_csi_driver(DEFAULT_DRIVER)) == [(NS, "one"), (NS, "two")]

        await wait_for(both_seen, what="both pods in the cache")
        # The simulated driver does not mount with -o context: both pods relabel recursively, no conflict.
        assert list(ctrl.cache.all_conflicts()) == []

        driver = await h.client.get(CSIDRIVERS, DEFAULT_DRIVER)
        await h.client.update(CSIDRIVERS, {**driver, "spec": {**driver["spec"], "seLinuxMount": True}})

        async def conflict_events() -> bool:
            for name in ("one", "two"):
                if "SELinuxLabelConflict" not in await reasons(h, name):
                    return False
            return True

        await wait_for(conflict_events, what="SELinuxLabelConflict events on both pods")
        events = {e["involvedObject"]["name"]: e for e in await h.list_objects(
            EVENTS, NS)
            if e.get("reason") == "SELinuxLabelConflict"}
        assert events["one"]["message"] == (
            'SELinuxLabel ":::s0:c1,c2" conflicts with pod two that uses the same volume as this pod with '
            'SELinuxLabel ":::s0:c98,c99". If both pods land on the same node, only one of them may access the '
            "volume.")
        assert events["one"]["type"] == "Normal"
        assert events["one"]["source"] == {"component": "selinux_warning"}
