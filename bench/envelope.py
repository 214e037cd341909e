"""The scalability envelope: one daemon, every default controller, a cluster at Kubernetes' published limits.

``python -m bench.envelope --profile full|reduced|smoke`` (``make bench-envelope``; not part of ``make test``).

kube-sim runs N nodes in 3 zones in its own process, writing its audit log; the ``controller-manager`` daemon runs
every default controller in another (QPS limit lifted; leader election on, with the profile's Lease flags:
kube-controller-manager's defaults, 15 s lease / 10 s renew deadline / 2 s retry); this process drives the
cluster through the API, as clusterloader2's load test does:
- fill: namespaces of at most 3,000 pods (sig-scalability's threshold), each with Deployments of three sizes
  (250, 30 and 5 replicas; the big and medium ones behind a Service), and one DaemonSet on every node; until
  every Deployment and the DaemonSet report their pods available;
- churn, for the profile's minutes: ``rate`` pods/s created and as many deleted, half by scaling medium
  Deployments up and others back down, half by Jobs (parallel pods that run a few seconds and succeed;
  ``ttlSecondsAfterFinished: 0``, so the ttl-after-finished controller and the garbage collector delete them);
- fail-over (:mod:`bench.failover`): on the cluster at full size, a standby replica is started, the leader is
  killed with SIGKILL, and the standby's takeover is timed;
- sync: the daemon is restarted on the settled cluster twice, with ``--feature-gates=WatchListClient=true``
  (streaming lists) and ``=false`` (paged lists); each time, the time from "waiting for informer caches to
  sync" to "informer caches synced" in its log, its peak RSS by then, and kube-sim's peak RSS and CPU meanwhile.

Recorded: the daemon's RSS (average and peak) and CPU (average and the busiest 5-second window) during the
churn, each controller's ``workqueue_queue_duration_seconds`` p99 over the churn (from the histogram's buckets,
as ``histogram_quantile`` computes it), kube-sim's own CPU (its audit log's writing included), the churn's
event-to-action latencies (:mod:`bench.reaction`: from kube-sim's audit log, each trigger's commit to the
controller's answering request), the fail-over's times from the SIGKILL (the standby holds the Lease, has synced
its informers, sends its first controller write, answers a Deployment scaled just after the kill), and the sync
figures. Goals are the issue's: RSS <= 1 GiB, CPU <= 1 core on average, every queue's p99 <= 1 s, event-to-action
p99 <= 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import random
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench import failover, procs, reaction
from bench.failover import LeaseFlags
from bench.report import Figure, at_most, markdown, table, write_json
from controller_manager.api.resources import DAEMONSETS, DEPLOYMENTS, JOBS, NAMESPACES, SERVICEACCOUNTS, SERVICES
from controller_manager.client import ApiClient, ApiError, load_config

HERE = Path(__file__).resolve().parent
NAMESPACE_PODS = 3000  # sig-scalability: at most 3,000 pods per namespace
SIZES = ((250, 0.5), (30, 0.3), (5, 0.2))  # Deployment replicas, share of a namespace's pods
JOB_RUN_SECONDS = 5
BENCH_AGENT = "bench-envelope"  # this process's User-Agent: its requests are told from the daemon's in the audit log
SCALE_BACK_TICKS = 10  # a Deployment the churn scales up comes back down this many ticks later, then rests as long
REACTION_GRACE = 60.0  # at most this long after the churn for the answers to its last triggers


@dataclass(frozen=True)
class Profile:
    nodes: int
    pods: int  # Deployment pods + one DaemonSet pod per node
    rate: float  # pods/s created (and as many deleted) during the churn
    minutes: float
    zones: int = 3
    # Both replicas' leader-election flags (the fail-over): kube-controller-manager's defaults.
    lease: LeaseFlags = field(default_factory=LeaseFlags)


PROFILES = {
    # sig-scalability's thresholds and clusterloader2's 5k-node load test throughput.
    "full": Profile(nodes=5000, pods=150_000, rate=50.0, minutes=10.0),
    # A fifth of the nodes and pods, the same churn.
    "reduced": Profile(nodes=1000, pods=30_000, rate=50.0, minutes=10.0),
    # Proves the harness on a small machine in a few minutes.
    "smoke": Profile(nodes=100, pods=2000, rate=10.0, minutes=1.0),
    # For tests/bench: the whole run well under 20 s.
    "tiny": Profile(nodes=4, pods=40, rate=4.0, minutes=0.05,
                    lease=LeaseFlags(duration=3.0, renew_deadline=2.0, retry_period=0.5)),
}


# --- the workload -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    namespace: str
    name: str
    replicas: int
    service: bool


def plan(profile: Profile) -> list[Planned]:
    """Deployments for ``pods - nodes`` pods, namespace by namespace (each at most 3,000 pods)."""
    remaining = max(0, profile.pods - profile.nodes)
    out: list[Planned] = []
    n = 0
    while remaining > 0:
        budget = min(NAMESPACE_PODS, remaining)
        remaining -= budget
        ns = f"envelope-{n}"
        n += 1
        left = budget
        for size, share in SIZES:
            count = int(budget * share) // size
            for i in range(count):
                if left < size:
                    break
                out.append(Planned(ns, f"d{size}-{i}", size, service=size > SIZES[-1][0]))
                left -= size
        if left > 0:  # what the sizes did not divide: one more small Deployment
            out.append(Planned(ns, "rest", left, service=False))
    return out


def _labels(name: str) -> dict[str, str]:
    return {"app": name}


def _pod_spec() -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}


def deployment(p: Planned) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": p.name, "namespace": p.namespace, "labels": _labels(p.name)},
            "spec": {"replicas": p.replicas, "selector": {"matchLabels": _labels(p.name)},
                     "template": {"metadata": {"labels": _labels(p.name)}, "spec": _pod_spec()}}}


def service(p: Planned) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": p.name, "namespace": p.namespace},
            "spec": {"selector": _labels(p.name), "ports": [{"port": 80, "targetPort": 8080}]}}


def daemonset(namespace: str) -> dict[str, Any]:
    labels = _labels("node-agent")
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "node-agent", "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": _pod_spec()}}}


def job(namespace: str, name: str, pods: int) -> dict[str, Any]:
    template = {"metadata": {"annotations": {"sim.controller-manager.io/run-seconds": str(JOB_RUN_SECONDS)}},
                "spec": {**_pod_spec(), "restartPolicy": "Never"}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"parallelism": pods, "completions": pods, "ttlSecondsAfterFinished": 0,
                     "template": template}}


async def ensure_namespace(client: ApiClient, name: str) -> None:
    # The ServiceAccount too: kube-sim's ServiceAccount admission refuses pods until the daemon's controller
    # has made it, and the fill need not wait for that.
    with contextlib.suppress(ApiError):
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    with contextlib.suppress(ApiError):
        await client.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                              "metadata": {"name": "default", "namespace": name}}, name)


async def bounded(calls: list[Callable[[], Awaitable[Any]]], concurrency: int = 32) -> None:
    """Run the calls with at most ``concurrency`` in flight."""
    it = iter(calls)

    async def worker() -> None:
        for call in it:
            await call()

    async with asyncio.TaskGroup() as tg:
        for _ in range(concurrency):
            tg.create_task(worker())


async def fill(client: ApiClient, profile: Profile, planned: list[Planned], timeout: float) -> float:
    """Create the workload; seconds until every pod of it is available."""
    start = time.perf_counter()
    for ns in sorted({p.namespace for p in planned} | {"envelope-system"}):
        await ensure_namespace(client, ns)
    await client.create(DAEMONSETS, daemonset("envelope-system"))
    calls: list[Callable[[], Awaitable[Any]]] = []
    for p in planned:
        calls.append(functools.partial(client.create, DEPLOYMENTS, deployment(p)))
        if p.service:
            calls.append(functools.partial(client.create, SERVICES, service(p)))
    await bounded(calls)
    want = sum(p.replicas for p in planned)
    deadline = time.perf_counter() + timeout
    while True:
        items, _ = await client.list_all(DEPLOYMENTS)
        available = sum((d.get("status") or {}).get("availableReplicas", 0) for d in items
                        if d["metadata"]["namespace"].startswith("envelope-"))
        ds = await client.get(DAEMONSETS, "node-agent", "envelope-system")
        st = ds.get("status") or {}
        if available >= want and st.get("numberAvailable", 0) >= profile.nodes:
            return time.perf_counter() - start
        if time.perf_counter() > deadline:
            raise TimeoutError(f"fill: {available}/{want} Deployment pods and {st.get('numberAvailable', 0)}/"
                               f"{profile.nodes} DaemonSet pods available after {timeout:.0f} s")
        await asyncio.sleep(1.0)


class Churn:
    """``rate`` pods/s created and deleted: half by Deployment scaling, half by Jobs that run and finish.

    Each tick scales one Deployment up and, ``hold`` ticks later, back down; a Deployment is not picked again
    while it is up nor for ``hold`` ticks after it came down. So the writes to any one Deployment are at least
    ``hold`` ticks apart, and the answer to one is seldom mistaken for the next one's, or made moot by it (an
    answer slower than the gap counts only as a lower bound in the event-to-action figures, so with writes a
    tick apart every slow answer would have been cut to about a second)."""

    def __init__(self, client: ApiClient, planned: list[Planned], rate: float, rng: random.Random) -> None:
        self.client = client
        self.rng = rng
        self.rate = rate
        medium = [p for p in planned if p.replicas == SIZES[1][0]] or planned
        self.pool = list(medium)
        # Room for the Deployments that are up and those resting after coming down, and one to pick.
        self.hold = max(1, min(SCALE_BACK_TICKS, (len(self.pool) - 1) // 2))
        self.came_down: dict[int, int] = {}  # id of a Deployment -> the tick it was last scaled back down
        self.ticks = 0
        self.scaled_up: list[tuple[Planned, int]] = []
        self.jobs = 0
        self.scaled: list[reaction.Scaled] = []  # every successful scale, in the order sent
        self.job_names: list[str] = []  # every Job created, in the order sent
        self.deployment_pods = 0
        self.job_pods = 0
        self.errors = 0

    async def run(self, seconds: float) -> None:
        step = max(1, round(self.rate / 2))  # pods per tick each way
        period = step / (self.rate / 2)
        ticks = max(1, int(seconds / period))
        started = time.perf_counter()
        for n in range(ticks):
            await asyncio.sleep(max(0.0, started + n * period - time.perf_counter()))
            try:
                await self._tick(step)
            except ApiError:
                self.errors += 1

    async def _tick(self, step: int) -> None:
        if self.pool:
            up_now = {id(p) for p, _k in self.scaled_up}
            resting = {i for i, tick in self.came_down.items() if self.ticks - tick <= self.hold}
            target = self.rng.choice([p for p in self.pool if id(p) not in up_now | resting] or self.pool)
            up = target.replicas + step + sum(k for p, k in self.scaled_up if p is target)
            await self.client.update_scale(DEPLOYMENTS, target.name, target.namespace, up)
            self.scaled.append(reaction.Scaled(target.namespace, target.name, up - step, up))
            self.scaled_up.append((target, step))
            self.deployment_pods += step
            if len(self.scaled_up) > self.hold:  # a Deployment scaled up earlier goes back down: the deletes
                back, k = self.scaled_up.pop(0)
                now = back.replicas + sum(j for p, j in self.scaled_up if p is back)
                await self.client.update_scale(DEPLOYMENTS, back.name, back.namespace, now)
                self.scaled.append(reaction.Scaled(back.namespace, back.name, now + k, now))
                self.came_down[id(back)] = self.ticks
        self.ticks += 1
        self.jobs += 1
        name = f"churn-{self.jobs}"
        await self.client.create(JOBS, job("envelope-system", name, step))
        self.job_names.append(name)
        self.job_pods += step

    def probe(self) -> failover.Probe:
        """A Deployment the churn left at its planned size, for the fail-over's probe."""
        moved = {id(p) for p, _k in self.scaled_up}
        target = next(p for p in self.pool if id(p) not in moved)
        return failover.Probe(target.namespace, target.name)


