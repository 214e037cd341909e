"""Event-to-action latency read on kube-sim's side: from a write that asks a controller to act to the controller's
first write in answer, both ends taken from kube-sim's audit log (``kube-sim --audit-log-path``).

Definitions:
- Clock: kube-sim's own (one process, ``time.time()``), as its audit Events carry it, to the microsecond.
- Start: the trigger's ``stageTimestamp`` (ResponseComplete). kube-sim commits a write, queues its watch event and
  completes the request without yielding in between (no admission webhooks are registered here), so this is the
  commit to within the encoding of the response.
- End: the action's ``requestReceivedTimestamp``: the controller's request has reached the API server. In between:
  the watch's delivery, the daemon's decode, informer cache and handlers, work queue, sync, and the request's way
  out. The daemon's own metrics play no part.
- Pairs, each a trigger and its first action:
  - ``deployment-scale -> replicaset-write``: the bench's PUT of a Deployment's ``/scale`` -> the daemon's first
    update or patch of that Deployment's ReplicaSet (``<deployment>-<hash>``; its status subresource excluded);
  - ``replicaset-scale-up -> pod-create`` / ``replicaset-scale-down -> pod-delete``: that ReplicaSet write (when
    the Deployment was scaled up / down) -> the daemon's first create of a pod the ReplicaSet owns / first delete
    of one of its pods;
  - ``job-create -> pod-create``: the bench's create of a Job -> the daemon's first create of a pod the Job owns.
- A trigger with no action before the next trigger on the same object (or the end of the log) is
  ``unanswered``: its latency is at least that long, and the percentiles count it at that lower bound (so a
  controller that falls behind cannot look fast by leaving triggers out; the answered ones alone are given
  beside). A trigger whose answer cannot be told apart is left out (``left_out``), never guessed: the previous
  trigger on the object was not answered before it (the first action after it may be that one's answer), or
  (a ReplicaSet) its pods were not what its previous size asked for when it was scaled, so a create or delete
  could still answer an earlier scale. The bench waits, up to a limit, until the pod watch shows the pods the
  churn's last triggers ask for (:meth:`PodWatch.caught_up`), so the slowest answers are not cut off.
- A pod create names no object in the audit log (the controllers use ``generateName``; kube-apiserver's log at
  level Metadata names none either). Its pod comes from a pod watch of the same stretch (:class:`PodWatch`): the
  daemon's successful pod creates, in the order the log holds them, are the pods' commits in order (a create
  commits and completes without yielding, and lines are written in completion order), so the n-th is the n-th
  pod the watch saw added. The two are zipped, each pair checked to share a namespace and the second (the pod's
  creationTimestamp); attribution stops at the first mismatch or where either runs out, and triggers past that
  point are not sampled.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import orjson

from bench.report import percentile
from controller_manager.api.meta import parse_time
from controller_manager.api.resources import PODS
from controller_manager.client import ApiClient, ApiError

DAEMON_AGENT = "kube-controller-manager/"  # every client of the daemon's sends this User-Agent prefix
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
T = TypeVar("T")
PAIRS = ("deployment-scale -> replicaset-write", "replicaset-scale-up -> pod-create",
         "replicaset-scale-down -> pod-delete", "job-create -> pod-create")


@dataclass(frozen=True, slots=True)
class Request:
    """One audit Event, the parts pairing reads."""

    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    received: float  # requestReceivedTimestamp, epoch seconds
    completed: float  # stageTimestamp (ResponseComplete)
    agent: str

    @property
    def by_daemon(self) -> bool:
        return self.agent.startswith(DAEMON_AGENT)


def request_of(event: dict[str, Any]) -> Request | None:
    """The audit Event as a :class:`Request`; None for a non-resource request or one without both timestamps."""
    ref = event.get("objectRef")
    received = parse_time(event.get("requestReceivedTimestamp"))
    completed = parse_time(event.get("stageTimestamp"))
    if not ref or received is None or completed is None:
        return None
    return Request(verb=event.get("verb", ""), resource=ref.get("resource", ""),
                   subresource=ref.get("subresource", ""), namespace=ref.get("namespace", ""),
                   name=ref.get("name", ""), code=int((event.get("responseStatus") or {}).get("code", 0)),
                   received=received, completed=completed, agent=event.get("userAgent", ""))


def log_end(path: Path) -> int:
    """The audit log's size now: every request completed from now on is written past it (lines are appended in
    completion order, each after its request completed)."""
    return path.stat().st_size


def read_audit(path: Path, offset: int = 0) -> list[Request]:
    """The resource requests logged from byte ``offset`` on, in the log's (completion) order. A line cut short by
    a write still under way is skipped."""
    out: list[Request] = []
    with path.open("rb") as fh:
        fh.seek(offset)
        for line in fh:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            request = request_of(event)
            if request is not None:
                out.append(request)
    return out


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod the watch saw added, and its controller owner."""

    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    created: float | None = None  # creationTimestamp (whole seconds)


