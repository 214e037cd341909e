"""The node lifecycle controller: notices nodes whose kubelet went silent, marks them and their pods, and taints
them so the taint eviction controller moves the pods (kube-controller-manager's ``node-lifecycle-controller``,
``pkg/controller/nodelifecycle/node_lifecycle_controller.go``).

Guarantees:
- Every ``--node-monitor-period`` one pass (``monitorNodeHealth``) looks at every cached node: a node whose
  Ready heartbeat and Lease have not moved for ``--node-monitor-grace-period`` (``--node-startup-grace-period``
  before its first status) gets Ready/MemoryPressure/DiskPressure/PIDPressure Unknown through ``/status``, the
  event ``NodeNotReady`` ("Node X status is now: NodeNotReady") and its pods Ready=False. New and removed nodes
  get ``RegisteredNode``/``RemovingNode`` events.
- NoExecute taints: a node whose Ready is False or Unknown joins its zone's rate-limited queue; a pass every
  100 ms taints it ``node.kubernetes.io/not-ready:NoExecute`` or ``unreachable:NoExecute`` (the two are
  exclusive; a node already carrying the other one is swapped at once) with ``timeAdded``. Ready again: both
  are removed and the node leaves the queue.
- Zones (``topology.kubernetes.io/region`` + ``zone``) pace tainting: Normal at ``--node-eviction-rate`` nodes/s;
  PartialDisruption (more than 2 and at least ``--unhealthy-zone-threshold`` of the zone not ready) at
  ``--secondary-node-eviction-rate`` if the zone has more than ``--large-cluster-size-threshold`` nodes, else 0;
  FullDisruption (no ready node) at the normal rate, unless every zone is fully disrupted: then tainting stops
  and NoExecute taints are removed from every node (master disruption mode) until some node is ready again,
  when every node's probe time is reset (a fresh grace period for all).
- Condition taints (``doNoScheduleTaintingPass``) on every node add/update: Ready False/Unknown -> not-ready/
  unreachable NoSchedule, MemoryPressure/DiskPressure/PIDPressure/NetworkUnavailable True and
  ``spec.unschedulable`` -> the matching NoSchedule taints, and the stale ones removed. The beta os/arch labels
  follow the stable ones.
- A pod newly bound to a node the controller knows is not ready is marked Ready=False at once.
- Malformed nodes (odd conditions, taints that are not objects, missing labels) are logged and skipped; no
  sync raises except to retry a failed write.

Prometheus: upstream's ``node_collector_*`` zone gauges, evictions counter and health-check timings
(:mod:`.metrics`).

Queue keys: a node name (condition taints + labels), ``namespace/name`` of a pod (newly bound), and the two
periodic passes ``@monitor`` and ``@noexecute`` (names cannot start with "@").
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import meta, split_key
from controller_manager.api.resources import LEASES, NODES, PODS
from controller_manager.api.taints import (
    EFFECT_NO_EXECUTE,
    EFFECT_NO_SCHEDULE,
    TAINT_NODE_DISK_PRESSURE,
    TAINT_NODE_MEMORY_PRESSURE,
    TAINT_NODE_NETWORK_UNAVAILABLE,
    TAINT_NODE_NOT_READY,
    TAINT_NODE_PID_PRESSURE,
    TAINT_NODE_UNREACHABLE,
    TAINT_NODE_UNSCHEDULABLE,
)
from controller_manager.client.errors import ApiError, NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import NODE_NAME_INDEX, Added, Deleted, Event, Updated

from . import metrics
from .health import HealthCheck, NodeHealth, ZoneState, compute_node_health, compute_zone_state, reduced_qps
from .node_utils import (
    LABEL_NODE_DISRUPTION_EXCLUSION,
    NodeUpdateError,
    get_node_condition,
    get_zone_key,
    mapping_field,
    mark_pods_not_ready,
    record_node_event,
    record_node_status_change,
    remove_taint_off_node,
    swap_node_controller_taint,
    taint_exists,
    taint_set_diff,
    taints_of,
)
from .rate_limited_queue import (
    EVICTION_RATE_LIMITER_BURST,
    NODE_EVICTION_PERIOD,
    NODE_HEALTH_UPDATE_RETRY,
    RateLimitedTimedQueue,
    TimedValue,
    TokenBucketRateLimiter,
)

__all__ = ["NOT_READY_TAINT", "UNREACHABLE_TAINT", "NodeLifecycleController"]

Obj = Mapping[str, Any]

UNREACHABLE_TAINT: Obj = {"key": TAINT_NODE_UNREACHABLE, "effect": EFFECT_NO_EXECUTE}
NOT_READY_TAINT: Obj = {"key": TAINT_NODE_NOT_READY, "effect": EFFECT_NO_EXECUTE}

# Which condition status means which NoSchedule taint.
CONDITION_TAINTS: Mapping[str, Mapping[str, str]] = {
    "Ready": {"False": TAINT_NODE_NOT_READY, "Unknown": TAINT_NODE_UNREACHABLE},
    "MemoryPressure": {"True": TAINT_NODE_MEMORY_PRESSURE},
    "DiskPressure": {"True": TAINT_NODE_DISK_PRESSURE},
    "NetworkUnavailable": {"True": TAINT_NODE_NETWORK_UNAVAILABLE},
    "PIDPressure": {"True": TAINT_NODE_PID_PRESSURE},
}
CONDITION_TAINT_KEYS = frozenset(k for by_status in CONDITION_TAINTS.values() for k in by_status.values())

# (stable label, beta label the controller keeps equal to it)
LABEL_RECONCILE = (("kubernetes.io/os", "beta.kubernetes.io/os"), ("kubernetes.io/arch", "beta.kubernetes.io/arch"))

MONITOR_KEY = "@monitor"
NO_EXECUTE_KEY = "@noexecute"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_UPDATE_WORKERS = 8  # bound on concurrent node checks within one monitor pass
EVENT_COMPONENT = "node-controller"


class NodeLifecycleController(Controller):
    name: ClassVar[str] = "node-lifecycle-controller"
    alias: ClassVar[str] = "nodelifecycle"
    queue_name: ClassVar[str | None] = "node_lifecycle_controller"
    default_workers: ClassVar[int] = NODE_UPDATE_WORKERS

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        opts = ctx.options
        self.monitor_period = float(opts.get("node_monitor_period", 5.0))
        self.monitor_grace = float(opts.get("node_monitor_grace_period", 50.0))
        self.startup_grace = float(opts.get("node_startup_grace_period", 60.0))
        self.eviction_qps = float(opts.get("node_eviction_rate", 0.1))
        self.secondary_eviction_qps = float(opts.get("secondary_node_eviction_rate", 0.01))
        self.large_cluster_threshold = int(opts.get("large_cluster_size_threshold", 50))
        self.unhealthy_zone_threshold = float(opts.get("unhealthy_zone_threshold", 0.55))
        self.clock = ctx.clock
        self.client = ctx.client
        self.recorder = ctx.events.recorder(EVENT_COMPONENT)
        # Nodes seen by the last monitor pass, by name.
        self.known_nodes: dict[str, Obj] = {}
        self.node_health: dict[str, NodeHealth] = {}
        self.zone_states: dict[str, ZoneState] = {}
        self.zone_tainters: dict[str, RateLimitedTimedQueue] = {}
        # Nodes whose pods still need marking not ready (a write failed last time).
        self.nodes_to_retry: set[str] = set()
        self.node_informer = ctx.informers.informer(NODES)
        self.pod_informer = ctx.informers.informer(PODS)
        self.lease_informer = ctx.informers.informer(LEASES)
        self.node_informer.add_handler(self._on_node)
        self.pod_informer.add_handler(self._on_pod)
        self.queue.add(MONITOR_KEY)

    # --- handlers -----------------------------------------------------------------------------------------

    def _on_node(self, event: Event) -> None:
        if isinstance(event, Added | Updated):
            obj = event.obj if isinstance(event, Added) else event.new
            self.queue.add(str(meta(obj).get("name", "")))
        elif isinstance(event, Deleted):
            self.nodes_to_retry.discard(str(meta(event.obj).get("name", "")))

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Deleted):
            return
        new = event.obj if isinstance(event, Added) else event.new
        old = event.old if isinstance(event, Updated) else None
        node_name = _node_name(new)
        if node_name and (old is None or _node_name(old) != node_name):
            self.queue.add(f"{meta(new).get('namespace', '')}/{meta(new).get('name', '')}")

    # --- sync -----------------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        if key == MONITOR_KEY:
            started = self.clock.monotonic()
            await self.monitor_node_health()
            # Keep the period from start to start, as wait.Until does for a pass shorter than the period.
            return Result(requeue_after=max(0.0, self.monitor_period - (self.clock.monotonic() - started)))
        if key == NO_EXECUTE_KEY:
            await self.do_no_execute_tainting_pass()
            if any(len(q) for q in self.zone_tainters.values()):
                return Result(requeue_after=NODE_EVICTION_PERIOD)
            return None
        if "/" in key:
            await self.process_pod(key)
            return None
        await self.do_no_schedule_tainting_pass(key)
        await self.reconcile_node_labels(key)
        return None

    # --- monitorNodeHealth --------------------------------------------------------------------------------

    async def monitor_node_health(self) -> None:
        started = self.clock.monotonic()
        try:
            await self._monitor_node_health()
        finally:
            metrics.UPDATE_ALL_NODES_HEALTH_DURATION.observe(self.clock.monotonic() - started)

    async def _monitor_node_health(self) -> None:
        nodes = self.node_informer.store.list()
        added, deleted, new_zone_nodes = self._classify_nodes(nodes)
        for node in new_zone_nodes:
            self._add_tainter_for_new_zone(node)
        for node in added:
            name = str(meta(node).get("name", ""))
            self.log.info("Controller observed a new Node", node=name)
            record_node_event(self.recorder, node, "Normal", "RegisteredNode", f"Registered Node {name} in Controller")
            self.known_nodes[name] = node
            self._add_tainter_for_new_zone(node)
            await self._mark_node_as_reachable(node)
        for node in deleted:
            name = str(meta(node).get("name", ""))
            self.log.info("Controller observed a Node deletion", node=name)
            record_node_event(self.recorder, node, "Normal", "RemovingNode", f"Removing Node {name} from Controller")
            self.known_nodes.pop(name, None)
            self.node_health.pop(name, None)

        zone_conditions: dict[str, list[Obj | None]] = {}
        limit = asyncio.Semaphore(NODE_UPDATE_WORKERS)

        async def check(node: Obj) -> None:
            async with limit:
                started = self.clock.monotonic()
                try:
                    await self._update_node(node, zone_conditions)
                finally:
                    metrics.UPDATE_NODE_HEALTH_DURATION.observe(self.clock.monotonic() - started)

        await asyncio.gather(*(check(n) for n in nodes))
        await self._handle_disruption(zone_conditions, nodes)

    def _classify_nodes(self, nodes: Sequence[Obj]) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """(new to us, gone since last pass, known but in a zone we have no state for)."""
        added: list[Obj] = []
        new_zone: list[Obj] = []
        names = set()
        for node in nodes:
            name = str(meta(node).get("name", ""))
            names.add(name)
            if name not in self.known_nodes:
                added.append(node)
            elif get_zone_key(node) not in self.zone_states:
                new_zone.append(node)
        deleted = [n for name, n in self.known_nodes.items() if name not in names]
        return added, deleted, new_zone

    async def _update_node(self, node: Obj, zone_conditions: dict[str, list[Obj | None]]) -> None:
        name = str(meta(node).get("name", ""))
        check: HealthCheck | None = None
        for _ in range(NODE_HEALTH_UPDATE_RETRY):
            try:
                check = await self._try_update_node_health(node)
                break
            except ApiError as err:
                self.log.info("Error updating node health, re-reading the node", node=name, error=str(err))
                try:
                    node = await self.client.get(NODES, name)
                except ApiError as get_err:
                    self.log.error("Failed while getting a Node to retry updating node health. "
                                   "Probably Node was deleted", node=name, error=str(get_err))
                    return
        if check is None:
            self.log.error("Update health of Node from Controller error, Skipping - no pods will be evicted",
                           node=name)
            return
        if check.new_node is not None:
            node = check.new_node
        labels = meta(node).get("labels") or {}
        if not (isinstance(labels, Mapping) and LABEL_NODE_DISRUPTION_EXCLUSION in labels):
            zone_conditions.setdefault(get_zone_key(node), []).append(check.current_ready)
        current, observed = check.current_ready, check.observed_ready
        if current is not None:
            await self._process_taint_based_eviction(node, observed)
            needs_retry = name in self.nodes_to_retry
            became_not_ready = current.get("status") != "True" and observed.get("status") == "True"
            if became_not_ready:
                record_node_status_change(self.recorder, node, "NodeNotReady")
            if became_not_ready or (needs_retry and observed.get("status") != "True"):
                # The node's pods are looked up only here: taken for every node of every pass, they were a walk
                # over every pod in the cluster each monitor period (5 s).
                pods = self.pod_informer.store.by_index(NODE_NAME_INDEX, name)
                try:
                    await mark_pods_not_ready(self.client, self.recorder, self.clock, pods, name)
                except NodeUpdateError as err:
                    self.log.error("unable to mark all pods NotReady on node; queuing for retry", node=name,
                                   error=str(err))
                    self.nodes_to_retry.add(name)
                    return
        self.nodes_to_retry.discard(name)

    async def _try_update_node_health(self, node: Obj) -> HealthCheck:
        name = str(meta(node).get("name", ""))
        lease = self.lease_informer.store.get(f"{NODE_LEASE_NAMESPACE}/{name}")
        now = self.clock.now()
        check = compute_node_health(node, self.node_health.get(name), lease, now, self.startup_grace,
                                    self.monitor_grace)
        self.node_health[name] = check.health
        if check.new_node is None:
            return check
        self.log.info("Node hasn't been updated; setting its conditions Unknown", node=name,
                      since=now - check.health.probe_timestamp)
        await self.client.update_status(NODES, check.new_node)
        self.node_health[name] = NodeHealth(check.health.probe_timestamp, now, check.new_node["status"], lease)
        return check

    async def _process_taint_based_eviction(self, node: Obj, observed: Obj) -> None:
        taints = taints_of(node)
        name = meta(node).get("name")
        status = observed.get("status")
        if status == "False":
            if taint_exists(taints, UNREACHABLE_TAINT):
                if not await swap_node_controller_taint(self.client, self.clock, [NOT_READY_TAINT],
                                                        [UNREACHABLE_TAINT], node):
                    self.log.error("Failed to instantly swap UnreachableTaint to NotReadyTaint. "
                                   "Will try again in the next cycle", node=name)
            elif self._mark_node_for_tainting(node, "False"):
                self.log.info("Node is NotReady. Adding it to the Taint queue", node=name)
        elif status == "Unknown":
            if taint_exists(taints, NOT_READY_TAINT):
                if not await swap_node_controller_taint(self.client, self.clock, [UNREACHABLE_TAINT],
                                                        [NOT_READY_TAINT], node):
                    self.log.error("Failed to instantly swap NotReadyTaint to UnreachableTaint. "
                                   "Will try again in the next cycle", node=name)
            elif self._mark_node_for_tainting(node, "Unknown"):
                self.log.info("Node is unresponsive. Adding it to the Taint queue", node=name)
        elif status == "True" and await self._mark_node_as_reachable(node):
            self.log.info("Node is healthy again, removed all taints", node=name)

    def _tainter(self, node: Obj) -> RateLimitedTimedQueue:
        zone = get_zone_key(node)
        if zone not in self.zone_tainters:
            self._add_tainter_for_new_zone(node)
        return self.zone_tainters[zone]

    def _mark_node_for_tainting(self, node: Obj, status: str) -> bool:
        name = str(meta(node).get("name", ""))
        queue = self._tainter(node)
        wanted = NOT_READY_TAINT if status == "False" else UNREACHABLE_TAINT
        if not taint_exists(taints_of(node), wanted):
            # Not tainted yet for this outage: forget an earlier pass so the node can be queued again.
            queue.remove(name)
        added = queue.add(name, str(meta(node).get("uid", "")))
        if added:
            self.queue.add(NO_EXECUTE_KEY)
        return added

    async def _mark_node_as_reachable(self, node: Obj) -> bool:
        """Remove both NoExecute taints and take the node out of its zone queue; True if it was queued."""
        name = str(meta(node).get("name", ""))
        try:
            await remove_taint_off_node(self.client, node, name, UNREACHABLE_TAINT)
            await remove_taint_off_node(self.client, node, name, NOT_READY_TAINT)
        except ApiError as err:
            self.log.error("Failed to remove taints from node. Will retry in next iteration", node=name,
                           error=str(err))
            return False
        return self._tainter(node).remove(name)

    def _add_tainter_for_new_zone(self, node: Obj) -> None:
        zone = get_zone_key(node)
        if zone in self.zone_states:
            return
        self.zone_states[zone] = ZoneState.INITIAL
        self.zone_tainters[zone] = RateLimitedTimedQueue(
            TokenBucketRateLimiter(self.eviction_qps, EVICTION_RATE_LIMITER_BURST, self.clock), self.clock)
        self.log.info("Initializing eviction metric for zone", zone=zone)
        metrics.init_zone_evictions(zone)

    # --- zones --------------------------------------------------------------------------------------------

    async def _handle_disruption(self, zone_conditions: dict[str, list[Obj | None]], nodes: Sequence[Obj]) -> None:
        new_states: dict[str, ZoneState] = {}
        all_fully_disrupted = True
        for zone, conditions in zone_conditions.items():
            unhealthy, state = compute_zone_state(conditions, self.unhealthy_zone_threshold)
            metrics.set_zone_stats(zone, len(conditions), unhealthy)
            if state != ZoneState.FULL_DISRUPTION:
                all_fully_disrupted = False
            new_states[zone] = state
            if zone not in self.zone_states:
                self.log.error("Setting initial state for unseen zone", zone=zone)
                self.zone_states[zone] = ZoneState.INITIAL
                self._ensure_tainter(zone)

        all_were_fully_disrupted = True
        for zone in list(self.zone_states):
            if zone not in zone_conditions:
                metrics.clear_zone(zone)
                del self.zone_states[zone]
                continue
            if self.zone_states[zone] != ZoneState.FULL_DISRUPTION:
                all_were_fully_disrupted = False
                break

        if all_fully_disrupted and all_were_fully_disrupted:
            return
        if all_fully_disrupted:
            self.log.info("Controller detected that all Nodes are not-Ready. Entering master disruption mode")
            for node in nodes:
                await self._mark_node_as_reachable(node)
            for zone in self.zone_states:
                self._ensure_tainter(zone).swap_limiter(0.0)
                self.zone_states[zone] = ZoneState.FULL_DISRUPTION
            return
        if all_were_fully_disrupted:
            self.log.info("Controller detected that some Nodes are Ready. Exiting master disruption mode")
            now = self.clock.now()
            for node in nodes:
                name = str(meta(node).get("name", ""))
                saved = self.node_health.get(name)
                if saved is not None:
                    # A fresh grace period for every node: their silence was the control plane's, not theirs.
                    self.node_health[name] = NodeHealth(now, now, saved.status, saved.lease)
            for zone in self.zone_states:
                self._set_limiter(zone, len(zone_conditions.get(zone, ())), new_states[zone])
                self.zone_states[zone] = new_states[zone]
            return
        for zone, state in list(self.zone_states.items()):
            new = new_states[zone]
            if state == new:
                continue
            self.log.info("Controller detected that zone is now in new state", zone=zone, new_state=str(new))
            self._set_limiter(zone, len(zone_conditions[zone]), new)
            self.zone_states[zone] = new

    def _ensure_tainter(self, zone: str) -> RateLimitedTimedQueue:
        queue = self.zone_tainters.get(zone)
        if queue is None:
            queue = RateLimitedTimedQueue(
                TokenBucketRateLimiter(self.eviction_qps, EVICTION_RATE_LIMITER_BURST, self.clock), self.clock)
            self.zone_tainters[zone] = queue
        return queue

    def _set_limiter(self, zone: str, zone_size: int, state: ZoneState) -> None:
        queue = self._ensure_tainter(zone)
        if state == ZoneState.NORMAL:
            queue.swap_limiter(self.eviction_qps)
        elif state == ZoneState.PARTIAL_DISRUPTION:
            queue.swap_limiter(reduced_qps(zone_size, self.large_cluster_threshold, self.secondary_eviction_qps))
        elif state == ZoneState.FULL_DISRUPTION:
            queue.swap_limiter(self.eviction_qps)

    # --- doNoExecuteTaintingPass --------------------------------------------------------------------------

    async def do_no_execute_tainting_pass(self) -> None:
        for zone in list(self.zone_tainters):
            await self.zone_tainters[zone].try_process(self._taint_queued_node)

    async def _taint_queued_node(self, value: TimedValue) -> tuple[bool, float]:
        node = self.node_informer.store.get(value.value)
        if node is None:
            self.log.info("Node no longer present in nodeLister", node=value.value)
            return True, 0.0
        ready = get_node_condition(mapping_field(node, "status"), "Ready")
        if ready is None:
            self.log.info("Failed to get NodeCondition from the node status", node=value.value)
            return False, 0.05
        status = ready.get("status")
        if status == "False":
            add, remove = NOT_READY_TAINT, UNREACHABLE_TAINT
        elif status == "Unknown":
            add, remove = UNREACHABLE_TAINT, NOT_READY_TAINT
        else:
            self.log.debug("Node was in a taint queue, but it's ready now. Ignoring taint request", node=value.value)
            return True, 0.0
        tainted = await swap_node_controller_taint(self.client, self.clock, [add], [remove], node)
        if tainted:
            metrics.record_eviction(get_zone_key(node))
        return tainted, 0.0

    # --- doNoScheduleTaintingPass and labels --------------------------------------------------------------

    async def do_no_schedule_tainting_pass(self, name: str) -> None:
        node = self.node_informer.store.get(name)
        if node is None:
            return
        wanted: list[Obj] = []
        status = mapping_field(node, "status")
        for cond in status.get("conditions") or ():
            if not isinstance(cond, Mapping):
                self.log.warning("ignoring a malformed node condition", node=name, condition=repr(cond)[:200])
                continue
            key = CONDITION_TAINTS.get(str(cond.get("type")), {}).get(str(cond.get("status")))
            if key is not None:
                wanted.append({"key": key, "effect": EFFECT_NO_SCHEDULE})
        if mapping_field(node, "spec").get("unschedulable") is True:
            wanted.append({"key": TAINT_NODE_UNSCHEDULABLE, "effect": EFFECT_NO_SCHEDULE})
        current = [t for t in taints_of(node) if t.get("effect") == EFFECT_NO_SCHEDULE
                   and (t.get("key") == TAINT_NODE_UNSCHEDULABLE or t.get("key") in CONDITION_TAINT_KEYS)]
        to_add, to_remove = taint_set_diff(wanted, current)
        if not to_add and not to_remove:
            return
        if not await swap_node_controller_taint(self.client, self.clock, to_add, to_remove, node):
            # Upstream leaves it to the next node update; we retry with backoff instead.
            raise NodeUpdateError(f"failed to swap NoSchedule taints of node {name}")

    async def reconcile_node_labels(self, name: str) -> None:
        node = self.node_informer.store.get(name)
        if node is None:
            return
        labels = meta(node).get("labels")
        if not isinstance(labels, Mapping):
            return
        to_update = {secondary: labels[primary] for primary, secondary in LABEL_RECONCILE
                     if primary in labels and labels.get(secondary) != labels[primary]}
        if not to_update:
            return
        try:
            await self.client.patch(NODES, name, {"metadata": {"labels": to_update}}, patch_type="merge")
        except NotFound:
            return

    # --- pods newly bound ---------------------------------------------------------------------------------

    async def process_pod(self, key: str) -> None:
        pod = self.pod_informer.store.get(key)
        if pod is None:
            return
        node_name = _node_name(pod)
        health = self.node_health.get(node_name)
        if health is None or self.node_informer.store.get(node_name) is None:
            return
        ready = get_node_condition(health.status, "Ready")
        if ready is None or ready.get("status") == "True":
            return
        try:
            await mark_pods_not_ready(self.client, self.recorder, self.clock, [pod], node_name)
        except NodeUpdateError as err:
            ns, name = split_key(key)
            raise NodeUpdateError(f"unable to mark pod {ns}/{name} NotReady on node {node_name}: {err}") from None


def _node_name(pod: Obj) -> str:
    spec = pod.get("spec")
    value = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return value if isinstance(value, str) else ""