# --- measuring ----------------------------------------------------------------------------------------------


class Sampler:
    """The daemon's RSS and CPU and kube-sim's CPU, every second, until stopped."""

    def __init__(self, daemon: procs.Proc, sim: procs.Proc) -> None:
        self.daemon = daemon
        self.sim = sim
        # (t, daemon cpu s, daemon rss, sim cpu s, daemon run-queue wait s)
        self.samples: list[tuple[float, float, int, float, float]] = []
        self._task: asyncio.Task[None] | None = None

    def _sample(self) -> None:
        pid = self.daemon.pid
        self.samples.append((time.perf_counter(), self.daemon.cpu(), procs.rss(pid), self.sim.cpu(),
                             procs.runqueue_wait_seconds(pid)))

    async def _loop(self) -> None:
        while True:
            self._sample()
            await asyncio.sleep(1.0)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._sample()

    def summary(self, window: float = 5.0) -> dict[str, float]:
        s = self.samples
        wall = s[-1][0] - s[0][0]
        peak = 0.0
        j = 0
        for i in range(len(s)):  # the busiest `window` seconds
            while s[i][0] - s[j][0] > window:
                j += 1
            if s[i][0] - s[j][0] >= window * 0.8:
                peak = max(peak, (s[i][1] - s[j][1]) / (s[i][0] - s[j][0]))
        return {"wall_s": wall, "daemon_cpu_avg_cores": (s[-1][1] - s[0][1]) / wall,
                "daemon_cpu_peak_cores": peak,
                "daemon_rss_avg_mib": sum(x[2] for x in s) / len(s) / 2**20,
                "daemon_rss_peak_mib": max(x[2] for x in s) / 2**20,
                "sim_cpu_avg_cores": (s[-1][3] - s[0][3]) / wall,
                # Runnable but not running: above a few percent, the machine (not the daemon) set the latencies.
                "daemon_runqueue_wait_share": (s[-1][4] - s[0][4]) / wall}


