"""The SELinux warning controller's label translator (upstream's selinux_translator_test.go tables) and its
volume cache: which additions conflict, what the events say, what the metric lists."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllers.selinuxwarning.cache import Conflict, VolumeCache
from controller_manager.controllers.selinuxwarning.translator import conflicts, file_label


@pytest.mark.parametrize(("options", "expected"), [
    pytest.param(None, "", id="nil options"),
    pytest.param({"user": "system_u", "role": "system_r", "type": "container_t", "level": "s0:c0,c1"},
                 "system_u:system_r:container_t:s0:c0,c1", id="all fields set"),
    pytest.param({"type": "container_t", "level": "s0:c0,c1"}, "::container_t:s0:c0,c1", id="some fields set"),
    pytest.param({"level": "s0:c0,c1"}, ":::s0:c0,c1", id="only level set"),
    pytest.param({}, "", id="no fields set"),
])
def test_file_label(options: dict[str, Any] | None, expected: str) -> None:
    assert file_label(options) == expected


@pytest.mark.parametrize(("a", "b", "conflict"), [
    pytest.param("", "", False, id="empty strings don't conflict"),
    pytest.param("", "system_u:system_r:container_t", False, id="empty string don't conflict with anything"),
    pytest.param(":::::::::::::", "system_u:system_r:container_t", False,
                 id="empty parts don't conflict with anything"),
    pytest.param("system_u:system_r:container_t:c0,c2", "system_u:system_r:container_t", False,
                 id="different lengths don't conflict if the common parts are the same"),
    pytest.param("system_u:system_r:conflict_t:c0,c2", "system_u:system_r:container_t", True,
                 id="different lengths conflict if the common parts differ"),
    pytest.param("::conflict_t", "::container_t", True, id="empty parts with conflict"),
    pytest.param("system_u::container_t", ":system_r::c0,c2", False, id="non-conflicting empty parts"),
    pytest.param(":::s0:c1,c2", ":::s0:c98,c99", True, id="levels differ"),
    pytest.param("system_u:system_r:container_t:s0:c1,c2", ":::s0:c1,c2", False,
                 id="a node may fill in the missing parts"),
])
def test_conflicts(a: str, b: str, conflict: bool) -> None:
    assert conflicts(a, b) is conflict
    assert conflicts(b, a) is conflict


NS = "ns1"
VOL = "kubernetes.io/csi/d^vol1"


def pod(name: str, namespace: str = NS) -> tuple[str, str]:
    return (namespace, name)


def test_first_user_of_a_volume_conflicts_with_nothing() -> None:
    cache = VolumeCache()
    assert cache.add_volume(VOL, pod("pod1"), ":::s0:c1,c2", "MountOption", "d") == []
    assert list(cache.all_conflicts()) == []


def test_same_label_and_policy_is_no_conflict_and_a_repeat_is_silent() -> None:
    cache = VolumeCache()
    cache.add_volume(VOL, pod("pod1"), ":::s0:c1,c2", "MountOption", "d")
    assert cache.add_volume(VOL, pod("pod2"), ":::s0:c1,c2", "MountOption", "d") == []
    assert cache.add_volume(VOL, pod("pod2"), ":::s0:c1,c2", "MountOption", "d") == []


def test_different_labels_conflict_both_ways_once() -> None:
    cache = VolumeCache()
    cache.add_volume(VOL, pod("pod1"), ":::s0:c1,c2", "MountOption", "d")
    got = cache.add_volume(VOL, pod("pod2"), ":::s0:c98,c99", "MountOption", "d")
    assert got == [
        Conflict("SELinuxLabel", "SELinuxLabelConflict", pod("pod2"), ":::s0:c98,c99", pod("pod1"), ":::s0:c1,c2"),
        Conflict("SELinuxLabel", "SELinuxLabelConflict", pod("pod1"), ":::s0:c1,c2", pod("pod2"), ":::s0:c98,c99"),
    ]
    # Re-adding the same pod unchanged reports nothing again; the metric still lists both directions.
    assert cache.add_volume(VOL, pod("pod2"), ":::s0:c98,c99", "MountOption", "d") == []
    assert sorted((c.pod, c.other_pod) for c in cache.all_conflicts()) == [(pod("pod1"), pod("pod2")),
                                                                           (pod("pod2"), pod("pod1"))]


def test_different_policies_conflict() -> None:
    cache = VolumeCache()
    cache.add_volume(VOL, pod("pod1"), "", "Recursive", "d")
    got = cache.add_volume(VOL, pod("pod2"), ":::s0:c1,c2", "MountOption", "d")
    assert [(c.event_reason, c.pod, c.property_value, c.other_property_value) for c in got] == [
        ("SELinuxChangePolicyConflict", pod("pod2"), "MountOption", "Recursive"),
        ("SELinuxChangePolicyConflict", pod("pod1"), "Recursive", "MountOption"),
    ]


def test_a_changed_pod_is_compared_again() -> None:
    cache = VolumeCache()
    cache.add_volume(VOL, pod("pod1"), ":::s0:c1,c2", "MountOption", "d")
    cache.add_volume(VOL, pod("pod2"), ":::s0:c1,c2", "MountOption", "d")
    got = cache.add_volume(VOL, pod("pod2"), ":::s0:c5,c6", "MountOption", "d")
    assert {c.pod for c in got} == {pod("pod1"), pod("pod2")}


def test_other_volumes_do_not_conflict_and_deleted_pods_are_forgotten() -> None:
    cache = VolumeCache()
    cache.add_volume(VOL, pod("pod1"), ":::s0:c1,c2", "MountOption", "d")
    assert cache.add_volume("kubernetes.io/csi/d^vol2", pod("pod2"), ":::s0:c9,c8", "MountOption", "d") == []
    cache.add_volume(VOL, pod("pod3"), ":::s0:c9,c8", "MountOption", "d")
    assert len(list(cache.all_conflicts())) == 2
    assert sorted(cache.pods_for_csi_driver("d")) == [pod("pod1"), pod("pod2"), pod("pod3")]
    assert cache.pods_for_csi_driver("other") == []
    cache.delete_pod(pod("pod3"))
    assert list(cache.all_conflicts()) == []
    cache.delete_pod(pod("pod1"))
    cache.delete_pod(pod("pod2"))
    assert len(cache) == 0


def test_event_messages() -> None:
    same = Conflict("SELinuxLabel", "SELinuxLabelConflict", pod("pod1"), ":::s0:c1,c2", pod("pod2"), ":::s0:c98,c99")
    assert same.event_message() == (
        'SELinuxLabel ":::s0:c1,c2" conflicts with pod pod2 that uses the same volume as this pod with SELinuxLabel '
        '":::s0:c98,c99". If both pods land on the same node, only one of them may access the volume.')
    other = Conflict("SELinuxChangePolicy", "SELinuxChangePolicyConflict", pod("pod1"), "MountOption",
                     pod("pod2", "ns2"), "Recursive")
    # Upstream's text for another namespace: no space after the property name, nothing of the other pod.
    assert other.event_message() == (
        'SELinuxChangePolicy"MountOption" conflicts with another pod that uses the same volume as this pod with a '
        "different SELinuxChangePolicy. If both pods land on the same node, only one of them may access the volume.")
