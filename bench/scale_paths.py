"""What breaks at scale (issue 19): the controllers' hot paths timed at the envelope's size, in process.

No API server and no kube-sim: the daemon's default controllers are built as the manager builds them, on one
SharedInformerFactory whose stores are filled directly (as a first list would), and a client that answers writes
at once and shows each written object to the informers (as its watch event would). Then each hot path the issue
names is run with the real controller code and timed, beside the number of cached objects it walked
(``bench/walks.py``), which is exact whatever the machine's load:

- one pod event through every pod handler (a Deployment pod turning ready and unready, a pod added and deleted);
- one sync of a Deployment, a ReplicaSet, a DaemonSet, a Job, a Service (EndpointSlices and Endpoints) and a
  PodDisruptionBudget, after a first sync has settled what the generated objects left to write;
- a node heartbeat and a node label change through every node handler, and the DaemonSet keys each enqueued;
- one node lifecycle monitor pass, one pod GC pass, one periodic resync of the pod informer (and the longest
  stretch it held the event loop), and the garbage collector's graph over every pod and its owners (tracemalloc).

Sizes (``--size``): ``full`` 5,000 nodes in 3 zones and 150,000 pods; ``tenth`` 500 and 15,000; ``tiny`` 30 and
900 (a smoke run). The pods: Deployments of 250, 30 and 5 replicas in namespaces of at most 3,000 pods (as
bench/envelope.py plans them), two DaemonSets in kube-system with a pod on every node, Jobs of 10 running pods,
a Service for each Deployment of more than 5 replicas and a PodDisruptionBudget per namespace. Without
``--size`` both ``tenth`` and ``full`` run, each in a process of its own, and the table puts them side by side:
a per-event or per-sync figure that grows tenfold with them is an O(n) walk.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import copy
import functools
import gc
import itertools
import json
import logging
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import structlog

from bench.envelope import Planned, Profile, plan
from bench.memory import rss_bytes
from bench.walks import StoreWalks
from controller_manager import gctuning
from controller_manager.api.meta import format_micro_time, format_time, key_of, meta
from controller_manager.api.resources import (
    CONTROLLERREVISIONS,
    DAEMONSETS,
    DEPLOYMENTS,
    JOBS,
    LEASES,
    NAMESPACES,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    SERVICES,
    Resource,
)
from controller_manager.client.errors import NotFound
from controller_manager.clock import RealClock
from controller_manager.controllerutil.controller_utils import compute_hash
from controller_manager.manager.options import Options
from controller_manager.manager.registry import default_registry
from controller_manager.runtime.controller import Controller, ControllerContext
from controller_manager.runtime.informers import SharedInformer, SharedInformerFactory
from controller_manager.sim.apiserver.defaults import apply_defaults

ROOT = Path(__file__).resolve().parent.parent
Obj = dict[str, Any]


@dataclass(frozen=True)
class Size:
    nodes: int
    pods: int  # every pod: Deployments', DaemonSets' and Jobs'
    zones: int = 3
    daemonsets: int = 2
    jobs: int = 50
    job_pods: int = 10


SIZES = {
    "full": Size(nodes=5000, pods=150_000),
    "tenth": Size(nodes=500, pods=15_000, jobs=5),
    "tiny": Size(nodes=30, pods=900, jobs=2),
}


# --- the cluster's objects ----------------------------------------------------------------------------------

class Objects:
    """Generated objects, as a 1.37 API server would serve them (defaults applied), plus a uid/rv source."""

    def __init__(self) -> None:
        self._uids = itertools.count(1)
        self._rvs = itertools.count(1000)
        self.now = format_time(time.time())

    def uid(self) -> str:
        n = next(self._uids)
        return f"00000000-0000-4000-8000-{n:012d}"

    def rv(self) -> str:
        return str(next(self._rvs))

    def meta(self, name: str, namespace: str | None = None, **extra: Any) -> Obj:
        m: Obj = {"name": name, "uid": self.uid(), "resourceVersion": self.rv(), "creationTimestamp": self.now,
                  "generation": 1}
        if namespace is not None:
            m["namespace"] = namespace
        m.update(extra)
        return m


def _owner(kind: str, api_version: str, obj: Obj) -> Obj:
    m = obj["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": m["name"], "uid": m["uid"], "controller": True,
            "blockOwnerDeletion": True}


def _pod_spec() -> Obj:
    return {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}]}


def _running_status(o: Objects, i: int, node: str) -> Obj:
    cond = [{"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": o.now}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")]
    ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
    return {"phase": "Running", "conditions": cond, "hostIP": "192.168.0.1", "hostIPs": [{"ip": "192.168.0.1"}],
            "podIP": ip, "podIPs": [{"ip": ip}], "startTime": o.now, "qosClass": "Burstable",
            "containerStatuses": [{"name": "c", "ready": True, "started": True, "restartCount": 0,
                                   "image": "registry.k8s.io/pause:3.10", "imageID": "sha256:abc",
                                   "containerID": f"containerd://{i:064x}",
                                   "state": {"running": {"startedAt": o.now}}}]}


class Cluster:
    """Every generated object by resource, and the keys the measurements use."""

    def __init__(self, size: Size) -> None:
        self.size = size
        self.o = Objects()
        self.by_res: dict[Resource, list[Obj]] = {r: [] for r in (
            NAMESPACES, NODES, LEASES, PODS, DEPLOYMENTS, REPLICASETS, DAEMONSETS, CONTROLLERREVISIONS, JOBS,
            SERVICES, PODDISRUPTIONBUDGETS)}
        self._pod_i = 0
        self.node_names = [f"node-{i:05d}" for i in range(size.nodes)]
        self._build()

    def add(self, res: Resource, obj: Obj) -> Obj:
        self.by_res[res].append(obj)
        return obj

    def _next_node(self) -> str:
        return self.node_names[self._pod_i % len(self.node_names)]

    def _pod(self, namespace: str, name: str, labels: Mapping[str, str], owner: Obj, spec: Obj,
             node: str | None = None, **meta_extra: Any) -> Obj:
        node = node or self._next_node()
        i = self._pod_i
        self._pod_i += 1
        return self.add(PODS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": self.o.meta(name, namespace, labels=dict(labels), ownerReferences=[owner], **meta_extra),
            "spec": {**spec, "nodeName": node}, "status": _running_status(self.o, i, node)})

    def _build(self) -> None:
        size, o = self.size, self.o
        for ns in ("default", "kube-system", "kube-node-lease"):
            self.add(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": o.meta(ns),
                                  "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        for i, name in enumerate(self.node_names):
            self.add(NODES, self.node(name, f"zone-{i % size.zones}"))
            self.add(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                              "metadata": o.meta(name, "kube-node-lease"),
                              "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                                       "renewTime": format_micro_time(time.time())}})
        daemon_pods = size.nodes * size.daemonsets
        job_pods = size.jobs * size.job_pods
        planned = plan(Profile(nodes=0, pods=size.pods - daemon_pods - job_pods, rate=0, minutes=0))
        namespaces = sorted({p.namespace for p in planned})
        for ns in namespaces:
            self.add(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": o.meta(ns),
                                  "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        self.deployments: list[tuple[Obj, Obj]] = []
        for p in planned:
            self.deployments.append(self._deployment(p))
        for ns in namespaces:
            biggest = next(p for p in planned if p.namespace == ns)
            self.add(PODDISRUPTIONBUDGETS, {
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": o.meta(f"{biggest.name}", ns),
                "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": biggest.name}}}})
        for d in range(size.daemonsets):
            self._daemonset(f"agent-{d}")
        for j in range(size.jobs):
            self._job(namespaces[j % len(namespaces)], f"job-{j}")

    def node(self, name: str, zone: str) -> Obj:
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
                  "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "region-1"}
        now = self.o.now
        conds = [{"type": t, "status": "False", "lastHeartbeatTime": now, "lastTransitionTime": now,
                  "reason": f"KubeletHas{r}", "message": "ok"}
                 for t, r in (("MemoryPressure", "SufficientMemory"), ("DiskPressure", "NoDiskPressure"),
                              ("PIDPressure", "SufficientPID"))]
        conds.append({"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now,
                      "reason": "KubeletReady", "message": "kubelet is posting ready status"})
        capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        return {"apiVersion": "v1", "kind": "Node", "metadata": self.o.meta(name, labels=labels),
                "spec": {"podCIDR": "", "providerID": f"sim://{name}"},
                "status": {"capacity": capacity, "allocatable": capacity, "conditions": conds,
                           "addresses": [{"type": "InternalIP", "address": "192.168.0.1"},
                                         {"type": "Hostname", "address": name}],
                           "nodeInfo": {"kubeletVersion": "v1.37.0", "operatingSystem": "linux",
                                        "architecture": "amd64"}}}

    def _deployment(self, p: Planned) -> tuple[Obj, Obj]:
        o = self.o
        labels = {"app": p.name}
        dep = apply_defaults(DEPLOYMENTS, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": o.meta(p.name, p.namespace, labels=labels,
                               annotations={"deployment.kubernetes.io/revision": "1"}),
            "spec": {"replicas": p.replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": _pod_spec()}}})
        template = dep["spec"]["template"]
        hash_ = compute_hash(template, None)
        rs_labels = {**labels, "pod-template-hash": hash_}
        rs_template = copy.deepcopy(template)
        rs_template["metadata"]["labels"] = rs_labels
        n = p.replicas
        surge = -(-n * 25 // 100)
        rs = self.add(REPLICASETS, {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": o.meta(f"{p.name}-{hash_}", p.namespace, labels=rs_labels,
                               annotations={"deployment.kubernetes.io/revision": "1",
                                            "deployment.kubernetes.io/desired-replicas": str(n),
                                            "deployment.kubernetes.io/max-replicas": str(n + surge)},
                               ownerReferences=[_owner("Deployment", "apps/v1", dep)]),
            "spec": {"replicas": n, "minReadySeconds": 0, "selector": {"matchLabels": rs_labels},
                     "template": rs_template},
            "status": {"replicas": n, "fullyLabeledReplicas": n, "readyReplicas": n, "availableReplicas": n,
                       "observedGeneration": 1}})
        dep["status"] = {"observedGeneration": 1, "replicas": n, "updatedReplicas": n, "readyReplicas": n,
                         "availableReplicas": n, "conditions": [
                             {"type": "Available", "status": "True", "lastUpdateTime": o.now,
                              "lastTransitionTime": o.now, "reason": "MinimumReplicasAvailable",
                              "message": "Deployment has minimum availability."},
                             {"type": "Progressing", "status": "True", "lastUpdateTime": o.now,
                              "lastTransitionTime": o.now, "reason": "NewReplicaSetAvailable",
                              "message": f'ReplicaSet "{rs["metadata"]["name"]}" has successfully progressed.'}]}
        self.add(DEPLOYMENTS, dep)
        owner = _owner("ReplicaSet", "apps/v1", rs)
        for i in range(n):
            self._pod(p.namespace, f"{rs['metadata']['name']}-{i:05d}", rs_labels, owner, rs_template["spec"],
                      generateName=f"{rs['metadata']['name']}-")
        if p.service:
            self.add(SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": o.meta(p.name, p.namespace),
                                "spec": {"selector": labels, "ports": [{"name": "http", "protocol": "TCP",
                                                                        "port": 80, "targetPort": 8080}],
                                         "type": "ClusterIP", "clusterIP": "10.96.0.10",
                                         "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"],
                                         "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None"},
                                "status": {"loadBalancer": {}}})
        return dep, rs

    def _daemonset(self, name: str) -> None:
        o = self.o
        labels = {"app": name}
        ds = apply_defaults(DAEMONSETS, {
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": o.meta(name, "kube-system"),
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": _pod_spec()}}})
        n = len(self.node_names)
        ds["status"] = {"currentNumberScheduled": n, "numberMisscheduled": 0, "desiredNumberScheduled": n,
                        "numberReady": n, "observedGeneration": 1, "updatedNumberScheduled": n,
                        "numberAvailable": n}
        self.add(DAEMONSETS, ds)
        owner = _owner("DaemonSet", "apps/v1", ds)
        spec = ds["spec"]["template"]["spec"]
        tolerations = [{"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": e}
                       for t, e in (("not-ready", "NoExecute"), ("unreachable", "NoExecute"),
                                    ("disk-pressure", "NoSchedule"), ("memory-pressure", "NoSchedule"),
                                    ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule"))]
        for node in self.node_names:
            affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
            self._pod("kube-system", f"{name}-{node}", {**labels, "controller-revision-hash": "0"}, owner,
                      {**spec, "affinity": affinity, "tolerations": tolerations}, node=node,
                      generateName=f"{name}-")

    def _job(self, namespace: str, name: str) -> None:
        o = self.o
        m = o.meta(name, namespace)
        uid = m["uid"]
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                  "controller-uid": uid, "job-name": name}
        k = self.size.job_pods
        job = apply_defaults(JOBS, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": m,
            "spec": {"parallelism": k, "completions": k, "manualSelector": False,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {**_pod_spec(), "restartPolicy": "Never"}}}})
        job["status"] = {"active": k, "ready": k, "terminating": 0, "startTime": o.now,
                         "uncountedTerminatedPods": {}}
        self.add(JOBS, job)
        owner = _owner("Job", "batch/v1", job)
        for i in range(k):
            self._pod(namespace, f"{name}-{i:03d}", labels, owner, job["spec"]["template"]["spec"],
                      finalizers=["batch.kubernetes.io/job-tracking"], generateName=f"{name}-")


# --- a client that answers at once and feeds the informers ------------------------------------------------

def _merge(target: Obj, patch: Mapping[str, Any]) -> Obj:
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        elif not k.startswith("$"):
            out[k] = copy.deepcopy(v)
    return out


class EchoClient:
    """Writes succeed at once; the written object goes to its informer's store as its watch event would."""

    supports_watch_list = False

    def __init__(self) -> None:
        self.factory: SharedInformerFactory | None = None
        self.writes = 0
        self._rvs = itertools.count(10_000_000)
        self._uids = itertools.count(1)

    def _informer(self, res: Resource) -> SharedInformer | None:
        return self.factory.existing(res) if self.factory is not None else None

    def _show(self, res: Resource, obj: Obj, event: str = "MODIFIED") -> Obj:
        self.writes += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(next(self._rvs))
        informer = self._informer(res)
        if informer is not None:
            informer.apply(event, obj)
        return obj

    def _cached(self, res: Resource, name: str, namespace: str | None) -> Obj:
        informer = self._informer(res)
        obj = informer.store.get(f"{namespace}/{name}" if namespace else name) if informer is not None else None
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found', {}, {})
        return copy.deepcopy(obj)

    async def get(self, res: Resource, name: str, namespace: str | None = None, **_: Any) -> Obj:
        return self._cached(res, name, namespace)

    async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> Obj:
        informer = self._informer(res)
        items = informer.store.list() if informer is not None else []
        return {"items": [i for i in items if namespace is None or meta(i).get("namespace") == namespace],
                "metadata": {"resourceVersion": "1"}}

    async def list_all(self, res: Resource, namespace: str | None = None, **kw: Any) -> tuple[builtins.list[Obj], str]:
        listed = await self.list(res, namespace)
        return listed["items"], "1"

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> Obj:
        created = copy.deepcopy(dict(obj))
        m = created.setdefault("metadata", {})
        if namespace and res.namespaced:
            m["namespace"] = namespace
        if not m.get("name"):
            m["name"] = f"{m.get('generateName', 'x-')}{next(self._uids):05d}"
        m["uid"] = f"ffffffff-0000-4000-8000-{next(self._uids):012d}"
        m.setdefault("creationTimestamp", format_time(time.time()))
        return self._show(res, created, "ADDED")

    async def update(self, res: Resource, obj: Mapping[str, Any], **_: Any) -> Obj:
        return self._show(res, dict(obj))

    async def update_status(self, res: Resource, obj: Mapping[str, Any], **_: Any) -> Obj:
        return self._show(res, dict(obj))

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, **_: Any) -> Obj:
        current = self._cached(res, name, namespace)
        if isinstance(patch, Mapping):
            current = _merge(current, patch)
        return self._show(res, current)

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **_: Any) -> Obj:
        current = self._cached(res, name, namespace)
        self.writes += 1
        informer = self._informer(res)
        if informer is not None:
            informer.apply("DELETED", current)
        return current

    async def discover_partial(self) -> Any:
        return [], {}

    async def get_scale(self, res: Resource, name: str, namespace: str) -> Obj:
        obj = self._cached(res, name, namespace)
        return {"spec": {"replicas": obj["spec"].get("replicas", 1)}, "status": {"replicas": 0, "selector": ""}}

    def watch(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("the informers are filled directly; nothing watches")

    def fence_writes(self, *_: Any) -> None:
        pass


class NullEvents:
    """Events go nowhere (the recorder's own cost is not what is measured here)."""

    def recorder(self, component: str) -> NullEvents:
        return self

    def event(self, *a: Any, **k: Any) -> None:
        pass

    def eventf(self, *a: Any, **k: Any) -> None:
        pass


# --- measuring ----------------------------------------------------------------------------------------------

@dataclass
class Row:
    item: str
    size: str
    per: str
    seconds: float  # CPU seconds per op or per pass (what the process spent, whatever else ran on the machine)
    walked: float  # cached objects handed out per op
    note: str = ""
    wall: float = 0.0  # wall-clock seconds per op (inflated on a loaded machine)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


class Bench:
    def __init__(self, size_name: str, *, verbose: bool = False) -> None:
        self.size_name = size_name
        self.size = SIZES[size_name]
        self.rows: list[Row] = []
        self.walks = StoreWalks()
        self.verbose = verbose

    def row(self, item: str, per: str, seconds: float, walked: float, note: str = "", *,
            wall: float | None = None) -> None:
        wall = seconds if wall is None else wall
        self.rows.append(Row(item, self.size_name, per, seconds, walked, note, wall))
        print(f"  {item:<58} {seconds * 1e3:10.3f} ms/{per:<6} CPU ({wall * 1e3:10.3f} wall) "
              f"{walked:10.0f} walked  {note}", flush=True)

    async def measure(self, item: str, op: Callable[[], Awaitable[object] | object], *, times: int,
                      per: str = "op", note: str = "") -> None:
        self.walks.reset()
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(times):
            result = op()
            if asyncio.iscoroutine(result):
                await result
        cpu = time.process_time() - cpu
        elapsed = time.perf_counter() - started
        self.row(item, per, cpu / times, self.walks.objects / times, note, wall=elapsed / times)
        if self.verbose:
            for caller, n in self.walks.by_caller.most_common(4):
                print(f"      {n / times:10.0f}  {caller}", flush=True)

    async def run(self) -> list[Row]:
        print(f"scale paths, size {self.size_name}: {self.size}", flush=True)
        started = time.perf_counter()
        cluster = Cluster(self.size)
        print(f"  generated {sum(len(v) for v in cluster.by_res.values())} objects in "
              f"{time.perf_counter() - started:.1f}s", flush=True)
        client = EchoClient()
        factory = SharedInformerFactory(client, clock=RealClock(), watch_list=False)
        client.factory = factory
        clock = RealClock()
        options = asdict(Options())
        controllers: dict[str, Controller] = {}
        for info in default_registry().select(["*"]).runnable:
            assert info.implementation is not None
            ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                                    events=NullEvents(), options=options)  # type: ignore[arg-type]
            controllers[info.implementation.alias] = info.implementation(ctx)
        gc_ctrl = controllers.get("garbagecollector")
        # Fill the stores as the first lists would: every handler sees every object Added.
        rss0 = rss_bytes()
        started, cpu = time.perf_counter(), time.process_time()
        for res, items in cluster.by_res.items():
            informer = factory.informer(res)
            informer.replace(items, "1")
        fill, cpu = time.perf_counter() - started, time.process_time() - cpu
        pods = len(factory.informer(PODS).store)
        del cluster.by_res
        gctuning.freeze_cache()  # as the manager does once the caches are synced
        self.row("initial list: every object through every handler", "list", cpu, 0,
                 f"{pods} pods cached; RSS +{(rss_bytes() - rss0) / 2**20:.0f} MiB (parsed dicts through the "
                 "transform: the wire decoder's path is cheaper)", wall=fill)
        with self.walks:
            await self._events(cluster, factory, controllers)
            await self._syncs(cluster, factory, controllers)
            await self._periodic(factory, controllers)
        if gc_ctrl is not None:
            await self._gc_graph(factory, gc_ctrl)
        return self.rows

    # -- events --------------------------------------------------------------------------------------------

    async def _events(self, cluster: Cluster, factory: SharedInformerFactory,
                      controllers: Mapping[str, Controller]) -> None:
        pods = factory.informer(PODS)
        _, rs = cluster.deployments[0]
        rs_uid = rs["metadata"]["uid"]
        pod = pods.store.by_index("controller-uid", rs_uid)[0]
        flips = [copy.deepcopy(pod), copy.deepcopy(pod)]
        for cond in flips[0]["status"]["conditions"]:
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["status"] = "False"
        rv = itertools.count(20_000_000)

        def flip(i: list[int] = [0]) -> None:  # noqa: B006 - a counter shared by the calls
            obj = flips[i[0] % 2]
            i[0] += 1
            obj["metadata"]["resourceVersion"] = str(next(rv))
            pods.apply("MODIFIED", obj, transformed=True)

        await self.measure("pod event: a Deployment pod's readiness changes", flip, times=2000, per="event",
                           note=f"{len(pods._handlers)} pod handlers")
        template = copy.deepcopy(pod)
        counter = itertools.count()

        def add_delete() -> None:
            obj = copy.deepcopy(template)
            n = next(counter)
            obj["metadata"].update(name=f"extra-{n}", uid=f"eeeeeeee-0000-4000-8000-{n:012d}",
                                   resourceVersion=str(next(rv)))
            pods.apply("ADDED", obj, transformed=True)
            pods.apply("DELETED", obj, transformed=True)

        await self.measure("pod event: a pod added, then deleted", add_delete, times=1000, per="pair")
        ds_pod = pods.store.get(f"kube-system/agent-0-{cluster.node_names[0]}")
        assert ds_pod is not None
        ds_flip = copy.deepcopy(ds_pod)

        def ds_update() -> None:
            ds_flip["metadata"]["resourceVersion"] = str(next(rv))
            pods.apply("MODIFIED", copy.deepcopy(ds_flip), transformed=True)

        await self.measure("pod event: a DaemonSet pod's status update", ds_update, times=1000, per="event")

        nodes = factory.informer(NODES)
        cached_node = nodes.store.get(cluster.node_names[0])
        assert cached_node is not None
        node = copy.deepcopy(cached_node)
        ds_ctrl = controllers["daemonset"]

        def heartbeat() -> None:
            beat = copy.deepcopy(node)
            beat["metadata"]["resourceVersion"] = str(next(rv))
            for cond in beat["status"]["conditions"]:
                cond["lastHeartbeatTime"] = format_time(time.time() + next(rv) % 1000)
            nodes.apply("MODIFIED", beat)

        _drain(ds_ctrl)
        await self.measure("node event: a heartbeat (status conditions' times)", heartbeat, times=500,
                           per="event", note=f"{len(nodes._handlers)} node handlers")
        beats = _drain(ds_ctrl)

        def relabel(i: list[int] = [0]) -> None:  # noqa: B006 - a counter shared by the calls
            i[0] += 1
            obj = copy.deepcopy(node)
            obj["metadata"]["resourceVersion"] = str(next(rv))
            obj["metadata"]["labels"] = {**obj["metadata"]["labels"], "example.com/pool": f"p{i[0] % 2}"}
            nodes.apply("MODIFIED", obj)

        await self.measure("node event: a label change", relabel, times=200, per="event")
        relabels = _drain(ds_ctrl)
        self.row("daemonset: keys enqueued per node heartbeat / label change", "event", 0.0, 0,
                 f"{beats / 500:.2f} / {relabels / 200:.2f} of {self.size.daemonsets} DaemonSets")

    # -- syncs ---------------------------------------------------------------------------------------------

    async def _syncs(self, cluster: Cluster, factory: SharedInformerFactory,
                     controllers: Mapping[str, Controller]) -> None:
        dep, rs = cluster.deployments[0]
        dep_key, rs_key = key_of(dep), key_of(rs)
        small_dep, small_rs = cluster.deployments[-1]
        jobs = factory.informer(JOBS).store.keys()
        pdbs = factory.informer(PODDISRUPTIONBUDGETS).store.keys()
        cases: list[tuple[str, str, str, str]] = [
            ("deployment", dep_key, "deployment sync (the first one)", f"{dep['spec']['replicas']} pods"),
            ("deployment", key_of(small_dep), "deployment sync (the last one)",
             f"{small_dep['spec']['replicas']} pods"),
            ("replicaset", rs_key, "replicaset sync (the first one)", f"{rs['spec']['replicas']} pods"),
            ("replicaset", key_of(small_rs), "replicaset sync (the last one)", f"{small_rs['spec']['replicas']} pods"),
            ("daemonset", "kube-system/agent-0", "daemonset sync (a pod on every node)", f"{self.size.nodes} nodes"),
            ("job", jobs[0], "job sync", f"{self.size.job_pods} pods"),
            ("endpointslice", dep_key, "endpointslice sync (the first Service)", f"{dep['spec']['replicas']} pods"),
            ("endpoint", dep_key, "endpoints sync (the first Service)", f"{dep['spec']['replicas']} pods"),
            ("disruption", pdbs[0], "disruption sync (the first PDB)", f"{dep['spec']['replicas']} pods"),
        ]
        for alias, key, item, what in cases:
            ctrl = controllers.get(alias)
            if ctrl is None:
                continue
            before = ctrl.ctx.client.writes  # type: ignore[attr-defined]
            for _ in range(2):  # settle what the generated objects left to write
                await ctrl.sync(key)
            settled = ctrl.ctx.client.writes  # type: ignore[attr-defined]
            times = 20 if alias == "daemonset" else 50
            await self.measure(item, functools.partial(ctrl.sync, key), times=times, per="sync",
                               note=f"{what}; {settled - before} writes settling, "
                                    f"{(ctrl.ctx.client.writes - settled) / times:.1f} per sync after")  # type: ignore[attr-defined]

    # -- periodic passes -----------------------------------------------------------------------------------

    async def _periodic(self, factory: SharedInformerFactory, controllers: Mapping[str, Controller]) -> None:
        lifecycle = controllers.get("nodelifecycle")
        if lifecycle is not None:
            await lifecycle.monitor_node_health()  # type: ignore[attr-defined]  # registers every node
            await self.measure("node lifecycle: one monitor pass", lifecycle.monitor_node_health,  # type: ignore[attr-defined]
                               times=3, per="pass", note=f"{self.size.nodes} nodes")
        podgc = controllers.get("podgc")
        if podgc is not None:
            await self.measure("pod GC: one pass", podgc.gc, times=3, per="pass")  # type: ignore[attr-defined]
        attach = controllers.get("attachdetach")
        if attach is not None:
            sweep = attach.find_and_add_active_pods  # type: ignore[attr-defined]
            stall = await _longest_stall(sweep())
            self.walks.reset()
            started, cpu = time.perf_counter(), time.process_time()
            await sweep()
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            self.row("attach/detach populator: the 3-minute sweep over every pod", "pass", cpu, self.walks.objects,
                     f"event loop held at most {stall * 1e3:.0f} ms (wall) at a time", wall=elapsed)
        pods = factory.informer(PODS)
        stall = await _longest_stall(pods.resync_once())
        self.walks.reset()
        started, cpu = time.perf_counter(), time.process_time()
        await pods.resync_once()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        self.row("informer resync: every cached pod to every handler", "pass", cpu, self.walks.objects,
                 f"event loop held at most {stall * 1e3:.0f} ms (wall) at a time", wall=elapsed)
        if self.verbose:
            for caller, n in self.walks.by_caller.most_common(4):
                print(f"      {n:10.0f}  {caller}", flush=True)

    async def _gc_graph(self, factory: SharedInformerFactory, ctrl: Controller) -> None:
        builder = ctrl.builder  # type: ignore[attr-defined]
        owned = {r: factory.informer(r) for r in (PODS, REPLICASETS, DEPLOYMENTS, DAEMONSETS, JOBS,
                                                  CONTROLLERREVISIONS)}
        objects = sum(len(i.store) for i in owned.values())
        gc.collect()
        tracemalloc.start(1)
        started, cpu = time.perf_counter(), time.process_time()
        builder.sync_monitors({(r.group, r.version, r.plural): r for r in owned})
        queue = builder.graph_changes
        while len(queue):
            event = await queue.get()
            builder.process_graph_changes(event)
            queue.done(event)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        tracemalloc.stop()
        filters = [tracemalloc.Filter(True, p) for p in ("*/garbagecollector/graph.py",
                                                        "*/garbagecollector/graph_builder.py")]
        graph_bytes = sum(s.size for s in snapshot.filter_traces(filters).statistics("filename"))
        nodes = len(builder.uid_to_node)
        self.row("garbage collector: graph of every pod and owner built", "build", cpu, 0,
                 f"{objects} objects: {nodes} nodes, {graph_bytes / 2**20:.1f} MiB "
                 f"({graph_bytes / max(1, nodes):.0f} B/node, "
                 "tracemalloc, so time is ~2x)", wall=elapsed)