@dataclass(frozen=True, slots=True)
class Scaled:
    """One successful PUT of a Deployment's /scale by the bench, in the order it sent them."""

    namespace: str
    name: str
    old: int
    new: int


@dataclass(frozen=True, slots=True)
class ReplicaSetScale:
    """A ReplicaSet write that answered a Deployment's scale: a trigger for the ReplicaSet controller."""

    namespace: str
    name: str
    at: float  # the write's stageTimestamp
    old: int
    new: int


@dataclass
class Samples:
    seconds: list[float] = field(default_factory=list)  # answered: exact
    unanswered: list[float] = field(default_factory=list)  # not answered: each no less than this
    left_out: int = 0

    @classmethod
    def combined(cls, parts: Iterable[Samples]) -> Samples:
        out = cls()
        for part in parts:
            out.seconds += part.seconds
            out.unanswered += part.unanswered
            out.left_out += part.left_out
        return out

    def summary(self) -> dict[str, float | int | None]:
        """``p50_ms``/``p99_ms``/``max_ms`` count each unanswered trigger at its lower bound, so they are lower
        bounds themselves (exact when every trigger was answered); ``answered_*`` are the answered ones alone."""
        answered = [s * 1000.0 for s in self.seconds]
        every = answered + [s * 1000.0 for s in self.unanswered]
        return {"count": len(answered), "unanswered": len(self.unanswered), "left_out": self.left_out,
                "p50_ms": percentile(every, 0.5) if every else None,
                "p99_ms": percentile(every, 0.99) if every else None, "max_ms": max(every) if every else None,
                "answered_p50_ms": percentile(answered, 0.5) if answered else None,
                "answered_p99_ms": percentile(answered, 0.99) if answered else None}


def _owner(meta: dict[str, Any]) -> tuple[str, str]:
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return "", ""


def pod_of(obj: dict[str, Any]) -> Pod:
    meta = obj.get("metadata") or {}
    kind, name = _owner(meta)
    return Pod(str(meta.get("namespace", "")), str(meta.get("name", "")), kind, name,
               parse_time(meta.get("creationTimestamp")))


