"""Benchmarks 4 and 5: convergence against kube-sim, and the daemon's idle cost with many pods cached.

kube-sim runs in its own process, the ``controller-manager`` daemon in another (every default controller,
``--kube-api-qps``/``--kube-api-burst`` lifted, leader election off); this process only drives and watches,
through the API, as any client would.

- reference: before the daemon starts, this process creates the same number of pods itself (32 requests in
  flight) and times it: what the API server allows, the floor for any controller. Then it deletes them.
- ``deploy-1000``: a 1,000-replica Deployment created; time until its status shows 1,000 up-to-date replicas
  (every pod created and counted), and, beside it, until all 1,000 are available.
- ``deploy-100x10``: 100 Deployments of 10 replicas created at once; time until every status shows 10.
- ``rollout-1000``: the 1,000-replica Deployment gets a new image; time until the rollout is complete (1,000 new
  replicas available, no old one left).
For each: the daemon's CPU seconds (``/proc/<pid>/stat``) per 1,000 pods created, its peak RSS, the share of the
wall time its requests spent waiting on the API (``rest_client_request_duration_seconds`` sum from its
``/metrics``: above 100% means requests overlapped), and kube-sim's CPU share, so it is clear who is the
bottleneck.

Idle: more Deployments bring the cached pods to ``idle_pods``; once everything is available and quiet, the
daemon's CPU over ``idle_seconds`` with nothing changing (nodes keep heartbeating, as in a real cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import procs
from bench.report import Figure, at_most
from controller_manager.api.resources import DEPLOYMENTS, NAMESPACES, PODS, SERVICEACCOUNTS
from controller_manager.client import ApiClient, ApiError, load_config

NS = "bench"
REF_NS = "bench-ref"
# The last status seen of each Deployment waited on, printed if a wait times out.
LAST_SEEN: dict[str, Any] = {}


def deployment(name: str, replicas: int, image: str = "nginx:1.27") -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                "name": "web", "image": image,
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }]}},
        },
    }


def bare_pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"ref-{i}", "namespace": REF_NS},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


def rolled_out(d: dict[str, Any], replicas: int, *, available: bool) -> bool:
    st = d.get("status") or {}
    if st.get("observedGeneration", 0) < d["metadata"].get("generation", 0):
        return False
    ok = st.get("replicas") == replicas and st.get("updatedReplicas") == replicas
    if available:
        ok = ok and st.get("availableReplicas") == replicas
    return bool(ok)


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float, what: str, period: float = 0.05) -> float:
    """Poll ``check`` until true; returns when it was first seen true (perf_counter)."""
    deadline = time.perf_counter() + timeout
    while True:
        if await check():
            return time.perf_counter()
        if time.perf_counter() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(period)


async def ensure_namespace(client: ApiClient, name: str) -> None:
    """The namespace with its "default" ServiceAccount, made here: kube-sim's ServiceAccount admission (on, as on
    kube-apiserver) refuses pods without it, and the reference creates run before the daemon (whose
    serviceaccount controller would make it) is started."""
    with contextlib.suppress(ApiError):
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    with contextlib.suppress(ApiError):
        await client.create(SERVICEACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                              "metadata": {"name": "default", "namespace": name}}, name)


async def count_pods(client: ApiClient, namespace: str) -> int:
    items, _ = await client.list_all(PODS, namespace)
    return len(items)


async def reference_creates(client: ApiClient, pods: int, concurrency: int = 32) -> float:
    """Seconds for this process to create ``pods`` pods itself, ``concurrency`` requests in flight."""
    await ensure_namespace(client, REF_NS)
    next_index = 0

    async def creator() -> None:
        nonlocal next_index
        while next_index < pods:
            i = next_index
            next_index += 1
            await client.create(PODS, bare_pod(i))

    start = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for n in range(concurrency):
            tg.create_task(creator(), name=f"bench:ref-creator-{n}")
    elapsed = time.perf_counter() - start
    await client.request("DELETE", f"/api/v1/namespaces/{REF_NS}/pods",
                         params={"gracePeriodSeconds": "0"})

    async def gone() -> bool:
        return await count_pods(client, REF_NS) == 0

    await wait_until(gone, 120, "the reference pods to be deleted", period=0.5)
    return elapsed


class Window:
    """CPU, API time and wall time of one scenario."""

    def __init__(self, daemon: procs.Proc, sim: procs.Proc) -> None:
        self.daemon = daemon
        self.sim = sim

    async def __aenter__(self) -> Window:
        self.m0 = await procs.scrape(self.daemon)
        self.cpu0 = self.daemon.cpu()
        self.sim0 = self.sim.cpu()
        self.t0 = time.perf_counter()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.t0
        self.cpu = self.daemon.cpu() - self.cpu0
        self.sim_cpu = self.sim.cpu() - self.sim0
        m1 = await procs.scrape(self.daemon)
        a0, n0 = procs.api_seconds(self.m0)
        a1, n1 = procs.api_seconds(m1)
        self.api_seconds = a1 - a0
        self.requests = n1 - n0

    def summary(self, pods: int) -> dict[str, float]:
        return {"wall_s": self.wall, "daemon_cpu_s": self.cpu, "daemon_cpu_share": self.cpu / self.wall,
                "daemon_cpu_s_per_1000_pods": self.cpu / max(pods, 1) * 1000,
                "api_wait_share": self.api_seconds / self.wall, "api_requests": self.requests,
                "sim_cpu_share": self.sim_cpu / self.wall,
                "daemon_peak_rss_mib": procs.peak_rss(self.daemon.pid) / 2**20}


async def run(*, replicas: int = 1000, many: int = 100, each: int = 10, idle_pods: int = 10_000,
              idle_seconds: float = 30.0, nodes: int | None = None) -> list[Figure]:
    nodes = nodes or max(4, idle_pods // 90 + 2)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        workdir = Path(tmp)
        sim = await procs.start_sim(workdir, nodes)
        daemon: procs.Proc | None = None
        try:
            config = await load_config(sim.extra["kubeconfig"])
            async with ApiClient(config, qps=0, burst=0) as client:
                ref_seconds = await reference_creates(client, replicas)
                await ensure_namespace(client, NS)
                daemon = await procs.start_daemon(workdir, sim.extra["kubeconfig"], sim.extra["admin_token"])
                return await _scenarios(client, sim, daemon, ref_seconds, replicas, many, each, idle_pods,
                                        idle_seconds)
        except BaseException:
            print(f"--- last Deployment statuses seen: {LAST_SEEN}")
            procs.print_log_tails(daemon, sim)
            raise
        finally:
            if daemon is not None:
                await daemon.stop()
            await sim.stop()


async def _scenarios(client: ApiClient, sim: procs.Proc, daemon: procs.Proc, ref_seconds: float, replicas: int,
                     many: int, each: int, idle_pods: int, idle_seconds: float) -> list[Figure]:
    figures: list[Figure] = []
    timeout = 60 + replicas * 0.5

    async def status_of(name: str) -> dict[str, Any]:
        d = await client.get(DEPLOYMENTS, name, NS)
        LAST_SEEN[name] = {"generation": d["metadata"].get("generation"), "status": d.get("status")}
        return d

    # -- one big Deployment --------------------------------------------------------------------------------
    async with Window(daemon, sim) as w:
        await client.create(DEPLOYMENTS, deployment("big", replicas))

        async def created() -> bool:
            return rolled_out(await status_of("big"), replicas, available=False)

        async def available() -> bool:
            return rolled_out(await status_of("big"), replicas, available=True)

        t_created = await wait_until(created, timeout, "the big Deployment's pods")
        t_available = await wait_until(available, timeout, "the big Deployment to be available")
    created_s = t_created - w.t0
    details = w.summary(replicas) | {"created_s": created_s, "available_s": t_available - w.t0,
                                     "reference_bare_creates_s": ref_seconds}
    figures.append(Figure("convergence", f"{replicas}-replica Deployment: all pods created, status shows them",
                          created_s, "s", ref_seconds, f"{replicas} bare pod creates", "", None, details))
    figures.append(Figure("convergence", f"daemon CPU per 1000 pods ({replicas}-replica Deployment)",
                          details["daemon_cpu_s_per_1000_pods"], "s", None, "", "<= 1 s", at_most(1.0)))

    # -- many small Deployments ----------------------------------------------------------------------------
    names = [f"small-{i}" for i in range(many)]
    async with Window(daemon, sim) as w:
        async with asyncio.TaskGroup() as tg:
            for name in names:
                tg.create_task(client.create(DEPLOYMENTS, deployment(name, each)))

        async def all_created() -> bool:
            items, _ = await client.list_all(DEPLOYMENTS, NS)
            by_name = {d["metadata"]["name"]: d for d in items}
            return all(n in by_name and rolled_out(by_name[n], each, available=False) for n in names)

        t_done = await wait_until(all_created, timeout, "the small Deployments", period=0.1)
    small_s = t_done - w.t0
    details = w.summary(many * each) | {"created_s": small_s}
    figures.append(Figure("convergence", f"{many} Deployments x {each} replicas: all pods created", small_s, "s",
                          ref_seconds * many * each / replicas, f"{many * each} bare pod creates (scaled)", "",
                          None, details))
    figures.append(Figure("convergence", f"daemon CPU per 1000 pods ({many} Deployments x {each})",
                          details["daemon_cpu_s_per_1000_pods"], "s", None, "", "<= 1 s", at_most(1.0)))

    # -- rolling update of the big one ---------------------------------------------------------------------
    async with Window(daemon, sim) as w:
        await client.patch(DEPLOYMENTS, "big", {"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.28"}]}}}}, NS, patch_type="strategic")

        async def complete() -> bool:
            return rolled_out(await status_of("big"), replicas, available=True)

        await asyncio.sleep(0.2)  # let observedGeneration move, so the old rollout's status does not count
        t_done = await wait_until(complete, timeout * 2, "the rolling update")
    roll_s = t_done - w.t0
    details = w.summary(replicas) | {"rollout_s": roll_s}
    figures.append(Figure("convergence", f"rolling update of the {replicas}-replica Deployment", roll_s, "s",
                          ref_seconds, f"{replicas} bare pod creates", "", None, details))
    figures.append(Figure("convergence", "daemon CPU per 1000 pods (rolling update)",
                          details["daemon_cpu_s_per_1000_pods"], "s", None, "", "<= 1 s", at_most(1.0)))
    figures.append(Figure("convergence", "daemon peak RSS", procs.peak_rss(daemon.pid) / 2**20, "MiB", None, "", "",
                          None))

    # -- idle, with many pods cached -----------------------------------------------------------------------
    have = replicas + many * each
    extra: list[str] = []
    while have < idle_pods:
        n = min(replicas, idle_pods - have)
        name = f"idle-{len(extra)}"
        await client.create(DEPLOYMENTS, deployment(name, n))
        extra.append(name)
        have += n

        async def done(name: str = name, n: int = n) -> bool:
            return rolled_out(await status_of(name), n, available=True)

        await wait_until(done, timeout, f"Deployment {name}", period=0.2)
    cached = await count_pods(client, NS)

    async def quiet() -> bool:
        # Quiet: the daemon used under 5% of a core over the last second.
        before = daemon.cpu()
        await asyncio.sleep(1.0)
        return daemon.cpu() - before < 0.05

    with contextlib.suppress(TimeoutError):
        await wait_until(quiet, 60, "the daemon to go quiet", period=0)
    cpu0, sim0, t0 = daemon.cpu(), sim.cpu(), time.perf_counter()
    await asyncio.sleep(idle_seconds)
    wall = time.perf_counter() - t0
    idle_share = (daemon.cpu() - cpu0) / wall
    sim_share = (sim.cpu() - sim0) / wall
    figures.append(Figure("idle", f"daemon CPU with {cached} pods cached, nothing changing", idle_share * 100,
                          "% core", sim_share * 100, "kube-sim heartbeating its nodes", "< 1% core",
                          lambda v, _r: v < 1.0,
                          {"pods": cached, "seconds": wall, "rss_mib": procs.rss(daemon.pid) / 2**20,
                           "peak_rss_mib": procs.peak_rss(daemon.pid) / 2**20}))
    return figures