_METRIC = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def buckets(metrics: dict[str, float], family: str) -> dict[str, list[tuple[float, float]]]:
    """``{name label: [(le, cumulative count), ...]}`` of a histogram family in a scrape."""
    out: dict[str, list[tuple[float, float]]] = {}
    for key, value in metrics.items():
        m = _METRIC.match(key)
        if m is None or m.group(1) != family + "_bucket":
            continue
        labels = dict(_LABEL.findall(m.group(2)))
        out.setdefault(labels.get("name", ""), []).append((float(labels["le"]), value))
    for series in out.values():
        series.sort()
    return out


def quantile(q: float, series: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets; None with no observations."""
    if not series or series[-1][1] <= 0:
        return None
    rank = q * series[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in series:
        if count >= rank:
            if math.isinf(le):
                return prev_le  # the highest finite bound, as Prometheus answers
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return series[-1][0]


def pauses_and_latency(before: dict[str, float], after: dict[str, float], sim_before: dict[str, float],
                       sim_after: dict[str, float], wall: float) -> dict[str, float]:
    """Over the churn: the share of the wall time each process spent in its cyclic garbage collector, and the
    daemon's mean API request time as its client measured it (kube-sim's loop, the wire and the daemon's own
    loop together: what every serial write of a sync waits)."""
    api0, n0 = procs.api_seconds(before)
    api1, n1 = procs.api_seconds(after)
    out = {"daemon_gc_pause_share": (procs.gc_pause_seconds(after) - procs.gc_pause_seconds(before)) / wall,
           "sim_gc_pause_share": (procs.gc_pause_seconds(sim_after) - procs.gc_pause_seconds(sim_before)) / wall}
    if n1 > n0:
        out["daemon_api_request_mean_ms"] = (api1 - api0) / (n1 - n0) * 1000
        out["daemon_api_requests_per_s"] = (n1 - n0) / wall
    return out


def quantile_bounds(q: float, series: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The bucket ``(lower, upper]`` holding the ``q`` quantile: all the histogram knows. The work queue's buckets
    grow tenfold, so an interpolated p99 of 904 s says only "between 100 s and 1,000 s" (the waits read from the
    audit log in that run were ~130 s)."""
    if not series or series[-1][1] <= 0:
        return None
    rank = q * series[-1][1]
    prev_le = 0.0
    for le, count in series:
        if count >= rank:
            return prev_le, le
        prev_le = le
    return prev_le, math.inf