class PodWatch:
    """Every pod added from :meth:`start` on, in the order the API server committed them (metadata only; a watch
    that ends cleanly is resumed from its last resourceVersion, so none is missed; one that fails is not); and
    the ReplicaSets' pods being deleted meanwhile, so the bench can tell when its triggers have all been answered
    (:meth:`caught_up`)."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.added: list[Pod] = []
        self.replicaset_pods_deleted: set[tuple[str, str]] = set()
        self.broken: str | None = None  # why the watch stopped early, if it did
        self.started_at = 0.0  # time.time() once the starting list had answered
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        page = await self.client.list(PODS, limit=1, metadata_only=True)
        self.started_at = time.time()
        version = str((page.get("metadata") or {}).get("resourceVersion") or "")
        self._task = asyncio.create_task(self._run(version), name="bench:pod-watch")

    async def _run(self, version: str) -> None:
        try:
            while True:
                async with self.client.watch(PODS, resource_version=version, metadata_only=True) as stream:
                    async for event in stream:
                        meta = event.object.get("metadata") or {}
                        version = str(meta.get("resourceVersion") or version)
                        if event.type == "ADDED":
                            self.added.append(pod_of(event.object))
                        elif (event.type == "DELETED" or meta.get("deletionTimestamp")) \
                                and _owner(meta)[0] == "ReplicaSet":
                            self.replicaset_pods_deleted.add((str(meta.get("namespace")), str(meta.get("name"))))
        except ApiError as exc:  # a 410 or a broken stream: what came before still holds
            self.broken = str(exc)

    def caught_up(self, scaled: list[Scaled], jobs: list[str]) -> bool:
        """Whether the ReplicaSets' pods have grown by what the scales added up to and every Job has a pod: the
        answers still to come, if any, are to triggers a later one made moot (scaled up, then down again)."""
        net = sum(s.new - s.old for s in scaled)
        by_replicasets = sum(1 for p in self.added if p.owner_kind == "ReplicaSet")
        with_pods = {p.owner_name for p in self.added if p.owner_kind == "Job"}
        return by_replicasets - len(self.replicaset_pods_deleted) == net and with_pods.issuperset(jobs)

    async def stop(self) -> list[Pod]:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        return self.added


def window_start(requests: Iterable[Request], started_at: float) -> float:
    """Where the pod watch began on kube-sim's clock: the completion of the bench's last pod list before
    ``started_at`` (the list the watch started from), else ``started_at`` itself."""
    lists = [r.completed for r in requests if r.resource == "pods" and r.verb == "list" and not r.by_daemon
             and r.completed <= started_at]
    return max(lists) if lists else started_at


def attribute(requests: list[Request], pods: list[Pod], since: float) -> tuple[list[tuple[Request, Pod]], float]:
    """The daemon's successful pod creates committed after ``since``, zipped with the pods the watch saw added;
    and the commit time from which creates are no longer attributed (``inf`` when all of them were)."""
    creates = [r for r in requests if r.by_daemon and r.resource == "pods" and not r.subresource
               and r.verb == "create" and r.code == 201 and r.completed > since]
    pairs: list[tuple[Request, Pod]] = []
    for request, pod in zip(creates, pods, strict=False):
        # The pod's creationTimestamp is its commit cut to the second: a second check that the two are one.
        stamped = pod.created is None or -0.5 <= request.completed - pod.created <= 1.5
        if request.namespace != pod.namespace or not stamped:
            break
        pairs.append((request, pod))
    end = creates[len(pairs)].completed if len(pairs) < len(creates) else float("inf")
    return pairs, end


def first_after(actions: list[Request], at: float) -> Request | None:
    """The first of ``actions`` (sorted by receipt) received after ``at``."""
    i = bisect.bisect_right([a.received for a in actions], at)
    return actions[i] if i < len(actions) else None


@dataclass
class Paired(Generic[T]):
    """What :func:`pair` made of one object's triggers: each is in exactly one list."""

    sampled: list[tuple[float, T, Request]] = field(default_factory=list)  # (commit, payload, action)
    left_out: list[T] = field(default_factory=list)
    unanswered: list[tuple[T, float]] = field(default_factory=list)  # (payload, its latency's lower bound)


