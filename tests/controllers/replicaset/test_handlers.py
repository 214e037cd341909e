"""The ReplicaSet controller's event handlers: which keys they queue and what they count off
(replica_set_test.go: TestPodControllerLookup, TestUpdatePods, TestDeletionTimestamp, TestOverlappingRSs, ...)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.controllerutil.controller_utils import pod_key

from .fakes import cache, drain, new_controller
from .objects import new_pod, new_replica_set, terminating, with_meta


def _pods(count: int, rs: dict[str, Any], phase: str = "Running", prefix: str = "pod",
          labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [new_pod(f"{prefix}{i}", rs, phase, labels=labels) for i in range(count)]


def _rs(name: str, namespace: str, selector: dict[str, str] | None) -> dict[str, Any]:
    rs = new_replica_set(1, selector or {}, name=name, namespace=namespace)
    if selector is None:
        rs["spec"].pop("selector")
    return rs


@pytest.mark.parametrize(("replica_sets", "pod", "expected"), [
    pytest.param([_rs("basic", "default", None)],
                 {"metadata": {"name": "foo1", "namespace": "default"}}, [],
                 id="pods without labels don't match any ReplicaSets"),
    pytest.param([_rs("foo", "default", {"foo": "bar"})],
                 {"metadata": {"name": "foo2", "namespace": "ns", "labels": {"foo": "bar"}}}, [],
                 id="matching labels, not namespace"),
    pytest.param([_rs("bar", "ns", {"foo": "bar"})],
                 {"metadata": {"name": "foo3", "namespace": "ns", "labels": {"foo": "bar"}}}, ["bar"],
                 id="matching ns and labels returns the ReplicaSet"),
    pytest.param([_rs("empty", "ns", {})],
                 {"metadata": {"name": "foo4", "namespace": "ns", "labels": {"foo": "bar"}}}, [],
                 id="an empty selector matches nothing here"),
    pytest.param([{**_rs("bad", "ns", {}), "spec": {"selector": {"matchExpressions": [
        {"key": "foo", "operator": "Bogus", "values": ["bar"]}]}}}],
                 {"metadata": {"name": "foo5", "namespace": "ns", "labels": {"foo": "bar"}}}, [],
                 id="an invalid selector matches nothing"),
])
def test_pod_controller_lookup(replica_sets: list[dict[str, Any]], pod: dict[str, Any], expected: list[str]) -> None:
    controller, _, _ = new_controller()
    cache(controller.rs_informer, *replica_sets)
    assert [rs["metadata"]["name"] for rs in controller._pod_replica_sets(pod)] == expected


def test_related_pods_lookup() -> None:
    some = new_replica_set(1, {"foo": "bar"}, name="foo1")
    related = new_replica_set(1, {"foo": "baz"}, name="foo2")
    unrelated = new_replica_set(1, {"foo": "quux"}, name="bar1", owner_uid="456")
    pending_deletion = with_meta(new_replica_set(1, {"foo": "xyzzy"}, name="foo3", owner_uid="789"),
                                 deletionTimestamp="2024-01-01T00:00:00Z")
    cases = [
        ([pending_deletion, unrelated], [new_pod("pod", pending_deletion, "Running")], pending_deletion, ["pod"]),
        ([some, unrelated], [new_pod("pod1", some, "Running"), new_pod("pod2", some, "Running"),
                             new_pod("pod4", unrelated, "Running")], some, ["pod1", "pod2"]),
        ([some, related, unrelated], [new_pod("pod1", some, "Running"), new_pod("pod2", some, "Running"),
                                      new_pod("pod3", related, "Running"), new_pod("pod4", unrelated, "Running")],
         some, ["pod1", "pod2", "pod3"]),
    ]
    for replica_sets, pods, rs, expected in cases:
        controller, _, _ = new_controller()
        cache(controller.rs_informer, *replica_sets)
        cache(controller.pod_informer, *pods)
        assert sorted(p["metadata"]["name"] for p in controller._related_pods(rs)) == expected


def test_related_pods_of_a_replica_set_without_controller_is_empty() -> None:
    controller, _, _ = new_controller()
    rs = new_replica_set(1, {"foo": "bar"}, owner_uid=None)
    cache(controller.rs_informer, rs)
    cache(controller.pod_informer, new_pod("pod", rs, "Running"))
    assert controller._related_pods(rs) == []


async def test_watch_controllers_queues_added_replica_set() -> None:
    controller, _, _ = new_controller()
    rs = new_replica_set(1, {"foo": "bar"}, name="foo")
    controller.rs_informer.apply("ADDED", rs)
    assert await drain(controller) == ["default/foo"]


async def test_watch_pods_queues_the_owner() -> None:
    controller, _, _ = new_controller()
    rs = new_replica_set(1, {"foo": "bar"})
    cache(controller.rs_informer, rs)
    pod = new_pod("pod0", rs, "Failed")
    controller.pod_informer.apply("ADDED", pod)
    assert await drain(controller) == [key_of(rs)]


async def test_delete_final_state_unknown_queues_the_owner() -> None:
    controller, _, _ = new_controller()
    rs = new_replica_set(1, {"foo": "bar"})
    cache(controller.rs_informer, rs)
    pod = new_pod("pod0", rs, "Running")
    controller.pod_informer.apply("ADDED", pod)
    await drain(controller)
    controller.pod_informer.replace([], "5")  # the pod vanished while the watch was down: a tombstone
    assert await drain(controller) == [key_of(rs)]


async def test_update_pods() -> None:
    controller, _, _ = new_controller()
    labels1, labels2 = {"foo": "bar"}, {"bar": "foo"}
    rs1 = new_replica_set(1, labels1)
    rs2 = with_meta({**rs1, "spec": {**rs1["spec"], "selector": {"matchLabels": labels2}}}, name="barfoo",
                    uid="uid-barfoo")
    cache(controller.rs_informer, rs1, rs2)

    def ref(rs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
                 "uid": rs["metadata"]["uid"], "controller": True}]

    base = new_pod("pod0", rs1, "Running", labels=labels1)

    # case 1: pod with a ControllerRef changes labels: its owner syncs.
    old = with_meta(base, ownerReferences=ref(rs1), resourceVersion="1")
    controller._update_pod(old, with_meta(old, labels=labels2, resourceVersion="2"))
    assert sorted(await drain(controller)) == [key_of(rs1)]

    # case 2: the ControllerRef is removed (orphan): the label-matching RS syncs (and the former owner).
    old = with_meta(base, labels=labels2, ownerReferences=ref(rs2), resourceVersion="1")
    controller._update_pod(old, with_meta(old, ownerReferences=None, resourceVersion="2"))
    assert sorted(await drain(controller)) == [key_of(rs2)]

    # case 3: orphaned from rs1 while matching rs2: both sync.
    old = with_meta(base, labels=labels2, ownerReferences=ref(rs1), resourceVersion="1")
    controller._update_pod(old, with_meta(old, ownerReferences=None, resourceVersion="2"))
    assert sorted(await drain(controller)) == sorted([key_of(rs1), key_of(rs2)])

    # case 4: ControllerRef kept, labels change: only the owner syncs.
    old = with_meta(base, labels=labels1, ownerReferences=ref(rs2), resourceVersion="1")
    controller._update_pod(old, with_meta(old, labels=labels2, resourceVersion="2"))
    assert sorted(await drain(controller)) == [key_of(rs2)]

    # a resync (same resourceVersion) queues nothing
    controller._update_pod(old, old)
    assert await drain(controller) == []


async def test_overlapping_replica_sets_only_the_controller_syncs() -> None:
    controller, _, _ = new_controller()
    replica_sets = [new_replica_set(1, {"foo": "bar"}, name=f"rs{j}") for j in range(1, 10)]
    cache(controller.rs_informer, *reversed(replica_sets))
    rs = replica_sets[3]
    controller._add_pod(new_pod("pod0", rs, "Pending"))
    assert await drain(controller) == [key_of(rs)]


async def test_orphan_added_wakes_every_matching_replica_set() -> None:
    controller, _, _ = new_controller()
    a = new_replica_set(1, {"foo": "bar"}, name="a")
    b = new_replica_set(1, {"foo": "bar"}, name="b")
    c = new_replica_set(1, {"foo": "other"}, name="c")
    cache(controller.rs_informer, a, b, c)
    controller.expectations.expect_creations(key_of(a), 1)
    controller._add_pod(new_pod("orphan", a, "Pending", owned=False))
    assert sorted(await drain(controller)) == ["default/a", "default/b"]
    assert controller.expectations.get_expectations(key_of(a)).add == 1  # type: ignore[union-attr]


async def test_deletion_timestamp() -> None:
    controller, _, _ = new_controller()
    rs = new_replica_set(1, {"foo": "bar"})
    cache(controller.rs_informer, rs)
    key = key_of(rs)
    pod = with_meta(terminating(new_pod("pod0", rs, "Pending")), resourceVersion="1")
    controller.expectations.expect_deletions(key, [pod_key(pod)])

    # A pod added with a deletion timestamp counts as a deletion, not a creation.
    controller._add_pod(pod)
    assert await drain(controller) == [key]
    assert controller.expectations.get_expectations(key).fulfilled()  # type: ignore[union-attr]

    # An update that sets the deletion timestamp counts as a deletion.
    old = with_meta(new_pod("pod0", rs, "Pending"), resourceVersion="2")
    controller.expectations.expect_deletions(key, [pod_key(pod)])
    controller._update_pod(old, pod)
    assert await drain(controller) == [key]
    assert controller.expectations.get_expectations(key).fulfilled()  # type: ignore[union-attr]

    # A further update of an already terminating pod is not a second deletion ...
    second = new_pod("secondPod", rs, "Pending")
    controller.expectations.expect_deletions(key, [pod_key(second)])
    controller._update_pod(terminating(old), pod)
    assert not controller.expectations.get_expectations(key).fulfilled()  # type: ignore[union-attr]
    # ... nor is its final delete.
    controller._delete_pod(pod)
    assert not controller.expectations.get_expectations(key).fulfilled()  # type: ignore[union-attr]

    # Deleting the pod that was expected clears them.
    await drain(controller)
    controller._delete_pod(second)
    assert await drain(controller) == [key]
    assert controller.expectations.get_expectations(key).fulfilled()  # type: ignore[union-attr]


async def test_pod_becoming_ready_with_min_ready_seconds_syncs_again_later() -> None:
    controller, _, clock = new_controller()
    rs = new_replica_set(1, {"foo": "bar"})
    rs = {**rs, "spec": {**rs["spec"], "minReadySeconds": 10}}
    cache(controller.rs_informer, rs)
    old = with_meta(new_pod("pod0", rs, "Running", ready=False), resourceVersion="1")
    new = with_meta(new_pod("pod0", rs, "Running", ready=True), resourceVersion="2")
    controller._update_pod(old, new)
    assert await drain(controller) == [key_of(rs)]
    clock.advance(9.9)
    assert await drain(controller) == []
    clock.advance(0.2)
    assert await drain(controller) == [key_of(rs)]


async def test_replica_set_recreated_under_the_same_name_drops_old_expectations() -> None:
    controller, _, _ = new_controller()
    old = new_replica_set(1, {"foo": "bar"})
    cache(controller.rs_informer, old)
    controller.expectations.expect_creations(key_of(old), 3)
    controller._update_rs(old, with_meta(old, uid="a-new-uid"))
    assert controller.expectations.get_expectations(key_of(old)) is None
    assert await drain(controller) == [key_of(old)]


async def test_pods_of_other_kinds_or_unknown_owners_are_ignored() -> None:
    controller, _, _ = new_controller()
    rs = new_replica_set(1, {"foo": "bar"})
    cache(controller.rs_informer, rs)
    owned = new_pod("pod0", rs, "Running")
    wrong_kind = with_meta(owned, ownerReferences=[{**owned["metadata"]["ownerReferences"][0], "kind": "Job"}])
    wrong_uid = with_meta(owned, ownerReferences=[{**owned["metadata"]["ownerReferences"][0], "uid": "gone"}])
    for pod in (wrong_kind, wrong_uid):
        controller._add_pod(pod)
        controller._delete_pod(pod)
    assert await drain(controller) == []
