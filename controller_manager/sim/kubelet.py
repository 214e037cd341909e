"""kube-sim's kubelets: one :class:`KubeletManager` plays the kubelet of every simulated node.

Guarantees:
- Each node registers a Node (capacity and allocatable from :class:`KubeletConfig`, the well-known
  labels, nodeInfo, addresses, the four kubelet conditions), renews its Lease in
  ``kube-node-lease`` every ``lease_renew_interval`` and posts node status every
  ``node_status_update_frequency`` when it changed, or every ``node_status_report_frequency``
  regardless, as the kubelet does since node leases exist.
- Pods bound to a node go Pending (containers waiting ``ContainerCreating``) -> Running, with the
  status fields and conditions a kubelet writes, driven by annotations (prefix
  ``sim.controller-manager.io/``): ``start-seconds``, ``ready-after-seconds``, ``run-seconds``,
  ``exit-code``. Exits follow ``restartPolicy`` (Always: restart after a short CrashLoopBackOff;
  OnFailure: restart non-zero exits; Never: the pod ends Succeeded or Failed).
- A pod with ``deletionTimestamp`` is stopped and, after min(its grace period,
  ``termination_delay``), deleted with ``gracePeriodSeconds=0`` and a uid precondition: the
  kubelet's confirmation. Finalizers then keep it until removed, as the API server rules.
- A node annotated ``sim.controller-manager.io/kubelet=stopped`` stops heartbeats, Lease renewals,
  status updates and pod progress, as if it died; ``=running`` resumes (Ready re-posted, pods
  picked up from what the API shows).
- Every delay reads the injected Clock; all API writes happen on one worker task, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import format_micro_time, format_time, meta, parse_time
from controller_manager.api.resources import EVENTS, LEASES, NAMESPACES, NODES, PODS
from controller_manager.clock import Clock, RealClock, TimerHandle
from controller_manager.sim.scheduler import ListWatch, event_object, status_code

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

__all__ = ["ANNOTATION_PREFIX", "KUBELET_ANNOTATION", "KubeletConfig", "KubeletManager", "node_object"]

log = structlog.get_logger("kube-sim.kubelet")

ANNOTATION_PREFIX = "sim.controller-manager.io/"
KUBELET_ANNOTATION = ANNOTATION_PREFIX + "kubelet"
NODE_LEASE_NAMESPACE = "kube-node-lease"


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """Intervals (seconds) and node shape. Defaults are the real kubelet's where one exists."""

    node_status_update_frequency: float = 10.0
    node_status_report_frequency: float = 300.0
    lease_duration_seconds: int = 40
    lease_renew_interval: float = 10.0  # the kubelet renews at a quarter of the lease duration
    default_start_seconds: float = 0.0  # pull + create + start, when the pod does not say
    termination_delay: float = 0.5  # cap on a graceful termination (the sim's containers stop fast)
    crash_loop_base: float = 1.0  # CrashLoopBackOff starts here and doubles (the kubelet: 10 s)
    crash_loop_max: float = 10.0  # (the kubelet: 300 s)
    cpu: str = "4"
    memory: str = "16Gi"
    pods: str = "110"
    ephemeral_storage: str = "100Gi"
    instance_type: str = "sim.large"
    region: str = "sim-region"
    kubelet_version: str = "v1.31.0"
    container_runtime_version: str = "containerd://1.7.22"
    events: bool = True  # record Pulled/Created/Started/Killing/BackOff events


def node_object(name: str, index: int, zone: str, config: KubeletConfig, now: float) -> dict[str, Any]:
    """The Node a kubelet registers (status included: node registration sends it)."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    resources = {"cpu": config.cpu, "memory": config.memory, "pods": config.pods,
                 "ephemeral-storage": config.ephemeral_storage, "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": config.instance_type,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": config.region,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": _pod_cidr(index), "podCIDRs": [_pod_cidr(index)], "providerID": f"kube-sim://{name}"},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": node_conditions(now, {}),
            "addresses": [{"type": "InternalIP", "address": _node_ip(index)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": digest[:32],
                "systemUUID": f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}",
                "bootID": digest[32:64],
                "kernelVersion": "6.8.0-sim",
                "osImage": "kube-sim Linux",
                "containerRuntimeVersion": config.container_runtime_version,
                "kubeletVersion": config.kubelet_version,
                "kubeProxyVersion": config.kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


_NODE_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def node_conditions(now: float, current: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The kubelet's node conditions, heartbeat now; transition time kept where the status did not change."""
    ts = format_time(now)
    out = []
    for ctype, status, reason, message in _NODE_CONDITIONS:
        prev = current.get(ctype)
        since = prev.get("lastTransitionTime") if prev and prev.get("status") == status else None
        out.append({"type": ctype, "status": status, "lastHeartbeatTime": ts, "lastTransitionTime": since or ts,
                    "reason": reason, "message": message})
    return out


