"""kube-sim and the controller-manager daemon as processes, and what the benchmarks read of them.

Guarantees:
- ``start_sim`` runs the ``kube-sim`` console script (its own process) and returns once it printed its ready line;
  ``start_daemon`` runs the ``controller-manager`` console script against a kubeconfig with the client-side QPS
  limit lifted and leader election off (unless ``leader_elect``), and returns once ``/readyz`` answers 200 (a
  standby answers 200 too: it runs no informers until it leads). Both log to files in the work
  directory; ``stop`` sends SIGTERM, waits, and kills only if the process hangs.
- ``cpu_seconds(pid)`` is user+system CPU from ``/proc/<pid>/stat``; ``peak_rss(pid)`` is ``VmHWM``, which
  ``reset_peak_rss(pid)`` sets back to the current RSS (``/proc/<pid>/clear_refs``), to measure one phase's peak.
- ``scrape`` reads the daemon's ``/metrics`` (HTTPS, delegated auth) with the kube-sim admin token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from controller_manager.api.meta import parse_time

_TICKS = os.sysconf("SC_CLK_TCK")


def tool(name: str) -> str:
    here = Path(sys.executable).parent / name
    if not here.exists():
        raise RuntimeError(f"{name} is not installed beside {sys.executable}; run `make install`")
    return str(here)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        text = fh.read()
    fields = text[text.rindex(")") + 2:].split()
    # After the command name: state is field 3, utime 14 and stime 15 (1-based), so 11 and 12 here.
    return (int(fields[11]) + int(fields[12])) / _TICKS


def peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def runqueue_wait_seconds(pid: int) -> float:
    """Seconds the process's threads spent runnable but waiting for a CPU (``/proc/<pid>/schedstat``, main
    thread): on a shared machine, how much of a latency was the scheduler's, not the program's."""
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[1]) / 1e9


def reset_peak_rss(pid: int) -> None:
    """Start ``VmHWM`` over from the current RSS (Linux: write 5 to clear_refs; needs to own the process)."""
    with open(f"/proc/{pid}/clear_refs", "w") as fh:
        fh.write("5")


@dataclass
class Proc:
    name: str
    process: asyncio.subprocess.Process
    log: Path
    url: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    async def stop(self, timeout: float = 20.0) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()


def event_loop_runner() -> asyncio.Runner:
    """uvloop's runner where it is installed (the daemon and kube-sim run on it), asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def print_log_tails(*processes: Proc | None, lines: int = 15) -> None:
    """The last ``lines`` of each process's log on stdout (a benchmark that failed says why)."""
    for p in processes:
        if p is not None:
            with contextlib.suppress(OSError):
                print(f"--- last lines of {p.log}:\n" + "\n".join(p.log.read_text().splitlines()[-lines:]))


async def start_sim(workdir: Path, nodes: int, *, zones: int = 1, ready_timeout: float = 120.0,
                    audit_log: Path | None = None) -> Proc:
    kubeconfig = workdir / "kubeconfig"
    log = workdir / "kube-sim.log"
    audit = ("--audit-log-path", str(audit_log)) if audit_log is not None else ()
    with log.open("wb") as log_file:  # the child keeps its own descriptor
        proc = await asyncio.create_subprocess_exec(
            tool("kube-sim"), "--nodes", str(nodes), "--zones", str(zones), "--port", "0",
            "--kubeconfig", str(kubeconfig), "--log-level", "warning", *audit,
            stdout=asyncio.subprocess.PIPE, stderr=log_file, start_new_session=True,
        )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), ready_timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"kube-sim did not become ready; see {log}") from None
    text = line.decode().strip()
    if not text.startswith("kube-sim ready:"):
        await proc.wait()
        raise RuntimeError(f"kube-sim failed: {text!r}; see {log}")
    sim = Proc("kube-sim", proc, log, url=text.split(":", 1)[1].strip())
    sim.extra["kubeconfig"] = str(kubeconfig)
    sim.extra["admin_token"] = admin_token(kubeconfig)
    return sim


