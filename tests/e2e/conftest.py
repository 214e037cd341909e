"""Fixtures that run kube-sim and controller-manager as real processes, and the clients that drive them.

Guarantees:
- Every process a test starts goes through :class:`Processes`, which stops it when the test ends,
  passed or failed: SIGTERM, then SIGKILL after a grace period. On Linux each child also gets
  PR_SET_PDEATHSIG, so even a test runner killed outright leaves no kube-sim or manager behind.
- Each process writes its logs to a file in the test's tmp_path; the tail of every log is printed at
  teardown, which pytest shows only for a failing test.
- :func:`start_kube_sim` returns once kube-sim printed its one ``kube-sim ready: <url>`` line (the
  kubeconfig is written by then); :func:`start_manager` returns once the manager's HTTPS port answers.
- Clients are the ones users have: real ``kubectl`` (:class:`Kubectl`), the official ``kubernetes``
  Python client (:class:`Kube`, its blocking calls run in a thread), and aiohttp for the manager's
  HTTPS endpoints (:class:`Https`, certificate not verified: the manager's is self-signed).
- Waiting is polling against a deadline (:func:`wait_until`, polls growing from 50 ms to 0.5 s), never a fixed
  sleep.

Every test module here is marked ``e2e`` and put in an xdist group for ``--dist loadgroup``: "e2e" for the
scale-ups that keep a core busy (one at a time), "e2e-light" for the rest. (pytest 9.2 with pytest-xdist 3.8
ignores the groups, pytest-dev/pytest-xdist#1386; the tests pass either way, the groups only spread the load.)
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

T = TypeVar("T")

BIN = Path(sys.executable).parent
KUBE_SIM = str(BIN / "kube-sim")
CONTROLLER_MANAGER = str(BIN / "controller-manager")
KUBECTL = str(BIN / "kubectl")
ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"^kube-sim ready: (https://\S+)$")

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "controller-manager-py"  # the manager's default --leader-elect-resource-name

# Short leader-election timings so takeovers are measurable in seconds.
LEASE_DURATION = 3.0
RENEW_DEADLINE = 2.0
RETRY_PERIOD = 0.5
FAST_ELECTION = (
    f"--leader-elect-lease-duration={LEASE_DURATION}s",
    f"--leader-elect-renew-deadline={RENEW_DEADLINE}s",
    f"--leader-elect-retry-period={RETRY_PERIOD}s",
)

STOP_GRACE = 15.0  # seconds a process gets between SIGTERM and SIGKILL at teardown
START_TIMEOUT = 30.0
LOG_TAIL = 60


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Polls start often and slow down: most checks spawn kubectl (~0.1 CPU-second each), so a wait of tens of
# seconds at a fixed 50 ms would keep a core busy with kubectl alone.
FIRST_POLL = 0.05
POLL_GROWTH = 1.5
MAX_POLL = 0.5


async def wait_until(check: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0,
                     interval: float | None = None, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy, which is returned; fail after ``timeout`` seconds.
    ``interval`` fixes the pause between polls (for tests that time what they wait for); by default it grows
    from 50 ms to 0.5 s."""
    deadline = time.monotonic() + timeout
    pause = FIRST_POLL if interval is None else interval
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(pause)
        if interval is None:
            pause = min(pause * POLL_GROWTH, MAX_POLL)


async def wait_for_default_service_account(kubectl: Kubectl, timeout: float = 30.0) -> None:
    """Until the namespace's "default" ServiceAccount exists: kube-sim (as kube-apiserver, its ServiceAccount
    admission on) refuses pods without it, and the serviceaccount controller makes it."""

    async def default_account() -> bool:
        return (await kubectl("get", "serviceaccount", "default"))[0] == 0

    await wait_until(default_account, timeout=timeout, what='the "default" ServiceAccount')


# Resolved once, here: the child runs _die_with_parent between fork and exec, where loading a library could
# deadlock on a lock another thread of this process held at fork time.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # If the test runner dies (killed, crashed), the kernel sends SIGKILL to this child.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def is_active(pod: dict[str, Any]) -> bool:
    """Counts as a replica: not being deleted, not terminal (upstream's IsPodActive)."""
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed")


