"""`make demo`: kube-sim and controller-manager as real processes, sample workloads, a live view.

What a newcomer sees, in order:
1. kube-sim starts (4 nodes over 2 zones) and writes a kubeconfig under ``.demo/``;
2. controller-manager starts against it (leader election on, metrics on a local HTTPS port);
3. the workloads in ``deploy/examples/`` are applied with the real ``kubectl``;
4. a live view shows them converging (replicas, rollout progress, jobs, recent events, the leader); once
   the Deployment is available the demo rolls it to a new image so a rolling update is visible. In a
   terminal it is one screen updated in place (``rich``: tables with progress bars); otherwise (a log, a
   test) the plain table is printed again each time it changes, line by line;
5. the kubeconfig path and ``kubectl`` commands to try are printed, and everything keeps running
   until Ctrl-C, which stops both processes (SIGTERM, then waits) and leaves nothing behind.

``--exit-after SECONDS`` ends the demo by itself (used by the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import ssl
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from controller_manager.api.meta import parse_time
from controller_manager.api.resources import CRONJOBS, DAEMONSETS, DEPLOYMENTS, EVENTS, JOBS, LEASES, NODES, PODS
from controller_manager.client import ApiClient, ApiError, load_config

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "deploy" / "examples"
NEW_IMAGE = "nginx:1.28"
LEASE = ("kube-system", "controller-manager-py")  # the manager's default --leader-elect-resource-name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tool(name: str) -> str:
    """A console script installed beside this interpreter (the venv's), else one on PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"demo: {name} not found; run `make demo` so the venv has it")
    return found


class Demo:
    def __init__(self, workdir: Path, nodes: int, zones: int, exit_after: float | None) -> None:
        self.workdir = workdir
        self.kubeconfig = workdir / "kubeconfig"
        self.nodes = nodes
        self.zones = zones
        self.exit_after = exit_after
        self.metrics_port = free_port()
        self.procs: list[asyncio.subprocess.Process] = []
        self.sim_url = ""
        self.rolled = False
        self.tty = sys.stdout.isatty()
        self._last_frame = ""
        self._live: Live | None = None

    # -- processes -------------------------------------------------------------------------------

    async def start_sim(self) -> None:
        log = (self.workdir / "kube-sim.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            tool("kube-sim"), "--nodes", str(self.nodes), "--zones", str(self.zones), "--port", "0",
            "--kubeconfig", str(self.kubeconfig),
            stdout=asyncio.subprocess.PIPE, stderr=log, start_new_session=True,
        )
        self._track(proc)
        assert proc.stdout is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
        except TimeoutError:
            raise SystemExit("demo: kube-sim did not become ready in 30 s (see .demo/kube-sim.log)") from None
        text = line.decode().strip()
        if not text.startswith("kube-sim ready:"):
            raise SystemExit(f"demo: kube-sim failed to start: {text or 'no output'} (see .demo/kube-sim.log)")
        self.sim_url = text.split(":", 1)[1].strip()

    async def start_manager(self) -> None:
        log = (self.workdir / "controller-manager.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            tool("controller-manager"), "--kubeconfig", str(self.kubeconfig),
            "--secure-port", str(self.metrics_port), "--bind-address", "127.0.0.1",
            "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
            "--leader-elect-retry-period", "1s", "--node-monitor-grace-period", "20s",
            stdout=log, stderr=log, start_new_session=True,
        )
        self._track(proc)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + 30
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if proc.returncode is not None:
                    raise SystemExit("demo: controller-manager exited; see .demo/controller-manager.log")
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with http.get(f"https://127.0.0.1:{self.metrics_port}/healthz", ssl=ctx) as resp:
                        if resp.status == 200:
                            return
                await asyncio.sleep(0.2)
        raise SystemExit("demo: controller-manager did not answer /healthz in 30 s")

    def _track(self, proc: asyncio.subprocess.Process) -> None:
        """Remember a child, also in ``<workdir>/pids``, so a stuck demo can be cleaned up by hand."""
        self.procs.append(proc)
        with (self.workdir / "pids").open("a") as f:
            f.write(f"{proc.pid}\n")

    async def kubectl(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            tool("kubectl"), "--kubeconfig", str(self.kubeconfig), *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        text = out.decode().strip()
        if proc.returncode != 0:
            raise SystemExit(f"demo: kubectl {' '.join(args)} failed: {text}")
        return text

    async def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()

    # -- the live view ---------------------------------------------------------------------------

    async def snapshot(self, client: ApiClient) -> dict[str, list[dict[str, Any]]]:
        kinds = {"nodes": NODES, "deployments": DEPLOYMENTS, "daemonsets": DAEMONSETS, "jobs": JOBS,
                 "cronjobs": CRONJOBS, "pods": PODS, "events": EVENTS, "leases": LEASES}
        out: dict[str, list[dict[str, Any]]] = {}
        for name, res in kinds.items():
            items, _ = await client.list_all(res)
            out[name] = items
        return out

    def render(self, snap: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
        now = time.time()
        ready_nodes = sum(1 for n in snap["nodes"] if _condition(n, "Ready") == "True")
        lines = [
            f"kube-sim {self.sim_url}   nodes {ready_nodes}/{len(snap['nodes'])} Ready   "
            f"controller-manager metrics https://127.0.0.1:{self.metrics_port}/metrics",
            "",
            f"leader: {_leader(snap) or 'none'}",
            "",
            f"{'DEPLOYMENT':<24}{'READY':>8}{'UP-TO-DATE':>12}{'AVAILABLE':>11}{'REV':>5}  PROGRESS",
        ]
        for d in snap["deployments"]:
            spec, st = d.get("spec", {}), d.get("status", {})
            want = spec.get("replicas", 1)
            rev = d["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision", "-")
            lines.append(
                f"{_ns_name(d):<24}{st.get('readyReplicas', 0):>5}/{want:<2}{st.get('updatedReplicas', 0):>12}"
                f"{st.get('availableReplicas', 0):>11}{rev:>5}  {_rollout_text(d)}"
            )
        lines += ["", f"{'DAEMONSET':<24}{'DESIRED':>8}{'CURRENT':>8}{'READY':>8}{'UP-TO-DATE':>12}{'AVAILABLE':>11}"]
        for ds in snap["daemonsets"]:
            st = ds.get("status", {})
            counts = [st.get(f, 0) for f in ("desiredNumberScheduled", "currentNumberScheduled", "numberReady")]
            lines.append(
                f"{_ns_name(ds):<24}" + "".join(f"{c:>8}" for c in counts)
                + f"{st.get('updatedNumberScheduled', 0):>12}{st.get('numberAvailable', 0):>11}"
            )
        lines += ["", f"{'JOB':<24}{'COMPLETIONS':>12}{'ACTIVE':>8}  STATUS"]
        for job in snap["jobs"]:
            st = job.get("status", {})
            done = _job_state(job)
            lines.append(f"{_ns_name(job):<24}{st.get('succeeded', 0):>8}/{job['spec'].get('completions', 1):<3}"
                         f"{st.get('active', 0):>8}  {done}")
        for cj in snap["cronjobs"]:
            last = cj.get("status", {}).get("lastScheduleTime", "never")
            lines.append(f"{'cronjob ' + _ns_name(cj):<24}  schedule {cj['spec'].get('schedule')!r}, last run {last}")
        phases = _pod_phases(snap)
        lines += ["", "pods: " + (", ".join(f"{k} {v}" for k, v in sorted(phases.items())) or "none"), "",
                  "recent events:"]
        for ev in _recent_events(snap):
            obj = ev.get("involvedObject", {})
            lines.append(f"  {self._age(ev, now):>8}  {obj.get('kind', '')}/{obj.get('name', '')}  "
                         f"{ev.get('reason', '')}: {ev.get('message', '')}"[:160])
        return lines

    def _age(self, event: Mapping[str, Any], now: float) -> str:
        stamp = parse_time(event.get("lastTimestamp") or event.get("eventTime"))
        if not stamp:
            return "?"
        if self.tty:
            return f"{int(now - stamp)}s"
        return time.strftime("%H:%M:%S", time.localtime(stamp))  # a log reads better with clock times

    def view(self, snap: Mapping[str, Sequence[Mapping[str, Any]]]) -> RenderableType:
        """The terminal's screen: one frame of tables with progress bars, redrawn in place by ``rich``."""
        now = time.time()
        ready_nodes = sum(1 for n in snap["nodes"] if _condition(n, "Ready") == "True")
        leader = _leader(snap)
        header = Text.assemble(
            ("kube-sim ", "bold"), self.sim_url, "   nodes ",
            (f"{ready_nodes}/{len(snap['nodes'])} Ready", "green" if ready_nodes == len(snap["nodes"]) else "yellow"),
            "   leader ", (leader or "none", "bold cyan" if leader else "bold red"),
            f"\nmetrics https://127.0.0.1:{self.metrics_port}/metrics",
        )
        deployments = Table(title="Deployments", title_justify="left", expand=True, box=box.SIMPLE_HEAD)
        for col in ("name", "ready", "up-to-date", "available", "rev", "rollout", "progress"):
            deployments.add_column(col, justify="right" if col in ("ready", "up-to-date", "available", "rev")
                                   else "left")
        for d in snap["deployments"]:
            want, st = int(d.get("spec", {}).get("replicas", 1)), d.get("status", {})
            rev = d["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision", "-")
            rollout = _rollout_text(d)
            deployments.add_row(
                _ns_name(d), f"{st.get('readyReplicas', 0)}/{want}", str(st.get("updatedReplicas", 0)),
                str(st.get("availableReplicas", 0)), rev, Text(rollout, "green" if rollout == "complete" else "yellow"),
                _bar(min(st.get("updatedReplicas", 0), st.get("availableReplicas", 0)), want))
        daemonsets = Table(title="DaemonSets", title_justify="left", expand=True, box=box.SIMPLE_HEAD)
        for col in ("name", "desired", "current", "ready", "up-to-date", "available", "progress"):
            daemonsets.add_column(col, justify="left" if col in ("name", "progress") else "right")
        for ds in snap["daemonsets"]:
            st = ds.get("status", {})
            desired = int(st.get("desiredNumberScheduled", 0))
            counts = [st.get(f, 0) for f in ("currentNumberScheduled", "numberReady", "updatedNumberScheduled",
                                              "numberAvailable")]
            daemonsets.add_row(_ns_name(ds), str(desired), *map(str, counts),
                               _bar(st.get("numberAvailable", 0), desired))
        jobs = Table(title="Jobs and CronJobs", title_justify="left", expand=True, box=box.SIMPLE_HEAD)
        for col in ("name", "completions", "active", "status", "progress"):
            jobs.add_column(col, justify="right" if col in ("completions", "active") else "left")
        for job in snap["jobs"]:
            st, completions = job.get("status", {}), int(job["spec"].get("completions", 1) or 1)
            state = _job_state(job)
            jobs.add_row(_ns_name(job), f"{st.get('succeeded', 0)}/{completions}", str(st.get("active", 0)),
                         Text(state, {"Complete": "green", "Failed": "red"}.get(state, "yellow")),
                         _bar(st.get("succeeded", 0), completions))
        for cj in snap["cronjobs"]:
            last = cj.get("status", {}).get("lastScheduleTime", "never")
            jobs.add_row(f"cronjob {_ns_name(cj)}", "", str(len(cj.get("status", {}).get("active", []) or [])),
                         f"schedule {cj['spec'].get('schedule')!r}, last run {last}", "")
        events = Table(title="Recent events", title_justify="left", expand=True, box=box.SIMPLE_HEAD)
        for col in ("age", "object", "reason", "message"):
            events.add_column(col, justify="right" if col == "age" else "left", overflow="ellipsis",
                              no_wrap=col != "message")
        for ev in _recent_events(snap, 6):
            obj = ev.get("involvedObject", {})
            events.add_row(self._age(ev, now), f"{obj.get('kind', '')}/{obj.get('name', '')}",
                           Text(ev.get("reason", ""), "red" if ev.get("type") == "Warning" else ""),
                           ev.get("message", ""))
        pods = Text("pods: " + (", ".join(f"{k} {v}" for k, v in sorted(_pod_phases(snap).items())) or "none"))
        return Group(header, deployments, daemonsets, jobs, pods, events, Text("\n".join(self.footer()), "dim"))

    def show(self, snap: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        if self._live is not None:
            self._live.update(self.view(snap), refresh=True)
            return
        # Not a terminal (a log, a test): print the table only when something changed.
        lines = self.render(snap)
        frame = "\n".join(lines)
        if frame != self._last_frame:
            print("\n".join(lines[2:]), "\n", flush=True)
        self._last_frame = frame

    def footer(self) -> list[str]:
        kc = self.kubeconfig
        return [
            "",
            f"kubeconfig: {kc}",
            "try:",
            f"  export KUBECONFIG={kc}; export PATH={Path(sys.executable).parent}:$PATH",
            "  kubectl get deploy,rs,pods -o wide",
            "  kubectl rollout status deployment/web",
            "  kubectl scale deployment/web --replicas=10",
            f"  kubectl set image deployment/web nginx={NEW_IMAGE}-alpine && kubectl rollout status deployment/web",
            "  kubectl rollout undo deployment/web",
            "  kubectl annotate node node-1 sim.controller-manager.io/kubelet=stopped   # a node dies",
            "  kubectl describe deployment web",
            f"logs: {self.workdir}/controller-manager.log, {self.workdir}/kube-sim.log      Ctrl-C to stop",
        ]

    async def maybe_roll(self, snap: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        """Once ``web`` is fully available on its first revision, roll it to a new image."""
        if self.rolled:
            return
        for d in snap["deployments"]:
            if d["metadata"]["name"] == "web" and _rollout_text(d) == "complete":
                self.rolled = True
                await self.kubectl("set", "image", "deployment/web", f"nginx={NEW_IMAGE}")
                await self.kubectl("annotate", "deployment/web", "--overwrite",
                                   f"kubernetes.io/change-cause=rolling update to {NEW_IMAGE}")

    async def run(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "pids").unlink(missing_ok=True)
        print("starting kube-sim ...", flush=True)
        await self.start_sim()
        print(f"kube-sim ready at {self.sim_url}; starting controller-manager ...", flush=True)
        await self.start_manager()
        print("controller-manager is serving; applying deploy/examples/ with kubectl ...", flush=True)
        print(await self.kubectl("apply", "-f", str(EXAMPLES)), flush=True)
        if not self.tty:
            # Without a terminal the live view prints only changes, so say once how to play with the cluster.
            print("\n".join(self.footer()), flush=True)
        config = await load_config(str(self.kubeconfig))
        with contextlib.ExitStack() as stack:
            if self.tty:
                self._live = stack.enter_context(Live(console=Console(), auto_refresh=False, transient=False,
                                                      vertical_overflow="crop"))
            async with ApiClient(config, qps=0, burst=0) as client:
                await self._loop(client)

    async def _loop(self, client: ApiClient) -> None:
        started = time.monotonic()
        while self.exit_after is None or time.monotonic() - started < self.exit_after:
            try:
                snap = await self.snapshot(client)
            except ApiError as exc:
                message = f"demo: reading the cluster failed: {exc}"
                if self._live is not None:
                    self._live.console.log(message)
                else:
                    print(message, flush=True)
                await asyncio.sleep(1)
                continue
            await self.maybe_roll(snap)
            self.show(snap)
            for proc in self.procs:
                if proc.returncode is not None:
                    raise SystemExit("demo: a process exited unexpectedly; see the logs in .demo/")
            await asyncio.sleep(1)


def _leader(snap: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The identity holding the manager's Lease ("" when none does)."""
    for lease in snap.get("leases", ()):
        if (lease["metadata"].get("namespace"), lease["metadata"]["name"]) == LEASE:
            return str((lease.get("spec") or {}).get("holderIdentity") or "")
    return ""


def _recent_events(snap: Mapping[str, Sequence[Mapping[str, Any]]], count: int = 10) -> list[Mapping[str, Any]]:
    events = sorted(snap["events"], key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return events[-count:]


def _pod_phases(snap: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, int]:
    phases: dict[str, int] = {}
    for pod in snap["pods"]:
        phase = "Terminating" if pod["metadata"].get("deletionTimestamp") else pod.get("status", {}).get(
            "phase", "Pending")
        phases[phase] = phases.get(phase, 0) + 1
    return phases


def _job_state(job: Mapping[str, Any]) -> str:
    st = job.get("status", {})
    return next((str(c["type"]) for c in st.get("conditions", []) if c.get("status") == "True"
                 and c.get("type") in ("Complete", "Failed")), "Running" if st.get("active") else "-")


def _bar(done: int, total: int) -> RenderableType:
    """A progress bar with its count, e.g. ``━━━━━━━━━━━━━━━━━━╸━ 3/4``."""
    if total <= 0:
        return Text("-")
    table = Table.grid(padding=(0, 1))
    table.add_row(ProgressBar(total=total, completed=min(done, total), width=20), f"{done}/{total}")
    return table


def _condition(obj: Mapping[str, Any], kind: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions", []) or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def _ns_name(obj: Mapping[str, Any]) -> str:
    m = obj["metadata"]
    return f"{m.get('namespace', '')}/{m['name']}" if m.get("namespace") not in (None, "default") else m["name"]


def _rollout_text(d: Mapping[str, Any]) -> str:
    """What `kubectl rollout status` would say, in a few words."""
    spec, st = d.get("spec", {}), d.get("status", {})
    want = spec.get("replicas", 1)
    if st.get("observedGeneration", 0) < d["metadata"].get("generation", 0):
        return "waiting for the controller"
    for cond in st.get("conditions", []) or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return "progress deadline exceeded"
    updated, total, avail = st.get("updatedReplicas", 0), st.get("replicas", 0), st.get("availableReplicas", 0)
    if updated < want:
        return f"rolling out: {updated} of {want} updated"
    if total > updated:
        return f"rolling out: {total - updated} old replicas pending termination"
    if avail < updated:
        return f"rolling out: {avail} of {updated} updated replicas available"
    return "complete"


async def amain(args: argparse.Namespace) -> int:
    demo = Demo(args.workdir, args.nodes, args.zones, args.exit_after)
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    assert main_task is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, main_task.cancel)
    try:
        await demo.run()
    except asyncio.CancelledError:
        print("\nstopping ...", flush=True)
    finally:
        await demo.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("demo stopped; nothing left running.", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workdir", default=str(ROOT / ".demo"))
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--zones", type=int, default=2)
    parser.add_argument("--exit-after", type=float, default=None, help="stop by itself after this many seconds")
    args = parser.parse_args(argv)
    args.workdir = Path(args.workdir).resolve()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return asyncio.run(amain(args))


if __name__ == "__main__":
    raise SystemExit(main())