# Events of the daemon's log the benchmarks time.
SYNC_WAITING = "waiting for informer caches to sync"
SYNC_DONE = "informer caches synced"
LEASE_WAITING = "waiting to acquire the lease"
LEASE_LEADING = "became leader"


def log_entries(log: Path) -> list[dict[str, Any]]:
    """The JSON lines of a daemon's log (its structured events), in order; other lines skipped."""
    out: list[dict[str, Any]] = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                out.append(entry)
    return out


def log_time(entries: list[dict[str, Any]], event: str) -> float | None:
    """When the first entry of ``event`` was logged (epoch seconds), None if it was not."""
    for entry in entries:
        if entry.get("event") == event:
            return parse_time(entry.get("timestamp"))
    return None


def admin_token(kubeconfig: Path) -> str:
    doc = json.loads(kubeconfig.read_text())
    current = doc["current-context"]
    context = next(c["context"] for c in doc["contexts"] if c["name"] == current)
    user = next(u["user"] for u in doc["users"] if u["name"] == context["user"])
    return str(user["token"])


def _insecure() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the daemon serves a self-signed certificate, as kube-controller-manager does
    return ctx


async def start_daemon(workdir: Path, kubeconfig: str, token: str, *, controllers: str = "*",
                       extra_args: tuple[str, ...] = (), log_name: str = "controller-manager.log",
                       ready_timeout: float = 60.0, leader_elect: bool = False) -> Proc:
    port = free_port()
    log = workdir / log_name
    with log.open("wb") as log_file:
        proc = await asyncio.create_subprocess_exec(
            tool("controller-manager"), f"--kubeconfig={kubeconfig}", f"--leader-elect={str(leader_elect).lower()}",
            "--kube-api-qps=100000", "--kube-api-burst=100000", f"--controllers={controllers}",
            f"--secure-port={port}", "--bind-address=127.0.0.1", *extra_args,
            stdout=log_file, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )
    daemon = Proc("controller-manager", proc, log, url=f"https://127.0.0.1:{port}")
    daemon.extra["token"] = token
    deadline = time.monotonic() + ready_timeout
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_insecure())) as http:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(f"controller-manager exited with {proc.returncode}; see {log}")
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(daemon.url + "/readyz") as resp:
                    if resp.status == 200:
                        return daemon
            await asyncio.sleep(0.1)
    await daemon.stop()
    raise RuntimeError(f"controller-manager did not become ready in {ready_timeout:.0f} s; see {log}")


async def scrape(daemon: Proc) -> dict[str, float]:
    """The daemon's metrics as ``{"name{labels}": value}`` (the Prometheus text format, parsed)."""
    headers = {"Authorization": f"Bearer {daemon.extra['token']}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_insecure())) as http, \
            http.get(daemon.url + "/metrics", headers=headers) as resp:
        if resp.status != 200:
            raise RuntimeError(f"/metrics answered {resp.status}")
        text = await resp.text()
    return parse_metrics(text)


def parse_metrics(text: str) -> dict[str, float]:
    """The Prometheus text format as ``{"name{labels}": value}``."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[name] = float(value)
    return out


def gc_pause_seconds(metrics: dict[str, float]) -> float:
    """Seconds the cyclic garbage collector held the process, every generation (``python_gc_pause_seconds``)."""
    return sum(v for k, v in metrics.items() if k.startswith("python_gc_pause_seconds_total"))


def api_seconds(metrics: dict[str, float]) -> tuple[float, float]:
    """(seconds spent in requests to the API, number of requests), summed over verbs, from client-go's histogram."""
    total = count = 0.0
    for name, value in metrics.items():
        if name.startswith("rest_client_request_duration_seconds_sum"):
            total += value
        elif name.startswith("rest_client_request_duration_seconds_count"):
            count += value
    return total, count
