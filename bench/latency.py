"""Benchmark 6: event-to-action latency, from a pod deletion in the API to the replacement's create request.

kube-sim runs in this process (``SimCluster``, served over loopback HTTP) so both ends of the interval are read
on one clock, inside the API server: the start is the in-process ``delete`` of a pod of a Deployment (the API sets
its deletionTimestamp, the watch tells the daemon), the end is the moment the API server receives the
replacement pod's create request from the daemon (its ``create`` is wrapped to note the time). So the figure
covers the watch delivery, the daemon's decode, cache, handler, queue, ReplicaSet sync and the create request
up to the server, and nothing of this process's own watch or polling.

The daemon runs in its own process. Meanwhile a background load of ``load_rate`` events per second annotates
unrelated pods (no owner, another namespace): every one is a watch event the daemon's pod informer decodes,
caches and hands to its handlers. The reference is the same latency with no background load.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import procs
from bench.convergence import deployment, rolled_out
from bench.report import Figure, percentile
from controller_manager.api.resources import DEPLOYMENTS, NAMESPACES, PODS

NS = "bench"
LOAD_NS = "bench-load"


async def run(*, samples: int = 200, load_rate: float = 1000.0, replicas: int = 20, load_pods: int = 200,
              nodes: int = 10) -> list[Figure]:
    from controller_manager.sim.cluster import SimCluster

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        workdir = Path(tmp)
        async with SimCluster(nodes=nodes, kubeconfig_path=workdir / "kubeconfig") as cluster:
            api = cluster.api
            created: asyncio.Queue[float] = asyncio.Queue()
            # create_raw: what HTTP creates and api.create both go through.
            original_create = api.create_raw

            def create(res: Any, obj: Any, namespace: str | None = None, **kwargs: Any) -> Any:
                if res.plural == "pods" and (namespace or obj.get("metadata", {}).get("namespace")) == NS:
                    created.put_nowait(time.perf_counter())
                return original_create(res, obj, namespace, **kwargs)

            api.create_raw = create  # type: ignore[method-assign]
            for ns in (NS, LOAD_NS):
                api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            for i in range(load_pods):
                api.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"load-{i}",
                                                                                   "namespace": LOAD_NS},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            daemon = await procs.start_daemon(workdir, str(cluster.kubeconfig_path), api.options.admin_token or "")
            try:
                api.create(DEPLOYMENTS, deployment("lat", replicas))
                quiet = await _measure(api, created, samples // 4, replicas)
                load = asyncio.create_task(_load(api, load_rate, load_pods), name="bench:load")
                load_start = time.perf_counter()
                sent = 0
                try:
                    loaded = await _measure(api, created, samples, replicas)
                finally:
                    load.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        sent = await load
                achieved = sent / (time.perf_counter() - load_start)
            finally:
                await daemon.stop()
    ms = 1000.0
    details = {"samples": len(loaded), "load_events_per_s": load_rate, "load_achieved_per_s": achieved,
               "loaded_ms": {"p50": percentile(loaded, 0.5) * ms, "p90": percentile(loaded, 0.9) * ms,
                             "p99": percentile(loaded, 0.99) * ms, "max": max(loaded) * ms,
                             "mean": statistics.fmean(loaded) * ms},
               "unloaded_ms": {"p50": percentile(quiet, 0.5) * ms, "p99": percentile(quiet, 0.99) * ms}}
    return [
        Figure("latency", f"delete->replacement create p50 (load {load_rate:.0f} ev/s)", percentile(loaded, 0.5) * ms,
               "ms", percentile(quiet, 0.5) * ms, "no load", "", None, details),
        Figure("latency", f"delete->replacement create p99 (load {load_rate:.0f} ev/s)", percentile(loaded, 0.99) * ms,
               "ms", percentile(quiet, 0.99) * ms, "no load", "< 50 ms", lambda v, _r: v < 50.0),
    ]


async def _measure(api: Any, created: asyncio.Queue[float], samples: int, replicas: int) -> list[float]:
    out: list[float] = []
    for _ in range(samples):
        await _settled(api, replicas)
        while not created.empty():
            created.get_nowait()
        pods, _ = api.list(PODS, NS)
        victim = next(p for p in pods if not p["metadata"].get("deletionTimestamp"))
        start = time.perf_counter()
        api.delete(PODS, NS, victim["metadata"]["name"])
        end = await asyncio.wait_for(created.get(), 30)
        out.append(end - start)
    return out


async def _settled(api: Any, replicas: int) -> None:
    """Wait until the Deployment is complete and no pod of it is terminating."""
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        d = api.get(DEPLOYMENTS, NS, "lat")
        pods, _ = api.list(PODS, NS)
        if rolled_out(d, replicas, available=True) and len(pods) == replicas:
            await asyncio.sleep(0.02)  # let the daemon's last status writes land
            return
        await asyncio.sleep(0.02)
    raise TimeoutError("the latency Deployment did not settle")


async def _load(api: Any, rate: float, pods: int) -> int:
    """Annotate unrelated pods at ``rate`` per second, in ticks of 10 ms; returns how many were sent."""
    sent = 0
    tick = 0.01
    per_tick = rate * tick
    owed = 0.0
    next_at = time.perf_counter()
    try:
        while True:
            owed += per_tick
            while owed >= 1:
                api.patch(PODS, LOAD_NS, f"load-{sent % pods}", {"metadata": {"annotations": {"bench/n": str(sent)}}},
                          "merge")
                sent += 1
                owed -= 1
            next_at += tick
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
    except asyncio.CancelledError:
        return sent
