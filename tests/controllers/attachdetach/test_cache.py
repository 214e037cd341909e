"""desired_state_of_world_test.go and actual_state_of_world_test.go, reduced to what the Python caches expose."""

from __future__ import annotations

import pytest

from controller_manager.controllers.attachdetach.cache import (
    ActualStateOfWorld,
    AttachState,
    DesiredStateOfWorld,
    StateError,
)

from .fakes import pod, spec

NODE = "node-name"


# --- desired state of world


def test_add_node_positive_new_node_and_existing_node() -> None:
    dsw = DesiredStateOfWorld()
    assert not dsw.node_exists(NODE)
    dsw.add_node(NODE)
    dsw.add_node(NODE)
    assert dsw.node_exists(NODE)
    assert dsw.volumes_to_attach() == []


def test_add_pod_positive_new_pod_node_exists_volume_doesnt_exist() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node(NODE)
    name = dsw.add_pod("pod-uid", pod("p"), spec(), NODE)
    assert name == "kubernetes.io/csi/csi.example.com^handle-volume-name"
    assert dsw.volume_exists(name, NODE)
    [volume] = dsw.volumes_to_attach()
    assert (volume.volume_name, volume.node_name, volume.scheduled_pods) == (name, NODE, [pod("p")])


def test_add_pod_positive_existing_pod_and_new_pod_same_volume() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node(NODE)
    name = dsw.add_pod("pod1", pod("p1"), spec(), NODE)
    assert dsw.add_pod("pod1", pod("p1"), spec(), NODE) == name
    dsw.add_pod("pod2", pod("p2"), spec(), NODE)
    [volume] = dsw.volumes_to_attach()
    assert len(volume.scheduled_pods) == 2


def test_add_pod_negative_new_pod_node_doesnt_exist() -> None:
    dsw = DesiredStateOfWorld()
    with pytest.raises(StateError, match='no node with the name "node-name" exists in the list of managed nodes'):
        dsw.add_pod("pod-uid", pod("p"), spec(), NODE)
    assert not dsw.node_exists(NODE)


def test_delete_node_positive_node_exists_and_doesnt() -> None:
    dsw = DesiredStateOfWorld()
    dsw.delete_node(NODE)  # a node not managed: no-op
    dsw.add_node(NODE)
    dsw.delete_node(NODE)
    assert not dsw.node_exists(NODE)


def test_delete_node_negative_node_exists_has_child_volumes() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node(NODE)
    dsw.add_pod("pod-uid", pod("p"), spec(), NODE)
    with pytest.raises(StateError, match="the node still contains 1 volumes in its list of volumes to attach"):
        dsw.delete_node(NODE)
    assert dsw.node_exists(NODE)


def test_delete_pod_positive_pod_exists_last_one_removes_the_volume() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node(NODE)
    name = dsw.add_pod("pod1", pod("p1"), spec(), NODE)
    dsw.add_pod("pod2", pod("p2"), spec(), NODE)
    dsw.delete_pod("pod1", name, NODE)
    assert dsw.volume_exists(name, NODE)
    dsw.delete_pod("pod2", name, NODE)
    assert not dsw.volume_exists(name, NODE)
    dsw.delete_pod("pod2", name, NODE)  # gone already: no-op
    dsw.delete_pod("pod2", name, "other-node")


def test_get_volumes_to_attach_positive_two_nodes_three_volumes() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node("node1")
    dsw.add_node("node2")
    dsw.add_pod("pod1", pod("p1"), spec("v1"), "node1")
    dsw.add_pod("pod2", pod("p2"), spec("v2"), "node2")
    dsw.add_pod("pod3", pod("p3"), spec("v3"), "node2")
    got = {(v.node_name, v.spec.name) for v in dsw.volumes_to_attach()}
    assert got == {("node1", "v1"), ("node2", "v2"), ("node2", "v3")}


def test_volume_pods_on_nodes() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node("node1")
    dsw.add_node("node2")
    name = dsw.add_pod("pod1", pod("p1"), spec(), "node1")
    dsw.add_pod("pod2", pod("p2"), spec(), "node2")
    assert dsw.volume_pods_on_nodes(["node1"], name) == [pod("p1")]
    assert dsw.volume_pods_on_nodes(["node3"], name) == []


def test_multi_attach_error_is_remembered() -> None:
    dsw = DesiredStateOfWorld()
    dsw.add_node(NODE)
    name = dsw.add_pod("pod1", pod("p1"), spec(), NODE)
    dsw.set_multi_attach_error(name, NODE)
    assert dsw.volumes_to_attach()[0].multi_attach_error_reported


def test_multi_attach_allowed_follows_the_access_modes() -> None:
    assert not spec(modes=("ReadWriteOnce",)).multi_attach_allowed
    assert not spec(modes=("ReadWriteOncePod",)).multi_attach_allowed
    assert spec(modes=("ReadWriteOnce", "ReadOnlyMany")).multi_attach_allowed
    assert spec(modes=("ReadWriteMany",)).multi_attach_allowed
    assert spec(modes=()).multi_attach_allowed