def pair(triggers: list[tuple[float, T]], answer: Callable[[float, T], Request | None],
         until: float = math.inf, horizon: float = math.inf,
         settled: Callable[[float, T], bool] | None = None) -> Paired[T]:
    """Pair the triggers on one object (commit time, payload) with their first actions (``answer(at, payload)``)
    under the rules of the module docstring. A trigger with no action before the next trigger on the object, or
    before ``until`` (where attribution stopped) or ``horizon`` (the end of what was observed), is unanswered:
    its latency is at least the time to the earliest of those. One that ``settled`` refuses is left out."""
    out: Paired[T] = Paired()
    triggers = sorted(triggers, key=lambda t: t[0])
    previous_answer: float | None = -math.inf  # None: the previous trigger was not answered
    for i, (at, payload) in enumerate(triggers):
        action = answer(at, payload)
        cut = min(triggers[i + 1][0] if i + 1 < len(triggers) else math.inf, until, horizon)
        if settled is not None and not settled(at, payload):
            out.left_out.append(payload)
            previous_answer = action.received if action is not None and action.received < cut else None
            continue
        if action is None or action.received >= cut:
            out.unanswered.append((payload, cut - at))
            previous_answer = None
            continue
        clear_before = previous_answer is not None and previous_answer < at
        previous_answer = action.received
        if clear_before:
            out.sampled.append((at, payload, action))
        else:
            out.left_out.append(payload)
    return out


def _first_in(actions: list[Request]) -> Callable[[float, object], Request | None]:
    return lambda at, _payload: first_after(actions, at)


def _deployment_of(replicaset: str) -> str:
    return replicaset.rpartition("-")[0]


def _count_before(actions: list[Request], at: float) -> int:
    """How many of ``actions`` had committed by ``at``."""
    return sum(1 for a in actions if a.completed <= at)


