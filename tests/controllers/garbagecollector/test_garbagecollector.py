"""Upstream's garbagecollector_test.go tables for the collector's logic on fakes: attemptToDeleteItem, the graph
builder's invariants (TestProcessEvent), the absent-owner cache, the patches, orphaning failures, the dependents
race, GetDeletableResources and the monitor resync (TestGarbageCollectorSync), plus foreground/orphan steps."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller_manager.client.errors import ApiError, Conflict
from controller_manager.controllers.garbagecollector import metrics
from controller_manager.controllers.garbagecollector.discovery import get_deletable_resources
from controller_manager.controllers.garbagecollector.garbagecollector import Action
from controller_manager.controllers.garbagecollector.graph import Node, ObjectReference, references_diffs
from controller_manager.controllers.garbagecollector.graph_builder import GraphEvent
from controller_manager.controllers.garbagecollector.operations import unblock_owner_refs_strategic_patch
from controller_manager.controllerutil.controller_ref import delete_owner_ref_patch
from controller_manager.sim.apiserver.patch import apply_patch
from tests.controllers.garbagecollector.fakes import (
    PODS,
    REPLICATION_CONTROLLERS,
    FakeClient,
    make_gc,
    verify_graph_invariants,
)
from tests.prometheus import sample_value


def pod(name: str, *owners: dict[str, Any], uid: str = "456", **meta: Any) -> dict[str, Any]:
    """getPod: a pod in ns1."""
    m: dict[str, Any] = {"name": name, "namespace": "ns1", "uid": uid, **meta}
    if owners:
        m["ownerReferences"] = list(owners)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m}


def rc_ref(name: str, uid: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ReplicationController", "name": name, "uid": uid, **extra}


def pod_node(obj: dict[str, Any], *, virtual: bool = False) -> Node:
    """podToGCNode: owners left empty, attemptToDeleteItem reads them from the server."""
    m = obj["metadata"]
    return Node(ObjectReference("v1", "Pod", m["name"], m["uid"], m["namespace"]), virtual=virtual)


async def test_attempt_to_delete_item() -> None:
    client = FakeClient()
    gc, _ = make_gc(client)
    client.create(PODS, pod("ToBeDeletedPod", rc_ref("owner1", "123")))
    item = pod_node(pod("ToBeDeletedPod"), virtual=True)
    await gc.attempt_to_delete_item(item)
    assert item.virtual, "attemptToDeleteItem changed virtual to false unexpectedly"
    assert set(client.take_actions()) == {
        "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
        "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
        "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
    }


def event(kind: str, uid: str, owners: list[str]) -> GraphEvent:
    """createEvent"""
    metadata: dict[str, Any] = {"uid": uid}
    if owners:
        metadata["ownerReferences"] = [{"uid": o} for o in owners]
    return GraphEvent(kind, {"metadata": metadata}, "v1", "Pod")  # type: ignore[arg-type]


@pytest.mark.parametrize("events", [
    pytest.param([event("add", "1", []), event("add", "2", ["1"]), event("add", "3", ["1", "2"])], id="test1"),
    pytest.param([event("add", "1", []), event("add", "2", ["1"]), event("add", "3", ["1", "2"]),
                  event("add", "4", ["2"]), event("delete", "2", ["doesn't matter"])], id="test2"),
    pytest.param([event("add", "1", []), event("add", "2", ["1"]), event("add", "3", ["1", "2"]),
                  event("add", "4", ["3"]), event("update", "2", ["4"])], id="test3"),
    pytest.param([event("add", "4", ["2"]), event("add", "3", ["1", "2"]), event("add", "2", ["1"]),
                  event("add", "1", []), event("delete", "2", ["doesn't matter"])], id="reverse test2"),
])
def test_process_event(events: list[GraphEvent]) -> None:
    gc, _ = make_gc(FakeClient(), absent_cache_size=2)
    for ev in events:
        gc.builder.process_graph_changes(ev)
        assert verify_graph_invariants(gc.builder.uid_to_node) == []


def test_references_diffs() -> None:
    added, removed, changed = references_diffs([{"uid": "1"}, {"uid": "2", "controller": True}],
                                               [{"uid": "2"}, {"uid": "3"}])
    assert added == [{"uid": "3"}]
    assert removed == [{"uid": "1"}]
    assert changed == [({"uid": "2", "controller": True}, {"uid": "2"})]


async def test_dependents_race() -> None:
    """The orphan worker reads a snapshot of the dependents while the builder keeps changing them."""
    client = FakeClient()
    gc, _ = make_gc(client)
    owner = Node(ObjectReference("v1", "ReplicationController", "owner", "owner", "ns1"))
    gc.builder.uid_to_node["owner"] = owner
    updates = 100

    async def churn() -> None:
        for i in range(updates):
            dependent = Node(ObjectReference("v1", "Pod", f"p{i}", f"uid{i}", "ns1"), [{"uid": "owner"}])
            gc.builder._add_dependent_to_owners(dependent, dependent.owners)
            await asyncio.sleep(0)
            gc.builder._remove_dependent_from_owners(dependent, dependent.owners)

    async def orphan() -> None:
        for _ in range(updates):
            gc.builder.attempt_to_orphan.add(owner)
            assert await gc.process_attempt_to_orphan_worker()

    await asyncio.gather(churn(), orphan())
    assert owner.dependents_length() == 0


async def test_absent_owner_cache() -> None:
    client = FakeClient()
    gc, _ = make_gc(client, absent_cache_size=2)
    rc1_pod1 = pod("rc1Pod1", rc_ref("rc1", "1", controller=True))
    rc1_pod2 = pod("rc1Pod2", rc_ref("rc1", "1", controller=False))
    rc2_pod1 = pod("rc2Pod1", rc_ref("rc2", "2"))
    rc3_pod1 = pod("rc3Pod1", rc_ref("rc3", "3"))
    for p in (rc1_pod1, rc1_pod2, rc2_pod1, rc3_pod1):
        client.create(PODS, p)
    await gc.attempt_to_delete_item(pod_node(rc1_pod1))
    await gc.attempt_to_delete_item(pod_node(rc2_pod1))
    # rc1 is cached: no request, and it is promoted in the cache ...
    await gc.attempt_to_delete_item(pod_node(rc1_pod2))
    # ... so rc2 is the one evicted now.
    await gc.attempt_to_delete_item(pod_node(rc3_pod1))
    cache = gc.builder.absent_owner_cache

    def rc(name: str, uid: str) -> ObjectReference:
        return ObjectReference("v1", "ReplicationController", name, uid, "ns1")

    assert cache.has(rc("rc1", "1"))
    assert not cache.has(rc("rc2", "2"))
    assert cache.has(rc("rc3", "3"))
    gets = [a for a in client.take_actions() if a == "get /v1, Resource=replicationcontrollers ns=ns1 name=rc1"]
    assert len(gets) == 1


def test_delete_owner_ref_patch() -> None:
    original = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"uid": "100", "ownerReferences": [{"uid": "1"}, {"uid": "2"}, {"uid": "3"}]}}
    patched = apply_patch(original, delete_owner_ref_patch("100", ["2", "3"]), "strategic", "Pod")
    assert patched["metadata"] == {"uid": "100", "ownerReferences": [{"uid": "1"}]}


def test_unblock_owner_reference() -> None:
    owners = [{"uid": "1", "blockOwnerDeletion": True}, {"uid": "2", "blockOwnerDeletion": False}, {"uid": "3"}]
    original = {"apiVersion": "v1", "kind": "Pod", "metadata": {"uid": "100", "ownerReferences": owners}}
    node = Node(ObjectReference("v1", "Pod", "p", "100", "ns1"), owners)
    patched = apply_patch(original, unblock_owner_refs_strategic_patch(node), "strategic", "Pod")
    assert patched["metadata"]["ownerReferences"] == [
        {"uid": "1", "blockOwnerDeletion": False}, {"uid": "2", "blockOwnerDeletion": False}, {"uid": "3"}]


async def test_orphan_dependents_failure() -> None:
    client = FakeClient()
    gc, _ = make_gc(client)
    client.failures[("patch", "pod")] = Conflict(409, "Conflict", "the server reported a conflict")
    dependents = [Node(ObjectReference("v1", "Pod", "pod", "", "ns1"))]
    with pytest.raises(RuntimeError, match="the server reported a conflict") as err:
        await gc.orphan_dependents(ObjectReference("", "", "", ""), dependents)
    assert "orphaning [v1/Pod, namespace: ns1, name: pod, uid: ] failed" in str(err.value)


def resource(name: str, kind: str, *verbs: str) -> dict[str, Any]:
    return {"name": name, "namespaced": True, "kind": kind, "verbs": list(verbs)}


@pytest.mark.parametrize(("lists", "expected"), [
    pytest.param([
        {"groupVersion": "apps/v1", "resources": [resource("pods", "Pod", "delete", "list", "watch"),
                                                  resource("services", "Service")]},
        {"groupVersion": "foo//whatever", "resources": [resource("bars", "Bar", "delete", "list", "watch")]},
        {"groupVersion": "acme/v1", "resources": [resource("widgets", "Widget", "delete")]},
    ], {("apps", "v1", "pods")}, id="no error"),
    pytest.param([{"groupVersion": "apps/v1", "resources": [resource("pods", "Pod", "delete", "list", "watch"),
                                                            resource("services", "Service")]}],
                 {("apps", "v1", "pods")}, id="failure with usable results"),
    pytest.param([], set(), id="discovery failure, no results"),
    pytest.param([
        {"groupVersion": "batch/v1", "resources": [resource("jobs", "Job", "delete", "list", "watch"),
                                                   resource("jobs/status", "Job", "get", "patch")]},
        {"groupVersion": "batch/v1beta1", "resources": [resource("jobs", "Job", "delete", "list", "watch"),
                                                        resource("cronjobs", "CronJob", "delete", "list", "watch")]},
    ], {("batch", "v1", "jobs"), ("batch", "v1beta1", "cronjobs")}, id="preferred version per resource"),
])
def test_get_deletable_resources(lists: list[dict[str, Any]], expected: set[tuple[str, str, str]]) -> None:
    assert set(get_deletable_resources(lists)) == expected


async def test_process_deleting_dependents_item() -> None:
    """An owner waiting for its dependents: blocking ones are queued; once none block, the finalizer goes."""
    client = FakeClient()
    gc, _ = make_gc(client)
    rc = {"apiVersion": "v1", "kind": "ReplicationController",
          "metadata": {"name": "rc", "namespace": "ns1", "uid": "rc-uid", "deletionTimestamp": "2024-01-01T00:00:00Z",
                       "finalizers": ["foregroundDeletion", "other"]}}
    client.create(REPLICATION_CONTROLLERS, rc)
    owner = Node(ObjectReference("v1", "ReplicationController", "rc", "rc-uid", "ns1"), deleting_dependents=True,
                 being_deleted=True)
    blocking = Node(ObjectReference("v1", "Pod", "a", "a", "ns1"), [rc_ref("rc", "rc-uid", blockOwnerDeletion=True)])
    loose = Node(ObjectReference("v1", "Pod", "b", "b", "ns1"), [rc_ref("rc", "rc-uid")])
    owner.add_dependent(blocking)
    owner.add_dependent(loose)
    await gc.process_deleting_dependents_item(owner)
    assert gc.builder.attempt_to_delete.pending() == [blocking]  # type: ignore[attr-defined]
    assert client.take_actions() == []
    owner.delete_dependent(blocking)
    await gc.process_deleting_dependents_item(owner)
    assert client.take_actions() == ["get /v1, Resource=replicationcontrollers ns=ns1 name=rc",
                                     "patch /v1, Resource=replicationcontrollers ns=ns1"]


async def test_attempt_to_orphan_worker_requeues_on_failure() -> None:
    client = FakeClient()
    gc, _ = make_gc(client)
    owner = Node(ObjectReference("v1", "ReplicationController", "rc", "rc-uid", "ns1"))
    owner.add_dependent(Node(ObjectReference("v1", "Pod", "gone", "g", "ns1")))  # 404: nothing to orphan
    owner.add_dependent(Node(ObjectReference("v1", "Pod", "stuck", "s", "ns1")))
    client.failures[("patch", "stuck")] = ApiError(500, "InternalError", "boom")
    assert await gc.attempt_to_orphan_worker(owner) is Action.REQUEUE
    del client.failures[("patch", "stuck")]
    client.create(PODS, pod("stuck", uid="s"))
    assert await gc.attempt_to_orphan_worker(owner) is Action.FORGET


def test_graph_metrics() -> None:
    gc, _ = make_gc(FakeClient())
    gc.builder.process_graph_changes(event("add", "child", ["owner"]))
    assert sample_value("garbage_collector_graph_nodes") == 2
    assert sample_value("garbage_collector_graph_virtual_nodes") == 1
    assert metrics.RESOURCES_SYNC_ERROR is not None