def _node_ip(index: int) -> str:
    n = index + 2
    return f"172.18.{n // 256}.{n % 256}"


def _pod_cidr(index: int) -> str:
    return f"10.{244 + index // 256}.{index % 256}.0/24"


def _annotation_seconds(pod: dict[str, Any], name: str, default: float | None) -> float | None:
    raw = (meta(pod).get("annotations") or {}).get(ANNOTATION_PREFIX + name)
    if raw is None:
        return default
    try:
        return max(0.0, float(raw))
    except ValueError:
        return default


@dataclass(slots=True)
class _Node:
    name: str
    index: int
    zone: str
    stopped: bool = False
    deleted: bool = False  # the Node object was deleted; a running kubelet does not register again
    obj: dict[str, Any] | None = None  # latest Node seen through the watch
    uid: str = ""
    last_report: float = float("-inf")
    timers: list[TimerHandle] = field(default_factory=list)
    next_ip: int = 0

    def cancel_timers(self) -> None:
        for t in self.timers:
            t.cancel()
        self.timers.clear()



# --------------------------------------------------------------------------- pod status


def normalize_image(image: str) -> str:
    """How containerd reports an image reference: ``nginx`` -> ``docker.io/library/nginx:latest``."""
    name = image
    first, _, rest = name.partition("/")
    if not rest:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    last = name.rsplit("/", 1)[-1]
    if "@" not in last and ":" not in last:
        name += ":latest"
    return name


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


@dataclass(slots=True)
class PodRun:
    """What the kubelet knows of one pod bound to its node."""

    uid: str
    node: str
    pod: dict[str, Any]
    # new -> creating -> running <-> backoff -> exited; any -> terminating -> confirmed; gone once deleted
    stage: str = "new"
    generation: int = 0  # bumped whenever timers are cancelled, so a stale timer does nothing
    timers: list[TimerHandle] = field(default_factory=list)
    ip: str | None = None
    started_at: float | None = None
    restarts: int = 0
    ready: bool = False
    terminated: dict[str, Any] | None = None  # the containers' current terminated state
    last_state: dict[str, Any] | None = None  # the previous run's terminated state
    condition_times: dict[str, tuple[str, str]] = field(default_factory=dict)  # type -> (status, since)
    start_time: str | None = None

    def cancel_timers(self) -> None:
        self.generation += 1
        for t in self.timers:
            t.cancel()
        self.timers.clear()

    def absorb_condition_times(self, status: dict[str, Any]) -> None:
        for c in status.get("conditions") or ():
            if c.get("type") and c.get("lastTransitionTime"):
                self.condition_times[c["type"]] = (str(c.get("status")), c["lastTransitionTime"])
        self.start_time = status.get("startTime") or self.start_time

    def terminated_state(self, code: int, now: float, reason: str | None = None) -> dict[str, Any]:
        return {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                "startedAt": format_time(self.started_at if self.started_at is not None else now),
                "finishedAt": format_time(now)}


