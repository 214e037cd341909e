"""A 10,000-object graph against kube-sim: built from the metadata-only lists, kept current as owners go, and
its memory measured with tracemalloc (the collector's graph and its informer caches, per object)."""

from __future__ import annotations

import gc as pygc
import os
import sys
import time
import tracemalloc

from controller_manager.api.resources import CONFIGMAPS
from controller_manager.client.errors import NotFound
from controller_manager.controllers.garbagecollector import GarbageCollector
from tests.controllers.harness import controller_harness, wait_for

OWNERS = 1000
DEPENDENTS_PER_OWNER = 9  # 10,000 objects in all
NAMESPACE = "default"
TRACE = os.environ.get("GC_TRACE", "1") == "1"


def configmap(name: str, owner: tuple[str, str] | None = None) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": NAMESPACE,
                               "labels": {"app": "scale", "tier": name[:5]},
                               "annotations": {"note": "labels and annotations are not cached by the collector"}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner[0], "uid": owner[1],
                                    "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v" * 64}}


async def test_ten_thousand_object_graph_is_built_kept_current_and_measured() -> None:
    async with controller_harness(GarbageCollector, nodes=1, start=False,
                                  options={"concurrent_gc_syncs": 20}) as h:
        api = h.cluster.api
        owners: list[tuple[str, str]] = []
        for i in range(OWNERS):
            created = api.create(CONFIGMAPS, configmap(f"owner-{i:04d}"), NAMESPACE)
            owners.append((created["metadata"]["name"], created["metadata"]["uid"]))
        for i, owner in enumerate(owners):
            for j in range(DEPENDENTS_PER_OWNER):
                api.create(CONFIGMAPS, configmap(f"dep-{i:04d}-{j}", owner), NAMESPACE)
        total = OWNERS * (1 + DEPENDENTS_PER_OWNER)

        pygc.collect()
        if TRACE:
            tracemalloc.start(1)
        started = time.monotonic()
        await h.start()
        collector = h.controller(GarbageCollector)
        graph = collector.builder.uid_to_node

        async def built() -> bool:
            return (collector.is_synced() and len(collector.builder.graph_changes) == 0
                    and sum(1 for n in graph.values() if n.identity.kind == "ConfigMap" and not n.virtual) >= total)

        await wait_for(built, timeout=60, interval=0.1, what="the 10k-object graph")
        build_seconds = time.monotonic() - started
        pygc.collect()
        if not TRACE:
            sys.stderr.write(f"\nbuilt in {build_seconds:.1f}s\n")
            return
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()

        def traced(*patterns: str) -> int:
            filters = [tracemalloc.Filter(True, p, all_frames=False) for p in patterns]
            return sum(stat.size for stat in snapshot.filter_traces(filters).statistics("filename"))

        graph_bytes = traced("*/garbagecollector/graph.py", "*/garbagecollector/graph_builder.py")
        everything = traced("*/controllers/garbagecollector/*", "*/runtime/informers/*", "*/client/*")
        # (kube-sim keeps a ConfigMap of its own in kube-system, the legacy token tracking one)
        owned = [n for n in graph.values() if n.identity.kind == "ConfigMap" and n.identity.namespace == NAMESPACE]
        assert len(owned) == total
        assert all(graph[uid].dependents_length() == DEPENDENTS_PER_OWNER for _, uid in owners)
        per_object = everything / total
        sys.stderr.write(f"\ngarbage collector, {total} objects: graph built in {build_seconds:.1f}s; "
                         f"{graph_bytes / total:.0f} B/object in the graph, {per_object:.0f} B/object with the "
                         f"metadata caches and what the client keeps ({everything / 2**20:.1f} MiB)\n")
        assert per_object < 4096  # metadata-only and trimmed: far below a full object

        # Kept current: deleting owners makes their dependents go, and the graph follows.
        doomed = owners[:10]
        for name, _ in doomed:
            await h.client.delete(CONFIGMAPS, name, NAMESPACE)

        async def collected() -> bool:
            for i in range(len(doomed)):
                try:
                    await h.client.get(CONFIGMAPS, f"dep-{i:04d}-0", NAMESPACE)
                    return False
                except NotFound:
                    pass
            return len([n for n in graph.values() if n.identity.kind == "ConfigMap"
                        and n.identity.namespace == NAMESPACE]) == total - 10 * (
                1 + DEPENDENTS_PER_OWNER)

        await wait_for(collected, timeout=30, interval=0.1, what="the dependents of deleted owners to be collected")
        # A survivor owned by a live owner was not touched.
        await h.client.get(CONFIGMAPS, "dep-0010-0", NAMESPACE)