def queue_waits(before: dict[str, float], after: dict[str, float]) -> dict[str, list[tuple[float, float]]]:
    """Each queue's workqueue_queue_duration_seconds buckets for what was observed between two scrapes."""
    b0 = buckets(before, "workqueue_queue_duration_seconds")
    out: dict[str, list[tuple[float, float]]] = {}
    for name, series in buckets(after, "workqueue_queue_duration_seconds").items():
        start = dict(b0.get(name, []))
        delta = [(le, count - start.get(le, 0.0)) for le, count in series]
        if delta and delta[-1][1] > 0:
            out[name] = delta
    return out


def queue_p99s(waits: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Each queue's p99 of workqueue_queue_duration_seconds from its waits between two scrapes (queue_waits)."""
    out: dict[str, float] = {}
    for name, delta in waits.items():
        p99 = quantile(0.99, delta)
        if p99 is not None:
            out[name] = p99
    return out


def share_over(limit: float, series: list[tuple[float, float]]) -> float:
    """The share of observations above ``limit``, which must be a bucket bound: exact, unlike an interpolated
    quantile (the work queue's buckets grow tenfold, so a p99 between 1 s and 10 s is only an estimate; a
    share over 1 s of at most 1% is exactly "p99 <= 1 s")."""
    total = series[-1][1]
    under = dict(series)[limit]
    return (total - under) / total if total else 0.0


def sync_seconds(log: Path) -> float | None:
    """From "waiting for informer caches to sync" to "informer caches synced" in a daemon's JSON log."""
    entries = procs.log_entries(log)
    waiting = procs.log_time(entries, procs.SYNC_WAITING)
    done = procs.log_time(entries, procs.SYNC_DONE)
    return None if waiting is None or done is None else done - waiting


async def measure_sync(workdir: Path, sim: procs.Proc, watch_list: bool, timeout: float) -> dict[str, float]:
    """Start a daemon on the settled cluster; its cache sync time and memory, and kube-sim's cost meanwhile."""
    procs.reset_peak_rss(sim.pid)
    sim_cpu0 = sim.cpu()
    mode = "watch-list" if watch_list else "paged"
    daemon = await procs.start_daemon(
        workdir, sim.extra["kubeconfig"], sim.extra["admin_token"], log_name=f"controller-manager-{mode}.log",
        extra_args=(f"--feature-gates=WatchListClient={str(watch_list).lower()}",), ready_timeout=timeout)
    try:
        metrics = await procs.scrape(daemon)
        seconds = sync_seconds(daemon.log)
        return {"sync_s": seconds if seconds is not None else float("nan"),
                "daemon_peak_rss_mib": procs.peak_rss(daemon.pid) / 2**20,
                "daemon_cpu_s": daemon.cpu(),
                "sim_peak_rss_mib": procs.peak_rss(sim.pid) / 2**20,
                "sim_cpu_s": sim.cpu() - sim_cpu0,
                "fallbacks": sum(v for k, v in metrics.items()
                                 if k.startswith("reflector_watch_list_fallbacks_total")),
                "lists": sum(v for k, v in metrics.items() if k.startswith("reflector_lists_total"))}
    finally:
        await daemon.stop()


# --- the run ------------------------------------------------------------------------------------------------


def _progress(started: float, what: str) -> None:
    print(f"[envelope {time.perf_counter() - started:7.1f} s] {what}", flush=True)


async def run(profile: Profile, *, seed: int = 1, label: str = "custom",
              keep: Path | None = None) -> tuple[list[Figure], dict[str, Any]]:
    """The whole run; with ``keep``, its logs (kube-sim's audit log, each daemon's) are written there and kept."""
    planned = plan(profile)
    timeout = 300 + profile.pods * 0.05
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        workdir = keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="envelope-")))
        workdir.mkdir(parents=True, exist_ok=True)
        audit = workdir / "audit.log"
        _progress(started, f"kube-sim: {profile.nodes} nodes in {profile.zones} zones")
        sim = await procs.start_sim(workdir, profile.nodes, zones=profile.zones,
                                    ready_timeout=120 + profile.nodes * 0.1, audit_log=audit)
        daemon: procs.Proc | None = None
        try:
            config = await load_config(sim.extra["kubeconfig"])
            async with ApiClient(config, qps=0, burst=0, user_agent=BENCH_AGENT) as client:
                _progress(started, "controller-manager")
                daemon = await procs.start_daemon(workdir, sim.extra["kubeconfig"], sim.extra["admin_token"],
                                                  ready_timeout=timeout, leader_elect=True,
                                                  extra_args=profile.lease.args())
                _progress(started, f"fill: {len(planned)} Deployments, {profile.pods} pods")
                fill_s = await fill(client, profile, planned, timeout)
                _progress(started, f"churn: {profile.rate:g} pods/s for {profile.minutes:g} min")
                churn = Churn(client, planned, profile.rate, random.Random(seed))
                sampler = Sampler(daemon, sim)
                before = await procs.scrape(daemon)
                sim_before = procs.parse_metrics(await client.request("GET", "/metrics"))
                offset = reaction.log_end(audit)  # every request completed from here on is logged past this point
                watch = reaction.PodWatch(client)
                await watch.start()
                sampler.start()
                await churn.run(profile.minutes * 60)
                await sampler.stop()
                churn_end = time.time()
                after = await procs.scrape(daemon)
                sim_after = procs.parse_metrics(await client.request("GET", "/metrics"))
                usage = sampler.summary()
                usage.update(pauses_and_latency(before, after, sim_before, sim_after, usage["wall_s"]))
                waits = queue_waits(before, after)
                p99 = queue_p99s(waits)
                p99_buckets = {name: bounds for name, delta in waits.items()
                               if (bounds := quantile_bounds(0.99, delta)) is not None}
                over_1s = {name: share_over(1.0, delta) for name, delta in waits.items()}
                usage["daemon_peak_rss_mib_lifetime"] = procs.peak_rss(daemon.pid) / 2**20
                # The last triggers' answers: leaving out the slowest would bias the figure down.
                waited = time.monotonic()
                while time.monotonic() < waited + REACTION_GRACE:
                    if watch.caught_up(churn.scaled, churn.job_names):
                        break
                    await asyncio.sleep(0.5)  # polled: the watch's task fills what caught_up reads
                caught_up = watch.caught_up(churn.scaled, churn.job_names)
                waited = time.monotonic() - waited
                pods = await watch.stop()
                await asyncio.sleep(0.5)  # kube-sim hands its audit lines to the file every 0.1 s
                requests = reaction.read_audit(audit, offset)
                since = reaction.window_start(requests, watch.started_at)
                reacted = reaction.reactions(requests, churn.scaled, churn.job_names, pods, since=since,
                                             until=churn_end)
                attributed, _ = reaction.attribute(requests, pods, since)
                reactions = {"pairs": {name: samples.summary() for name, samples in reacted.items()},
                             "all": reaction.Samples.combined(reacted.values()).summary(),
                             "pods_added": len(pods), "pod_creates_attributed": len(attributed),
                             "watch_broken": watch.broken, "caught_up": caught_up, "waited_for_answers_s": waited}
                _progress(started, f"fail-over: SIGKILL the leader, a standby takes over ({profile.lease})")
                fail_over = await failover.measure(workdir, sim, daemon, client, audit, churn.probe(), profile.lease,
                                                   timeout)
                daemon = None  # killed
                synced = {}
                for mode in ("watch-list", "paged"):
                    _progress(started, f"cache sync, {mode}")
                    synced[mode] = await measure_sync(workdir, sim, mode == "watch-list", timeout)
                _progress(started, "done")
        except BaseException:
            procs.print_log_tails(daemon, sim)
            raise
        finally:
            if daemon is not None:
                await daemon.stop()
            await sim.stop()
    details = {"profile": label, **asdict(profile), "deployments": len(planned),
               "namespaces": len({p.namespace for p in planned}), "fill_s": fill_s,
               "churn": {"deployment_pods": churn.deployment_pods, "job_pods": churn.job_pods, "jobs": churn.jobs,
                         "errors": churn.errors},
               "usage": usage, "queue_p99_s": p99, "queue_p99_bucket_s": p99_buckets,
               "queue_share_over_1s": over_1s,
               "event_to_action": reactions, "failover": fail_over, "sync": synced}
    return figures(profile, usage, p99, over_1s, synced, reactions, fail_over, p99_buckets), details