# --- processes ----------------------------------------------------------------------------------------


@dataclass
class Process:
    """One started program; its stderr (and stdout unless piped) goes to ``log``."""

    name: str
    proc: asyncio.subprocess.Process
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def send(self, sig: signal.Signals) -> None:
        if self.proc.returncode is None:
            self.proc.send_signal(sig)

    async def wait(self, timeout: float) -> int:
        return await asyncio.wait_for(self.proc.wait(), timeout)

    async def stop(self, timeout: float = STOP_GRACE) -> int:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the exit code."""
        self.send(signal.SIGTERM)
        try:
            return await self.wait(timeout)
        except TimeoutError:
            self.send(signal.SIGKILL)
            return await self.wait(timeout)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (other lines are skipped)."""
        out = []
        for line in self.text().splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    out.append(record)
        return out


class Processes:
    """Owner of every process a test starts; :meth:`close` leaves none running."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Process] = []

    async def spawn(self, name: str, *argv: str, stdout: int | None = None) -> Process:
        log = self.directory / f"{name}.log"
        n = 1
        while log.exists():  # a restarted process keeps its predecessor's log
            n += 1
            log = self.directory / f"{name}-{n}.log"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["PYTHONUNBUFFERED"] = "1"
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=sink if stdout is None else stdout, stderr=sink,
                cwd=self.directory, env=env,
                preexec_fn=_die_with_parent)
        process = Process(name, proc, log)
        self.started.append(process)
        return process

    async def close(self) -> None:
        """Stop what still runs, newest first: managers leave before the kube-sim they talk to."""
        for p in reversed(self.started):
            if p.returncode is None:
                with contextlib.suppress(TimeoutError, ProcessLookupError):
                    await p.stop()
            if p.returncode is None:  # belt and braces: never leave one behind
                p.send(signal.SIGKILL)
                await p.wait(STOP_GRACE)

    def print_tails(self) -> None:
        for p in self.started:
            lines = p.text().splitlines()
            print(f"----- {p.log.name} (pid {p.pid}, exit {p.returncode}), last {LOG_TAIL} lines -----")
            print("\n".join(lines[-LOG_TAIL:]))


@pytest.fixture
async def processes(tmp_path: Path) -> AsyncIterator[Processes]:
    owner = Processes(tmp_path)
    try:
        yield owner
    finally:
        await owner.close()
        owner.print_tails()


# --- kube-sim -----------------------------------------------------------------------------------------


@dataclass
class KubeSim:
    process: Process
    url: str
    kubeconfig: Path
    config: dict[str, Any] = field(repr=False)

    def token(self, user: str) -> str:
        """The bearer token of a kubeconfig user ("admin" or "viewer", as kube-sim names them)."""
        for entry in self.config["users"]:
            if entry["name"].endswith(f"-{user}"):
                return str(entry["user"]["token"])
        raise LookupError(user)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context trusting the CA kube-sim made at start-up (its kubeconfig carries it)."""
        ca = base64.b64decode(self.config["clusters"][0]["cluster"]["certificate-authority-data"])
        return ssl.create_default_context(cadata=ca.decode())


async def start_kube_sim(processes: Processes, *, nodes: int = 3, faults: str = "",
                         extra: Iterable[str] = ()) -> KubeSim:
    kubeconfig = processes.directory / "kubeconfig"
    argv = [KUBE_SIM, "--nodes", str(nodes), "--port", "0", "--kubeconfig", str(kubeconfig), *extra]
    if faults:
        argv += ["--faults", faults]
    process = await processes.spawn("kube-sim", *argv, stdout=asyncio.subprocess.PIPE)
    assert process.proc.stdout is not None
    try:
        line = (await asyncio.wait_for(process.proc.stdout.readline(), START_TIMEOUT)).decode()
    except TimeoutError:
        raise AssertionError("kube-sim printed no ready line") from None
    match = READY.match(line.rstrip("\n"))
    assert match, f"kube-sim's first line is not the ready line: {line!r}"
    config = yaml.safe_load(kubeconfig.read_text())
    return KubeSim(process, match.group(1), kubeconfig, config)