# --- actual state of world


def test_add_volume_node_positive_new_volume_new_node() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(), NODE, "")
    assert asw.volume_node_exists(name, NODE)
    [attached] = asw.attached_volumes()
    assert (attached.volume_name, attached.node_name, attached.mounted_by_node) == (name, NODE, True)
    assert attached.detach_requested_time is None


def test_add_volume_node_negative_no_name_and_no_spec() -> None:
    with pytest.raises(StateError, match="volumeSpec cannot be nil if volumeName is empty"):
        ActualStateOfWorld().mark_volume_as_attached("", None, NODE)


def test_add_volume_node_positive_existing_volume_new_node_and_existing_node() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(modes=("ReadWriteMany",)), "node1")
    asw.mark_volume_as_attached("", spec(modes=("ReadWriteMany",)), "node2")
    asw.mark_volume_as_attached("", spec(modes=("ReadWriteMany",)), "node2")
    assert asw.nodes_for_attached_volume(name) == ["node1", "node2"]
    assert len(asw.attached_volumes()) == 2


def test_delete_volume_node_positive_volume_exists_node_exists() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(), NODE)
    asw.mark_volume_as_detached(name, NODE)
    assert not asw.volume_node_exists(name, NODE)
    assert asw.attached_volumes() == []
    assert asw.volumes_to_report_attached() == {NODE: []}
    asw.mark_volume_as_detached(name, NODE)  # twice: no-op


def test_uncertain_attachments_are_not_reported_nor_count_as_attached_elsewhere() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_uncertain("", spec(), NODE)
    assert asw.get_attach_state(name, NODE) is AttachState.UNCERTAIN
    assert asw.nodes_for_attached_volume(name) == []
    assert asw.volumes_to_report_attached() == {}
    assert asw.attached_volumes_per_node() == {}
    asw.mark_volume_as_attached(name, spec(), NODE)
    assert asw.get_attach_state(name, NODE) is AttachState.ATTACHED


def test_set_volume_mounted_by_node_positive_set_false_then_true() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(), NODE)
    asw.set_volumes_mounted_by_node([], NODE)
    assert not asw.attached_volumes()[0].mounted_by_node
    asw.set_volumes_mounted_by_node([name], NODE)
    assert asw.attached_volumes()[0].mounted_by_node
    asw.set_volumes_mounted_by_node([], "other-node")
    assert asw.attached_volumes()[0].mounted_by_node


def test_set_detach_request_time_and_reset() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(), NODE)
    assert asw.set_detach_request_time(name, NODE, 100.0) == 0.0
    assert asw.set_detach_request_time(name, NODE, 130.0) == 30.0  # the first request time is kept
    asw.reset_detach_request_time(name, NODE)
    assert asw.set_detach_request_time(name, NODE, 200.0) == 0.0
    with pytest.raises(StateError, match='is no longer attached to the node "other-node"'):
        asw.set_detach_request_time(name, "other-node", 1.0)


def test_volumes_to_report_attached_clears_the_update_flag() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(), NODE, "/dev/sdb")
    assert asw.volumes_to_report_attached() == {NODE: [{"name": name, "devicePath": "/dev/sdb"}]}
    assert asw.volumes_to_report_attached() == {}
    asw.set_node_status_update_needed(NODE)
    assert asw.volumes_to_report_attached() == {NODE: [{"name": name, "devicePath": "/dev/sdb"}]}


def test_remove_and_add_volume_to_report_as_attached() -> None:
    asw = ActualStateOfWorld()
    name = asw.mark_volume_as_attached("", spec(), NODE)
    asw.volumes_to_report_attached()
    asw.remove_volume_from_report_as_attached(name, NODE)
    assert asw.volumes_to_report_attached_for_node(NODE) == (True, [])
    with pytest.raises(StateError, match="does not exist in volumesToReportAsAttached list"):
        asw.remove_volume_from_report_as_attached(name, NODE)
    asw.add_volume_to_report_as_attached(name, NODE)
    assert asw.volumes_to_report_attached_for_node(NODE) == (True, [{"name": name, "devicePath": ""}])
    assert asw.volumes_to_report_attached_for_node(NODE) == (False, [])
    asw.add_volume_to_report_as_attached(name, "other-node")  # not attached there: ignored
    assert "other-node" not in asw.volumes_to_report_attached()


def test_attached_volumes_per_node() -> None:
    asw = ActualStateOfWorld()
    asw.mark_volume_as_attached("", spec("v1"), "node1")
    asw.mark_volume_as_attached("", spec("v2"), "node2")
    asw.mark_volume_as_uncertain("", spec("v3"), "node2")
    per_node = asw.attached_volumes_per_node()
    assert {n: [v.spec.name for v in vs if v.spec] for n, vs in per_node.items()} == {"node1": ["v1"],
                                                                                   "node2": ["v2"]}
    assert [v.spec.name for v in asw.attached_volumes_for_node("node2") if v.spec] == ["v2", "v3"]