def reactions(requests: list[Request], scaled: list[Scaled], jobs: list[str], pods: list[Pod], *,
              since: float, until: float) -> dict[str, Samples]:
    """Every pair's samples from the audit ``requests`` (in log order), the bench's successful scales and Job
    creates in the order it sent them, and the pods the watch saw added from ``since`` (kube-sim's clock).
    Triggers committed after ``until`` are not counted."""
    out = {name: Samples() for name in PAIRS}
    deployment_pair, up_pair, down_pair, job_pair = (out[name] for name in PAIRS)
    created, attributed_until = attribute(requests, pods, since)
    horizon = max((r.received for r in requests), default=math.inf)  # the end of what the log shows
    daemon = [r for r in requests if r.by_daemon and r.received > since]
    mine = [r for r in requests if not r.by_daemon and since < r.completed <= until]

    # Deployment scale -> its ReplicaSet's write. The bench's k-th successful scale of a Deployment in the log is
    # the k-th it recorded (it sends them one at a time).
    bench_scales: dict[tuple[str, str], list[Request]] = defaultdict(list)
    for r in mine:
        if r.resource == "deployments" and r.subresource == "scale" and r.verb == "update" and r.code == 200:
            bench_scales[(r.namespace, r.name)].append(r)
    records: dict[tuple[str, str], list[Scaled]] = defaultdict(list)
    for sc in scaled:
        records[(sc.namespace, sc.name)].append(sc)
    rs_writes: dict[tuple[str, str], list[Request]] = defaultdict(list)
    for r in daemon:
        if r.resource == "replicasets" and not r.subresource and r.verb in ("update", "patch") and r.code < 400:
            rs_writes[(r.namespace, _deployment_of(r.name))].append(r)
    for writes in rs_writes.values():
        writes.sort(key=lambda r: r.received)
    initial: dict[tuple[str, str], int] = {}  # each scaled Deployment's size before the churn
    # The ReplicaSet writes that answered a Deployment's scale: the sampled ones with their scale, the others
    # (their scale left out) with None, so they still cut the window of the trigger before them.
    rs_scales: dict[tuple[str, str], list[tuple[float, Scaled | None]]] = defaultdict(list)
    for key, sent in bench_scales.items():
        recs = records.get(key, [])
        if recs:
            initial[key] = recs[0].old
        writes = rs_writes.get(key, [])
        triggers = [(r.completed, sc) for r, sc in zip(sent, recs, strict=False)]
        got = pair(triggers, _first_in(writes), horizon=horizon)
        deployment_pair.left_out += len(got.left_out)
        deployment_pair.unanswered += [bound for _sc, bound in got.unanswered]
        answers: set[int] = set()  # the writes already among the ReplicaSet's triggers
        for at, sc, action in got.sampled:
            deployment_pair.seconds.append(action.received - at)
            rs_scales[(action.namespace, action.name)].append((action.completed, sc))
            answers.add(id(action))
        for at, _sc in triggers:
            write = first_after(writes, at)
            if write is not None and id(write) not in answers:
                answers.add(id(write))
                rs_scales[(write.namespace, write.name)].append((write.completed, None))

    # ReplicaSet scale -> its first pod create (up) or delete (down), when its pods were what it had asked for.
    creates_of: dict[tuple[str, str, str], list[Request]] = defaultdict(list)
    for request, pod in created:
        creates_of[(pod.namespace, pod.owner_kind, pod.owner_name)].append(request)
    deletes_of: dict[tuple[str, str], list[Request]] = defaultdict(list)
    deleted: set[tuple[str, str]] = set()
    for r in daemon:  # a pod's name is its ReplicaSet's plus a suffix; a retried delete counts once
        if r.resource == "pods" and not r.subresource and r.verb == "delete" and r.code in (200, 202) \
                and (r.namespace, r.name) not in deleted:
            deleted.add((r.namespace, r.name))
            deletes_of[(r.namespace, _deployment_of(r.name))].append(r)
    for (ns, rs), rs_triggers in rs_scales.items():
        creates = creates_of.get((ns, "ReplicaSet", rs), [])
        deletes = deletes_of.get((ns, rs), [])
        start = initial.get((ns, _deployment_of(rs)))

        def answer(at: float, sc: Scaled | None, creates: list[Request] = creates,
                   deletes: list[Request] = deletes) -> Request | None:
            if sc is None:
                return None
            return first_after(creates if sc.new > sc.old else deletes, at)

        # Scale-ups and -downs of one ReplicaSet are paired together: each is the other's "another trigger".
        def settled(at: float, sc: Scaled | None, creates: list[Request] = creates,
                    deletes: list[Request] = deletes, start: int | None = start) -> bool:
            # Its pods were what the previous size asked for: no earlier scale's creates or deletes still due.
            return sc is not None and start is not None \
                and start + _count_before(creates, at) - _count_before(deletes, at) == sc.old

        got_rs = pair([t for t in rs_triggers if t[1] is None or t[1].new != t[1].old], answer,
                      until=attributed_until, horizon=horizon, settled=settled)
        for scale in got_rs.left_out:
            if scale is not None:  # None: a scale left out already, above
                (up_pair if scale.new > scale.old else down_pair).left_out += 1
        for scale, bound in got_rs.unanswered:
            if scale is not None:
                (up_pair if scale.new > scale.old else down_pair).unanswered.append(bound)
        for at, scale, action in got_rs.sampled:
            if scale is not None:
                (up_pair if scale.new > scale.old else down_pair).seconds.append(action.received - at)

    # Job create -> its first pod create. The bench's k-th successful Job create is the k-th it recorded.
    job_creates = [r for r in requests if not r.by_daemon and r.resource == "jobs" and r.verb == "create"
                   and r.code == 201 and since < r.completed]
    for request, job in zip(job_creates, jobs, strict=False):
        if request.completed > until:
            break
        pods_of_job = creates_of.get((request.namespace, "Job", job), [])
        got_job = pair([(request.completed, job)], _first_in(pods_of_job), until=attributed_until, horizon=horizon)
        job_pair.unanswered += [bound for _job, bound in got_job.unanswered]
        for at, _job, action in got_job.sampled:
            job_pair.seconds.append(action.received - at)
    return out