@pytest.fixture
async def sim(processes: Processes) -> KubeSim:
    return await start_kube_sim(processes)


def write_token_file(path: Path, users: Iterable[str]) -> dict[str, str]:
    """A ``--token-auth-file`` giving each user (in ``system:masters``) a fresh token; user -> token."""
    tokens = {user: base64.b32encode(os.urandom(15)).decode().lower() for user in users}
    path.write_text("".join(f'{token},{user},uid-{user},"system:masters"\n' for user, token in tokens.items()))
    return tokens


def user_kubeconfig(sim: KubeSim, user: str, token: str) -> Path:
    """A copy of kube-sim's kubeconfig whose current context authenticates as ``user`` with ``token``."""
    config = json.loads(json.dumps(sim.config))
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    context["context"]["user"] = user
    config["users"].append({"name": user, "user": {"token": token}})
    path = sim.kubeconfig.with_name(f"kubeconfig-{user}")
    path.write_text(yaml.safe_dump(config))
    return path


WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class Audited:
    """One line of kube-sim's audit log (``--audit-log-path``), with what the tests look at."""

    user: str
    verb: str
    resource: str  # "pods", "leases", "events" (either API group), "replicasets/status", ...
    name: str
    code: int
    received: str  # RFC 3339 with microseconds: compares as text
    completed: str
    event: dict[str, Any] = field(repr=False, compare=False)

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS


def read_audit_log(path: Path) -> list[Audited]:
    """Every complete line of the audit log so far, in completion order."""
    out = []
    text = path.read_text() if path.exists() else ""
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            e = json.loads(line)
            ref = e.get("objectRef") or {}
            resource = ref.get("resource", "")
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            out.append(Audited(e["user"]["username"], e["verb"], resource, ref.get("name", ""),
                               e["responseStatus"]["code"], e["requestReceivedTimestamp"], e["stageTimestamp"], e))
    return out


# --- controller-manager -------------------------------------------------------------------------------


@dataclass
class Manager:
    process: Process
    port: int

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def identity(self) -> str:
        """Its leader-election identity, as it logged it."""

        async def logged() -> str | None:
            for record in self.process.records():
                if record.get("event") == "waiting to acquire the lease":
                    return str(record["identity"])
            return None

        return await wait_until(logged, timeout=START_TIMEOUT, what=f"{self.process.name} to log its identity")


async def start_manager(processes: Processes, sim: KubeSim, *flags: str, name: str = "manager",
                        election: Iterable[str] = FAST_ELECTION, https: Https | None = None,
                        kubeconfig: Path | None = None) -> Manager:
    """Start ``controller-manager`` against ``sim`` (as the admin, or as ``kubeconfig``'s user); with ``https``,
    return once it serves /healthz."""
    port = free_port()
    process = await processes.spawn(
        name, CONTROLLER_MANAGER, f"--kubeconfig={kubeconfig or sim.kubeconfig}", f"--secure-port={port}",
        "--bind-address=127.0.0.1", *election, *flags)
    manager = Manager(process, port)
    if https is not None:
        await https.wait_serving(manager)
    return manager


# --- clients ------------------------------------------------------------------------------------------


