"""kube-sim's own cost at size: nodes' heartbeats, and pods created, bound and started, with no daemon running.

``python -m bench.simscale --nodes 100,1000,5000 --pods 3000 --rate 50`` (``make bench-simscale``; not part of
``make test``).

For each node count, kube-sim runs alone in its own process (as ``bench.envelope`` starts it: 3 zones, storage
simulated, ServiceAccount admission on), and this process:
- idles ``--idle-seconds`` with the nodes only: kube-sim's CPU then is the kubelets' Lease renewals (every 10 s)
  and node-status checks, divided by nodes and seconds: CPU per node-second of heartbeats;
- creates ``--pods`` bare pods (no ``nodeName``, so the scheduler binds them) at ``--rate`` pods/s, namespaces of
  at most 3,000 pods, and follows them through a pod watch until every one is Running: the CPU kube-sim spent
  meanwhile, less what the heartbeats cost in that time, per pod is the CPU per pod create + bind + Running; the
  pods over the time from the first create to the last Running is the rate kube-sim sustained (it kept up when
  that is the rate asked for), and the create-to-Running latency's p50/p99 says how far behind it fell;
- reads kube-sim's RSS after registering the nodes and after the pods: RSS per node and per pod.

``--py-spy PATH`` (a py-spy binary) records kube-sim during each load phase into ``<output dir>/simscale-<N>.txt``
(collapsed stacks; ``--py-spy-top`` lines of the heaviest functions are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import procs
from bench.envelope import ensure_namespace
from bench.report import Figure, markdown, table, write_json
from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, ApiError, load_config

HERE = Path(__file__).resolve().parent
NAMESPACE_PODS = 3000  # sig-scalability: at most 3,000 pods per namespace
CONCURRENCY = 16


@dataclass
class SizeResult:
    nodes: int
    pods: int
    rate: float
    register_s: float
    idle_cores: float  # kube-sim's CPU with nodes only
    rss_nodes_mib: float  # after registering
    load_s: float  # first create to last Running
    load_cpu_s: float
    rss_pods_mib: float
    latency_p50_s: float
    latency_p99_s: float
    errors: int
    profile: list[tuple[str, float]] = field(default_factory=list)

    @property
    def heartbeat_us_per_node_s(self) -> float:
        return self.idle_cores / self.nodes * 1e6

    @property
    def cpu_ms_per_pod(self) -> float:
        return max(0.0, self.load_cpu_s - self.idle_cores * self.load_s) / self.pods * 1e3

    @property
    def sustained_pods_s(self) -> float:
        return self.pods / self.load_s

    @property
    def load_cores(self) -> float:
        return self.load_cpu_s / self.load_s


def bare_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "simscale"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}}


class RunningTracker:
    """Follows a pod watch; the moment each pod of ours was first seen Running."""

    def __init__(self, client: ApiClient, total: int) -> None:
        self.client = client
        self.total = total
        self.sent: dict[str, float] = {}
        self.running: dict[str, float] = {}
        self.done = asyncio.Event()

    async def run(self, resource_version: str) -> None:
        async with self.client.watch(PODS, resource_version=resource_version,
                                     label_selector="app=simscale") as stream:
            async for event in stream:
                obj = event.object
                if event.type == "BOOKMARK" or (obj.get("status") or {}).get("phase") != "Running":
                    continue
                m = obj["metadata"]
                key = f"{m['namespace']}/{m['name']}"
                if key not in self.running:
                    self.running[key] = time.perf_counter()
                    if len(self.running) >= self.total:
                        self.done.set()
                        return


async def create_at_rate(client: ApiClient, tracker: RunningTracker, pods: int, rate: float) -> int:
    """Create the pods, ``rate`` a second (at most CONCURRENCY in flight); the number of failed creates."""
    errors = 0
    started = time.perf_counter()
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        nonlocal errors
        ns = f"simscale-{i // NAMESPACE_PODS}"
        name = f"p-{i}"
        try:
            tracker.sent[f"{ns}/{name}"] = time.perf_counter()
            await client.create(PODS, bare_pod(name), ns)
        except ApiError:
            errors += 1
            tracker.total -= 1
        finally:
            slots.release()

    async with asyncio.TaskGroup() as tg:
        for i in range(pods):
            await asyncio.sleep(max(0.0, started + i / rate - time.perf_counter()))
            await slots.acquire()
            tg.create_task(one(i))
    return errors


def collapsed_top(path: Path, top: int) -> list[tuple[str, float]]:
    """From py-spy's raw (collapsed-stack) output: the share of samples in which each function is on the stack
    (inclusive), heaviest first."""
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        for frame in set(stack.split(";")):
            inclusive[frame] += count
    return [(frame, n / total) for frame, n in inclusive.most_common(top)] if total else []


async def measure_size(workdir: Path, nodes: int, pods: int, rate: float, idle_seconds: float,
                       py_spy: str | None, profile_out: Path | None, top: int) -> SizeResult:
    t0 = time.perf_counter()
    sim = await procs.start_sim(workdir, nodes, zones=3, ready_timeout=120 + nodes * 0.2)
    register_s = time.perf_counter() - t0
    spy: asyncio.subprocess.Process | None = None
    try:
        await asyncio.sleep(2.0)  # the first Lease writes and watch catch-ups settle
        rss_nodes = procs.rss(sim.pid)
        cpu0, w0 = sim.cpu(), time.perf_counter()
        await asyncio.sleep(idle_seconds)
        idle_cores = (sim.cpu() - cpu0) / (time.perf_counter() - w0)
        config = await load_config(sim.extra["kubeconfig"])
        async with ApiClient(config, qps=0, burst=0) as client:
            for n in range((pods + NAMESPACE_PODS - 1) // NAMESPACE_PODS):
                await ensure_namespace(client, f"simscale-{n}")
            listed = await client.list(PODS, limit=1)
            tracker = RunningTracker(client, pods)
            watching = asyncio.create_task(tracker.run(listed["metadata"]["resourceVersion"]))
            if py_spy is not None and profile_out is not None:
                spy = await asyncio.create_subprocess_exec(
                    py_spy, "record", "--pid", str(sim.pid), "--format", "raw", "--rate", "50", "--nonblocking",
                    "--output", str(profile_out), stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL)
            cpu0, w0 = sim.cpu(), time.perf_counter()
            errors = await create_at_rate(client, tracker, pods, rate)
            deadline = time.perf_counter() + max(120.0, pods / rate * 4)
            while not tracker.done.is_set() and len(tracker.running) < tracker.total:
                if time.perf_counter() > deadline:
                    raise TimeoutError(f"{len(tracker.running)}/{tracker.total} pods Running at {nodes} nodes")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(tracker.done.wait(), 1.0)
            load_cpu = sim.cpu() - cpu0
            last = max(tracker.running.values())
            load_s = last - w0
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
            rss_pods = procs.rss(sim.pid)
            latencies = sorted(tracker.running[k] - tracker.sent[k] for k in tracker.running if k in tracker.sent)
        profile: list[tuple[str, float]] = []
        if spy is not None and profile_out is not None:
            with contextlib.suppress(ProcessLookupError):
                spy.send_signal(2)  # SIGINT: py-spy writes what it has
            await spy.wait()
            spy = None
            with contextlib.suppress(OSError):
                profile = collapsed_top(profile_out, top)
    except BaseException:
        procs.print_log_tails(sim)
        raise
    finally:
        if spy is not None:
            with contextlib.suppress(ProcessLookupError):
                spy.kill()
            await spy.wait()
        await sim.stop()
    q = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [latencies[0]] * 99
    return SizeResult(nodes, pods, rate, register_s, idle_cores, rss_nodes / 2**20, load_s, load_cpu,
                      rss_pods / 2**20, q[49], q[98], errors, profile)


def figures(results: list[SizeResult]) -> list[Figure]:
    out: list[Figure] = []
    for r in results:
        size = f"{r.nodes} nodes"
        out += [
            Figure("simscale", f"kube-sim CPU idle with {size} (heartbeats)", r.idle_cores, "cores"),
            Figure("simscale", f"kube-sim CPU per node-second of heartbeats ({size})", r.heartbeat_us_per_node_s,
                   "us"),
            Figure("simscale", f"kube-sim RSS with {size} registered", r.rss_nodes_mib, "MiB"),
            Figure("simscale", f"kube-sim CPU per pod create+bind+Running ({size}, {r.pods} pods at {r.rate:g}/s)",
                   r.cpu_ms_per_pod, "ms"),
            Figure("simscale", f"kube-sim pods/s sustained ({size})", r.sustained_pods_s, "pods/s", r.rate,
                   "asked"),
            Figure("simscale", f"kube-sim CPU during the pod load ({size})", r.load_cores, "cores"),
            Figure("simscale", f"create-to-Running p99 ({size})", r.latency_p99_s, "s",
                   r.latency_p50_s, "p50"),
            Figure("simscale", f"kube-sim RSS per pod ({size})",
                   (r.rss_pods_mib - r.rss_nodes_mib) * 1024 / r.pods, "KiB"),
        ]
    return out


async def run(sizes: list[int], pods: int, rate: float, idle_seconds: float, py_spy: str | None,
              out_dir: Path, top: int) -> list[SizeResult]:
    results = []
    with tempfile.TemporaryDirectory(prefix="simscale-") as tmp:
        for nodes in sizes:
            print(f"[simscale] {nodes} nodes, {pods} pods at {rate:g}/s", flush=True)
            profile_out = out_dir / f"simscale-{nodes}.txt" if py_spy else None
            r = await measure_size(Path(tmp), nodes, pods, rate, idle_seconds, py_spy, profile_out, top)
            results.append(r)
            print(table(figures([r])), flush=True)
            for frame, share in r.profile:
                print(f"  {share * 100:5.1f}%  {frame}")
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simscale", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", default="100,1000,5000", help="node counts, comma-separated")
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=50.0, help="pods/s created")
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--py-spy", default=None, metavar="PATH", help="record kube-sim with this py-spy binary")
    parser.add_argument("--py-spy-top", type=int, default=40)
    parser.add_argument("--output", default=str(HERE / "simscale.json"))
    args = parser.parse_args(argv)
    from bench.__main__ import quiet_logs

    quiet_logs()
    output = Path(args.output)
    sizes = [int(n) for n in args.nodes.split(",") if n]
    with procs.event_loop_runner() as runner:
        results = runner.run(run(sizes, args.pods, args.rate, args.idle_seconds, args.py_spy, output.parent,
                                 args.py_spy_top))
    got = figures(results)
    print(table(got))
    print(f"\n(markdown)\n{markdown(got)}\n")
    write_json(output, got, quick=False, errors={})
    doc = json.loads(output.read_text())
    doc["simscale"] = [{**asdict(r), "profile": r.profile[:10]} for r in results]
    output.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
