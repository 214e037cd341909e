"""Upstream's reconciler_test.go, ported onto in-memory fakes (``fakes.py``): attach and detach are the
VolumeAttachment writes the CSI attacher makes, and the clock is fake."""

from __future__ import annotations

import pytest

from controller_manager.api.csi import attachment_name
from controller_manager.controllers.attachdetach import metrics
from controller_manager.controllers.attachdetach.cache import AttachState

from .fakes import DRIVER, node, pod, spec, world

NODE1, NODE2 = "node-1", "node-2"


def va(volume: str, node_name: str) -> str:
    return attachment_name(f"handle-{volume}", DRIVER, node_name)


async def test_run_positive_do_nothing() -> None:
    w = world()
    await w.step()
    assert w.client.calls == []


async def test_run_positive_one_desired_volume_attach() -> None:
    w = world()
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    assert w.client.calls[:2] == [("create", va("volume-name", NODE1)), ("patch-node", NODE1)]
    assert [c for c in w.client.calls if c[0] == "create"] == [("create", va("volume-name", NODE1))]
    assert w.asw.get_attach_state(name, NODE1) is AttachState.ATTACHED
    assert w.client.nodes[NODE1]["status"]["volumesAttached"] == [{"name": name, "devicePath": ""}]
    assert w.client.attachments[va("volume-name", NODE1)]["spec"] == {
        "attacher": DRIVER, "nodeName": NODE1, "source": {"persistentVolumeName": "volume-name"}}
    assert w.recorder.events == [("ns1/p", "Normal", "SuccessfulAttachVolume",
                                  'AttachVolume.Attach succeeded for volume "volume-name" ')]


async def test_run_positive_one_desired_volume_attach_then_detach_with_unmounted_volume() -> None:
    w = world()
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    w.dsw.delete_pod("pod-uid", name, NODE1)
    assert not w.dsw.volume_exists(name, NODE1)
    w.asw.set_volumes_mounted_by_node([name], NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    w.client.calls.clear()
    await w.step()
    # The node stops reporting the volume attached before the attachment is deleted.
    assert w.client.calls == [("patch-node", NODE1), ("delete", va("volume-name", NODE1))]
    assert "volumesAttached" not in w.client.nodes[NODE1]["status"]
    assert w.asw.get_attach_state(name, NODE1) is AttachState.DETACHED


async def test_run_positive_attach_then_detach_with_mounted_volume_waits_on_a_healthy_node() -> None:
    w = world()
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    w.dsw.delete_pod("pod-uid", name, NODE1)
    await w.step()
    w.clock.advance(60)  # past the max wait: a Ready node is still trusted to unmount first
    await w.step()
    assert ("delete", va("volume-name", NODE1)) not in w.client.calls
    assert w.asw.get_attach_state(name, NODE1) is AttachState.ATTACHED


async def test_run_positive_attach_then_detach_with_mounted_volume_forced_on_an_unhealthy_node() -> None:
    w = world()
    w.add_node(node(NODE1, ready=False))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    w.dsw.delete_pod("pod-uid", name, NODE1)
    await w.step()
    assert ("delete", va("volume-name", NODE1)) not in w.client.calls  # the timer has just started
    before = metrics.FORCED_DETACHES.labels(metrics.REASON_TIMEOUT)._value.get()
    w.clock.advance(1)
    await w.step()
    assert ("delete", va("volume-name", NODE1)) in w.client.calls
    assert w.asw.get_attach_state(name, NODE1) is AttachState.DETACHED
    assert metrics.FORCED_DETACHES.labels(metrics.REASON_TIMEOUT)._value.get() == before + 1


async def test_run_one_volume_detach_on_unhealthy_node_with_force_detach_on_timeout_disabled() -> None:
    w = world(disable_force_detach=True)
    w.add_node(node(NODE1, ready=False))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    w.dsw.delete_pod("pod-uid", name, NODE1)
    await w.step()
    w.clock.advance(600)
    await w.step()
    assert ("delete", va("volume-name", NODE1)) not in w.client.calls


@pytest.mark.parametrize("tainted", [True, False])
async def test_run_one_volume_detach_on_out_of_service_tainted_node(tainted: bool) -> None:
    taints = [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}] if tainted else []
    w = world(max_wait=600)
    w.add_node(node(NODE1, ready=False, taints=taints))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    w.dsw.delete_pod("pod-uid", name, NODE1)
    before = metrics.FORCED_DETACHES.labels(metrics.REASON_OUT_OF_SERVICE)._value.get()
    await w.step()
    # Still mounted, within the max wait: only the out-of-service taint detaches it at once.
    assert (("delete", va("volume-name", NODE1)) in w.client.calls) is tainted
    assert metrics.FORCED_DETACHES.labels(metrics.REASON_OUT_OF_SERVICE)._value.get() == before + int(tainted)