class Https:
    """GETs against a manager's secure port, as curl -k does."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def get(self, manager: Manager, path: str, token: str | None = None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.session.get(manager.url + path, headers=headers) as resp:
            return resp.status, await resp.text()

    async def try_get(self, manager: Manager, path: str, token: str | None = None) -> tuple[int, str] | None:
        """As :meth:`get`, None while nothing listens (starting, or gone)."""
        try:
            return await self.get(manager, path, token)
        except (aiohttp.ClientConnectionError, TimeoutError):
            return None

    async def wait_serving(self, manager: Manager, timeout: float = START_TIMEOUT) -> None:
        async def serving() -> bool:
            if manager.process.returncode is not None:
                raise AssertionError(f"{manager.process.name} exited with {manager.process.returncode}")
            return await self.try_get(manager, "/healthz") == (200, "ok")

        await wait_until(serving, timeout=timeout, what=f"{manager.process.name} to serve /healthz")

    async def role(self, manager: Manager) -> str | None:
        """``leader`` or ``standby`` as /readyz says it; None when /readyz does not answer 200."""
        answer = await self.try_get(manager, "/readyz")
        if answer is None or answer[0] != 200:
            return None
        return answer[1].removeprefix("ok: ")

    async def wait_role(self, manager: Manager, role: str, timeout: float = START_TIMEOUT) -> None:
        async def reached() -> bool:
            return await self.role(manager) == role

        await wait_until(reached, timeout=timeout, what=f"{manager.process.name}'s /readyz to say {role}")


@pytest.fixture
async def https() -> AsyncIterator[Https]:
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False), timeout=timeout) as session:
        yield Https(session)


class Kube:
    """The official ``kubernetes`` client on kube-sim's kubeconfig; blocking calls run in a worker thread."""

    def __init__(self, kubeconfig: Path) -> None:
        self.api_client = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        self.core = k8s.CoreV1Api(self.api_client)
        self.apps = k8s.AppsV1Api(self.api_client)
        self.coordination = k8s.CoordinationV1Api(self.api_client)

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def retrying(self, fn: Callable[..., T], *args: Any, attempts: int = 20, **kwargs: Any) -> T:
        """As a call, retried on 429/5xx (for clusters injecting faults)."""
        for attempt in range(attempts):
            try:
                return await self(fn, *args, **kwargs)
            except k8s.ApiException as exc:
                if exc.status not in (429, 500, 503, 504) or attempt == attempts - 1:
                    raise
            await asyncio.sleep(0.05)
        raise AssertionError("unreachable")

    async def lease_holder(self) -> str:
        lease = await self.retrying(self.coordination.read_namespaced_lease, LEASE_NAME, LEASE_NAMESPACE)
        return str(lease.spec.holder_identity or "")

    async def active_pods(self, selector: str, namespace: str = "default") -> list[dict[str, Any]]:
        """Pods matching ``selector`` that count as replicas (not terminal, not being deleted), as JSON:
        the client's model objects cost more CPU than a test sampling often should spend."""
        resp = await self.retrying(self.core.list_namespaced_pod, namespace, label_selector=selector,
                                   _preload_content=False)
        return [p for p in json.loads(resp.data)["items"] if is_active(p)]

    def close(self) -> None:
        self.api_client.close()


@contextlib.asynccontextmanager
async def official_client(sim: KubeSim) -> AsyncIterator[Kube]:
    api = Kube(sim.kubeconfig)
    try:
        yield api
    finally:
        await asyncio.to_thread(api.close)


@pytest.fixture
async def kube(sim: KubeSim) -> AsyncIterator[Kube]:
    async with official_client(sim) as api:
        yield api


class Kubectl:
    """The real kubectl, on kube-sim's kubeconfig, with its own HOME and cache."""

    def __init__(self, sim: KubeSim, home: Path) -> None:
        self.kubeconfig = str(sim.kubeconfig)
        self.home = home

    async def __call__(self, *args: str, timeout: float = 90.0) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            KUBECTL, "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.home / "cache"), *args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            cwd=ROOT, env={**os.environ, "HOME": str(self.home)},
            preexec_fn=_die_with_parent)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"kubectl {' '.join(args)} did not finish within {timeout}s") from None
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    async def ok(self, *args: str, timeout: float = 90.0) -> str:
        code, out = await self(*args, timeout=timeout)
        assert code == 0, f"kubectl {' '.join(args)} exited {code}: {out}"
        return out


