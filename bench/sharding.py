"""Sharding's scale-out: the same workload against 1, 2 and 3 replicas running ``--sharding=true``.

For each run (``off``: one replica without ``--sharding``, today's default and the baseline; ``N``: N replicas
with it): a fresh kube-sim (its own process), that many ``controller-manager`` processes (client
rate limit lifted, short leases), and once every replica holds its shard Lease and the ring has them all, the
workload: ``--deployments`` Deployments of ``--replicas`` pods created at once (time until every pod exists
and every status counts it), then a new image for all (time until every rollout is complete).

Reported per run: pods per second for each phase, kube-sim's CPU share (on a small machine it is the bottleneck
and caps what more replicas can add), and per replica:
- whether it leads (the leader also runs every cluster-wide controller and the sharder);
- CPU seconds, and syncs per controller (``controller_sync_duration_seconds`` count, during the workload);
- RSS at idle (ring formed, caches synced, no workload: the interpreter, its imports and near-empty caches),
  after the workload, and the difference: what the workload's objects cost that replica;
- objects cached per informer and label selector at the end (``informer_cached_objects``: a member's own
  shard informers have a selector, the leader's cluster-wide ones none; the leader's shard informers are views
  of its cluster-wide caches, ``informer_view_objects``, listed with ``"view": true``: not a second copy);
- the Deployments it owned.
Size the workload so the caches dominate the idle baseline (several thousand pods), or RSS says little.

Throughput: kube-sim is one Python process; on its core it caps this workload at about a hundred pods a second,
while one unlimited replica needs well under a core for that. Replicas with the machine to themselves therefore
measure kube-sim, not sharding. ``--replica-cpu CORES`` runs each replica under a CPU limit (a cgroup quota, as a
pod's ``limits.cpu``; :mod:`bench.cpulimit`), small enough that N replicas' work stays under kube-sim's cap: then
pods/s measures what N replicas can do, and each replica's ``throttled_share`` shows the limit was what bound it.

``python -m bench.sharding [--deployments 200 --replicas 10 --counts off,1,2,3 --no-rollout --replica-cpu 0.15
--output report.json]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench import procs
from bench.cpulimit import CpuLimit
from controller_manager.api.resources import DEPLOYMENTS, LEASES, PODS, SERVICEACCOUNTS
from controller_manager.client import ApiClient, ApiError, load_config

NS = "default"
RING = "controller-manager-py"
SHARD_LABEL = f"shard.controller-manager.io/{RING}"


def deployment(name: str, replicas: int, image: str = "nginx:1.27") -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "web", "image": image}]}}}}


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.5)  # each look lists every Deployment: at thousands of pods, a load on kube-sim


async def start_replica(workdir: Path, index: int, kubeconfig: str, token: str, *, sharding: bool = True,
                        limit: CpuLimit | None = None, leader_share: float | None = None) -> procs.Proc:
    port = procs.free_port()
    log = workdir / f"replica-{index}.log"
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            procs.tool("controller-manager"), f"--kubeconfig={kubeconfig}", f"--sharding={str(sharding).lower()}",
            *([f"--sharding-leader-share={leader_share}"] if sharding and leader_share is not None else []),
            # Upstream's lease timings: shorter ones make a replica on a saturated machine miss its renew deadline
            # (fenced, or exiting on a lost shard Lease) in the middle of the workload.
            "--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s",
            "--kube-api-qps=100000", "--kube-api-burst=100000", f"--secure-port={port}", "--bind-address=127.0.0.1",
            stdout=sink, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    replica = procs.Proc(f"replica-{index}", proc, log, url=f"https://127.0.0.1:{port}")
    if limit is not None:
        limit.add(proc.pid)  # before its imports: the whole life of the replica runs under the limit
    replica.extra["token"] = token
    return replica


async def ready(replica: procs.Proc) -> bool:
    with contextlib.suppress(aiohttp.ClientError, OSError):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http, \
                http.get(replica.url + "/readyz") as resp:
            return resp.status == 200
    return False


PODS_PER_NODE = 110  # kube-sim's nodes' pod capacity, as a kubelet's default maxPods
LEADER_STATUS = f'leader_election_master_status{{name="{RING}"}}'
SYNC_COUNT = "controller_sync_duration_seconds_count"
CACHED = "informer_cached_objects"
VIEWED = "informer_view_objects"


def labels_of(series: str) -> dict[str, str]:
    """``name{a="x",b="y"}`` -> ``{"a": "x", "b": "y"}`` (values in this benchmark's metrics hold no quotes)."""
    inner = series[series.index("{") + 1:series.rindex("}")] if "{" in series else ""
    out: dict[str, str] = {}
    for part in inner.split('",'):
        key, _, value = part.partition("=")
        if key:
            out[key.strip()] = value.strip().strip('"')
    return out


def syncs_by_controller(metrics: dict[str, float]) -> dict[str, int]:
    out: dict[str, int] = {}
    for series, value in metrics.items():
        if series.startswith(SYNC_COUNT + "{"):
            controller = labels_of(series).get("controller", "")
            out[controller] = out.get(controller, 0) + int(value)
    return out


def cached_objects(metrics: dict[str, float]) -> list[dict[str, Any]]:
    """Every informer with objects: resource, selector ("" = every object), how many it holds, and whether it
    is a view of another informer's cache (its objects are that cache's, not copies)."""
    rows = []
    for series, value in metrics.items():
        view = series.startswith(VIEWED + "{")
        if (view or series.startswith(CACHED + "{")) and value:
            labels = labels_of(series)
            rows.append({"informer": labels.get("name", ""), "selector": labels.get("selector", ""),
                         "objects": int(value), "view": view})
    return sorted(rows, key=lambda r: (-r["objects"], r["informer"], r["selector"]))


async def idle_rss(replica: procs.Proc, samples: int = 5) -> int:
    """RSS with no workload, taken as the lowest of a few samples a little apart (startup garbage settles)."""
    lowest = procs.rss(replica.pid)
    for _ in range(samples - 1):
        await asyncio.sleep(0.2)
        lowest = min(lowest, procs.rss(replica.pid))
    return lowest


async def run_one(count: int, deployments: int, replicas: int, nodes: int, *, sharding: bool = True,
                  rollout: bool = True, replica_cpu: float | None = None, leader_share: float | None = None
                  ) -> dict[str, Any]:
    """One run: ``count`` replicas with ``--sharding=true``, or (``sharding`` False) one replica without it;
    with ``replica_cpu``, each replica limited to that many cores (:mod:`bench.cpulimit`), kube-sim not."""
    with tempfile.TemporaryDirectory(prefix=f"bench-sharding-{count}-") as tmp:
        workdir = Path(tmp)
        limits = [CpuLimit(f"replica-{i}", replica_cpu) for i in range(count)] if replica_cpu else []
        sim = await procs.start_sim(workdir, nodes)
        members: list[procs.Proc] = []
        try:
            config = await load_config(kubeconfig=sim.extra["kubeconfig"])
            async with ApiClient(config, qps=0) as client:
                members = list(await asyncio.gather(*(
                    start_replica(workdir, i, sim.extra["kubeconfig"], sim.extra["admin_token"], sharding=sharding,
                                  limit=limits[i] if limits else None, leader_share=leader_share)
                    for i in range(count))))

                async def all_in_ring() -> bool:
                    if not all([await ready(m) for m in members]):
                        return False
                    if not sharding:
                        return True  # ready: leading, caches synced
                    items, _ = await client.list_all(LEASES, "kube-system",
                                                     label_selector=f"controller-manager.io/ring={RING}")
                    return sum(1 for i in items if i["spec"].get("holderIdentity") == i["metadata"]["name"]) == count

                await wait_for(all_in_ring, 120, f"{count} replicas in the ring" if sharding else "the replica ready")

                async def default_account() -> bool:
                    try:
                        await client.get(SERVICEACCOUNTS, "default", NS)
                    except ApiError:
                        return False
                    return True

                await wait_for(default_account, 60, "the default ServiceAccount")
                await asyncio.sleep(2.0)  # the sharder has seen every member: no move during the workload
                idle = {m.name: await idle_rss(m) for m in members}
                cpu0 = {m.name: m.cpu() for m in members}
                throttled0 = [limit.throttled_seconds() for limit in limits]
                sim_cpu0 = sim.cpu()
                syncs0 = {m.name: syncs_by_controller(await procs.scrape(m)) for m in members}
                total = deployments * replicas

                started = time.monotonic()
                sem = asyncio.Semaphore(16)

                async def create(i: int) -> None:
                    async with sem:
                        await client.create(DEPLOYMENTS, deployment(f"web-{i}", replicas), NS)

                await asyncio.gather(*(create(i) for i in range(deployments)))

                async def all_counted() -> bool:
                    items, _ = await client.list_all(DEPLOYMENTS, NS)
                    return len(items) == deployments and all(
                        (d.get("status") or {}).get("replicas") == replicas for d in items)

                await wait_for(all_counted, 600, "every pod created and counted")
                create_s = time.monotonic() - started

                rollout_s = 0.0
                if rollout:
                    started = time.monotonic()
                    for i in range(deployments):
                        await client.patch(DEPLOYMENTS, f"web-{i}", {"spec": {"template": {"spec": {"containers": [
                            {"name": "web", "image": "nginx:1.28"}]}}}}, NS, patch_type="strategic")

                    async def rolled_out() -> bool:
                        items, _ = await client.list_all(DEPLOYMENTS, NS)
                        for d in items:
                            s = d.get("status") or {}
                            if (s.get("observedGeneration") != d["metadata"]["generation"]
                                    or s.get("updatedReplicas") != replicas or s.get("replicas") != replicas
                                    or s.get("availableReplicas") != replicas):
                                return False
                        pods, _ = await client.list_all(PODS, NS, metadata_only=True)
                        return len(pods) == total

                    await wait_for(rolled_out, 900, "every rollout complete")
                    rollout_s = time.monotonic() - started
                items, _ = await client.list_all(DEPLOYMENTS, NS)
                owners: dict[str, int] = {}
                for d in items:
                    shard = (d["metadata"].get("labels") or {}).get(SHARD_LABEL, "")
                    owners[shard] = owners.get(shard, 0) + 1
                elapsed = create_s + rollout_s
                per_replica = []
                for index, m in enumerate(members):
                    metrics = await procs.scrape(m)
                    before = syncs0[m.name]
                    by_controller = {c: n - before.get(c, 0) for c, n in syncs_by_controller(metrics).items()}
                    by_controller = {c: n for c, n in sorted(by_controller.items()) if n}
                    # A member's name is its shard Lease's, the value of the shard label on what it owns.
                    member = next((labels_of(k).get("name", "") for k, v in metrics.items()
                                   if k.startswith("leader_election_master_status{") and v == 1
                                   and labels_of(k).get("name") != RING), "")
                    now = procs.rss(m.pid)
                    per_replica.append({
                        "leader": metrics.get(LEADER_STATUS) == 1,
                        "member": member,
                        "deployments_owned": owners.get(member, 0),
                        "cpu_seconds": round(m.cpu() - cpu0[m.name], 2),
                        # the share of the workload's time the kernel held this replica back for its limit
                        "throttled_share": round((limits[index].throttled_seconds() - throttled0[index]) / elapsed,
                                                 2) if limits else None,
                        "idle_rss_mib": round(idle[m.name] / 2**20, 1),
                        "rss_mib": round(now / 2**20, 1),
                        "workload_rss_mib": round((now - idle[m.name]) / 2**20, 1),
                        "syncs": sum(by_controller.values()),
                        "syncs_by_controller": by_controller,
                        "cached_objects": cached_objects(metrics),
                    })
                return {
                    "replicas": count, "sharding": sharding, "pods": total, "nodes": nodes,
                    "replica_cpu_limit": replica_cpu, "leader_share": leader_share if sharding else None,
                    "load_average_1m": round(os.getloadavg()[0], 1),  # the machine's, as the run ends
                    "create_seconds": round(create_s, 2), "create_pods_per_s": round(total / create_s, 1),
                    "rollout_seconds": round(rollout_s, 2),
                    "rollout_pods_per_s": round(total / rollout_s, 1) if rollout_s else None,
                    "kube_sim_cpu_share": round((sim.cpu() - sim_cpu0) / elapsed, 2),
                    "deployments_per_shard": sorted(owners.values(), reverse=True),
                    "per_replica": per_replica,
                }
        finally:
            for m in members:
                await m.stop()
            await sim.stop()
            for limit in limits:
                limit.close()


SHARDED_CONTROLLERS = ("deployment-controller", "replicaset-controller", "statefulset-controller",
                       "daemonset-controller", "job-controller", "cronjob-controller")


def pods_cached(replica: dict[str, Any], *, selected: bool) -> int:
    """Pods in the replica's shard informers (``selected``; views included) or in its cluster-wide ones."""
    return sum(r["objects"] for r in replica["cached_objects"]
               if r["informer"] == "v1/pods" and bool(r["selector"]) == selected)


def pods_held(replica: dict[str, Any]) -> int:
    """Pod objects the replica decoded and keeps: every pod cache but the views (which share those objects)."""
    return sum(r["objects"] for r in replica["cached_objects"] if r["informer"] == "v1/pods" and not r.get("view"))


def _run_name(result: dict[str, Any]) -> str:
    return str(result["replicas"]) if result.get("sharding", True) else "1, sharding off"


def print_tables(results: list[dict[str, Any]]) -> None:
    base = results[0]
    print("\n| replicas | create pods/s | rollout pods/s | vs first | kube-sim CPU share | Deployments per shard |")
    print("|---|---|---|---|---|---|")
    for r in results:
        total = r["create_seconds"] + r["rollout_seconds"]
        ratio = (base["create_seconds"] + base["rollout_seconds"]) / total if total else 0.0
        print(f"| {_run_name(r)} | {r['create_pods_per_s']} | {r['rollout_pods_per_s'] or '-'} | {ratio:.2f}x | "
              f"{r['kube_sim_cpu_share']} | {r['deployments_per_shard']} |")
    print("\n| replicas | replica | Deployments | syncs: sharded controllers / others | pods cached: own shard "
          "/ cluster-wide / held | RSS MiB: idle / after / workload | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        for x in r["per_replica"]:
            sharded = sum(n for c, n in x["syncs_by_controller"].items() if c in SHARDED_CONTROLLERS)
            print(f"| {_run_name(r)} | {'leader' if x['leader'] else 'member'} | {x['deployments_owned']} | "
                  f"{sharded:,} / {x['syncs'] - sharded:,} | "
                  f"{pods_cached(x, selected=True):,} / {pods_cached(x, selected=False):,} / {pods_held(x):,} | "
                  f"{x['idle_rss_mib']} / {x['rss_mib']} / {x['workload_rss_mib']} | {x['cpu_seconds']}"
                  + (f" ({x['throttled_share']:.0%} throttled)" if x.get("throttled_share") is not None else "")
                  + " |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sharding", description=__doc__.split("\n\n")[0])
    p.add_argument("--deployments", type=int, default=200)
    p.add_argument("--replicas", type=int, default=10)
    p.add_argument("--nodes", type=int, default=0,
                   help="kube-sim's nodes (default: enough for every pod and a rollout's surge at 110 pods a node)")
    p.add_argument("--counts", default="off,1,2,3",
                   help="replica counts to run, in order; 'off' is one replica without --sharding (the baseline)")
    p.add_argument("--no-rollout", dest="rollout", action="store_false",
                   help="create the Deployments only (a large size in less time: memory and syncs of the creation)")
    p.add_argument("--replica-cpu", type=float, default=None, metavar="CORES",
                   help="limit each replica to this many cores (a cgroup CPU quota, as a pod's CPU limit; needs "
                        "root), so the replicas and not kube-sim's one process bound the throughput")
    p.add_argument("--leader-share", type=float, default=None, metavar="SHARE",
                   help="--sharding-leader-share for the replicas (default: theirs, 1)")
    p.add_argument("--output", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    # A pod kube-sim cannot place stays Pending and its rollout never completes.
    nodes = args.nodes or max(10, math.ceil(args.deployments * math.ceil(args.replicas * 1.25) / PODS_PER_NODE))
    results = []
    for spec in args.counts.split(","):
        sharding = spec.strip() != "off"
        count = int(spec) if sharding else 1
        result = asyncio.run(run_one(count, args.deployments, args.replicas, nodes, sharding=sharding,
                                     rollout=args.rollout, replica_cpu=args.replica_cpu,
                                     leader_share=args.leader_share))
        results.append(result)
        print(json.dumps(result), flush=True)
        if args.output:  # after every run: a later run that fails leaves the earlier ones
            Path(args.output).write_text(json.dumps(results, indent=1))
    print_tables(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
