"""ReplicaSet and ReplicationController status: computing it from the pods, its ReplicaFailure condition, and
writing it (``replica_set_utils.go``; both kinds' status share these fields and the condition type).

Guarantees:
- :func:`calculate_status` is pure: a new status dict from the RS's current status, its active and
  terminating pods, the error (if any) of this sync's creates/deletes, and ``now``. ``replicas``,
  ``fullyLabeledReplicas`` (template labels all present), ``readyReplicas``, ``availableReplicas``
  (ready for ``minReadySeconds`` as of ``now``) and ``terminatingReplicas`` (feature
  DeploymentReplicaSetTerminatingReplicas, on by default: always written, 0 included, for a kind whose status
  has the field; ``terminating_replicas=False`` (ReplicationController) leaves it out) are recounted.
  A ReplicaFailure=True condition (reason FailedCreate with too few pods, FailedDelete with too many,
  the error as message) is added when an error happened and none is there; it is removed on the first
  sync without an error. ``observedGeneration`` is left to :func:`update_status`.
- :func:`update_status` writes nothing when the counts, conditions and observedGeneration
  already match (the steady state). Otherwise it PUTs ``/status`` with ``observedGeneration`` = the
  generation acted on; on failure it re-reads the RS once and tries once more, then raises (a failed
  re-read raises the read's error, as upstream).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from controller_manager.api.meta import deep_copy, format_time, meta
from controller_manager.api.pods import is_pod_available, is_pod_ready
from controller_manager.api.selectors import from_set
from controller_manager.client import ApiClient

from .kind import ReplicaKind

__all__ = [
    "REPLICA_FAILURE",
    "STATUS_UPDATE_RETRIES",
    "calculate_status",
    "get_condition",
    "new_condition",
    "remove_condition",
    "set_condition",
    "status_unchanged",
    "update_status",
]

Obj = Mapping[str, Any]

REPLICA_FAILURE = "ReplicaFailure"  # apps.ReplicaSetReplicaFailure
STATUS_UPDATE_RETRIES = 1  # one GET + retry after a failed status update

_COUNTS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")


def spec_replicas(rs: Obj) -> int:
    """``*spec.replicas`` (the API server defaults it to 1)."""
    value = (rs.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def min_ready_seconds(rs: Obj) -> int:
    value = (rs.get("spec") or {}).get("minReadySeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --- conditions ------------------------------------------------------------------------------------


def new_condition(cond_type: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    return {"type": cond_type, "status": status, "lastTransitionTime": format_time(now), "reason": reason,
            "message": message}


def get_condition(status: Obj, cond_type: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == cond_type:
            return cond
    return None


def _without(conditions: Sequence[Any] | None, cond_type: str) -> list[Any]:
    return [c for c in conditions or () if not (isinstance(c, Mapping) and c.get("type") == cond_type)]


def set_condition(status: dict[str, Any], condition: Mapping[str, Any]) -> None:
    """Add or replace ``condition``; an existing one with the same status and reason is kept as is."""
    current = get_condition(status, str(condition.get("type")))
    if current is not None and current.get("status") == condition.get("status") \
            and current.get("reason") == condition.get("reason"):
        return
    status["conditions"] = [*_without(status.get("conditions"), str(condition.get("type"))), dict(condition)]


def remove_condition(status: dict[str, Any], cond_type: str) -> None:
    remaining = _without(status.get("conditions"), cond_type)
    if remaining:
        status["conditions"] = remaining
    else:
        status.pop("conditions", None)  # Go's nil slice: omitted from the JSON


# --- status ----------------------------------------------------------------------------------------


def calculate_status(rs: Obj, active_pods: Sequence[Obj], terminating_pods: Sequence[Obj],
                     manage_error: BaseException | None, now: float, *,
                     terminating_replicas: bool = True) -> dict[str, Any]:
    """The status ``rs`` should have (``calculateStatus``); ``terminating_replicas``: the kind's status has
    that field (upstream's ``EnableStatusTerminatingReplicas``)."""
    status: dict[str, Any] = deep_copy(dict(rs.get("status") or {}))
    template_labels = meta((rs.get("spec") or {}).get("template") or {}).get("labels")
    template_selector = from_set(template_labels if isinstance(template_labels, Mapping) else None)
    mrs = min_ready_seconds(rs)
    fully_labeled = ready = available = 0
    for pod in active_pods:
        labels = meta(pod).get("labels")
        if template_selector.matches(labels if isinstance(labels, Mapping) else None):
            fully_labeled += 1
        if is_pod_ready(pod):
            ready += 1
            # Without minReadySeconds a ready pod is available: no second look at its conditions.
            if mrs == 0 or is_pod_available(pod, mrs, now):
                available += 1

    failure = get_condition(status, REPLICA_FAILURE)
    if manage_error is not None and failure is None:
        diff = len(active_pods) - spec_replicas(rs)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        set_condition(status, new_condition(REPLICA_FAILURE, "True", reason, str(manage_error), now))
    elif manage_error is None and failure is not None:
        remove_condition(status, REPLICA_FAILURE)

    status["replicas"] = len(active_pods)
    status["fullyLabeledReplicas"] = fully_labeled
    status["readyReplicas"] = ready
    status["availableReplicas"] = available
    if terminating_replicas:
        status["terminatingReplicas"] = len(terminating_pods)
    else:
        status.pop("terminatingReplicas", None)
    return status


def _count(status: Obj, field: str) -> int:
    value = status.get(field)
    return value if isinstance(value, int) else 0


def status_unchanged(rs: Obj, new_status: Obj) -> bool:
    """True when writing ``new_status`` would change nothing (the steady state)."""
    old = rs.get("status") or {}
    if any(_count(old, f) != _count(new_status, f) for f in _COUNTS):
        return False
    if old.get("terminatingReplicas") != new_status.get("terminatingReplicas"):
        return False
    if (meta(rs).get("generation") or 0) != (old.get("observedGeneration") or 0):
        return False
    return list(old.get("conditions") or []) == list(new_status.get("conditions") or [])


async def update_status(client: ApiClient, kind: ReplicaKind, rs: Obj, new_status: Obj) -> Obj:
    """Write ``new_status`` through ``rs``'s ``/status`` unless nothing changed; returns ``rs`` as now stored."""
    if status_unchanged(rs, new_status):
        return rs
    resource = kind.resource
    log = structlog.get_logger(kind.logger_name)
    status = {**new_status, "observedGeneration": meta(rs).get("generation") or 0}
    current = rs
    attempt = 0
    while True:
        old = current.get("status") or {}
        m = meta(current)
        log.debug("updating status", kind=kind.kind, key=f"{m.get('namespace')}/{m.get('name')}",
                   replicas=f"{_count(old, 'replicas')}->{_count(status, 'replicas')} (need {spec_replicas(current)})",
                   ready=f"{_count(old, 'readyReplicas')}->{_count(status, 'readyReplicas')}",
                   available=f"{_count(old, 'availableReplicas')}->{_count(status, 'availableReplicas')}",
                   terminating=f"{old.get('terminatingReplicas')}->{status.get('terminatingReplicas')}",
                   observed_generation=f"{old.get('observedGeneration')}->{status['observedGeneration']}")
        try:
            body = {**current, "apiVersion": resource.api_version, "kind": resource.kind, "status": status}
            return await client.update_status(resource, body)
        except Exception as err:
            if attempt >= STATUS_UPDATE_RETRIES:
                raise
            log.debug("status update failed, re-reading", key=f"{m.get('namespace')}/{m.get('name')}",
                       error=str(err))
        attempt += 1
        # A failed re-read is the more telling error: we can no longer trust what we counted against.
        current = await client.get(resource, str(m.get("name", "")), m.get("namespace"))
