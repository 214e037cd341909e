"""Upstream's TestGarbageCollectorSync, as a sequence of discovery answers: monitors follow what discovery serves,
survive a failed discovery and (once synced) a failed group, drop what is gone, and never cover events."""

from __future__ import annotations

from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError
from controller_manager.controllers.garbagecollector import GarbageCollector
from tests.controllers.garbagecollector.fakes import FakeClient, make_gc
from tests.prometheus import sample_value

PODS = Resource("", "v1", "pods", "Pod", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
EVENTS = Resource("", "v1", "events", "Event", True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", True)
READ_ONLY = Resource("", "v1", "componentstatuses", "ComponentStatus", False, verbs=("get", "list"))

SYNC_ERRORS = "garbagecollector_controller_resources_sync_error_total"


def monitors(gc: GarbageCollector) -> set[str]:
    return {plural for (_, _, plural) in gc.builder.monitors}


def sync_errors() -> float:
    return sample_value(SYNC_ERRORS) or 0.0


async def test_monitors_follow_discovery() -> None:
    client = FakeClient()
    gc, _ = make_gc(client, sync_period=0.0)  # informers never run here: don't wait for them
    client.serve([PODS, EVENTS, READ_ONLY, DEPLOYMENTS])
    await gc.resync_monitors()
    assert monitors(gc) == {"pods", "deployments"}  # events ignored, read-only kinds not deletable
    assert not gc.is_synced()

    # Discovery fails outright: nothing changes, an error is counted.
    before = sync_errors()
    client.discovery["/api"] = ApiError(500, "InternalError", "error calling discovery")
    await gc.resync_monitors()
    assert monitors(gc) == {"pods", "deployments"}
    assert sync_errors() == before + 1

    # A resource appears (a new CRD would), another goes.
    client.serve([PODS, SECRETS])
    await gc.resync_monitors()
    assert monitors(gc) == {"pods", "secrets"}
    dropped = gc.builder.monitors[("", "v1", "secrets")]
    client.serve([PODS, DEPLOYMENTS])
    await gc.resync_monitors()
    assert monitors(gc) == {"pods", "deployments"}
    assert not dropped.active
    # Events from a dropped monitor no longer reach the graph.
    dropped.informer.apply("ADDED", {"metadata": {"name": "s", "namespace": "ns", "uid": "u", "resourceVersion": "1"}})
    assert len(gc.builder.graph_changes) == 0

    # A group that fails discovery keeps its monitor once that monitor has synced.
    gc.builder.monitors[("apps", "v1", "deployments")].informer.replace([], "1")
    client.serve([PODS, SECRETS], failing=["apps/v1"])
    await gc.resync_monitors()
    assert monitors(gc) == {"pods", "deployments", "secrets"}
    assert gc.mapper.resource_for("apps/v1", "Deployment") == DEPLOYMENTS

    client.serve([PODS, DEPLOYMENTS])
    await gc.resync_monitors()
    assert monitors(gc) == {"pods", "deployments"}


async def test_monitor_events_feed_the_graph() -> None:
    client = FakeClient()
    gc, _ = make_gc(client, sync_period=0.0)
    client.serve([PODS])
    await gc.resync_monitors()
    informer = gc.builder.monitors[("", "v1", "pods")].informer
    informer.replace([{"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", "resourceVersion": "1",
                                    "labels": {"dropped": "by the transform"},
                                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "o",
                                                         "uid": "owner-uid"}]}}], "1")
    assert gc.is_synced()
    assert "labels" not in informer.store.get("ns/p")["metadata"]  # the cache keeps what the collector reads
    event = await gc.builder.graph_changes.get()
    assert event is not None
    gc.builder.process_graph_changes(event)
    gc.builder.graph_changes.done(event)
    assert gc.graph_has_uid("pod-uid")
    assert gc.graph_has_uid("owner-uid")
    assert gc.builder.uid_to_node["owner-uid"].virtual


async def test_a_full_informer_another_controller_runs_is_shared() -> None:
    """Upstream's ObjectOrMetadataInformerFactory: the collector watches pods through the typed informer the
    ReplicaSet controller already runs, not through a second, metadata-only watch."""
    client = FakeClient()
    gc, _ = make_gc(client, sync_period=0.0)
    pods = gc.ctx.informers.informer(PODS)  # what another controller made first
    client.serve([PODS, DEPLOYMENTS])
    await gc.resync_monitors()
    assert gc.builder.monitors[("", "v1", "pods")].informer is pods
    assert gc.ctx.informers.existing(PODS, metadata_only=True) is None
    # Deployments had no informer yet: a metadata-only one, as before.
    assert gc.builder.monitors[("apps", "v1", "deployments")].informer.metadata_only

    # The shared informer's events feed the graph; the full object's metadata is what the graph reads.
    pods.replace([{"kind": "Pod", "apiVersion": "v1", "spec": {"nodeName": "n1"},
                   "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", "resourceVersion": "1",
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                                     "uid": "rs-uid", "controller": True}]}}], "1")
    event = await gc.builder.graph_changes.get()
    assert event is not None
    gc.builder.process_graph_changes(event)
    gc.builder.graph_changes.done(event)
    assert gc.graph_has_uid("pod-uid")
    assert gc.graph_has_uid("rs-uid")
    assert gc.builder.cached_metadata(PODS, "ns", "p") is pods.store.get("ns/p")


async def test_updates_that_change_nothing_the_graph_reads_are_not_queued() -> None:
    client = FakeClient()
    gc, _ = make_gc(client, sync_period=0.0)
    client.serve([PODS])
    await gc.resync_monitors()
    informer = gc.builder.monitors[("", "v1", "pods")].informer
    base = {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "1",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                              "uid": "rs-uid", "controller": True}]}}
    informer.apply("ADDED", base)
    queued = len(gc.builder.graph_changes)
    status_only = {**base, "metadata": {**base["metadata"], "resourceVersion": "2"}, "status": {"phase": "Running"}}
    informer.apply("MODIFIED", status_only)
    assert len(gc.builder.graph_changes) == queued  # a status update: the graph has nothing to learn
    for change in ({"finalizers": ["x"]}, {"deletionTimestamp": "2026-01-01T00:00:00Z"}, {"ownerReferences": []},
                   {"uid": "u2"}):
        informer.apply("MODIFIED", {**base, "metadata": {**base["metadata"], "resourceVersion": "3", **change}})
        assert len(gc.builder.graph_changes) == queued + 1, change
        queued += 1
        informer.apply("MODIFIED", base)  # back to the base facts: also a change
        queued += 1
