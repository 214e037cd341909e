"""Rolling-update arithmetic and status counting of the DaemonSet controller, as pure functions
(``update.go``'s ``rollingUpdate``/``updatedDesiredNodeCounts`` and ``updateDaemonSetStatus``'s counting).

Inputs: the DaemonSet, ``node_pods`` (node name -> the DaemonSet's pods targeting it, terminal deleted ones left
out), ``placement`` (node name -> ``(should_run, should_continue_running)`` for every existing node), the current
revision's ``hash``, the template generation and ``now`` (epoch seconds).

Guarantees:
- :func:`desired_node_counts` gives ``(max_surge, max_unavailable, desired)``: percentages are of the nodes that
  should run a pod, rounded up; with both limits 0 on a non-empty set, one node may be unavailable.
- :func:`plan_rolling_update` returns ``(pods_to_delete, nodes_to_create)``:
  without surge, old pods are deleted (the main loop recreates them) so that at most ``max_unavailable`` nodes
  lack an available up-to-date pod, old pods that are not available being replaced first and at no cost in the
  budget beyond their own unavailability; with surge, a new pod is created beside an old one on at most
  ``max_surge`` nodes at a time (immediately where the old pod is unavailable), and the old pod is deleted once the
  new one is available (``minReadySeconds`` honoured), so a node keeps an available pod throughout. A node with
  more than one old or new pod is left to the main loop (and counts against the budget).
- Nodes are visited in name order, so the same inputs give the same plan.
- :func:`daemon_set_status` counts exactly the seven numbers of ``updateDaemonSetStatus``, judging each node by
  its oldest pod.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller_manager.api.meta import is_being_deleted, meta
from controller_manager.api.pods import is_pod_available, is_pod_ready

from .placement import pod_creation_order_key
from .util import is_pod_updated, surge_count, unavailable_count

__all__ = ["DaemonSetCounts", "daemon_set_status", "desired_node_counts", "find_updated_pods_on_node",
           "plan_rolling_update"]

Obj = Mapping[str, Any]
NodePods = Mapping[str, Sequence[Obj]]
Placement = Mapping[str, tuple[bool, bool]]


def _min_ready_seconds(ds: Obj) -> int:
    value = (ds.get("spec") or {}).get("minReadySeconds")
    return value if isinstance(value, int) else 0


def _name(pod: Obj) -> str:
    return str(meta(pod).get("name") or "")


def desired_node_counts(ds: Obj, placement: Placement) -> tuple[int, int, int]:
    """``updatedDesiredNodeCounts``: ``(max_surge, max_unavailable, desired)``; ValueError on a bad limit."""
    desired = sum(1 for should_run, _ in placement.values() if should_run)
    try:
        max_unavailable = unavailable_count(ds, desired)
    except ValueError as err:
        raise ValueError(f"invalid value for MaxUnavailable: {err}") from err
    try:
        max_surge = surge_count(ds, desired)
    except ValueError as err:
        raise ValueError(f"invalid value for MaxSurge: {err}") from err
    if desired > 0 and max_unavailable == 0 and max_surge == 0:
        # An impossible configuration (the apiserver rejects it): fall back to the default unavailability.
        max_unavailable = 1
    return max_surge, max_unavailable, desired


def find_updated_pods_on_node(pods: Sequence[Obj], hash_: str, generation: int | None
                              ) -> tuple[Obj | None, Obj | None, bool]:
    """``(new_pod, old_pod, ok)`` among the node's pods not being deleted; ok False if there are two of either."""
    new: Obj | None = None
    old: Obj | None = None
    for pod in pods:
        if is_being_deleted(pod):
            continue
        if is_pod_updated(pod, hash_, generation):
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


def _nodes_with_wanted(node_pods: NodePods, placement: Placement) -> dict[str, Sequence[Obj]]:
    # Every node that should run a pod takes part, with or without pods.
    out: dict[str, Sequence[Obj]] = dict(node_pods)
    for node, (should_run, _) in placement.items():
        if should_run:
            out.setdefault(node, ())
    return out


