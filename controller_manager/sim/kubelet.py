"""kube-sim's kubelets: one :class:`KubeletManager` plays the kubelet of every simulated node.

Guarantees:
- Each node registers a Node (:func:`~controller_manager.sim.nodestatus.node_object`), renews its
  Lease in ``kube-node-lease`` every ``lease_renew_interval`` and posts node status every
  ``node_status_update_frequency`` when it changed, or every ``node_status_report_frequency``
  regardless, as the kubelet does since node leases exist. All nodes' renewals and checks run from one timer
  (:class:`~controller_manager.sim.heartbeats.HeartbeatSchedule`), those due together in one pass; a renewal
  whose stored result is certain is written by :func:`~controller_manager.sim.apiserver.renewal.renew_in_place`
  (the update's bytes and watch event, without its machinery).
- Pods bound to a node go Pending (containers waiting ``ContainerCreating``) -> Running, driven by
  annotations (prefix ``sim.controller-manager.io/``): ``start-seconds``, ``ready-after-seconds``,
  ``run-seconds``, ``exit-code``. Exits follow ``restartPolicy`` (Always: restart after a short
  CrashLoopBackOff; OnFailure: restart non-zero exits; Never: the pod ends Succeeded or Failed).
- Every pod status write leaves exactly the status a real kubelet would show at that stage
  (:func:`~controller_manager.sim.podstatus.build_pod_status`), merged with the status the API holds
  at that moment, as the kubelet's status manager does: fields the kubelet no longer reports are
  removed, conditions it does not own are kept, and a write that would change nothing is not sent.
  A pod taken up again (first sight, a resumed node) is re-posted, so what others wrote over
  kubelet-owned fields meanwhile is corrected; so is a pod whose readiness-gate conditions change.
- A pod with ``deletionTimestamp`` is stopped and, after min(its grace period,
  ``termination_delay``), deleted with ``gracePeriodSeconds=0`` and a uid precondition: the
  kubelet's confirmation. Finalizers then keep it until removed, as the API server rules.
- A node annotated ``sim.controller-manager.io/kubelet=stopped`` stops heartbeats, Lease renewals,
  status updates and pod progress, as if it died; ``=running`` resumes (Ready re-posted, pods
  picked up from what the API shows).
- With a :class:`~controller_manager.sim.storage.StorageConfig` (kube-sim's simulated CSI driver), each node
  publishes its CSINode, a pod starts only once its volumes are ready
  (:meth:`~controller_manager.sim.storage.KubeletVolumes.check`: claims Bound, attachable volumes reported in
  use, attached by the attach/detach controller and their VolumeAttachments attached; re-checked every
  ``volume_poll`` seconds), and ``node.status.volumesInUse`` lists the attachable volumes of the node's pods
  that have not finished, posted as soon as that list changes.
- Every delay reads the injected Clock; all API writes happen on one worker task, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from controller_manager.api.meta import format_micro_time, meta, parse_time
from controller_manager.api.resources import LEASES, NAMESPACES, NODES, PODS
from controller_manager.clock import Clock, RealClock
from controller_manager.sim.apiserver.renewal import renew_in_place
from controller_manager.sim.heartbeats import HeartbeatSchedule
from controller_manager.sim.listwatch import ListWatch, status_code
from controller_manager.sim.nodestatus import (
    NODE_CONDITIONS,
    KubeletConfig,
    node_conditions,
    node_ip,
    node_object,
    pod_cidr,
)
from controller_manager.sim.podstatus import PodRun, build_pod_status, normalize_image
from controller_manager.sim.recorder import event_object, record
from controller_manager.sim.storage import KubeletVolumes, StorageConfig

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

# KubeletConfig, node_object and normalize_image stay importable from here, where callers first found them.
__all__ = ["ANNOTATION_PREFIX", "KUBELET_ANNOTATION", "KubeletConfig", "KubeletManager", "node_object",
           "normalize_image"]

log = structlog.get_logger("kube-sim.kubelet")

ANNOTATION_PREFIX = "sim.controller-manager.io/"
KUBELET_ANNOTATION = ANNOTATION_PREFIX + "kubelet"
NODE_LEASE_NAMESPACE = "kube-node-lease"
FIELD_MANAGER = "kubelet"  # what a kubelet's writes are recorded under in managedFields (its User-Agent)
_REPORTED_STAGES = frozenset({"creating", "running", "backoff", "exited"})  # stages a status describes
_UNMOUNTED_STAGES = frozenset({"exited", "confirmed", "gone"})  # a pod in these holds no volume any more
# Heartbeats due together are done in slices of this many, the loop let in between (HTTP requests, watches).
_HEARTBEAT_SLICE = 256


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
    next_ip: int = 0
    runs: dict[str, PodRun] = field(default_factory=dict)  # pod uid -> run, the pods bound to this node


class KubeletManager:
    """Runs the kubelets of all simulated nodes. ``run()`` until cancelled."""

    def __init__(self, api: ApiServer, clock: Clock | None = None, config: KubeletConfig | None = None,
                 storage: StorageConfig | None = None) -> None:
        self._api = api
        self._clock = clock or RealClock()
        self.config = config or KubeletConfig()
        self._volumes = KubeletVolumes(api, storage) if storage is not None else None
        self._nodes: dict[str, _Node] = {}
        self._runs: dict[str, PodRun] = {}  # pod uid -> what the kubelet knows of it (also under its _Node)
        # Every node's Lease renewals and status checks, on one timer; due ones are done in one queued action.
        self._heartbeats: HeartbeatSchedule[str, str] = HeartbeatSchedule(self._clock, self._heartbeats_due)
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
        self._heartbeats.arm(node.name, [("status", self.config.node_status_update_frequency),
                                         ("lease", self.config.lease_renew_interval)])

    def _heartbeats_due(self, due: list[tuple[str, str]]) -> None:
        beats = [(node, beat) for name, beat in due if not (node := self._nodes[name]).stopped]
        if beats:
            self._do(lambda: self._heartbeat(beats))

    async def _heartbeat(self, beats: list[tuple[_Node, str]]) -> None:
        """The status checks and Lease renewals due now, in due order, a slice at a time."""
        for i, (node, beat) in enumerate(beats):
            if i and i % _HEARTBEAT_SLICE == 0:
                await asyncio.sleep(0)
            try:
                if beat == "lease":
                    await self._renew_lease(node)
                else:
                    await self._post_node_status(node, force=False)
            except Exception:
                log.exception("kubelet heartbeat failed", node=node.name, beat=beat)

    async def _register(self, node: _Node) -> None:
        obj = node_object(node.name, node.index, node.zone, self.config, self._clock.now())
        try:
            created = self._api.create(NODES, obj, field_manager=FIELD_MANAGER)
            node.uid = str(meta(created).get("uid", ""))
            node.obj = created
            node.last_report = self._clock.monotonic()
        except Exception as exc:
            if status_code(exc) != 409:
                raise
            await self._post_node_status(node, force=True)
        node.deleted = False
        await self._renew_lease(node)
        if self._volumes is not None:
            self._volumes.publish_csi_node(node.name, node.uid)

    async def _post_node_status(self, node: _Node, *, force: bool) -> None:
        """Post the node's status if it changed or is due; ``force``: now, registering the node if it
        is gone (a restarted kubelet registers itself; a running one only fails its updates)."""
        if node.stopped or (node.deleted and not force):
            return
        current = {c.get("type"): c for c in ((node.obj or {}).get("status") or {}).get("conditions") or ()}
        changed = any(
            (current.get(ctype) or {}).get("status") != status or (current.get(ctype) or {}).get("reason") != reason
            for ctype, status, reason, _ in NODE_CONDITIONS
        )
        due = self._clock.monotonic() - node.last_report >= self.config.node_status_report_frequency
        in_use = self._volumes_in_use(node)
        volumes_changed = self._volumes is not None and in_use != _reported_in_use(node.obj)
        if not (force or changed or due or volumes_changed):
            return
        patch: dict[str, Any] = {"status": {"conditions": node_conditions(self._clock.now(), current)}}
        if self._volumes is not None:
            patch["status"]["volumesInUse"] = in_use or None
        try:
            node.obj = self._api.patch(NODES, None, node.name, patch, "strategic", subresource="status",
                                       field_manager=FIELD_MANAGER)
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
        when = self._clock.now()
        now = format_micro_time(when)
        try:
            stored = self._api.get_stored(LEASES, NODE_LEASE_NAMESPACE, node.name)
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            await self._create_lease(node, now)
            return
        if renew_in_place(self._api, stored, holder=node.name, duration=self.config.lease_duration_seconds,
                          renew_time=now, manager=FIELD_MANAGER, now=when):
            return
        lease = self._api.get(LEASES, NODE_LEASE_NAMESPACE, node.name)
        spec = {**(lease.get("spec") or {}), "holderIdentity": node.name, "renewTime": now,
                "leaseDurationSeconds": self.config.lease_duration_seconds}
        self._api.update(LEASES, {**lease, "spec": spec}, field_manager=FIELD_MANAGER)

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
                self._api.create(LEASES, lease, namespace=NODE_LEASE_NAMESPACE, field_manager=FIELD_MANAGER)
                return
            except Exception as exc:
                if status_code(exc) != 404 or attempt:
                    raise
                # The namespace is the API server's to make; make sure it exists before giving up.
                with contextlib.suppress(Exception):
                    self._api.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": NODE_LEASE_NAMESPACE}},
                                     field_manager=FIELD_MANAGER)

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
        self._heartbeats.disarm(node.name)
        for run in node.runs.values():
            run.cancel_timers()

    def _resume_node(self, node: _Node) -> None:
        log.info("kubelet resumed", node=node.name)
        node.stopped = False
        self._do(lambda: self._post_node_status(node, force=True))
        self._do(lambda: self._renew_lease(node))
        self._arm_node_timers(node)
        for run in list(node.runs.values()):
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
                owner = self._nodes.get(run.node)
                if owner is not None:
                    owner.runs.pop(uid, None)
                self._volumes_released(run)
            return
        if run is None:
            run = PodRun(uid=uid, node=node.name, pod=pod)
            self._runs[uid] = run
            node.runs[uid] = run
            if not node.stopped:
                self._adopt(run)
            return
        before, run.pod = run.pod, pod
        if node.stopped or run.stage in ("terminating", "confirmed", "gone"):
            return
        if meta(pod).get("deletionTimestamp"):
            self._begin_termination(run)
        elif run.stage != "exited" and _gate_states(before) != _gate_states(pod):
            self._do(lambda: self._post(run))  # the kubelet re-evaluates Ready when a readiness gate moves

    def _adopt(self, run: PodRun) -> None:
        """Take up a pod from what the API shows (first sight, or a resumed node)."""
        pod = run.pod
        run.cancel_timers()
        status = pod.get("status") or {}
        phase = status.get("phase")
        statuses = [c for c in status.get("containerStatuses") or () if isinstance(c, Mapping)]
        running = [c for c in statuses if "running" in (c.get("state") or {})]
        run.start_time = status.get("startTime") or run.start_time
        if phase in ("Succeeded", "Failed"):
            run.stage = "exited"
            ended = next((c["state"]["terminated"] for c in statuses if "terminated" in (c.get("state") or {})), None)
            if isinstance(ended, Mapping):
                run.terminated = {k: v for k, v in ended.items() if k != "containerID"}
        elif phase == "Running" and running:
            run.stage = "running"
            run.ip = status.get("podIP") or run.ip or self._next_ip(run.node)
            started = [parse_time((c["state"]["running"] or {}).get("startedAt")) for c in running]
            run.started_at = min((s for s in started if s is not None), default=self._clock.now())
            run.restarts = max(int(c.get("restartCount") or 0) for c in running)
            run.ready = all(c.get("ready") for c in running)
            last = next((c["lastState"]["terminated"] for c in running
                         if "terminated" in (c.get("lastState") or {})), None)
            if isinstance(last, Mapping):
                run.last_state = {k: v for k, v in last.items() if k != "containerID"}
                run.last_attempt = max(0, run.restarts - 1)
        elif run.stage not in ("creating", "new"):
            run.stage = "new"
        if meta(pod).get("deletionTimestamp"):
            self._begin_termination(run)
        elif run.stage == "running":
            if self._volumes is not None:
                self._volumes.check(pod, run.node)  # a running pod's volumes are mounted: keep them in use
            self._do(lambda: self._post(run))  # put back what others wrote over the kubelet's fields meanwhile
            self._arm_running_timers(run)
        elif run.stage in ("new", "creating"):
            run.stage = "creating"
            self._do(lambda: self._post(run))
            delay = _annotation_seconds(pod, "start-seconds", self.config.default_start_seconds) or 0.0
            self._after(run, delay, self._start)

    def _next_ip(self, node_name: str) -> str:
        node = self._nodes[node_name]
        node.next_ip = node.next_ip % 252 + 1
        return _ip_in(self._node_pod_cidr(node_name) or pod_cidr(node.index), node.next_ip + 1)

    def _node_pod_cidr(self, node_name: str) -> str | None:
        """The Node's IPv4 pod CIDR as the API has it (a controller-manager may have assigned it), if any: from the
        node as this kubelet last heard of it (as the real kubelet reads its node informer), read live only before
        that. A live read decodes the stored node: 2.3% of kube-sim's CPU at 1,000 nodes when done for every pod."""
        obj = self._nodes[node_name].obj
        if obj is None:
            try:
                obj = self._api.get(NODES, None, node_name)
            except Exception:
                return None
        for cidr in (obj.get("spec") or {}).get("podCIDRs") or ():
            if isinstance(cidr, str) and ":" not in cidr:
                return cidr
        return None

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
        if run.stage == "creating" and self._volumes is not None:
            check = self._volumes.check(run.pod, run.node)
            self._sync_volumes_in_use(self._nodes[run.node])
            if not check.ready:
                log.debug("pod waits for its volumes", pod=_pod_ref(run.pod), waiting_for=check.waiting_for)
                self._after(run, self._volumes.config.volume_poll, self._start)
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

    def main_process_exited(self, uid: str, code: int) -> None:
        """A simulated container's main process (one an attached client drove, see sim/containers) ended with
        ``code``: the pod's containers exit as if their run time were up, with that code."""
        run = self._runs.get(uid)
        if run is not None and run.stage == "running" and not self._nodes[run.node].stopped:
            self._do(lambda: self._exit(run, code))

    async def _exit(self, run: PodRun, code: int | None = None) -> None:
        if run.stage != "running":
            return
        if code is None:
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
            self._volumes_released(run)
            return
        run.stage = "backoff"
        run.last_state, run.last_attempt = run.terminated, run.restarts
        run.backoff = delay = min(self.config.crash_loop_base * 2 ** min(run.restarts, 30), self.config.crash_loop_max)
        await self._post(run)
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
        self._volumes_released(run)
        m = meta(run.pod)
        try:
            self._api.delete(PODS, str(m.get("namespace")), str(m.get("name")), grace_period_seconds=0,
                                        preconditions={"uid": run.uid})
        except Exception as exc:
            if status_code(exc) not in (404, 409):
                raise

    async def _post(self, run: PodRun, *, killed: bool = False) -> None:
        """Replace the pod's status with the one the kubelet computes now, merged with what the API holds
        (the status manager's GET, merge, PATCH-against-old, whose result is exactly the new status).

        In-process the read and the write happen in one step of the loop, so the PUT below, carrying
        the resourceVersion just read, cannot conflict; it lands the same object and watch event as the
        patch would, without the patch machinery's copies. Nothing is written when nothing changes.
        """
        node = self._nodes[run.node]
        if run.stage not in _REPORTED_STAGES or node.stopped:
            return  # (a write queued before the pod began terminating, or went away, has nothing to say)
        m = meta(run.pod)
        namespace, name = str(m.get("namespace")), str(m.get("name"))
        try:
            stored = self._api.get_stored(PODS, namespace, name).obj
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            return
        if meta(stored).get("uid") != run.uid:
            return  # a new pod under the old name is not this run's
        current = stored.get("status") or {}
        status = build_pod_status(run, self._clock.now(), node_ip(node.index), current, killed=killed)
        run.start_time = status["startTime"]
        if status == current:
            return
        try:
            run.pod = self._api.update(PODS, {**stored, "status": status}, subresource="status",
                                       field_manager=FIELD_MANAGER)
        except Exception as exc:
            if status_code(exc) != 404:
                raise

    # ---- volumes

    def _volumes_in_use(self, node: _Node) -> list[str]:
        if self._volumes is None:
            return []
        return self._volumes.in_use(r.uid for r in node.runs.values() if r.stage not in _UNMOUNTED_STAGES)

    def _sync_volumes_in_use(self, node: _Node) -> None:
        """Post the node's status soon if the volumes it reports in use would change."""
        if self._volumes is not None and not node.stopped and \
                self._volumes_in_use(node) != _reported_in_use(node.obj):
            self._do(lambda: self._post_node_status(node, force=False))

    def _volumes_released(self, run: PodRun) -> None:
        """A pod stopped or went away: its volumes are unmounted, so the node stops reporting them in use."""
        if self._volumes is None:
            return
        if run.stage == "gone":
            self._volumes.forget(run.uid)
        node = self._nodes.get(run.node)
        if node is not None:
            self._sync_volumes_in_use(node)

    async def _event(self, run: PodRun, event_type: str, reason: str, message: str) -> None:
        if not self.config.events:
            return
        self._seq += 1
        record(self._api, event_object(run.pod, event_type, reason, message, "kubelet", self._clock.now(), self._seq,
                                       host=run.node))

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
            self._heartbeats.cancel()
            for run in self._runs.values():
                run.cancel_timers()


def _reported_in_use(node: Mapping[str, Any] | None) -> list[str]:
    return list(((node or {}).get("status") or {}).get("volumesInUse") or ())


def _first_container(pod: dict[str, Any]) -> str:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return str(containers[0].get("name", ""))


def _pod_ref(pod: dict[str, Any]) -> str:
    m = meta(pod)
    return f"{m.get('name')}_{m.get('namespace')}({m.get('uid')})"


def _gate_states(pod: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The statuses of the conditions the pod's readiness gates name (empty without gates)."""
    gates = [str(g.get("conditionType", "")) for g in (pod.get("spec") or {}).get("readinessGates") or ()]
    if not gates:
        return ()
    have = {c.get("type"): c.get("status") for c in (pod.get("status") or {}).get("conditions") or ()}
    return tuple((g, have.get(g)) for g in gates)


def _ip_in(cidr: str, offset: int) -> str:
    """The address ``offset`` into ``cidr`` (wrapping inside it), e.g. ``_ip_in("10.244.1.0/24", 2)``."""
    net = ipaddress.ip_network(cidr, strict=False)
    return str(net.network_address + offset % max(net.num_addresses, 1))