def build_pod_status(run: PodRun, now: float, host_ip: str, *, killed: bool = False) -> dict[str, Any]:
    """The status the kubelet reports for ``run`` at ``now`` (``killed``: stopped by a deletion)."""
    pod = run.pod
    spec = pod.get("spec") or {}
    current = pod.get("status") or {}
    containers = sorted(spec.get("containers") or (), key=lambda c: str(c.get("name", "")))
    inits = spec.get("initContainers") or ()
    stage = run.stage
    ts = format_time(now)
    run.start_time = run.start_time or current.get("startTime") or ts

    def cstatus(c: dict[str, Any], restarts: int) -> dict[str, Any]:
        image = normalize_image(str(c.get("image", "")))
        out: dict[str, Any] = {"name": c.get("name"), "image": image, "imageID": "", "ready": False,
                               "restartCount": restarts, "started": False, "state": {}, "lastState": {}}
        if stage == "creating":
            out["state"] = {"waiting": {"reason": "ContainerCreating"}}
            return out
        out["imageID"] = f"{image.rsplit(':', 1)[0]}@sha256:{_digest(image)}"
        out["containerID"] = f"containerd://{_digest(run.uid, str(c.get('name')), str(run.restarts))}"
        if stage == "running":
            out["state"] = {"running": {"startedAt": format_time(run.started_at or now)}}
            out["ready"] = run.ready
            out["started"] = True
        elif stage == "backoff":
            out["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message":
                                        f"back-off restarting failed container={c.get('name')} "
                                        f"pod={meta(pod).get('name')}_{meta(pod).get('namespace')}({run.uid})"}}
        else:
            out["state"] = {"terminated": {**(run.terminated or {}), "containerID": out["containerID"]}}
        if run.last_state is not None:
            out["lastState"] = {"terminated": run.last_state}
        return out

    statuses = [cstatus(c, run.restarts) for c in containers]
    unready = [str(c.get("name")) for c in containers]
    terminal = stage == "exited"
    if terminal:
        code = int((run.terminated or {}).get("exitCode", 0))
        phase = "Succeeded" if code == 0 and not killed else "Failed"
    else:
        phase = "Pending" if stage == "creating" else "Running"
    ready = stage == "running" and run.ready
    gates = [g.get("conditionType") for g in spec.get("readinessGates") or ()]
    have = {c.get("type"): c.get("status") for c in current.get("conditions") or ()}
    missing_gate = next((g for g in gates if have.get(g) != "True"), None)

    def cond(ctype: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = run.condition_times.get(ctype)
        since = prev[1] if prev and prev[0] == status else ts
        run.condition_times[ctype] = (status, since)
        out: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
        if not ok and reason:
            out["reason"] = reason
        if not ok and message:
            out["message"] = message
        return out

    not_ready_msg = f"containers with unready status: [{' '.join(unready)}]"
    if terminal:
        ready_conds = [cond("ContainersReady", False, "PodCompleted"), cond("Ready", False, "PodCompleted")]
    elif ready and missing_gate is not None:
        ready_conds = [cond("ContainersReady", True),
                       cond("Ready", False, "ReadinessGatesNotReady",
                            f'corresponding condition of pod readiness gate "{missing_gate}" does not exist.')]
    else:
        ready_conds = [cond("ContainersReady", ready, "ContainersNotReady", not_ready_msg),
                       cond("Ready", ready, "ContainersNotReady", not_ready_msg)]
    initialized = stage != "creating" or not inits
    conditions = [
        cond("PodReadyToStartContainers", stage not in ("creating",) and not (terminal and killed)),
        cond("Initialized", initialized, "ContainersNotInitialized",
             f"containers with incomplete status: [{' '.join(str(c.get('name')) for c in inits)}]"),
        *ready_conds,
        cond("PodScheduled", True),
    ]
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": run.start_time,
        "containerStatuses": statuses,
    }
    if inits:
        status["initContainerStatuses"] = [
            {"name": c.get("name"), "image": normalize_image(str(c.get("image", ""))), "imageID": "",
             "ready": False, "restartCount": 0, "started": False, "lastState": {},
             "state": {"waiting": {"reason": "PodInitializing"}} if stage == "creating" else
             {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": run.start_time,
                             "finishedAt": run.start_time}}}
            for c in inits]
    if run.ip and stage != "creating":
        status["podIP"] = run.ip
        status["podIPs"] = [{"ip": run.ip}]
    return status