def _value(x: float | int | None) -> float:
    return math.nan if x is None else float(x)


def figures(profile: Profile, usage: dict[str, float], p99: dict[str, float], over_1s: dict[str, float],
            synced: dict[str, dict[str, float]], reactions: dict[str, Any],
            fail_over: dict[str, Any],
            p99_buckets: dict[str, tuple[float, float]] | None = None) -> list[Figure]:
    size = f"{profile.nodes} nodes, {profile.pods} pods, {profile.rate:g} pods/s"
    out = [
        Figure("envelope", f"daemon RSS, peak during churn ({size})", usage["daemon_rss_peak_mib"], "MiB",
               None, "", "<= 1 GiB", at_most(1024.0), {"avg_mib": usage["daemon_rss_avg_mib"]}),
        Figure("envelope", f"daemon CPU, average during churn ({size})", usage["daemon_cpu_avg_cores"], "cores",
               usage["sim_cpu_avg_cores"], "kube-sim's own CPU", "<= 1 core", at_most(1.0),
               {"peak_5s_cores": usage["daemon_cpu_peak_cores"]}),
        Figure("envelope", "daemon CPU, busiest 5 s of the churn", usage["daemon_cpu_peak_cores"], "cores"),
        Figure("envelope", "daemon's main thread runnable but waiting for a CPU (share of the churn)",
               usage["daemon_runqueue_wait_share"] * 100, "%", None, "", "", None),
        Figure("envelope", "cyclic garbage collector's pauses, share of the churn: daemon (kube-sim)",
               usage.get("daemon_gc_pause_share", math.nan) * 100, "%", usage.get("sim_gc_pause_share", math.nan) * 100,
               "kube-sim"),
        Figure("envelope", "daemon's API requests during churn: mean time, as its client measures it",
               usage.get("daemon_api_request_mean_ms", math.nan), "ms", None, "", "", None,
               {"requests_per_s": usage.get("daemon_api_requests_per_s")}),
    ]
    if p99:
        worst = max(p99, key=lambda k: p99[k])
        out.append(Figure("envelope", f"workqueue queue time p99 (bucket-interpolated), worst queue ({worst})",
                          p99[worst], "s", None, "", "<= 1 s", at_most(1.0),
                          {"per_queue": p99, "p99_bucket_s": (p99_buckets or {}).get(worst)}))
    if over_1s:
        worst = max(over_1s, key=lambda k: over_1s[k])
        out.append(Figure("envelope", f"share of queue waits over 1 s, worst queue ({worst})", over_1s[worst] * 100,
                          "%", None, "", "<= 1% (p99 <= 1 s)", at_most(1.0),
                          {"per_queue_percent": {k: v * 100 for k, v in over_1s.items()}}))
    every = reactions["all"]
    out.append(Figure("envelope", f"event-to-action p99, every pair (kube-sim's audit log: trigger committed -> "
                      f"the controller's write received; {every['count']} answered, {every['unanswered']} "
                      "unanswered counted at their lower bound)", _value(every["p99_ms"]), "ms",
                      _value(every["p50_ms"]), "p50", "<= 100 ms", at_most(100.0), reactions))
    for name, pair in reactions["pairs"].items():
        out.append(Figure("envelope", f"event-to-action p99, {name} ({pair['count']} answered, "
                          f"{pair['unanswered']} unanswered)", _value(pair["p99_ms"]), "ms", _value(pair["p50_ms"]),
                          "p50"))
    lease = fail_over["lease"]
    flags = (f"{lease['duration_s']:g} s lease / {lease['renew_deadline_s']:g} s renew / "
             f"{lease['retry_period_s']:g} s retry")
    out += [
        Figure("envelope", f"fail-over: standby holds the Lease, from the leader's SIGKILL ({flags})",
               _value(fail_over["lease_held_s"]), "s", lease["duration_s"], "lease duration", "", None, fail_over),
        Figure("envelope", "fail-over: standby's informer caches synced, from the SIGKILL",
               _value(fail_over["informers_synced_s"]), "s", _value(fail_over["informer_sync_s"]),
               "the sync alone"),
        Figure("envelope", f"fail-over: standby's first controller write ({fail_over['first_controller_write']}), "
               "from the SIGKILL", _value(fail_over["first_controller_write_s"]), "s"),
        Figure("envelope", "fail-over: a Deployment scaled just after the SIGKILL acted on (ReplicaSet written)",
               _value(fail_over["probe_acted_s"]), "s", _value(fail_over["probe_commit_to_action_s"]),
               "from the scale's commit"),
    ]
    wl, paged = synced["watch-list"], synced["paged"]
    out += [
        Figure("envelope", "initial cache sync, streaming lists (WatchListClient)", wl["sync_s"], "s",
               paged["sync_s"], "paged lists", "", None, {"watch_list": wl, "paged": paged}),
        Figure("envelope", "daemon peak RSS at cache sync, streaming lists", wl["daemon_peak_rss_mib"], "MiB",
               paged["daemon_peak_rss_mib"], "paged lists"),
        Figure("envelope", "kube-sim peak RSS while the daemon syncs, streaming lists", wl["sim_peak_rss_mib"],
               "MiB", paged["sim_peak_rss_mib"], "paged lists"),
        Figure("envelope", "kube-sim CPU while the daemon syncs, streaming lists", wl["sim_cpu_s"], "s",
               paged["sim_cpu_s"], "paged lists"),
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.envelope",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="reduced")
    parser.add_argument("--nodes", type=int, help="override the profile's node count")
    parser.add_argument("--pods", type=int, help="override the profile's pod count")
    parser.add_argument("--rate", type=float, help="override the churn, pods/s created (and deleted)")
    parser.add_argument("--minutes", type=float, help="override the churn's duration")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep-workdir", type=Path, help="write the run's logs (the audit log included) here, kept")
    parser.add_argument("--output", help="where to write the JSON (default bench/envelope-<profile>.json)")
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    overrides = {k: getattr(args, k) for k in ("nodes", "pods", "rate", "minutes") if getattr(args, k) is not None}
    profile = replace(profile, **overrides)
    from bench.__main__ import quiet_logs

    quiet_logs()
    runner = procs.event_loop_runner()
    started = time.perf_counter()
    with runner:
        got, details = runner.run(run(profile, seed=args.seed, label=args.profile,
                                              keep=args.keep_workdir))
    print(table(got))
    print(f"\n(markdown)\n{markdown(got)}\n")
    output = Path(args.output or HERE / f"envelope-{args.profile}.json")
    write_json(output, got, quick=args.profile in ("smoke", "tiny"), errors={})
    doc = json.loads(output.read_text())
    doc["envelope"] = details
    output.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print(f"wrote {output}; {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
