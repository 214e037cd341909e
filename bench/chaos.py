"""The chaos soak: kube-sim with API faults, several controller-manager replicas with short leases, a seeded
churning workload and seeded chaos (SIGKILL, SIGTERM, SIGSTOP past the lease, watch-cache restarts), with the
daemon's guarantees checked continuously from outside.

``python -m bench.chaos --minutes 60`` (``make chaos``, ``CHAOS_MINUTES=`` to choose) runs the long profile;
``tests/bench/test_chaos.py`` runs a seeded 2-minute one. Everything is judged from outside: through the API
(watches of pods, jobs, ReplicaSets and Deployments) and from kube-sim's audit log (``--audit-log-path``), where
each replica authenticates as its own user (``--token-auth-file``).

Invariants (each violation is recorded with the objects' JSON):
- ``surge``: the controller never raises a Deployment's ReplicaSets to ask for more than replicas + maxSurge pods
  (checked when a ReplicaSet appears or its replicas grow, the controller's acts; replicas taken as the largest
  the Deployment had over the last :data:`SCALE_GRACE` seconds, a cache a step behind included. A Deployment
  scaled down leaves its ReplicaSets above the new bound until a leader syncs it: no act, no violation).
- ``job-succeeded``: a Job's ``succeeded`` never goes down nor exceeds ``completions``; for an Indexed Job it is
  the number of completed indexes (no index counted twice).
- ``job-finalizer``: no pod keeps ``batch.kubernetes.io/job-tracking`` once its Job has finished (checked once
  the pod watch has caught up with the Job's finishing resourceVersion).
- ``ordered-ready``: an OrderedReady StatefulSet never creates ordinal k+1 unless ordinal k is Ready (judged
  against the pod watch's state at the creation's resourceVersion).
- ``two-controllers``: no pod has two controller ownerReferences.
- ``holder-writes``: every write a replica sends (any resource but the Lease itself) is received while the
  last successful Lease write was its own: a replica that lost the Lease writes nothing, however it lost it.
  With ``--sharding`` (every replica runs the workload controllers on its own shard) a write is also allowed
  while the last successful write of one of the replica's shard Leases was its own (not yet taken over by the
  sharder): a member fenced by the sharder writes nothing more.
With ``--calm-minutes`` (``CHAOS_CALM_MINUTES=``) the churn, API faults and watch-cache restarts go on after the
chaos for that long with no replica touched, and the RSS trend of every replica process that lived through it is
reported (a leak shows as a slope; under the chaos no process lives long enough to show one).
After the chaos and the churn stop: every Deployment, StatefulSet, DaemonSet and Job converges (status equal
to spec, observedGeneration current, Jobs finished) within ``converge_timeout``; RSS of each replica is sampled
throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import contextlib
import ctypes
import itertools
import json
import math
import os
import random
import signal
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.procs import free_port, rss, tool

LEASE_NAMESPACE = "kube-system"
LEASE_NAME = "controller-manager-py"
SIM = "sim.controller-manager.io/"
JOB_TRACKING = "batch.kubernetes.io/job-tracking"
RSS_WARMUP = 20.0  # seconds after a replica starts before its RSS is sampled (caches filling)
# A calm stretch's RSS rise below this is no trend, whatever the scatter: an idle standby's RSS moves by a few
# pages (+0.15 MiB over 50 minutes with a 0.05 MiB band), which is no leak.
FLAT_FLOOR_MIB = 1.0
SCALE_GRACE = 30.0  # seconds a Deployment's earlier replica count still bounds its ReplicaSets
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# Realistic API trouble: a few 5xx and 429s, watches that cannot start or are too old, a lagging watch cache.
# The kinds whose informers hold most of a leader's cache in this workload.
CACHED_KINDS = ("/api/v1/pods", "/apis/apps/v1/replicasets", "/apis/apps/v1/deployments", "/apis/apps/v1/statefulsets",
                "/apis/apps/v1/daemonsets", "/apis/apps/v1/controllerrevisions", "/apis/batch/v1/jobs",
                "/apis/batch/v1/cronjobs", "/apis/discovery.k8s.io/v1/endpointslices", "/api/v1/endpoints",
                "/api/v1/services", "/apis/policy/v1/poddisruptionbudgets", "/api/v1/namespaces",
                "/api/v1/serviceaccounts", "/api/v1/configmaps", "/api/v1/secrets")

DEFAULT_FAULTS = ",".join((
    "error:code=500:p=0.01",
    "error:code=429:p=0.01:retry-after=1",
    "error:code=500:every=25:verb=watch",
    "error:code=410:every=20:verb=watch",
    "slow-watch:seconds=0.05",
    "latency:seconds=0.002",
))

Obj = dict[str, Any]


@dataclass
class Profile:
    seed: int = 1
    minutes: float = 60.0
    replicas: int = 3
    nodes: int = 4
    zones: int = 2
    # Short (upstream's defaults are 15 s / 10 s / 2 s), yet renewals survive a busy shared 2-core machine.
    lease_duration: float = 5.0
    renew_deadline: float = 4.0
    retry_period: float = 1.0
    faults: str = DEFAULT_FAULTS
    churn_interval: float = 1.0  # mean seconds between workload changes
    chaos_interval: float = 20.0  # mean seconds between chaos actions
    namespaces: int = 2  # workload namespaces alive at a time
    converge_timeout: float = 240.0
    rss_interval: float = 10.0
    # After the chaos: minutes of the same churn, API faults and watch-cache restarts with no replica killed,
    # stopped or terminated, so that one leader (and its standbys) live long enough to show an RSS trend.
    calm_minutes: float = 0.0
    sharding: bool = False  # replicas run with --sharding=true


@dataclass
class Violation:
    invariant: str
    message: str
    at: float
    objects: list[Obj] = field(default_factory=list)


@dataclass
class Report:
    seed: int
    minutes: float
    replicas: int
    kills: int = 0
    terms: int = 0
    pauses: int = 0
    watch_restarts: int = 0
    faults_injected: int = 0
    objects_churned: int = 0
    writes_by_replicas: int = 0
    self_exits: list[str] = field(default_factory=list)  # replica exits the chaos did not cause (restarted)
    violations: list[Violation] = field(default_factory=list)
    converged: bool = False
    converge_seconds: float | None = None
    unconverged: list[str] = field(default_factory=list)
    rss_start_mib: dict[str, float] = field(default_factory=dict)
    rss_end_mib: dict[str, float] = field(default_factory=dict)
    rss_samples: dict[str, list[float]] = field(default_factory=dict)
    longest_leaderless_seconds: float = 0.0
    leader_changes: int = 0
    calm_minutes: float = 0.0
    # Replica processes that lived through the whole calm stretch: first and last RSS sample in it (MiB) and the
    # least-squares slope over its samples (MiB per minute).
    rss_calm: dict[str, dict[str, float]] = field(default_factory=dict)
    # Objects of the kinds the leader caches (CACHED_KINDS) at the calm stretch's start and end.
    calm_cluster_objects: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        by_kind: dict[str, int] = {}
        for v in self.violations:
            by_kind[v.invariant] = by_kind.get(v.invariant, 0) + 1
        rss = ", ".join(f"{k} {self.rss_start_mib.get(k, 0):.0f}->{self.rss_end_mib.get(k, 0):.0f} MiB"
                        for k in sorted(self.rss_end_mib))
        return (f"chaos seed={self.seed}: {self.minutes:g} min, {self.replicas} replicas; "
                f"{self.kills} SIGKILL, {self.terms} SIGTERM, {self.pauses} SIGSTOP/SIGCONT, "
                f"{self.watch_restarts} watch-cache restarts, {self.faults_injected} faults injected, "
                f"{self.objects_churned} workload changes, {self.writes_by_replicas} writes by replicas, "
                f"{self.leader_changes} leader changes, {len(self.self_exits)} exits not caused by the chaos; "
                f"violations: {len(self.violations)} {by_kind or ''}; "
                f"converged: {self.converged} in {self.converge_seconds} s; "
                f"longest without a leader: {self.longest_leaderless_seconds:.1f} s; RSS {rss}"
                + "".join(f"; calm {self.calm_minutes:g} min, {k} RSS {v['first']:.0f}->{v['last']:.0f} MiB "
                          f"({v['slope_mib_per_min']:+.2f} MiB/min; second half "
                          f"{v.get('second_half_slope_mib_per_min', 0.0):+.2f})" + _verdict(v)
                          for k, v in sorted(self.rss_calm.items()))
                + ("; cluster objects over the calm stretch "
                   + "->".join(str(self.calm_cluster_objects[k]) for k in ("first", "half", "last")
                               if k in self.calm_cluster_objects) if self.calm_cluster_objects else ""))


# --- processes ------------------------------------------------------------------------------------------

_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with_parent() -> None:
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


@dataclass
class Replica:
    name: str  # its user in the audit log
    kubeconfig: Path
    log_dir: Path
    proc: asyncio.subprocess.Process | None = None
    identity: str = ""
    starts: int = 0
    started_at: float = 0.0
    log: Path | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


async def _spawn(argv: list[str], log: Path, stdout: int | None = None) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["PYTHONUNBUFFERED"] = "1"
    with log.open("ab") as sink:
        return await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=sink if stdout is None else stdout, stderr=sink,
            env=env, preexec_fn=_die_with_parent)


# --- the API, as the harness uses it ---------------------------------------------------------------------


class Api:
    """JSON over HTTPS as the kube-sim admin; retried through injected faults."""

    def __init__(self, url: str, token: str, ca: str) -> None:
        self.url = url
        self._headers = {"Authorization": f"Bearer {token}"}
        self._ssl = ssl.create_default_context(cadata=ca)
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl, limit=20),
                                             headers=self._headers,
                                             timeout=aiohttp.ClientTimeout(total=None, sock_read=90))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session is not None:
            await self.session.close()

    async def request(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
                      params: dict[str, str] | None = None, attempts: int = 30) -> tuple[int, Any]:
        assert self.session is not None
        data = json.dumps(body) if body is not None else None
        for attempt in range(attempts):
            try:
                async with self.session.request(method, self.url + path, data=data, params=params,
                                                headers={"Content-Type": content_type}) as resp:
                    payload = await resp.json(content_type=None) if resp.content_length != 0 else None
                    if resp.status in (429, 500, 503, 504) and attempt < attempts - 1:
                        await asyncio.sleep(0.05 * (attempt + 1))
                        continue
                    return resp.status, payload
            except (aiohttp.ClientError, TimeoutError):
                if attempt == attempts - 1:
                    raise
                await asyncio.sleep(0.1 * (attempt + 1))
        raise AssertionError("unreachable")

    async def get(self, path: str) -> Obj | None:
        code, body = await self.request("GET", path)
        return body if code == 200 else None

    async def items(self, path: str) -> list[Obj]:
        code, body = await self.request("GET", path)
        return list(body.get("items") or []) if code == 200 and isinstance(body, dict) else []

    async def create(self, path: str, obj: Obj) -> int:
        return (await self.request("POST", path, obj))[0]

    async def patch(self, path: str, patch: Obj) -> int:
        return (await self.request("PATCH", path, patch, content_type="application/merge-patch+json"))[0]

    async def delete(self, path: str) -> int:
        return (await self.request("DELETE", path))[0]


class Watch:
    """List then watch ``path`` (all namespaces), calling ``on_event(type, obj)`` per event in order; reopens
    from the last resourceVersion, re-lists on 410. ``rv`` is the last resourceVersion applied."""

    def __init__(self, api: Api, path: str, on_event: Callable[[str, Obj], None]) -> None:
        self.api = api
        self.path = path
        self.on_event = on_event
        self.objects: dict[str, Obj] = {}  # by uid
        self.rv = 0
        self.listed = asyncio.Event()

    async def _list(self) -> str:
        while True:
            code, body = await self.api.request("GET", self.path)
            if code == 200 and isinstance(body, dict):
                fresh = {o["metadata"]["uid"]: o for o in body.get("items") or []}
                for uid, old in list(self.objects.items()):
                    if uid not in fresh:
                        self.objects.pop(uid)
                        self.on_event("DELETED", old)
                for obj in fresh.values():
                    self.objects[obj["metadata"]["uid"]] = obj
                    self.on_event("SYNC", obj)
                rv = str(body["metadata"]["resourceVersion"])
                self.rv = int(rv)
                self.listed.set()
                return rv
            await asyncio.sleep(0.2)

    async def run(self) -> None:
        assert self.api.session is not None
        rv = await self._list()
        while True:
            params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
            try:
                async with self.api.session.get(self.api.url + self.path, params=params) as resp:
                    if resp.status != 200:
                        await asyncio.sleep(0.1)
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
                            uid = obj["metadata"]["uid"]
                            if kind == "DELETED":
                                self.objects.pop(uid, None)
                            else:
                                self.objects[uid] = obj
                            self.on_event(kind, obj)
                        self.rv = int(rv)
            except (aiohttp.ClientError, TimeoutError, ValueError):
                await asyncio.sleep(0.1)


# --- invariants ----------------------------------------------------------------------------------------


def _controllers(obj: Obj) -> list[Obj]:
    return [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")]


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _finished(job: Obj) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _count_indexes(ranges: str) -> int:
    total = 0
    for part in filter(None, ranges.split(",")):
        lo, _, hi = part.partition("-")
        total += (int(hi) - int(lo) + 1) if hi else 1
    return total


def _surge(deployment: Obj, replicas: int) -> int:
    strategy = deployment["spec"].get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    value = (strategy.get("rollingUpdate") or {}).get("maxSurge", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(replicas * int(value[:-1]) / 100)
    return int(value)


class Checker:
    """The invariants, fed by watches and the audit log; violations are appended to ``report``."""

    def __init__(self, report: Report, replica_users: set[str], t0: float) -> None:
        self.report = report
        self.users = replica_users
        self.t0 = t0
        self.pods: Watch | None = None
        self.jobs_succeeded: dict[str, int] = {}
        self.pending_finalizer_checks: list[tuple[int, Obj]] = []
        self.deployment_history: dict[str, list[tuple[float, int]]] = {}  # uid -> (time, replicas)
        self.replica_sets: dict[str, Obj] = {}
        self.deployments: dict[str, Obj] = {}
        self.lease_writes: list[tuple[str, str]] = []  # (stageTimestamp, user) of successful Lease writes
        # --sharding: successful writes of each shard Lease (by its member, or by the sharder fencing it), and
        # the shard Leases each replica user wrote first (its own).
        self.shard_writes: dict[str, list[tuple[str, str]]] = {}
        self.shards_of: dict[str, set[str]] = {}
        self._audit_offset = 0
        self.ordered_sets: set[tuple[str, str]] = set()  # (namespace, name) of OrderedReady StatefulSets

    def violation(self, invariant: str, message: str, *objects: Obj) -> None:
        self.report.violations.append(Violation(invariant, message, round(time.monotonic() - self.t0, 2),
                                                list(objects)))
        print(f"VIOLATION {invariant}: {message}", flush=True)

    # pods
    def on_pod(self, kind: str, pod: Obj) -> None:
        if len(_controllers(pod)) > 1:
            self.violation("two-controllers", f"pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']}", pod)
        if kind != "ADDED":
            return
        refs = _controllers(pod)
        if not refs or refs[0].get("kind") != "StatefulSet":
            return
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        owner = refs[0]["name"]
        if (ns, owner) not in self.ordered_sets:
            return
        ordinal = name.rsplit("-", 1)[-1]
        if not ordinal.isdigit() or int(ordinal) == 0:
            return
        assert self.pods is not None
        before = f"{owner}-{int(ordinal) - 1}"
        prev = next((p for p in self.pods.objects.values()
                     if p["metadata"]["namespace"] == ns and p["metadata"]["name"] == before), None)
        if prev is None or prev["metadata"].get("deletionTimestamp") or not _ready(prev):
            self.violation("ordered-ready", f"{ns}/{name} created while {before} was "
                           f"{'missing' if prev is None else 'not Ready'}", pod, *([prev] if prev else []))

    # jobs
    def on_job(self, kind: str, job: Obj) -> None:
        if kind == "DELETED":
            return
        uid = job["metadata"]["uid"]
        status = job.get("status") or {}
        succeeded = int(status.get("succeeded") or 0)
        completions = job["spec"].get("completions")
        previous = self.jobs_succeeded.get(uid, 0)
        label = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        if succeeded < previous:
            self.violation("job-succeeded", f"{label}: succeeded went down {previous} -> {succeeded}", job)
        if completions is not None and succeeded > int(completions):
            self.violation("job-succeeded", f"{label}: succeeded {succeeded} > completions {completions}", job)
        if job["spec"].get("completionMode") == "Indexed" and "completedIndexes" in status:
            indexes = _count_indexes(status.get("completedIndexes") or "")
            if indexes != succeeded:
                self.violation("job-succeeded", f"{label}: succeeded {succeeded} but {indexes} completed indexes",
                               job)
        self.jobs_succeeded[uid] = max(previous, succeeded)
        if _finished(job):
            self.pending_finalizer_checks.append((int(job["metadata"]["resourceVersion"]), job))

    def check_finalizers(self) -> None:
        assert self.pods is not None
        ready = [c for c in self.pending_finalizer_checks if c[0] <= self.pods.rv]
        self.pending_finalizer_checks = [c for c in self.pending_finalizer_checks if c[0] > self.pods.rv]
        for _, job in ready:
            uid = job["metadata"]["uid"]
            for pod in self.pods.objects.values():
                if JOB_TRACKING in (pod["metadata"].get("finalizers") or []) and \
                        any(r.get("uid") == uid for r in _controllers(pod)):
                    self.violation("job-finalizer", f"pod {pod['metadata']['name']} keeps {JOB_TRACKING} after "
                                   f"Job {job['metadata']['name']} finished", job, pod)

    # deployments
    def on_deployment(self, kind: str, d: Obj) -> None:
        uid = d["metadata"]["uid"]
        if kind == "DELETED":
            self.deployments.pop(uid, None)
            return
        self.deployments[uid] = d
        history = self.deployment_history.setdefault(uid, [])
        replicas = int(d["spec"].get("replicas", 1))
        if not history or history[-1][1] != replicas:
            history.append((time.monotonic(), replicas))

    def on_replica_set(self, kind: str, rs: Obj) -> None:
        uid = rs["metadata"]["uid"]
        if kind == "DELETED":
            self.replica_sets.pop(uid, None)
            return
        before = self.replica_sets.get(uid)
        self.replica_sets[uid] = rs
        grew = before is None or int(rs["spec"].get("replicas", 1)) > int(before["spec"].get("replicas", 1))
        if not grew:
            return
        for ref in _controllers(rs):
            if ref.get("kind") == "Deployment":
                self._check_surge(ref["uid"])

    def _check_surge(self, uid: str) -> None:
        d = self.deployments.get(uid)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        now = time.monotonic()
        history = self.deployment_history.get(uid) or [(now, int(d["spec"].get("replicas", 1)))]
        recent = [r for t, r in history if now - t <= SCALE_GRACE]
        # The count in force before the last change within the grace period still counts too.
        earlier = [r for t, r in history if now - t > SCALE_GRACE]
        replicas = max(recent + earlier[-1:])
        sets = [rs for rs in self.replica_sets.values()
                if any(r.get("uid") == uid for r in _controllers(rs)) and not rs["metadata"].get("deletionTimestamp")]
        total = sum(int(rs["spec"].get("replicas", 1)) for rs in sets)
        bound = replicas + _surge(d, replicas)
        if total > bound:
            self.violation("surge", f"deployment {d['metadata']['namespace']}/{d['metadata']['name']}: its "
                           f"ReplicaSets ask for {total} pods > {bound} (replicas {replicas} + maxSurge)", d, *sets)

    # the audit log
    def scan_audit(self, path: Path) -> None:
        if not path.exists():
            return
        with path.open("rb") as fh:
            fh.seek(self._audit_offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1
        self._audit_offset += end
        for line in data[:end].splitlines():
            self._audit_line(json.loads(line))

    def _audit_line(self, e: Obj) -> None:
        user = e["user"]["username"]
        if user not in self.users or e["verb"] not in WRITE_VERBS:
            return
        ref = e.get("objectRef") or {}
        code = e["responseStatus"]["code"]
        # A create names no object in the audit log: a shard Lease's is told by its client ("/sharding").
        shard_create = ref.get("name") is None and str(e.get("userAgent") or "").endswith("/sharding")
        if ref.get("resource") == "leases" and ref.get("namespace") == LEASE_NAMESPACE \
                and ref.get("name") in (LEASE_NAME, None) and not shard_create:
            if 200 <= code < 300:
                if self.lease_writes and self.lease_writes[-1][1] != user:
                    self.report.leader_changes += 1
                bisect.insort(self.lease_writes, (e["stageTimestamp"], user))
            return
        if ref.get("resource") == "leases" and ref.get("namespace") == LEASE_NAMESPACE:
            name = str(ref.get("name") or "")
            if 200 <= code < 300 and name:  # a shard Lease's create is followed at once by its member's renewal
                writes = self.shard_writes.setdefault(name, [])
                if not writes:  # a shard Lease is created by its own member
                    self.shards_of.setdefault(user, set()).add(name)
                bisect.insort(writes, (e["stageTimestamp"], user))
            return
        self.report.writes_by_replicas += 1
        received = e["requestReceivedTimestamp"]
        at = bisect.bisect_left(self.lease_writes, (received, ""))
        holder = self.lease_writes[at - 1][1] if at else None
        if holder != user and not self._holds_shard(user, received):
            self.violation("holder-writes", f"{user} sent {e['verb']} {e['requestURI']} (answered {code}) while "
                           f"the last Lease write was {holder or 'nobody'}'s", e)

    def _holds_shard(self, user: str, received: str) -> bool:
        for name in self.shards_of.get(user, ()):
            writes = self.shard_writes[name]
            at = bisect.bisect_left(writes, (received, ""))
            if at and writes[at - 1][1] == user:
                return True
        return False

    def longest_leaderless(self) -> float:
        stamps = [_parse_stamp(s) for s, _ in self.lease_writes]
        return max((b - a for a, b in itertools.pairwise(stamps)), default=0.0)


def _parse_stamp(stamp: str) -> float:
    from datetime import datetime
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


# --- the workload --------------------------------------------------------------------------------------


def _pod_template(app: str, image: str, annotations: dict[str, str] | None = None,
                  restart: str = "Always") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": image}], "restartPolicy": restart,
                 "terminationGracePeriodSeconds": 1}
    return {"metadata": {"labels": {"app": app}, "annotations": annotations or {}}, "spec": spec}


def deployment(name: str, replicas: int, image: str, strategy: Obj) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "strategy": strategy,
                     "template": _pod_template(name, image, {SIM + "ready-after-seconds": "0.5"})}}


def stateful_set(name: str, replicas: int, image: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "OrderedReady",
                     "selector": {"matchLabels": {"app": name}},
                     "template": _pod_template(name, image, {SIM + "ready-after-seconds": "0.3"})}}


def job(name: str, rng: random.Random) -> Obj:
    completions = rng.randint(2, 5)
    fail = rng.random() < 0.3
    annotations = {SIM + "run-seconds": str(rng.choice([0.5, 1, 2]))}
    spec: Obj = {"completions": completions, "parallelism": rng.randint(1, 3), "backoffLimit": rng.randint(1, 3),
                 "ttlSecondsAfterFinished": 15,
                 "template": _pod_template(name, "busybox", annotations, restart="Never")}
    if rng.random() < 0.5:
        spec["completionMode"] = "Indexed"
    if fail:
        annotations[SIM + "exit-code"] = str(rng.choice([1, 42]))
        spec["podFailurePolicy"] = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In",
                                                                                    "values": [42]}}]}
    spec["template"]["metadata"].pop("labels")
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def cron_job(name: str) -> Obj:
    template = _pod_template(name, "busybox", {SIM + "run-seconds": "1"}, restart="Never")
    template["metadata"].pop("labels")
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid", "successfulJobsHistoryLimit": 1,
                     "failedJobsHistoryLimit": 1,
                     "jobTemplate": {"spec": {"completions": 1, "ttlSecondsAfterFinished": 30,
                                              "template": template}}}}


def daemon_set(image: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                     "template": _pod_template("agent", image)}}


STRATEGIES: list[Obj] = [
    {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
    {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 1}},
    {"type": "Recreate"},
]


class Workload:
    """Seeded churn over a few namespaces (each with Deployments, a StatefulSet, Jobs, a CronJob, a Service and
    a PDB), a DaemonSet, nodes dying and recovering, and whole namespaces deleted with their content."""

    def __init__(self, api: Api, rng: random.Random, profile: Profile, report: Report, checker: Checker) -> None:
        self.api = api
        self.rng = rng
        self.profile = profile
        self.report = report
        self.checker = checker
        self.namespaces: list[str] = []
        self.generation = 0
        self.jobs = 0
        self.images = 0
        self.dead_node: str | None = None

    def _image(self) -> str:
        self.images += 1
        return f"nginx:1.{self.images}"

    async def _namespace(self) -> None:
        self.generation += 1
        ns = f"chaos-{self.generation}"
        await self.api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": ns}})
        base = f"/apis/apps/v1/namespaces/{ns}"
        for i in range(2):
            await self.api.create(f"{base}/deployments", deployment(
                f"web-{i}", self.rng.randint(2, 6), self._image(), self.rng.choice(STRATEGIES)))
        self.checker.ordered_sets.add((ns, "db"))
        await self.api.create(f"{base}/statefulsets", stateful_set("db", self.rng.randint(1, 3), self._image()))
        await self.api.create(f"/apis/batch/v1/namespaces/{ns}/cronjobs", cron_job("tick"))
        await self.api.create(f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-0"},
            "spec": {"selector": {"app": "web-0"}, "ports": [{"port": 80}]}})
        await self.api.create(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-0"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web-0"}}}})
        self.namespaces.append(ns)
        self.report.objects_churned += 7

    async def setup(self) -> None:
        await self.api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                     "metadata": {"name": "chaos-agents"}})
        await self.api.create("/apis/apps/v1/namespaces/chaos-agents/daemonsets", daemon_set(self._image()))
        for _ in range(self.profile.namespaces):
            await self._namespace()

    async def step(self) -> None:
        action = self.rng.choices(
            ["scale", "image", "job", "sts-scale", "sts-image", "evict", "ds-image", "node", "namespace"],
            weights=[6, 3, 5, 2, 1, 2, 1, 1, 1])[0]
        ns = self.rng.choice(self.namespaces)
        apps = f"/apis/apps/v1/namespaces/{ns}"
        if action == "scale":
            await self.api.patch(f"{apps}/deployments/web-{self.rng.randint(0, 1)}",
                                 {"spec": {"replicas": self.rng.randint(0, 8)}})
        elif action == "image":
            await self.api.patch(f"{apps}/deployments/web-{self.rng.randint(0, 1)}", {"spec": {"template": {
                "spec": {"containers": [{"name": "c", "image": self._image()}]}}}})
        elif action == "job":
            self.jobs += 1
            await self.api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", job(f"job-{self.jobs}", self.rng))
        elif action == "sts-scale":
            await self.api.patch(f"{apps}/statefulsets/db", {"spec": {"replicas": self.rng.randint(0, 4)}})
        elif action == "sts-image":
            await self.api.patch(f"{apps}/statefulsets/db", {"spec": {"template": {
                "spec": {"containers": [{"name": "c", "image": self._image()}]}}}})
        elif action == "evict":
            pods = await self.api.items(f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dweb-0")
            if pods:
                name = self.rng.choice(pods)["metadata"]["name"]
                await self.api.create(f"/api/v1/namespaces/{ns}/pods/{name}/eviction", {
                    "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
        elif action == "ds-image":
            await self.api.patch("/apis/apps/v1/namespaces/chaos-agents/daemonsets/agent", {"spec": {"template": {
                "spec": {"containers": [{"name": "c", "image": self._image()}]}}}})
        elif action == "node":
            await self._node()
        elif action == "namespace":
            victim = self.namespaces.pop(0)
            await self.api.delete(f"/api/v1/namespaces/{victim}")
            await self._namespace()
        self.report.objects_churned += 1

    async def _node(self) -> None:
        if self.dead_node is not None:
            await self.revive()
            return
        self.dead_node = f"node-{self.rng.randint(1, self.profile.nodes)}"
        await self.api.patch(f"/api/v1/nodes/{self.dead_node}",
                             {"metadata": {"annotations": {SIM + "kubelet": "stopped"}}})

    async def revive(self) -> None:
        if self.dead_node is not None:
            await self.api.patch(f"/api/v1/nodes/{self.dead_node}",
                                 {"metadata": {"annotations": {SIM + "kubelet": "running"}}})
            self.dead_node = None

    async def quiesce(self) -> None:
        """Stop what would keep changing on its own: CronJobs suspended, the dead node revived."""
        await self.revive()
        for ns in self.namespaces:
            await self.api.patch(f"/apis/batch/v1/namespaces/{ns}/cronjobs/tick", {"spec": {"suspend": True}})


# --- convergence ---------------------------------------------------------------------------------------


def _conditions_ok(obj: Obj) -> bool:
    return int((obj.get("status") or {}).get("observedGeneration") or 0) >= int(obj["metadata"].get("generation") or 0)


async def unconverged(api: Api, namespaces: list[str]) -> list[str]:
    out: list[str] = []
    for ns in [*namespaces, "chaos-agents"]:
        for d in await api.items(f"/apis/apps/v1/namespaces/{ns}/deployments"):
            s, want = d.get("status") or {}, int(d["spec"].get("replicas", 1))
            if not _conditions_ok(d) or any(int(s.get(k) or 0) != want for k in (
                    "replicas", "updatedReplicas", "readyReplicas", "availableReplicas")):
                out.append(f"deployment {ns}/{d['metadata']['name']}: {s}")
        for sts in await api.items(f"/apis/apps/v1/namespaces/{ns}/statefulsets"):
            s, want = sts.get("status") or {}, int(sts["spec"].get("replicas", 1))
            if not _conditions_ok(sts) or int(s.get("readyReplicas") or 0) != want or \
                    int(s.get("replicas") or 0) != want or s.get("currentRevision") != s.get("updateRevision"):
                out.append(f"statefulset {ns}/{sts['metadata']['name']}: {s}")
        for ds in await api.items(f"/apis/apps/v1/namespaces/{ns}/daemonsets"):
            s = ds.get("status") or {}
            want = int(s.get("desiredNumberScheduled") or 0)
            if not _conditions_ok(ds) or want == 0 or int(s.get("numberReady") or 0) != want or \
                    int(s.get("updatedNumberScheduled") or 0) != want:
                out.append(f"daemonset {ns}/{ds['metadata']['name']}: {s}")
        for j in await api.items(f"/apis/batch/v1/namespaces/{ns}/jobs"):
            if not _finished(j):
                out.append(f"job {ns}/{j['metadata']['name']}: {j.get('status')}")
    return out


# --- the run ---------------------------------------------------------------------------------------------


class Soak:
    def __init__(self, profile: Profile, workdir: Path) -> None:
        self.profile = profile
        self.workdir = workdir
        self.rng = random.Random(profile.seed)
        self.chaos_rng = random.Random(profile.seed * 7919 + 1)
        self.report = Report(profile.seed, profile.minutes, profile.replicas)
        self.replicas: list[Replica] = []
        self.sim: asyncio.subprocess.Process | None = None
        self.audit = workdir / "audit.log"
        self.t0 = time.monotonic()
        self.checker = Checker(self.report, {f"replica-{i}" for i in range(profile.replicas)}, self.t0)
        self.busy: set[str] = set()  # replicas the chaos is acting on (the supervisor leaves them alone)

    # processes
    async def start_sim(self) -> tuple[str, Obj]:
        tokens = {f"replica-{i}": base64.b32encode(os.urandom(15)).decode().lower()
                  for i in range(self.profile.replicas)}
        token_file = self.workdir / "tokens.csv"
        token_file.write_text("".join(f'{t},{u},uid-{u},"system:masters"\n' for u, t in tokens.items()))
        kubeconfig = self.workdir / "kubeconfig"
        self.sim = await _spawn([tool("kube-sim"), "--nodes", str(self.profile.nodes), "--zones",
                                 str(self.profile.zones), "--port", "0", "--kubeconfig", str(kubeconfig),
                                 "--faults", self.profile.faults, "--audit-log-path", str(self.audit),
                                 "--token-auth-file", str(token_file), "--node-status-update-frequency", "2",
                                 "--node-lease-renew-interval", "2"],
                                self.workdir / "kube-sim.log", stdout=asyncio.subprocess.PIPE)
        assert self.sim.stdout is not None
        line = (await asyncio.wait_for(self.sim.stdout.readline(), 60)).decode().strip()
        if not line.startswith("kube-sim ready: "):
            raise RuntimeError(f"kube-sim did not start: {line!r}")
        config = yaml.safe_load(kubeconfig.read_text())
        for user, token in tokens.items():
            mine = json.loads(json.dumps(config))
            mine["users"].append({"name": user, "user": {"token": token}})
            for ctx in mine["contexts"]:
                if ctx["name"] == mine["current-context"]:
                    ctx["context"]["user"] = user
            path = self.workdir / f"kubeconfig-{user}"
            path.write_text(yaml.safe_dump(mine))
            self.replicas.append(Replica(user, path, self.workdir))
        return line.removeprefix("kube-sim ready: "), config

    async def start_replica(self, r: Replica) -> None:
        r.starts += 1
        r.started_at = time.monotonic()
        r.log = self.workdir / f"{r.name}.{r.starts}.log"
        p = self.profile
        r.proc = await _spawn([tool("controller-manager"), f"--kubeconfig={r.kubeconfig}",
                               f"--secure-port={free_port()}", "--bind-address=127.0.0.1",
                               f"--leader-elect-lease-duration={p.lease_duration}s",
                               f"--leader-elect-renew-deadline={p.renew_deadline}s",
                               f"--leader-elect-retry-period={p.retry_period}s",
                               "--kube-api-qps=200", "--kube-api-burst=400",
                               *(["--sharding=true"] if p.sharding else [])], r.log)
        r.identity = ""

    def identity(self, r: Replica) -> str:
        if not r.identity and r.log is not None and r.log.exists():
            for line in r.log.read_text(errors="replace").splitlines():
                if '"waiting to acquire the lease"' in line:
                    with contextlib.suppress(ValueError):
                        r.identity = str(json.loads(line).get("identity") or "")
                        break
        return r.identity

    async def leader(self, api: Api) -> Replica | None:
        lease = await api.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}")
        holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
        return next((r for r in self.replicas if r.running and holder and self.identity(r) == holder), None)

    async def stop_all(self) -> None:
        for r in self.replicas:
            if r.proc is not None and r.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    r.proc.send_signal(signal.SIGCONT)
                    r.proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(r.proc.wait(), 20)
                except TimeoutError:
                    r.proc.kill()
                    await r.proc.wait()
        if self.sim is not None and self.sim.returncode is None:
            self.sim.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.sim.wait(), 20)
            except TimeoutError:
                self.sim.kill()
                await self.sim.wait()

    # chaos
    async def chaos_step(self, api: Api) -> None:
        self.busy = {r.name for r in self.replicas}
        try:
            await self._chaos_step(api)
        finally:
            self.busy = set()

    async def _chaos_step(self, api: Api) -> None:
        action = self.chaos_rng.choices(["kill", "term", "pause", "watch-restart"], weights=[3, 2, 3, 2])[0]
        if action == "watch-restart":
            assert self.sim is not None
            self.sim.send_signal(signal.SIGUSR1)
            self.report.watch_restarts += 1
            return
        leader = await self.leader(api)
        if action == "term":
            victim = self.chaos_rng.choice([r for r in self.replicas if r.running])
            assert victim.proc is not None
            victim.proc.send_signal(signal.SIGTERM)
            self.report.terms += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(victim.proc.wait(), 30)
            await self.start_replica(victim)
            return
        if leader is None:
            return
        assert leader.proc is not None
        if action == "kill":
            leader.proc.send_signal(signal.SIGKILL)
            self.report.kills += 1
            await leader.proc.wait()
            await asyncio.sleep(self.chaos_rng.uniform(1, 4))
            await self.start_replica(leader)
        else:
            leader.proc.send_signal(signal.SIGSTOP)
            self.report.pauses += 1
            await asyncio.sleep(self.profile.lease_duration + self.chaos_rng.uniform(1.5, 5))
            leader.proc.send_signal(signal.SIGCONT)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(leader.proc.wait(), 15)  # it finds it lost the Lease and exits 1
            if not leader.running:
                await self.start_replica(leader)

    # loops
    async def _every(self, mean: float, rng: random.Random, until: Callable[[], bool],
                     step: Callable[[], Awaitable[None]]) -> None:
        while not until():
            await asyncio.sleep(rng.expovariate(1.0 / mean))
            if not until():
                await step()

    async def _sample_rss(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for r in self.replicas:
                if r.running and r.proc is not None and time.monotonic() - r.started_at >= RSS_WARMUP:
                    with contextlib.suppress(OSError):
                        mib = rss(r.proc.pid) / 2**20
                        if mib > 0:  # 0: the process is exiting (a zombie has no VmRSS)
                            key = f"{r.name}#{r.starts}"
                            self.report.rss_samples.setdefault(key, []).append(round(mib, 1))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.profile.rss_interval)

    async def _supervise(self, stop: asyncio.Event) -> None:
        """Restart a replica that exited on its own (as its Deployment or systemd unit would), noting why."""
        while not stop.is_set():
            for r in self.replicas:
                if r.proc is not None and r.proc.returncode is not None and r.name not in self.busy:
                    last = _last_error(r.log)
                    self.report.self_exits.append(f"{r.name}#{r.starts} exit {r.proc.returncode}: {last}")
                    print(f"{r.name}#{r.starts} exited by itself ({r.proc.returncode}): {last}", flush=True)
                    await self.start_replica(r)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    async def _audit_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.checker.scan_audit(self.audit)
            self.checker.check_finalizers()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)

    async def run(self) -> Report:
        url, config = await self.start_sim()
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        admin = next(u["user"]["token"] for u in config["users"] if u["name"].endswith("-admin"))
        try:
            async with Api(url, admin, ca) as api:
                for r in self.replicas:
                    await self.start_replica(r)
                watches = [Watch(api, "/api/v1/pods", self.checker.on_pod),
                           Watch(api, "/apis/batch/v1/jobs", self.checker.on_job),
                           Watch(api, "/apis/apps/v1/deployments", self.checker.on_deployment),
                           Watch(api, "/apis/apps/v1/replicasets", self.checker.on_replica_set)]
                self.checker.pods = watches[0]
                background = [asyncio.create_task(w.run(), name=f"watch {w.path}") for w in watches]
                stop = asyncio.Event()
                background.append(asyncio.create_task(self._sample_rss(stop), name="rss"))
                background.append(asyncio.create_task(self._audit_loop(stop), name="audit"))
                background.append(asyncio.create_task(self._supervise(stop), name="supervisor"))
                try:
                    await self._soak(api)
                    await self._converge(api)
                finally:
                    stop.set()
                    await asyncio.sleep(0)
                    for task in background:
                        task.cancel()
                    await asyncio.gather(*background, return_exceptions=True)
        finally:
            await self.stop_all()
        self.checker.scan_audit(self.audit)
        self.report.longest_leaderless_seconds = round(self.checker.longest_leaderless(), 2)
        self.report.faults_injected = sum(
            1 for line in (self.workdir / "kube-sim.log").read_text(errors="replace").splitlines()
            if "fault injected" in line)
        for key, samples in self.report.rss_samples.items():
            if samples:
                self.report.rss_start_mib[key] = samples[0]
                self.report.rss_end_mib[key] = samples[-1]
        return self.report

    async def _soak(self, api: Api) -> None:
        workload = Workload(api, self.rng, self.profile, self.report, self.checker)
        self.workload = workload
        await workload.setup()
        deadline = time.monotonic() + self.profile.minutes * 60

        def over() -> bool:
            return time.monotonic() >= deadline

        await asyncio.gather(self._every(self.profile.churn_interval, self.rng, over, workload.step),
                             self._every(self.profile.chaos_interval, self.chaos_rng, over,
                                         lambda: self.chaos_step(api)))
        if self.profile.calm_minutes > 0:
            await self._calm(api, workload)

    async def _calm(self, api: Api, workload: Workload) -> None:
        """Churn, API faults and watch-cache restarts go on; no replica is touched. The RSS of every replica
        process alive from start to end of it is reported with its trend."""
        self.report.calm_minutes = self.profile.calm_minutes
        # A replica paused or restarting when the chaos stopped settles first (woken, it exits and is restarted).
        await asyncio.sleep(self.profile.lease_duration * 3)
        first = {f"{r.name}#{r.starts}": len(self.report.rss_samples.get(f"{r.name}#{r.starts}", []))
                 for r in self.replicas if r.running}
        deadline = time.monotonic() + self.profile.calm_minutes * 60

        def over() -> bool:
            return time.monotonic() >= deadline

        async def restart_watch_cache() -> None:
            assert self.sim is not None
            self.sim.send_signal(signal.SIGUSR1)
            self.report.watch_restarts += 1

        async def halfway() -> None:
            # The second half's trend tells a leak from caches still filling (the event correlator's LRUs, a
            # cluster that grew): it is judged beside the cluster's object count at the half and the end.
            await asyncio.sleep(self.profile.calm_minutes * 30)
            self.report.calm_cluster_objects["half"] = await self._cluster_objects(api)

        self.report.calm_cluster_objects["first"] = await self._cluster_objects(api)
        await asyncio.gather(self._every(self.profile.churn_interval, self.rng, over, workload.step),
                             self._every(self.profile.chaos_interval * 5, self.chaos_rng, over, restart_watch_cache),
                             halfway())
        self.report.calm_cluster_objects["last"] = await self._cluster_objects(api)
        lived = {f"{r.name}#{r.starts}" for r in self.replicas if r.running}
        for key, start in first.items():
            samples = self.report.rss_samples.get(key, [])[start:]
            if key in lived and len(samples) >= 3:
                second_half = samples[len(samples) // 2:]
                rise, noise = _trend(samples, self.profile.rss_interval)
                half_rise, half_noise = _trend(second_half, self.profile.rss_interval)
                self.report.rss_calm[key] = {
                    "first": samples[0], "half": samples[len(samples) // 2], "last": samples[-1],
                    "slope_mib_per_min": round(_slope(samples, self.profile.rss_interval), 3),
                    "second_half_slope_mib_per_min": round(_slope(second_half, self.profile.rss_interval), 3),
                    "rise_mib": round(rise, 2), "noise_mib": round(noise, 2), "flat": _flat(rise, noise),
                    "second_half_rise_mib": round(half_rise, 2), "second_half_noise_mib": round(half_noise, 2),
                    "second_half_flat": _flat(half_rise, half_noise)}

    async def _cluster_objects(self, api: Api) -> int:
        """How many objects of the kinds the leader caches the cluster holds now: a growing cluster grows the
        leader's caches, which is not a leak."""
        total = 0
        for path in CACHED_KINDS:
            total += len(await api.items(path))
        return total

    async def _converge(self, api: Api) -> None:
        for r in self.replicas:
            if r.proc is not None and r.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    r.proc.send_signal(signal.SIGCONT)
            elif r.proc is not None:
                await self.start_replica(r)
        await self.workload.quiesce()
        started = time.monotonic()
        left: list[str] = []
        while time.monotonic() - started < self.profile.converge_timeout:
            left = await unconverged(api, self.workload.namespaces)
            if not left:
                self.report.converged = True
                self.report.converge_seconds = round(time.monotonic() - started, 1)
                return
            await asyncio.sleep(2)
        self.report.unconverged = left