def _drain(ctrl: Controller) -> int:
    """Keys waiting in a controller's queue, taken out (the count of what was enqueued since the last drain)."""
    queue = ctrl.queue
    n = 0
    while len(queue):
        key = queue._queue.popleft()
        queue._dirty.discard(key)
        n += 1
    return n


async def _longest_stall(work: Awaitable[object]) -> float:
    """Run ``work`` beside a probe that yields to the loop all the time: the longest gap it saw."""
    longest = 0.0
    done = False

    async def probe() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)  # the probe has taken its first time
    try:
        await work
    finally:
        done = True
        await task
    return longest


# --- driver -------------------------------------------------------------------------------------------------

def _run_size(size: str, verbose: bool = False) -> list[dict[str, Any]]:
    # As the daemon runs: warnings and errors only, and its garbage-collector settings.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    gctuning.configure()
    rows = asyncio.run(Bench(size, verbose=verbose).run())
    return [r.as_json() for r in rows]


def _table(runs: dict[str, list[dict[str, Any]]]) -> str:
    sizes = list(runs)
    items: dict[str, dict[str, dict[str, Any]]] = {}
    for size, rows in runs.items():
        for r in rows:
            items.setdefault(r["item"], {})[size] = r
    head = "| item | " + " | ".join(f"{s}: time | {s}: walked" for s in sizes) + " | notes (largest size) |"
    out = [head, "|" + "---|" * (2 + 2 * len(sizes))]
    for item, by_size in items.items():
        cells = []
        for s in sizes:
            found = by_size.get(s)
            cells += ["-", "-"] if found is None else [_fmt_time(found["seconds"], found["per"]),
                                                      f"{found['walked']:.0f}"]
        note = by_size[sizes[-1]]["note"] if sizes[-1] in by_size else ""
        out.append(f"| {item} | " + " | ".join(cells) + f" | {note} |")
    return "\n".join(out)


def _fmt_time(seconds: float, per: str) -> str:
    if seconds == 0:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s/{per}"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms/{per}"
    return f"{seconds * 1e6:.0f} us/{per}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_paths", description=__doc__.split("\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), help="one size, in this process")
    parser.add_argument("--json", type=Path, help="write the rows there (with --size)")
    parser.add_argument("--verbose", action="store_true", help="name the code behind each walk")
    parser.add_argument("--sizes", default="tenth,full", help="sizes to compare, each in its own process")
    args = parser.parse_args(argv)
    if args.size:
        rows = _run_size(args.size, args.verbose)
        if args.json:
            args.json.write_text(json.dumps(rows))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="scale-paths-") as tmp:
        for size in args.sizes.split(","):
            out = Path(tmp) / f"{size}.json"
            subprocess.run([sys.executable, "-m", "bench.scale_paths", "--size", size, "--json", str(out)],
                           check=True, cwd=ROOT)
            runs[size] = json.loads(out.read_text())
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"\nload average at the end: {load}\n")
    print(_table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
