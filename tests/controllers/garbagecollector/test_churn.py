"""The collector under churn, on fakes (exact counts, no timing):

- The graph keeps up: its processor applies changes in runs between event-loop turns, not one change per turn
  (a busy process's turns would cap it at a few hundred changes a second).
- A foreground deletion whose dependents vanish at once (a finished Job's pods under ``ttlSecondsAfterFinished:
  0``), with the graph behind the informers: each gone dependent is read at most once, not once per time its
  owner is re-examined. Here the graph's changes are applied one at a time, and between two of them the workers
  drain everything queued (the most the graph can lag). Likewise the owner, while dependents still block it.
- The workers deleting many dependents of one owner at once read that owner once, not once each."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.controllers.garbagecollector.graph import Node, ObjectReference
from controller_manager.controllers.garbagecollector.graph_builder import (
    FOREGROUND,
    GRAPH_CHANGES_PER_TURN,
    GraphEvent,
)
from controller_manager.controllers.garbagecollector.reference_cache import ReferenceCache
from controller_manager.runtime.informers.informer import SharedInformer
from tests.controllers.garbagecollector.fakes import PODS, REPLICATION_CONTROLLERS, FakeClient, make_gc

DEPENDENTS = 25
NAMESPACE = "ns1"


class WatchedClient(FakeClient):
    """The fake API, with each successful delete delivered to the informer watching that resource at once (an
    informer that keeps up with the server, unlike the graph behind it)."""

    def __init__(self) -> None:
        super().__init__()
        self.watchers: dict[str, SharedInformer] = {}

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        gone = await super().delete(res, name, namespace, **options)
        watcher = self.watchers.get(res.plural)
        if watcher is not None:
            watcher.apply("DELETED", gone)
        return gone


def _obj(kind: str, name: str, uid: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1", **metadata}}


def _owner(**metadata: Any) -> dict[str, Any]:
    return _obj("ReplicationController", "job", "job-uid", **metadata)


def _dependent(i: int) -> dict[str, Any]:
    ref = {"apiVersion": "v1", "kind": "ReplicationController", "name": "job", "uid": "job-uid",
           "controller": True, "blockOwnerDeletion": True}
    return _obj("Pod", f"pod-{i}", f"pod-uid-{i}", ownerReferences=[ref])


def _node(obj: Mapping[str, Any]) -> Node:
    m = obj["metadata"]
    return Node(ObjectReference(obj["apiVersion"], obj["kind"], m["name"], m["uid"], m["namespace"]),
                m.get("ownerReferences", ()))


def _apply_one_graph_change(gc: GarbageCollector) -> bool:
    queue = gc.builder.graph_changes
    if not len(queue):
        return False
    event = queue._queue.popleft()  # the tracking queue: nothing else is waiting on it
    queue._dirty.discard(event)
    gc.builder.process_graph_changes(event)
    return True


async def _drain_workers(gc: GarbageCollector) -> int:
    processed = 0
    while len(gc.builder.attempt_to_delete):
        await gc.process_attempt_to_delete_worker()
        processed += 1
    return processed


async def _run_foreground_burst() -> tuple[WatchedClient, GarbageCollector, Mapping[str, int]]:
    client = WatchedClient()
    gc, _ = make_gc(client)
    assert gc.builder.sync_monitors({("", "v1", "pods"): PODS,
                                     ("", "v1", "replicationcontrollers"): REPLICATION_CONTROLLERS}) == []
    pods = gc.builder.monitors[("", "v1", "pods")].informer
    owners = gc.builder.monitors[("", "v1", "replicationcontrollers")].informer
    client.watchers = {"pods": pods, "replicationcontrollers": owners}
    client.create(REPLICATION_CONTROLLERS, _owner())
    for i in range(DEPENDENTS):
        client.create(PODS, _dependent(i))
    owners.replace([_owner()], "1")
    pods.replace([_dependent(i) for i in range(DEPENDENTS)], "1")
    while _apply_one_graph_change(gc):
        pass
    assert not len(gc.builder.attempt_to_delete)

    # The owner is deleted in the foreground (as the TTL controller deletes a finished Job).
    deleting = _owner(resourceVersion="2", deletionTimestamp="2026-01-01T00:00:00Z", finalizers=[FOREGROUND])
    client.create(REPLICATION_CONTROLLERS, deleting)
    owners.apply("MODIFIED", deleting)
    client.take_actions()

    counts = {"items": 0, "graph_changes": 0}
    while True:
        counts["items"] += await _drain_workers(gc)
        if not _apply_one_graph_change(gc):
            break
        counts["graph_changes"] += 1
    return client, gc, counts


async def test_each_gone_dependent_is_read_once_however_often_its_owner_is_re_examined() -> None:
    client, gc, counts = await _run_foreground_burst()
    actions = client.take_actions()
    pod_reads = [a for a in actions if a.startswith("get /v1, Resource=pods")]
    pod_deletes = [a for a in actions if a.startswith("delete /v1, Resource=pods")]
    # What the collector decides is unchanged: every dependent deleted once, then the owner's finalizer removed.
    assert len(pod_deletes) == DEPENDENTS
    assert len(set(pod_deletes)) == DEPENDENTS
    assert actions[-1] == "patch /v1, Resource=replicationcontrollers ns=ns1"
    assert not any(str(uid).startswith("pod-uid") for uid in gc.builder.uid_to_node)
    # Each dependent is read live once, before its delete. Re-examined later (each of its siblings' deletions
    # re-queues the owner, which re-queues every blocking dependent still in the graph), it is known gone from
    # the informer's cache. Reading it again would cost a request and a repeated delete event each time: about
    # DEPENDENTS**2 / 2 of both.
    assert len(pod_reads) == DEPENDENTS
    # The owner is re-examined once per dependent gone; while some still block it, all upstream does after
    # reading it is re-queue them, so it is read only once per dependent's owner look-up, then to decide (none
    # left blocking) and to remove its finalizer.
    owner_reads = [a for a in actions if a.startswith("get /v1, Resource=replicationcontrollers")]
    assert len(owner_reads) == DEPENDENTS + 2
    assert counts["items"] > 2 * DEPENDENTS  # it was re-examined: the reads saved were asked for
    # The graph saw one delete event per dependent, and the owner's: no virtual repeats.
    assert counts["graph_changes"] == DEPENDENTS + 1


async def test_graph_changes_are_applied_in_runs_between_loop_turns() -> None:
    gc, _ = make_gc(FakeClient(), sync_period=0.0)  # no monitors to wait for: the workers start at once
    changes = 1000
    for i in range(changes):
        pod = _obj("Pod", f"p{i}", f"u{i}")
        gc.builder.graph_changes.add(GraphEvent("add", pod, "v1", "Pod"))
    loop = asyncio.get_running_loop()
    turns = 0
    ticking = True

    def tick() -> None:  # counts the loop's turns
        nonlocal turns
        turns += 1
        if ticking:
            loop.call_soon(tick)

    loop.call_soon(tick)
    started = turns
    task = asyncio.create_task(gc.run_background())
    try:
        while len(gc.builder.uid_to_node) < changes:
            await asyncio.sleep(0)
            assert turns - started < changes, "the graph is applying about one change per loop turn"
        # A few turns to start the tasks, then one per run of changes.
        assert turns - started <= changes // GRAPH_CHANGES_PER_TURN + 5
    finally:
        ticking = False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_concurrent_look_ups_of_one_owner_share_a_request() -> None:
    client = FakeClient()
    gc, _ = make_gc(client)
    client.create(REPLICATION_CONTROLLERS, _owner())
    pods = [_dependent(i) for i in range(DEPENDENTS)]
    for pod in pods:
        client.create(PODS, pod)
    nodes = [gc.builder.uid_to_node.setdefault(p["metadata"]["uid"], _node(p)) for p in pods]
    ref = pods[0]["metadata"]["ownerReferences"][0]

    answers = await asyncio.gather(*(gc.is_dangling(ref, node) for node in nodes))
    assert all(not dangling and owner is not None for dangling, owner in answers)
    assert client.take_actions() == ["get /v1, Resource=replicationcontrollers ns=ns1 name=job"]

    # Gone: one 404 answers everyone, and the owner is remembered as absent.
    client.remove(REPLICATION_CONTROLLERS, NAMESPACE, "job")
    answers = await asyncio.gather(*(gc.is_dangling(ref, node) for node in nodes))
    assert all(dangling and owner is None for dangling, owner in answers)
    assert client.take_actions() == ["get /v1, Resource=replicationcontrollers ns=ns1 name=job"]
    # One after the other, each look-up is its own request (a later one must not get an older answer).
    client.create(REPLICATION_CONTROLLERS, _owner())
    gc.builder.absent_owner_cache = ReferenceCache(100)
    for node in nodes[:3]:
        await gc.is_dangling(ref, node)
    assert len(client.take_actions()) == 3