async def test_run_negative_detach_with_unmounted_volume_update_status_fail() -> None:
    w = world()
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-uid", pod("p"), spec(), NODE1)
    await w.step()
    w.client.fail_node_patch = True
    w.dsw.delete_pod("pod-uid", name, NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    await w.step()
    assert ("delete", va("volume-name", NODE1)) not in w.client.calls
    assert w.asw.get_attach_state(name, NODE1) is AttachState.ATTACHED
    # Once the node can be updated again, the detach goes ahead.
    w.client.fail_node_patch = False
    await w.step()
    assert ("delete", va("volume-name", NODE1)) in w.client.calls


async def test_run_one_volume_attach_and_detach_multiple_nodes_with_read_write_many() -> None:
    w = world()
    w.add_node(node(NODE1))
    w.add_node(node(NODE2))
    rwx = spec(modes=("ReadWriteMany",))
    name = w.dsw.add_pod("pod-1", pod("p1"), rwx, NODE1)
    w.dsw.add_pod("pod-2", pod("p2"), rwx, NODE2)
    await w.step()
    assert w.asw.nodes_for_attached_volume(name) == [NODE1, NODE2]
    w.dsw.delete_pod("pod-1", name, NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    await w.step()
    assert w.asw.nodes_for_attached_volume(name) == [NODE2]
    assert va("volume-name", NODE2) in w.client.attachments
    assert va("volume-name", NODE1) not in w.client.attachments


async def test_run_one_volume_attach_and_detach_multiple_nodes_with_read_write_once() -> None:
    w = world()
    w.add_node(node(NODE1))
    w.add_node(node(NODE2))
    name = w.dsw.add_pod("pod-1", pod("p1"), spec(), NODE1)
    await w.step()
    w.dsw.add_pod("pod-2", pod("p2"), spec(), NODE2)
    await w.step()
    assert w.asw.nodes_for_attached_volume(name) == [NODE1]
    assert va("volume-name", NODE2) not in w.client.attachments
    multi = [e for e in w.recorder.events if e[2] == "FailedAttachVolume"]
    assert multi == [("ns1/p2", "Warning", "FailedAttachVolume",
                      'Multi-Attach error for volume "volume-name" Volume is already used by pod(s) p1')]
    await w.step()
    assert len([e for e in w.recorder.events if e[2] == "FailedAttachVolume"]) == 1  # reported once
    w.dsw.delete_pod("pod-1", name, NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    await w.step()
    assert w.asw.nodes_for_attached_volume(name) == [NODE2]


async def test_run_one_volume_attach_and_detach_uncertain_nodes_with_read_write_once() -> None:
    w = world(attach_error="rpc error: timeout")
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-1", pod("p1"), spec(), NODE1)
    await w.step(1)
    assert w.asw.get_attach_state(name, NODE1) is AttachState.UNCERTAIN
    assert w.recorder.events == [("ns1/p1", "Warning", "FailedAttachVolume",
                                  'AttachVolume.Attach failed for volume "volume-name" : rpc error: timeout')]
    assert "volumesAttached" not in w.client.nodes[NODE1]["status"]  # uncertain attachments are not reported
    # The pod goes away: the uncertain attachment is detached (its VolumeAttachment deleted) once backoff allows.
    w.dsw.delete_pod("pod-1", name, NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    w.clock.advance(1)
    await w.step()
    assert ("delete", va("volume-name", NODE1)) in w.client.calls
    assert w.asw.get_attach_state(name, NODE1) is AttachState.DETACHED


async def test_failed_attach_is_retried_with_exponential_backoff() -> None:
    w = world(attach_error="busy")
    w.add_node(node(NODE1))
    w.dsw.add_pod("pod-1", pod("p1"), spec(), NODE1)
    await w.step()
    assert len([c for c in w.client.calls if c[0] == "create"]) == 1
    w.clock.advance(0.6)  # past the first backoff (500 ms)
    await w.step()
    assert len([c for c in w.client.calls if c[0] == "create"]) == 2
    w.clock.advance(0.6)  # the second backoff is 1 s
    await w.step()
    assert len([c for c in w.client.calls if c[0] == "create"]) == 2
    w.client.attach_error = None
    w.client.attachments.clear()
    w.clock.advance(0.5)
    await w.step()
    assert len([c for c in w.client.calls if c[0] == "create"]) == 3
    assert w.recorder.events[-1][2] == "SuccessfulAttachVolume"


async def test_run_one_volume_detach_fail_node_with_read_write_once() -> None:
    w = world()
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-1", pod("p1"), spec(), NODE1)
    await w.step()
    w.client.fail_delete = True
    w.dsw.delete_pod("pod-1", name, NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    await w.step(1)
    # The detach failed: the volume is reported attached again.
    assert w.asw.get_attach_state(name, NODE1) is AttachState.ATTACHED
    await w.step(1)
    assert w.client.nodes[NODE1]["status"]["volumesAttached"] == [{"name": name, "devicePath": ""}]
    w.client.fail_delete = False
    w.clock.advance(1)
    await w.step()
    assert w.asw.get_attach_state(name, NODE1) is AttachState.DETACHED


async def test_detach_is_not_started_while_the_node_reports_the_volume_in_use() -> None:
    w = world()
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-1", pod("p1"), spec(), NODE1)
    await w.step()
    w.dsw.delete_pod("pod-1", name, NODE1)
    w.asw.set_volumes_mounted_by_node([], NODE1)
    # The cache says unmounted, but the Node the safe-to-detach check reads says in use: no delete.
    w.client.nodes[NODE1]["status"]["volumesInUse"] = [name]
    await w.step(1)
    assert ("delete", va("volume-name", NODE1)) not in w.client.calls
    w.client.nodes[NODE1]["status"]["volumesInUse"] = []
    w.clock.advance(1)
    await w.step()
    assert ("delete", va("volume-name", NODE1)) in w.client.calls


async def test_sync_marks_volumes_whose_attachment_is_no_longer_attached_detached() -> None:
    w = world(sync_period=60)
    w.add_node(node(NODE1))
    name = w.dsw.add_pod("pod-1", pod("p1"), spec(), NODE1)
    await w.step()
    w.client.attachments[va("volume-name", NODE1)]["status"]["attached"] = False
    w.dsw.delete_pod("pod-1", name, NODE1)  # so the reconciler does not attach it straight back
    w.asw.set_volumes_mounted_by_node([name], NODE1)
    await w.step(1)
    assert w.asw.get_attach_state(name, NODE1) is AttachState.ATTACHED
    w.clock.advance(61)
    await w.reconciler.step()
    assert w.asw.get_attach_state(name, NODE1) is AttachState.DETACHED


@pytest.mark.parametrize(("pods_on_node1", "expected"), [
    ([], "Volume is already exclusively attached to one node and can't be attached to another"),
    ([("ns1", "pod1")], "Volume is already used by pod(s) pod1"),
    ([("ns2", "pod2")], "Volume is already used by 1 pod(s) in different namespaces"),
    ([("ns1", "pod3"), ("ns2", "pod4"), ("ns2", "pod5")],
     "Volume is already used by pod(s) pod3 and 2 pod(s) in different namespaces"),
], ids=["no pods use the volume", "pods in the same namespace use the volume",
        "pods in another namespace use the volume", "pods both in the same and another namespace use the volume"])
async def test_report_multi_attach_error(pods_on_node1: list[tuple[str, str]], expected: str) -> None:
    w = world()
    w.add_node(node(NODE1))
    w.add_node(node(NODE2))
    volume = spec()
    w.asw.mark_volume_as_attached("", volume, NODE1)
    for namespace, name in pods_on_node1:
        w.dsw.add_pod(f"uid-{name}", pod(name, namespace), volume, NODE1)
    w.dsw.add_pod("uid-new", pod("new", "ns1"), volume, NODE2)
    await w.reconciler.reconcile()
    assert w.recorder.events == [("ns1/new", "Warning", "FailedAttachVolume",
                                  f'Multi-Attach error for volume "volume-name" {expected}')]