def plan_rolling_update(ds: Obj, node_pods: NodePods, placement: Placement, hash_: str, generation: int | None,
                        now: float) -> tuple[list[str], list[str]]:
    """``rollingUpdate``'s decision: pod names to delete and node names to create a pod on."""
    max_surge, max_unavailable, desired = desired_node_counts(ds, placement)
    nodes = _nodes_with_wanted(node_pods, placement)
    mrs = _min_ready_seconds(ds)

    def available(pod: Obj) -> bool:
        return is_pod_available(pod, mrs, now)

    if max_surge == 0:
        num_unavailable = 0
        replacements: list[str] = []
        candidates: list[str] = []
        for node in sorted(nodes):
            new, old, ok = find_updated_pods_on_node(nodes[node], hash_, generation)
            if not ok or (old is None) == (new is None):
                # Excess pods, none at all, or both: the main loop acts; the node counts as unavailable.
                num_unavailable += 1
            elif new is not None:
                if not available(new):
                    num_unavailable += 1
            elif old is not None:
                if not available(old):
                    replacements.append(_name(old))
                    num_unavailable += 1
                elif num_unavailable < max_unavailable:
                    candidates.append(_name(old))
        budget = min(max(max_unavailable - num_unavailable, 0), len(candidates))
        return replacements + candidates[:budget], []

    to_delete: list[str] = []
    should_not_run: list[str] = []
    surge_candidates: list[str] = []
    allowed_new: list[str] = []
    num_surge = 0
    num_available = 0
    for node in sorted(nodes):
        new, old, ok = find_updated_pods_on_node(nodes[node], hash_, generation)
        if not ok:
            num_surge += 1
            continue
        if old is not None:
            num_available += available(old)
        elif new is not None:
            num_available += available(new)
        if old is None:
            continue  # the main loop creates the pod if none is there
        if new is None:
            if node not in placement:
                raise LookupError(f"couldn't get node for nodeName {node!r}: not found")
            should_run = placement[node][0]
            if not available(old):
                if not should_run:
                    to_delete.append(_name(old))
                else:
                    allowed_new.append(node)  # nothing to lose here: replace at once
            elif not should_run:
                should_not_run.append(_name(old))
            elif num_surge < max_surge:
                surge_candidates.append(node)
            continue
        if not available(new):
            num_surge += 1  # surged here, waiting for the new pod
            continue
        to_delete.append(_name(old))  # the new pod took over

    # Delete pods on nodes that should no longer run one only while more are available than desired.
    deletable = min(max(num_available - desired, 0), len(should_not_run))
    to_delete.extend(should_not_run[:deletable])
    remaining = min(max(max_surge - num_surge, 0), len(surge_candidates))
    return to_delete, allowed_new + surge_candidates[:remaining]


@dataclass(frozen=True, slots=True)
class DaemonSetCounts:
    desired_number_scheduled: int = 0
    current_number_scheduled: int = 0
    number_misscheduled: int = 0
    number_ready: int = 0
    updated_number_scheduled: int = 0
    number_available: int = 0
    number_unavailable: int = 0

    def as_status(self) -> dict[str, int]:
        return {
            "desiredNumberScheduled": self.desired_number_scheduled,
            "currentNumberScheduled": self.current_number_scheduled,
            "numberMisscheduled": self.number_misscheduled,
            "numberReady": self.number_ready,
            "updatedNumberScheduled": self.updated_number_scheduled,
            "numberAvailable": self.number_available,
            "numberUnavailable": self.number_unavailable,
        }


def daemon_set_status(ds: Obj, node_pods: NodePods, placement: Placement, hash_: str, generation: int | None,
                      now: float, order: Callable[[Obj], Any] = pod_creation_order_key) -> DaemonSetCounts:
    """The status numbers of ``updateDaemonSetStatus`` for the nodes in ``placement``."""
    desired = current = misscheduled = ready = updated = available = 0
    mrs = _min_ready_seconds(ds)
    for node, (should_run, _) in placement.items():
        pods = node_pods.get(node) or ()
        if not should_run:
            misscheduled += bool(pods)
            continue
        desired += 1
        if not pods:
            continue
        current += 1
        pod = min(pods, key=order)
        if is_pod_ready(pod):
            ready += 1
            available += is_pod_available(pod, mrs, now)
        updated += is_pod_updated(pod, hash_, generation)
    return DaemonSetCounts(desired, current, misscheduled, ready, updated, available, desired - available)