def _slope(samples: list[float], interval: float) -> float:
    """Least-squares slope of evenly spaced samples (``interval`` seconds apart), per minute."""
    n = len(samples)
    xs = [i * interval / 60 for i in range(n)]
    mean_x, mean_y = sum(xs) / n, sum(samples) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, samples, strict=True)) / var if var else 0.0


def _trend(samples: list[float], interval: float) -> tuple[float, float]:
    """(rise, noise) of evenly spaced samples, in their unit: how much the least-squares line rises from the first
    sample's time to the last's, and twice the samples' standard deviation about that line. A rise within the
    noise is no trend beyond noise: the 5-minute collections make the daemon's RSS a sawtooth a few MiB high,
    and a leak shows as a line that climbs out of its own scatter."""
    n = len(samples)
    if n < 3:
        return 0.0, 0.0
    slope = _slope(samples, interval)
    minutes = [i * interval / 60 for i in range(n)]
    mean_x, mean_y = sum(minutes) / n, sum(samples) / n
    residuals = [y - (mean_y + slope * (x - mean_x)) for x, y in zip(minutes, samples, strict=True)]
    spread = (sum(r * r for r in residuals) / (n - 2)) ** 0.5
    return slope * minutes[-1], 2 * spread


def _flat(rise: float, noise: float) -> bool:
    return rise <= max(noise, FLAT_FLOOR_MIB)


