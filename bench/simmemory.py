"""kube-sim's memory per stored pod, and where it goes: ``python -m bench.simmemory --pods 10000``.

kube-sim runs in this process (as the ``kube-sim`` command builds it: TLS off, no storage simulation, ServiceAccount
admission on, the command's GC threshold) with ``--nodes`` nodes; this process creates ``--pods`` bare pods over
HTTP (``ApiClient``, 16 in flight, namespaces of at most 3,000 pods), waits until every one is Running, and then
reports, after a full collection:

- the Python heap per pod: what ``tracemalloc`` saw allocated and still live, after the pods less before them,
  divided by the pods (with ``--tracemalloc``; it slows the run about 2x), and the top allocation sites;
- the reachable size of each of kube-sim's structures (each resource's objects, their JSON bytes and cached views;
  the watch history's other versions; the scheduler's and kubelets' per-pod state), found by walking the objects
  (``sys.getsizeof`` over each container, every object counted once, strings shared between structures counted in
  the first): this says where the bytes are, independent of the allocator;
- RSS before and after the pods, per pod (the allocator's overhead and fragmentation included).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.envelope import ensure_namespace
from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, load_config
from controller_manager.gctuning import GEN0_THRESHOLD
from controller_manager.sim.apiserver import ApiServerOptions
from controller_manager.sim.cluster import SimCluster

NAMESPACE_PODS = 3000
CONCURRENCY = 16


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "simmemory"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}


def deep_size(root: Any, seen: set[int]) -> int:
    """Bytes reachable from ``root`` through dicts, lists, tuples, sets and slotted objects, each counted once."""
    total = 0
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (bool, type)):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
            stack.extend(obj)
        elif isinstance(obj, (str, bytes, int, float, memoryview)):
            continue
        else:
            slots = getattr(type(obj), "__slots__", ())
            for name in slots:
                stack.append(getattr(obj, name, None))
            d = getattr(obj, "__dict__", None)
            if d is not None:
                stack.append(d)
    return total


def breakdown(cluster: SimCluster, pods: int) -> list[tuple[str, int]]:
    """(structure, bytes) for kube-sim's per-object structures, the largest first."""
    api = cluster.api
    seen: set[int] = set()
    rows: list[tuple[str, int]] = []
    # Every string and small int the interpreter shares (interned names, keys) is counted at first sight: walk
    # the live objects first, so the history is charged only for what it keeps alive on its own.
    for key, store in sorted(api._stores.items(), key=lambda kv: -len(kv[1])):
        if not store.objects:
            continue
        parsed = sum(deep_size(s.obj, seen) for s in store.objects.values())
        raw = sum(deep_size(s.raw, seen) for s in store.objects.values())
        views = sum(deep_size(s._views, seen) for s in store.objects.values())
        shells = sum(deep_size(s, seen) for s in store.objects.values()) + deep_size(store.objects, seen)
        rows.append((f"{key[1]}: {len(store)} objects (parsed)", parsed))
        rows.append((f"{key[1]}: JSON bytes", raw))
        if views:
            rows.append((f"{key[1]}: cached views", views))
        rows.append((f"{key[1]}: Stored shells + index", shells))
    for key, store in sorted(api._stores.items(), key=lambda kv: -len(kv[1].history)):
        if store.history:
            rows.append((f"{key[1]}: watch history ({len(store.history)} changes)", deep_size(store.history, seen)))
    if cluster.scheduler is not None:
        rows.append(("scheduler state", deep_size(cluster.scheduler, seen)))
    if cluster.kubelets is not None:
        rows.append(("kubelets state", deep_size(cluster.kubelets, seen)))
    rows.sort(key=lambda r: -r[1])
    return rows


async def create_pods(client: ApiClient, total: int) -> None:
    for n in range((total + NAMESPACE_PODS - 1) // NAMESPACE_PODS):
        await ensure_namespace(client, f"simmemory-{n}")
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        try:
            await client.create(PODS, pod(f"p-{i}"), f"simmemory-{i // NAMESPACE_PODS}")
        finally:
            slots.release()

    async with asyncio.TaskGroup() as tg:
        for i in range(total):
            await slots.acquire()
            tg.create_task(one(i))


async def wait_running(cluster: SimCluster, total: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        items, _ = cluster.api.list(PODS, label_selector="app=simmemory")
        running = sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running")
        if running >= total:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{running}/{total} pods Running")
        await asyncio.sleep(1.0)


async def run(args: argparse.Namespace) -> None:
    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
    options = ApiServerOptions(service_account_admission=True)
    async with SimCluster(nodes=args.nodes, zones=3, api_options=options, ready_timeout=300) as cluster:
        config = await load_config(str(cluster.kubeconfig_path))
        async with ApiClient(config, qps=0, burst=0) as client:
            await asyncio.sleep(1.0)
            gc.collect()
            if args.tracemalloc:
                tracemalloc.start(1)
            before_rss = rss_kib()
            before = tracemalloc.take_snapshot() if args.tracemalloc else None
            t0 = time.perf_counter()
            await create_pods(client, args.pods)
            await wait_running(cluster, args.pods, timeout=max(300.0, args.pods * 0.2))
            elapsed = time.perf_counter() - t0
            await asyncio.sleep(1.0)
            gc.collect()
            after_rss = rss_kib()
            print(f"{args.pods} pods Running in {elapsed:.0f} s on {args.nodes} nodes")
            print(f"RSS: {before_rss / 1024:.0f} MiB -> {after_rss / 1024:.0f} MiB: "
                  f"{(after_rss - before_rss) / args.pods:.1f} KiB per pod")
            if before is not None:
                after = tracemalloc.take_snapshot()
                stats = after.compare_to(before, "lineno")
                grown = sum(s.size_diff for s in stats)
                print(f"tracemalloc: {grown / args.pods / 1024:.1f} KiB per pod live; top sites:")
                for stat in stats[: args.top]:
                    frame = stat.traceback[0]
                    print(f"  {stat.size_diff / args.pods:9.0f} B/pod  {stat.count_diff / args.pods:6.1f} blocks/pod  "
                          f"{frame.filename.split('controller_manager/')[-1]}:{frame.lineno}")
                tracemalloc.stop()
            rows = breakdown(cluster, args.pods)
            total = sum(b for _, b in rows)
            print(f"structures walked: {total / args.pods / 1024:.1f} KiB per pod")
            for name, size in rows[: args.top]:
                print(f"  {size / args.pods:9.0f} B/pod  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--tracemalloc", action="store_true")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
