"""How the node lifecycle controller judges a node's health: ``tryUpdateNodeHealth`` and ``ComputeZoneState``
of ``pkg/controller/nodelifecycle/node_lifecycle_controller.go``, as pure functions.

Guarantees:
- Time is the controller's own: a node is healthy while the controller has *observed* its Ready condition's
  ``lastHeartbeatTime`` change, or its Lease's ``renewTime`` move forward, within the grace period
  (``--node-monitor-grace-period``; ``--node-startup-grace-period`` while the node never posted a Ready
  condition). Timestamps the kubelet wrote are compared for change only, never against our clock, so clock
  skew between machines does not matter.
- Once ``now > probe + grace`` the Ready, MemoryPressure, DiskPressure and PIDPressure conditions become
  Unknown (reason ``NodeStatusUnknown``, "Kubelet stopped posting node status."; a missing one is added with
  ``NodeStatusNeverUpdated``, "Kubelet never posted node status."). NetworkUnavailable is left alone. A node
  to write is returned only when the Ready condition changed.
- Inputs (cached objects) are never mutated; malformed conditions are skipped, not fatal.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import format_time, meta, parse_time

from .node_utils import get_node_condition

__all__ = [
    "HealthCheck",
    "NodeHealth",
    "ZoneState",
    "compute_node_health",
    "compute_zone_state",
    "reduced_qps",
]

Obj = Mapping[str, Any]

# Conditions the controller turns Unknown when the kubelet goes silent (NetworkUnavailable is the cloud's).
UNKNOWN_CONDITION_TYPES = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


class ZoneState(enum.StrEnum):
    INITIAL = "Initial"
    NORMAL = "Normal"
    FULL_DISRUPTION = "FullDisruption"
    PARTIAL_DISRUPTION = "PartialDisruption"


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """What the controller last observed of a node, and when (its own clock, epoch seconds)."""

    probe_timestamp: float
    ready_transition_timestamp: float
    status: Mapping[str, Any] | None
    lease: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class HealthCheck:
    health: NodeHealth  # to remember, whether or not ``new_node`` gets written
    grace_period: float
    observed_ready: Mapping[str, Any]  # the Ready condition as the cache showed it (a fake Unknown if none)
    current_ready: Mapping[str, Any] | None  # the Ready condition after this check
    new_node: dict[str, Any] | None  # the node with Unknown conditions, to write through /status; None: no write


def _status(node: Obj) -> Mapping[str, Any]:
    status = node.get("status")
    return status if isinstance(status, Mapping) else {}


def _renew_time(lease: Obj | None) -> float | None:
    if not isinstance(lease, Mapping):
        return None
    spec = lease.get("spec")
    return parse_time(spec.get("renewTime")) if isinstance(spec, Mapping) else None


def compute_node_health(node: Obj, saved: NodeHealth | None, lease: Obj | None, now: float,
                        startup_grace: float, monitor_grace: float) -> HealthCheck:
    """One health check of ``node`` given what was ``saved`` from the last one and the node's ``lease``."""
    status = _status(node)
    created_raw = meta(node).get("creationTimestamp")
    created = parse_time(created_raw) if isinstance(created_raw, str) else None
    current_ready = get_node_condition(status, "Ready")
    health = saved
    if current_ready is None:
        # Never posted: pretend an Unknown condition from the node's creation, with the longer startup grace.
        observed: Mapping[str, Any] = {"type": "Ready", "status": "Unknown", "lastHeartbeatTime": created_raw,
                                       "lastTransitionTime": created_raw}
        grace = startup_grace
        if health is not None:
            health = NodeHealth(health.probe_timestamp, health.ready_transition_timestamp, status, health.lease)
        else:
            born = created if created is not None else now
            health = NodeHealth(born, born, status)
    else:
        observed = current_ready
        grace = monitor_grace

    saved_ready = get_node_condition(health.status, "Ready") if health is not None else None
    saved_lease = health.lease if health is not None else None
    if health is None:
        health = NodeHealth(now, now, status)
    elif saved_ready is None and current_ready is not None:
        # First look at a node that already has status (e.g. after a controller restart).
        health = NodeHealth(now, now, status)
    elif saved_ready is not None and current_ready is None:
        health = NodeHealth(now, now, status)
    elif (saved_ready is not None and current_ready is not None
          and saved_ready.get("lastHeartbeatTime") != current_ready.get("lastHeartbeatTime")):
        transition = health.ready_transition_timestamp
        if saved_ready.get("lastTransitionTime") != current_ready.get("lastTransitionTime"):
            transition = now
        health = NodeHealth(now, transition, status)

    # A renewed Lease is a heartbeat too (it is what the kubelet sends most often).
    observed_renew = _renew_time(lease)
    saved_renew = _renew_time(saved_lease)
    if lease is not None and (saved_lease is None or (saved_renew is not None and observed_renew is not None
                                                      and saved_renew < observed_renew)):
        health = NodeHealth(now, health.ready_transition_timestamp, health.status, lease)

    new_node: dict[str, Any] | None = None
    if now > health.probe_timestamp + grace:
        conditions = _unknown_conditions(status, created_raw, format_time(now))
        new_ready = next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready"), None)
        if new_ready != observed:
            new_node = {**node, "status": {**status, "conditions": conditions}}
        current_ready = new_ready
    return HealthCheck(health, grace, observed, current_ready, new_node)


def _unknown_conditions(status: Obj, created: Any, now: str) -> list[Any]:
    raw = status.get("conditions")
    conditions: list[Any] = list(raw) if isinstance(raw, list) else []
    for ctype in UNKNOWN_CONDITION_TYPES:
        index = next((i for i, c in enumerate(conditions) if isinstance(c, Mapping) and c.get("type") == ctype),
                     None)
        if index is None:
            conditions.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.", "lastHeartbeatTime": created,
                               "lastTransitionTime": now})
        elif conditions[index].get("status") != "Unknown":
            conditions[index] = {**conditions[index], "status": "Unknown", "reason": "NodeStatusUnknown",
                                 "message": "Kubelet stopped posting node status.", "lastTransitionTime": now}
    return conditions


def compute_zone_state(ready_conditions: Sequence[Mapping[str, Any] | None],
                       unhealthy_zone_threshold: float) -> tuple[int, ZoneState]:
    """(not-ready node count, state): FullDisruption with no Ready node, PartialDisruption with more than two
    not-ready nodes making at least ``unhealthy_zone_threshold`` of the zone, Normal otherwise."""
    ready = sum(1 for c in ready_conditions if c is not None and c.get("status") == "True")
    not_ready = len(ready_conditions) - ready
    if ready == 0 and not_ready > 0:
        return not_ready, ZoneState.FULL_DISRUPTION
    if not_ready > 2 and not_ready / (not_ready + ready) >= unhealthy_zone_threshold:
        return not_ready, ZoneState.PARTIAL_DISRUPTION
    return not_ready, ZoneState.NORMAL


def reduced_qps(zone_size: int, large_cluster_threshold: int, secondary_qps: float) -> float:
    """Eviction rate of a partially disrupted zone: the secondary rate in a large zone, else 0 (stop)."""
    return secondary_qps if zone_size > large_cluster_threshold else 0.0
