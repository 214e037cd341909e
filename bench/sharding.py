"""Sharding's scale-out: the same workload against 1, 2 and 3 replicas running ``--sharding=true``.

For each replica count: a fresh kube-sim (its own process), that many ``controller-manager`` processes (client
rate limit lifted, short leases), and once every replica holds its shard Lease and the ring has them all, the
workload: ``--deployments`` Deployments of ``--replicas`` pods created at once (time until every pod exists
and every status counts it), then a new image for all (time until every rollout is complete). Reported per run:
pods per second for each phase, and per replica its CPU seconds, RSS, syncs (``controller_sync_duration_seconds``
count) and the Deployments it owned. kube-sim's CPU share is printed too: on a small machine it is the bottleneck
and caps what more replicas can add.

``python -m bench.sharding [--deployments 30 --replicas 10 --counts 1,2,3 --output report.json]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench import procs
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
        await asyncio.sleep(0.1)


async def start_replica(workdir: Path, index: int, kubeconfig: str, token: str) -> procs.Proc:
    port = procs.free_port()
    log = workdir / f"replica-{index}.log"
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(
            procs.tool("controller-manager"), f"--kubeconfig={kubeconfig}", "--sharding=true",
            "--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s",
            "--kube-api-qps=100000", "--kube-api-burst=100000", f"--secure-port={port}", "--bind-address=127.0.0.1",
            stdout=sink, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    replica = procs.Proc(f"replica-{index}", proc, log, url=f"https://127.0.0.1:{port}")
    replica.extra["token"] = token
    return replica


async def ready(replica: procs.Proc) -> bool:
    with contextlib.suppress(aiohttp.ClientError, OSError):
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False)) as http, \
                http.get(replica.url + "/readyz") as resp:
            return resp.status == 200
    return False


def syncs(metrics: dict[str, float]) -> int:
    return int(sum(v for k, v in metrics.items() if k.startswith("controller_sync_duration_seconds_count")))


async def run_one(count: int, deployments: int, replicas: int, nodes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-sharding-{count}-") as tmp:
        workdir = Path(tmp)
        sim = await procs.start_sim(workdir, nodes)
        members: list[procs.Proc] = []
        try:
            config = await load_config(kubeconfig=sim.extra["kubeconfig"])
            async with ApiClient(config, qps=0) as client:
                members = list(await asyncio.gather(*(
                    start_replica(workdir, i, sim.extra["kubeconfig"], sim.extra["admin_token"])
                    for i in range(count))))

                async def all_in_ring() -> bool:
                    if not all([await ready(m) for m in members]):
                        return False
                    items, _ = await client.list_all(LEASES, "kube-system",
                                                     label_selector=f"controller-manager.io/ring={RING}")
                    return sum(1 for i in items if i["spec"].get("holderIdentity") == i["metadata"]["name"]) == count

                await wait_for(all_in_ring, 120, f"{count} replicas in the ring")

                async def default_account() -> bool:
                    try:
                        await client.get(SERVICEACCOUNTS, "default", NS)
                    except ApiError:
                        return False
                    return True

                await wait_for(default_account, 60, "the default ServiceAccount")
                await asyncio.sleep(2.0)  # the sharder has seen every member: no move during the workload
                cpu0 = {m.name: m.cpu() for m in members}
                sim_cpu0 = sim.cpu()
                syncs0 = {m.name: syncs(await procs.scrape(m)) for m in members}
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
                for m in members:
                    per_replica.append({
                        "cpu_seconds": round(m.cpu() - cpu0[m.name], 2),
                        "rss_mib": round(procs.rss(m.pid) / 2**20, 1),
                        "syncs": syncs(await procs.scrape(m)) - syncs0[m.name],
                    })
                return {
                    "replicas": count, "pods": total,
                    "create_seconds": round(create_s, 2), "create_pods_per_s": round(total / create_s, 1),
                    "rollout_seconds": round(rollout_s, 2), "rollout_pods_per_s": round(total / rollout_s, 1),
                    "kube_sim_cpu_share": round((sim.cpu() - sim_cpu0) / elapsed, 2),
                    "deployments_per_shard": sorted(owners.values(), reverse=True),
                    "per_replica": per_replica,
                }
        finally:
            for m in members:
                await m.stop()
            await sim.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sharding", description=__doc__.split("\n\n")[0])
    p.add_argument("--deployments", type=int, default=30)
    p.add_argument("--replicas", type=int, default=10)
    p.add_argument("--nodes", type=int, default=10)
    p.add_argument("--counts", default="1,2,3", help="replica counts to run, in order")
    p.add_argument("--output", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    results = []
    for count in (int(c) for c in args.counts.split(",")):
        result = asyncio.run(run_one(count, args.deployments, args.replicas, args.nodes))
        results.append(result)
        print(json.dumps(result), flush=True)
    base = results[0]
    print("\n| replicas | create pods/s | rollout pods/s | vs first | kube-sim CPU share "
          "| per replica: CPU s / RSS MiB / syncs | Deployments per shard |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        ratio = (r["create_seconds"] + r["rollout_seconds"]) and \
            (base["create_seconds"] + base["rollout_seconds"]) / (r["create_seconds"] + r["rollout_seconds"])
        each = "; ".join(f"{x['cpu_seconds']} / {x['rss_mib']} / {x['syncs']}" for x in r["per_replica"])
        print(f"| {r['replicas']} | {r['create_pods_per_s']} | {r['rollout_pods_per_s']} | {ratio:.2f}x | "
              f"{r['kube_sim_cpu_share']} | {each} | {r['deployments_per_shard']} |")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