class KubeletManager:
    """Runs the kubelets of all simulated nodes. ``run()`` until cancelled."""

    def __init__(self, api: ApiServer, clock: Clock | None = None, config: KubeletConfig | None = None) -> None:
        self._api = api
        self._clock = clock or RealClock()
        self.config = config or KubeletConfig()
        self._nodes: dict[str, _Node] = {}
        self._runs: dict[str, PodRun] = {}  # pod uid -> what the kubelet knows of it
        self._actions: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._running = False
        self._seq = 0

    # ---- nodes

    def add_node(self, name: str, zone: str = "zone-a") -> None:
        """Add a node; it registers once the manager runs (at once if it already does)."""
        if name in self._nodes:
            return
        node = _Node(name, len(self._nodes), zone)
        self._nodes[name] = node
        if self._running:
            self._start_node(node)

    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    def is_stopped(self, name: str) -> bool:
        return self._nodes[name].stopped

    def _start_node(self, node: _Node) -> None:
        self._do(lambda: self._register(node))
        self._arm_node_timers(node)

    def _arm_node_timers(self, node: _Node) -> None:
        node.cancel_timers()

        def every(interval: float, action: Callable[[], Awaitable[None]]) -> None:
            def fire() -> None:
                if not node.stopped:
                    self._do(action)
                    node.timers.append(self._clock.call_later(interval, fire))
            node.timers.append(self._clock.call_later(interval, fire))

        every(self.config.node_status_update_frequency, lambda: self._post_node_status(node, force=False))
        every(self.config.lease_renew_interval, lambda: self._renew_lease(node))

    async def _register(self, node: _Node) -> None:
        obj = node_object(node.name, node.index, node.zone, self.config, self._clock.now())
        try:
            created = self._api.create(NODES, obj)
            node.uid = str(meta(created).get("uid", ""))
            node.obj = created
            node.last_report = self._clock.monotonic()
        except Exception as exc:
            if status_code(exc) != 409:
                raise
            await self._post_node_status(node, force=True)
        node.deleted = False
        await self._renew_lease(node)

    async def _post_node_status(self, node: _Node, *, force: bool) -> None:
        """Post the node's status if it changed or is due; ``force``: now, registering the node if it
        is gone (a restarted kubelet registers itself; a running one only fails its updates)."""
        if node.stopped or (node.deleted and not force):
            return
        current = {c.get("type"): c for c in ((node.obj or {}).get("status") or {}).get("conditions") or ()}
        changed = any(
            (current.get(ctype) or {}).get("status") != status or (current.get(ctype) or {}).get("reason") != reason
            for ctype, status, reason, _ in _NODE_CONDITIONS
        )
        due = self._clock.monotonic() - node.last_report >= self.config.node_status_report_frequency
        if not (force or changed or due):
            return
        patch = {"status": {"conditions": node_conditions(self._clock.now(), current)}}
        try:
            node.obj = self._api.patch(NODES, None, node.name, patch, "strategic", subresource="status")
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            if force:
                await self._register(node)
            return
        node.uid = str(meta(node.obj).get("uid", node.uid))
        node.last_report = self._clock.monotonic()

    async def _renew_lease(self, node: _Node) -> None:
        if node.stopped or node.deleted:
            return
        now = format_micro_time(self._clock.now())
        try:
            lease = self._api.get(LEASES, NODE_LEASE_NAMESPACE, node.name)
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            await self._create_lease(node, now)
            return
        spec = {**(lease.get("spec") or {}), "holderIdentity": node.name, "renewTime": now,
                "leaseDurationSeconds": self.config.lease_duration_seconds}
        self._api.update(LEASES, {**lease, "spec": spec})

    async def _create_lease(self, node: _Node, now: str) -> None:
        lease: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": node.name, "namespace": NODE_LEASE_NAMESPACE},
            "spec": {"holderIdentity": node.name, "leaseDurationSeconds": self.config.lease_duration_seconds,
                     "renewTime": now},
        }
        if node.uid:
            lease["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid}]
        for attempt in range(2):
            try:
                self._api.create(LEASES, lease, namespace=NODE_LEASE_NAMESPACE)
                return
            except Exception as exc:
                if status_code(exc) != 404 or attempt:
                    raise
                # The namespace is the API server's to make; make sure it exists before giving up.
                with contextlib.suppress(Exception):
                    self._api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": NODE_LEASE_NAMESPACE}})

    def _on_node(self, kind: str, obj: dict[str, Any]) -> None:
        node = self._nodes.get(str(meta(obj).get("name", "")))
        if node is None:
            return
        if kind == "DELETED":
            node.obj = None
            node.deleted = True
            return
        node.obj = obj
        node.deleted = False
        node.uid = str(meta(obj).get("uid", node.uid))
        wanted = (meta(obj).get("annotations") or {}).get(KUBELET_ANNOTATION, "running")
        if wanted == "stopped" and not node.stopped:
            self._stop_node(node)
        elif wanted != "stopped" and node.stopped:
            self._resume_node(node)

    def _stop_node(self, node: _Node) -> None:
        log.info("kubelet stopped", node=node.name)
        node.stopped = True
        node.cancel_timers()
        for run in self._runs.values():
            if run.node == node.name:
                run.cancel_timers()

    def _resume_node(self, node: _Node) -> None:
        log.info("kubelet resumed", node=node.name)
        node.stopped = False
        self._do(lambda: self._post_node_status(node, force=True))
        self._do(lambda: self._renew_lease(node))
        self._arm_node_timers(node)
        for run in list(self._runs.values()):
            if run.node == node.name:
                self._adopt(run)

    # ---- pods

    def _on_pod(self, kind: str, pod: dict[str, Any]) -> None:
        uid = str(meta(pod).get("uid", ""))
        node = self._nodes.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        run = self._runs.get(uid)
        if kind == "DELETED" or node is None:
            if run is not None:
                run.cancel_timers()
                run.stage = "gone"
                del self._runs[uid]
            return
        if run is None:
            run = PodRun(uid=uid, node=node.name, pod=pod)
            self._runs[uid] = run
            if not node.stopped:
                self._adopt(run)
            return
        run.pod = pod
        if node.stopped or run.stage in ("terminating", "confirmed", "gone"):
            return
        if meta(pod).get("deletionTimestamp"):
            self._begin_termination(run)

    def _adopt(self, run: PodRun) -> None:
        """Take up a pod from what the API shows (first sight, or a resumed node)."""
        pod = run.pod
        run.cancel_timers()
        status = pod.get("status") or {}
        phase = status.get("phase")
        running = [c for c in status.get("containerStatuses") or () if "running" in (c.get("state") or {})]
        run.absorb_condition_times(status)
        if phase in ("Succeeded", "Failed"):
            run.stage = "exited"
        elif phase == "Running" and running:
            run.stage = "running"
            run.ip = status.get("podIP") or run.ip or self._next_ip(run.node)
            started = [parse_time((c["state"]["running"] or {}).get("startedAt")) for c in running]
            run.started_at = min((s for s in started if s is not None), default=self._clock.now())
            run.restarts = max(int(c.get("restartCount") or 0) for c in running)
            run.ready = all(c.get("ready") for c in running)
        elif run.stage not in ("creating", "new"):
            run.stage = "new"
        if meta(pod).get("deletionTimestamp"):
            self._begin_termination(run)
        elif run.stage == "running":
            self._arm_running_timers(run)
        elif run.stage in ("new", "creating"):
            run.stage = "creating"
            self._do(lambda: self._post(run))
            delay = _annotation_seconds(pod, "start-seconds", self.config.default_start_seconds) or 0.0
            self._after(run, delay, self._start)

    def _next_ip(self, node_name: str) -> str:
        node = self._nodes[node_name]
        node.next_ip = node.next_ip % 252 + 1
        cidr = _pod_cidr(node.index)
        return cidr.rsplit(".", 1)[0] + f".{node.next_ip + 1}"

    def _after(self, run: PodRun, delay: float, action: Callable[[PodRun], Awaitable[None]]) -> None:
        generation = run.generation

        def fire() -> None:
            if run.generation == generation and run.stage != "gone":
                self._do(lambda: action(run))
        if delay <= 0:
            fire()  # no timer: a fake clock would hold even a zero delay until it is advanced
            return
        run.timers.append(self._clock.call_later(delay, fire))

    def _arm_running_timers(self, run: PodRun) -> None:
        elapsed = max(0.0, self._clock.now() - (run.started_at or self._clock.now()))
        if not run.ready:
            ready_after = _annotation_seconds(run.pod, "ready-after-seconds", 0.0) or 0.0
            self._after(run, max(0.0, ready_after - elapsed), self._become_ready)
        run_seconds = _annotation_seconds(run.pod, "run-seconds", None)
        if run_seconds is not None:
            self._after(run, max(0.0, run_seconds - elapsed), self._exit)

    async def _start(self, run: PodRun) -> None:
        if run.stage not in ("creating", "backoff"):
            return
        if run.stage == "backoff":
            run.restarts += 1
        run.stage = "running"
        run.started_at = self._clock.now()
        run.terminated = None
        run.ip = run.ip or self._next_ip(run.node)
        run.ready = (_annotation_seconds(run.pod, "ready-after-seconds", 0.0) or 0.0) <= 0
        await self._post(run)
        if run.restarts == 0:
            for c in (run.pod.get("spec") or {}).get("containers") or ():
                await self._event(run, "Normal", "Pulled", f'Container image "{c.get("image", "")}" already present '
                                                         "on machine")
                await self._event(run, "Normal", "Created", f"Created container: {c.get('name')}")
                await self._event(run, "Normal", "Started", f"Started container {c.get('name')}")
        self._arm_running_timers(run)

    async def _become_ready(self, run: PodRun) -> None:
        if run.stage == "running" and not run.ready:
            run.ready = True
            await self._post(run)

    async def _exit(self, run: PodRun) -> None:
        if run.stage != "running":
            return
        raw = (meta(run.pod).get("annotations") or {}).get(ANNOTATION_PREFIX + "exit-code", "0")
        try:
            code = int(raw)
        except ValueError:
            code = 1
        policy = (run.pod.get("spec") or {}).get("restartPolicy") or "Always"
        run.cancel_timers()
        run.terminated = run.terminated_state(code, self._clock.now())
        run.ready = False
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            run.stage = "exited"
            await self._post(run)
            return
        run.stage = "backoff"
        run.last_state = run.terminated
        await self._post(run)
        delay = min(self.config.crash_loop_base * 2 ** min(run.restarts, 30), self.config.crash_loop_max)
        await self._event(run, "Warning", "BackOff", "Back-off restarting failed container "
                          f"{_first_container(run.pod)} in pod {_pod_ref(run.pod)}")
        self._after(run, delay, self._start)

    def _begin_termination(self, run: PodRun) -> None:
        previous = run.stage
        run.cancel_timers()
        run.stage = "terminating"
        m = meta(run.pod)
        grace = m.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (run.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        delay = 0.0 if previous == "exited" else min(float(grace or 0), self.config.termination_delay)
        if previous in ("running", "backoff"):
            self._do(lambda: self._event(run, "Normal", "Killing", f"Stopping container {_first_container(run.pod)}"))
        self._after(run, delay, lambda r: self._confirm_deletion(r, previous))

    async def _confirm_deletion(self, run: PodRun, previous: str) -> None:
        if run.stage != "terminating" or self._nodes[run.node].stopped:
            return
        if previous in ("running", "backoff", "creating"):
            run.terminated = run.terminated_state(143 if previous == "running" else 137, self._clock.now(),
                                                  reason="Error" if previous == "running" else
                                                  "ContainerStatusUnknown")
            run.ready = False
            run.stage = "exited"
            await self._post(run, killed=True)
        run.stage = "confirmed"
        m = meta(run.pod)
        try:
            self._api.delete(PODS, str(m.get("namespace")), str(m.get("name")), grace_period_seconds=0,
                                        preconditions={"uid": run.uid})
        except Exception as exc:
            if status_code(exc) not in (404, 409):
                raise

    async def _post(self, run: PodRun, *, killed: bool = False) -> None:
        if run.stage == "gone" or self._nodes[run.node].stopped:
            return
        node = self._nodes[run.node]
        status = build_pod_status(run, self._clock.now(), _node_ip(node.index), killed=killed)
        m = meta(run.pod)
        try:
            run.pod = self._api.patch(PODS, str(m.get("namespace")), str(m.get("name")), {"status": status},
                                                 "strategic", subresource="status")
        except Exception as exc:
            if status_code(exc) != 404:
                raise

    async def _event(self, run: PodRun, event_type: str, reason: str, message: str) -> None:
        if not self.config.events:
            return
        self._seq += 1
        ev = event_object(run.pod, event_type, reason, message, "kubelet", self._clock.now(), self._seq,
                          host=run.node)
        with contextlib.suppress(Exception):  # events are best effort
            self._api.create(EVENTS, ev, namespace=ev["metadata"]["namespace"])

    # ---- the loop

    def _do(self, action: Callable[[], Awaitable[None]]) -> None:
        self._actions.put_nowait(action)

    async def _worker(self) -> None:
        while True:
            action = await self._actions.get()
            try:
                await action()
            except Exception:
                log.exception("kubelet action failed")

    async def run(self) -> None:
        self._running = True
        try:
            for node in self._nodes.values():
                self._start_node(node)
            node_watch = ListWatch(self._api, NODES, self._on_node, clock=self._clock, name="kubelet-nodes")
            pod_watch = ListWatch(self._api, PODS, self._on_pod, clock=self._clock, name="kubelet-pods")
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._worker(), name="sim-kubelet-worker")
                tg.create_task(node_watch.run(), name="sim-kubelet-watch-nodes")
                tg.create_task(pod_watch.run(), name="sim-kubelet-watch-pods")
        finally:
            self._running = False
            for node in self._nodes.values():
                node.cancel_timers()
            for run in self._runs.values():
                run.cancel_timers()


def _first_container(pod: dict[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("name", ""))


def _pod_ref(pod: dict[str, Any]) -> str:
    m = meta(pod)
    return f"{m.get('name')}_{m.get('namespace')}({m.get('uid')})"
