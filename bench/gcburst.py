"""The garbage collector's attempt-to-delete queue under the envelope's Job churn, in one process (issue 19).

kube-sim in process with only the garbage collector running (20 workers, as ``--concurrent-gc-syncs``). ``owners``
owners each with ``dependents`` blocking dependents (ConfigMaps: like a finished Job's pods, they go at once
when deleted) are deleted in the foreground, one every ``period`` seconds, as the TTL controller deletes one
finished Job a second in the envelope's churn. ``busy_ms`` of CPU are burnt on every event-loop turn, standing for
the other controllers of a busy daemon (a turn costs that much more), and ``latency`` seconds are added to every
HTTP request kube-sim answers.

Reported, over the deletions: the attempt-to-delete queue's waits from its workqueue metrics (share over 1 s from
the buckets, exact; p50/p99 from every wait observed), items processed, the collector's GET requests, and
the graph changes queued. Wall-clock waits depend on the machine's load; the counts do not.

``python -m bench.gcburst [--owners 15] [--dependents 25] [--period 1] [--busy-ms 2] [--latency 0.02]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from controller_manager.api.resources import CONFIGMAPS
from controller_manager.client import ApiClient, load_config
from controller_manager.clock import RealClock
from controller_manager.controllers.garbagecollector import GarbageCollector
from controller_manager.runtime.controller import ControllerContext, run_controller
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from controller_manager.runtime.workqueue.metrics import Histogram, QueueStats, stats_for
from controller_manager.sim.cluster import SimCluster

NAMESPACE = "default"
ATTEMPT_TO_DELETE = "garbage_collector_attempt_to_delete"
GRAPH_CHANGES = "garbage_collector_graph_changes"


def _configmap(name: str, owner: tuple[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner[0], "uid": owner[1],
                                    "controller": True, "blockOwnerDeletion": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


class _Recording(Histogram):
    """Stands in for the queue's histogram for a while: keeps every wait (for exact percentiles) and passes each
    on to the histogram it replaced, which the metrics keep exporting."""

    __slots__ = ("inner", "waits")

    def __init__(self, inner: Histogram) -> None:
        super().__init__()
        self.inner = inner
        self.waits: list[float] = []

    def observe(self, value: float) -> None:
        self.waits.append(value)
        self.inner.observe(value)


def _busy_loop(loop: asyncio.AbstractEventLoop, seconds: float) -> Callable[[], None]:
    """Burn ``seconds`` of CPU on every loop turn until the returned function is called."""
    running = True

    def burn() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        if running:
            loop.call_soon(burn)

    def stop() -> None:
        nonlocal running
        running = False

    if seconds > 0:
        loop.call_soon(burn)
    return stop


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] if sorted_values else 0.0


async def run(owners: int, dependents: int, period: float, busy_ms: float, latency: float) -> dict[str, Any]:
    clock = RealClock()
    async with SimCluster(nodes=1, scheduler=False, kubelets=False, clock=clock) as cluster:
        api = cluster.api
        made: list[tuple[str, str]] = []
        for i in range(owners):
            created = api.create(CONFIGMAPS, _configmap(f"burst-owner-{i}"), NAMESPACE)
            made.append((created["metadata"]["name"], created["metadata"]["uid"]))
            for j in range(dependents):
                api.create(CONFIGMAPS, _configmap(f"burst-sub-{i}-{j}", made[-1]), NAMESPACE)
        config = await load_config(kubeconfig=str(cluster.kubeconfig_path))
        async with ApiClient(config, qps=0, burst=0, clock=clock) as client:
            factory = SharedInformerFactory(client, clock)
            events = EventBroadcaster(client, clock)
            gc = GarbageCollector(ControllerContext(client=client, informers=factory, clock=clock, events=events,
                                                    options={"concurrent_gc_syncs": 20}))
            tasks = [asyncio.create_task(factory.run()), asyncio.create_task(events.run()),
                     asyncio.create_task(run_controller(gc, gc.workers()))]
            try:
                deadline = time.monotonic() + 120
                while not (gc.is_synced() and gc.workers_started and not len(gc.builder.graph_changes)):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the garbage collector did not sync")
                    await asyncio.sleep(0.05)
                return await _burst(cluster, client, gc, made, period, busy_ms, latency)
            finally:
                gc.queue.shut_down()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


async def _burst(cluster: SimCluster, client: ApiClient, gc: GarbageCollector, made: list[tuple[str, str]],
                 period: float, busy_ms: float, latency: float) -> dict[str, Any]:
    stats: QueueStats = stats_for(ATTEMPT_TO_DELETE)
    recording = _Recording(stats.queue_duration)
    stats.queue_duration = recording
    graph: QueueStats = stats_for(GRAPH_CHANGES)
    graph_adds0, adds0 = graph.adds, stats.adds
    gets = 0
    real_get = client.get

    async def counting_get(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal gets
        gets += 1
        return await real_get(*args, **kwargs)

    client.get = counting_get  # type: ignore[method-assign]  # only the collector reads through this client here
    cluster.faults.set_latency(latency)
    stop_burning = _busy_loop(asyncio.get_running_loop(), busy_ms / 1000)
    started = time.monotonic()
    try:
        deleter = ApiClient(await load_config(kubeconfig=str(cluster.kubeconfig_path)), qps=0, burst=0)
        async with deleter:
            for i, (name, _) in enumerate(made):
                await asyncio.sleep(max(0.0, started + i * period - time.monotonic()))
                await deleter.delete(CONFIGMAPS, name, NAMESPACE, propagation_policy="Foreground")
            while True:
                items, _ = await deleter.list_all(CONFIGMAPS, NAMESPACE)
                if not any(str(o["metadata"]["name"]).startswith("burst-") for o in items):
                    break
                if time.monotonic() - started > 600:
                    raise RuntimeError("the dependents were not collected in 10 minutes")
                await asyncio.sleep(0.2)
    finally:
        stop_burning()
        cluster.faults.set_latency(None)
        stats.queue_duration = recording.inner
        client.get = real_get  # type: ignore[method-assign]
    elapsed = time.monotonic() - started
    waits = sorted(recording.waits)
    over = sum(1 for w in waits if w > 1.0)
    return {"owners": len(made), "collected_s": round(elapsed, 2), "items": len(waits),
            "adds": stats.adds - adds0, "gets": gets, "graph_changes": graph.adds - graph_adds0,
            "share_over_1s": round(over / len(waits), 4) if waits else 0.0,
            "p50_s": round(_percentile(waits, 0.5), 3), "p99_s": round(_percentile(waits, 0.99), 3),
            "max_s": round(waits[-1], 3) if waits else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gcburst", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--owners", type=int, default=15)
    parser.add_argument("--dependents", type=int, default=25)
    parser.add_argument("--period", type=float, default=1.0, help="seconds between two owners' deletions")
    parser.add_argument("--busy-ms", type=float, default=2.0, help="CPU burnt per event-loop turn (a busy daemon)")
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added to every API request")
    args = parser.parse_args(argv)
    from bench.__main__ import quiet_logs

    quiet_logs()
    with contextlib.suppress(KeyboardInterrupt):
        result = asyncio.run(run(args.owners, args.dependents, args.period, args.busy_ms, args.latency))
        print(json.dumps({"busy_ms": args.busy_ms, "latency_s": args.latency, "dependents": args.dependents,
                          **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