@pytest.fixture
def kubectl(sim: KubeSim, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(sim, home)


class ApiWatch:
    """Every event of one resource matching a selector, from a raw watch as curl would stream it, so a
    figure over the live objects (``measure``) is known after each event: its peak is exact, no sampling
    gap. ``seen`` holds the uid of every object that ever existed.

    ``async with ApiWatch(...) as w:`` lists, then watches from the list's resourceVersion; a stream that
    ends or fails (injected faults) is reopened from the last resourceVersion, a 410 re-lists.
    """

    def __init__(self, sim: KubeSim, path: str, selector: str,
                 measure: Callable[[Iterable[dict[str, Any]]], int]) -> None:
        self._url = f"{sim.url}{path}"
        self._ssl = sim.ssl_context()
        self._selector = selector
        self._measure = measure
        self._headers = {"Authorization": f"Bearer {sim.token('admin')}"}
        self.objects: dict[str, dict[str, Any]] = {}
        self.seen: set[str] = set()
        self.peak = 0
        self.peak_state: dict[str, Any] = {}  # what made the peak, for failure messages
        self.events = 0
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._listed = asyncio.Event()

    @property
    def value(self) -> int:
        return self._measure(self.objects.values())

    async def __aenter__(self) -> ApiWatch:
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl),
                                              timeout=aiohttp.ClientTimeout(total=None, sock_read=60))
        self._task = asyncio.create_task(self._run(), name=f"e2e-watch:{self._url}?{self._selector}")
        listed = asyncio.create_task(self._listed.wait(), name="e2e-watch:listed")
        await asyncio.wait({self._task, listed}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        if not listed.done():
            listed.cancel()
            await self.__aexit__(None, None, None)
            raise AssertionError(f"the watch of {self._url} never listed")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._session is not None:
            await self._session.close()

    def _observe(self, obj: dict[str, Any], deleted: bool = False) -> None:
        uid = obj["metadata"]["uid"]
        self.seen.add(uid)
        if deleted:
            self.objects.pop(uid, None)
        else:
            self.objects[uid] = obj
        value = self.value
        if value > self.peak:
            self.peak = value
            self.peak_state = {o["metadata"]["name"]: self._measure([o]) for o in self.objects.values()}

    async def _list(self) -> str:
        assert self._session is not None
        while True:
            async with self._session.get(self._url, params={"labelSelector": self._selector},
                                         headers=self._headers) as resp:
                if resp.status == 200:
                    body = await resp.json()
                    self.objects.clear()
                    for obj in body["items"]:
                        self._observe(obj)
                    self._listed.set()
                    return str(body["metadata"]["resourceVersion"])
            await asyncio.sleep(0.05)  # an injected 429/5xx: try again

    async def _run(self) -> None:
        assert self._session is not None
        rv = await self._list()
        while True:
            params = {"labelSelector": self._selector, "watch": "1", "resourceVersion": rv,
                      "allowWatchBookmarks": "true"}
            try:
                async with self._session.get(self._url, params=params, headers=self._headers) as resp:
                    if resp.status != 200:
                        await asyncio.sleep(0.05)
                        continue
                    async for line in resp.content:
                        event = json.loads(line)
                        kind, obj = event["type"], event["object"]
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                rv = await self._list()
                            break
                        rv = obj["metadata"]["resourceVersion"]
                        if kind != "BOOKMARK":
                            self.events += 1
                            self._observe(obj, deleted=kind == "DELETED")
            except aiohttp.ClientError:
                await asyncio.sleep(0.05)


def watch_pods(sim: KubeSim, selector: str, namespace: str = "default") -> ApiWatch:
    """Its value: how many matching pods are active (count as replicas)."""
    return ApiWatch(sim, f"/api/v1/namespaces/{namespace}/pods", selector,
                    lambda pods: sum(1 for p in pods if is_active(p)))


def watch_replica_sets(sim: KubeSim, selector: str, namespace: str = "default") -> ApiWatch:
    """Its value: the sum of the matching ReplicaSets' ``spec.replicas`` (the pods asked for)."""
    return ApiWatch(sim, f"/apis/apps/v1/namespaces/{namespace}/replicasets", selector,
                    lambda sets: sum(int(rs["spec"].get("replicas", 1)) for rs in sets))