def _verdict(calm: dict[str, float]) -> str:
    """How a calm stretch's trend reads beside its noise (reports written before the band was kept: nothing)."""
    if "rise_mib" not in calm:
        return ""
    def reads(rise: float, noise: float) -> str:
        return f"{'flat' if _flat(rise, noise) else 'rising'}: {rise:+.1f} MiB in a {noise:.1f} MiB band"
    return (f" [{reads(calm['rise_mib'], calm['noise_mib'])}; second half "
            f"{reads(calm['second_half_rise_mib'], calm['second_half_noise_mib'])}]")


def _last_error(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("level") == "error":
                return str(record.get("event"))
    return ""


async def run_soak(profile: Profile, workdir: Path) -> Report:
    """Run ``profile`` in ``workdir`` (created if missing): logs, the audit log and kubeconfigs stay there."""
    await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
    return await Soak(profile, workdir).run()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=float(os.environ.get("CHAOS_MINUTES", "60")))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--calm-minutes", type=float, default=float(os.environ.get("CHAOS_CALM_MINUTES", "0")),
                   help="then this many minutes of churn and API faults with no replica touched (RSS trend)")
    p.add_argument("--workdir", default="chaos-run")
    p.add_argument("--sharding", action="store_true", help="run the replicas with --sharding=true")
    p.add_argument("--output", default=None, help="write the report as JSON here (default: <workdir>/report.json)")
    args = p.parse_args(argv)
    profile = Profile(seed=args.seed, minutes=args.minutes, replicas=args.replicas, calm_minutes=args.calm_minutes,
                      sharding=args.sharding)
    workdir = Path(args.workdir)
    report = asyncio.run(run_soak(profile, workdir))
    out = Path(args.output) if args.output else workdir / "report.json"
    out.write_text(json.dumps(asdict(report), indent=1))
    print(report.summary())
    for v in report.violations[:20]:
        print(f"  {v.invariant} at {v.at}s: {v.message}")
    if report.unconverged:
        print("  not converged:", *report.unconverged[:20], sep="\n    ")
    return 0 if report.converged and not report.violations else 1


if __name__ == "__main__":
    sys.exit(main())
