"""Pure PodDisruptionBudget arithmetic: healthy pods, expiring disrupted pods, the status and its condition.

The pieces of ``pkg/controller/disruption/disruption.go`` and ``k8s.io/component-helpers/apps/poddisruptionbudget``
that need no cache and no API:

- :func:`count_healthy_pods` counts ready pods that are neither being deleted nor recorded in ``disruptedPods``
  less than :data:`DELETION_TIMEOUT` ago (``countHealthyPods``).
- :func:`build_disrupted_pod_map` keeps the ``disruptedPods`` entries of pods that still exist, are not being
  deleted and were disrupted at most :data:`DELETION_TIMEOUT` ago; it names the expired ones (upstream's
  ``NotDeleted`` event) and the earliest time an entry will expire (when the PDB must be synced again).
- :func:`disruptions_allowed` is ``currentHealthy - desiredHealthy``, and 0 when no pods are expected.
- :func:`status_is_current` is upstream's "nothing to write" test; :func:`new_status` the status to write,
  with the ``DisruptionAllowed`` condition set as ``UpdateDisruptionAllowedCondition`` sets it;
  :func:`fail_safe_status` the ``SyncFailed`` status of ``failSafe``.
- Conditions follow ``apimeta.SetStatusCondition``: the transition time changes only when the status does;
  other conditions are kept as they are.
- Statuses are built as the API serialises ``policy/v1`` (``observedGeneration``, ``disruptedPods`` and
  ``conditions`` omitted when empty; the four counts always present). Inputs are never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_manager.api.meta import format_time, meta, parse_time
from controller_manager.api.pods import is_pod_ready

__all__ = [
    "DELETION_TIMEOUT",
    "DISRUPTION_ALLOWED_CONDITION",
    "INSUFFICIENT_PODS_REASON",
    "SUFFICIENT_PODS_REASON",
    "SYNC_FAILED_REASON",
    "build_disrupted_pod_map",
    "conditions_are_up_to_date",
    "count_healthy_pods",
    "disruptions_allowed",
    "fail_safe_status",
    "find_condition",
    "new_status",
    "set_status_condition",
    "status_is_current",
]

Obj = Mapping[str, Any]

# How long after an eviction recorded a pod in disruptedPods the pod is expected to be seen terminating; after
# that the entry is dropped (the pod was not deleted after all). Assumes clocks of the nodes are in sync.
DELETION_TIMEOUT = 120.0

DISRUPTION_ALLOWED_CONDITION = "DisruptionAllowed"
SYNC_FAILED_REASON = "SyncFailed"
SUFFICIENT_PODS_REASON = "SufficientPods"
INSUFFICIENT_PODS_REASON = "InsufficientPods"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _pod_name(pod: Obj) -> str:
    return str(meta(pod).get("name") or "")


def _disruption_time(value: Any) -> float:
    """A disruptedPods timestamp in epoch seconds; an unparsable one counts as the zero time, as Go's would."""
    parsed = parse_time(value) if isinstance(value, str) else None
    return parsed if parsed is not None else float("-inf")


def count_healthy_pods(pods: Iterable[Obj], disrupted_pods: Mapping[str, Any], now: float) -> int:
    """Ready pods not being deleted and not expected to be deleted soon."""
    healthy = 0
    for pod in pods:
        if meta(pod).get("deletionTimestamp") is not None:
            continue
        disrupted = disrupted_pods.get(_pod_name(pod))
        if disrupted is not None and _disruption_time(disrupted) + DELETION_TIMEOUT > now:
            continue  # evicted moments ago: its deletion is on the way
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def build_disrupted_pod_map(pods: Iterable[Obj], pdb: Obj, now: float
                            ) -> tuple[dict[str, Any], list[Obj], float | None]:
    """(entries to keep, pods whose entry expired, earliest expiry of a kept entry or None)."""
    recorded = (pdb.get("status") or {}).get("disruptedPods")
    result: dict[str, Any] = {}
    expired: list[Obj] = []
    recheck: float | None = None
    if not recorded:
        return result, expired, recheck
    for pod in pods:
        if meta(pod).get("deletionTimestamp") is not None:
            continue  # its deletion started: the entry has done its job
        name = _pod_name(pod)
        if name not in recorded:
            continue
        expected_deletion = _disruption_time(recorded[name]) + DELETION_TIMEOUT
        if expected_deletion < now:
            expired.append(pod)
        else:
            if recheck is None or expected_deletion < recheck:
                recheck = expected_deletion
            result[name] = recorded[name]
    return result, expired, recheck


def disruptions_allowed(current_healthy: int, desired_healthy: int, expected_count: int) -> int:
    """How many more pods may be disrupted; 0 while no pods are expected, so a PDB whose first pods appear before
    this controller has counted them is never permissive."""
    allowed = current_healthy - desired_healthy
    return 0 if expected_count <= 0 or allowed <= 0 else allowed


def find_condition(conditions: Sequence[Obj] | None, type_: str) -> Obj | None:
    for cond in conditions or ():
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def set_status_condition(conditions: Sequence[Obj] | None, new: Mapping[str, Any], now: float) -> list[dict[str, Any]]:
    """A new list with ``new`` set (``apimeta.SetStatusCondition``); ``new`` has no transition time of its own."""
    out = [dict(c) for c in conditions or () if isinstance(c, Mapping)]
    for cond in out:
        if cond.get("type") != new["type"]:
            continue
        if cond.get("status") != new["status"]:
            cond["status"] = new["status"]
            cond["lastTransitionTime"] = format_time(now)
        cond["reason"] = new.get("reason", "")
        cond["message"] = new.get("message", "")
        if new.get("observedGeneration"):
            cond["observedGeneration"] = new["observedGeneration"]
        else:
            cond.pop("observedGeneration", None)
        return out
    added: dict[str, Any] = {"type": new["type"], "status": new["status"]}
    if new.get("observedGeneration"):
        added["observedGeneration"] = new["observedGeneration"]
    added.update(lastTransitionTime=format_time(now), reason=new.get("reason", ""), message=new.get("message", ""))
    out.append(added)
    return out


def _disruption_allowed_condition(allowed: int, observed_generation: int) -> dict[str, Any]:
    if allowed > 0:
        return {"type": DISRUPTION_ALLOWED_CONDITION, "status": "True", "reason": SUFFICIENT_PODS_REASON,
                "message": "", "observedGeneration": observed_generation}
    return {"type": DISRUPTION_ALLOWED_CONDITION, "status": "False", "reason": INSUFFICIENT_PODS_REASON,
            "message": "", "observedGeneration": observed_generation}


def conditions_are_up_to_date(pdb: Obj) -> bool:
    """The DisruptionAllowed condition agrees with disruptionsAllowed for this generation
    (``ConditionsAreUpToDate``)."""
    status = pdb.get("status") or {}
    cond = find_condition(status.get("conditions"), DISRUPTION_ALLOWED_CONDITION)
    if cond is None:
        return False
    if _int(status.get("observedGeneration")) != _int(meta(pdb).get("generation")):
        return False
    if _int(status.get("disruptionsAllowed")) > 0:
        return cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS_REASON
    return cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS_REASON


def _same_disrupted_pods(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Semantic equality: nil and empty maps are equal, times compare as instants."""
    old = old or {}
    if set(old) != set(new):
        return False
    return all(_disruption_time(old[k]) == _disruption_time(new[k]) for k in new)


def status_is_current(pdb: Obj, current_healthy: int, desired_healthy: int, expected_count: int,
                      disrupted_pods: Mapping[str, Any]) -> bool:
    """Nothing to write: every field already says what this sync computed."""
    status = pdb.get("status") or {}
    allowed = disruptions_allowed(current_healthy, desired_healthy, expected_count)
    return (_int(status.get("currentHealthy")) == current_healthy
            and _int(status.get("desiredHealthy")) == desired_healthy
            and _int(status.get("expectedPods")) == expected_count
            and _int(status.get("disruptionsAllowed")) == allowed
            and _same_disrupted_pods(status.get("disruptedPods"), disrupted_pods)
            and _int(status.get("observedGeneration")) == _int(meta(pdb).get("generation"))
            and conditions_are_up_to_date(pdb))


def _serialise(observed_generation: int, disrupted_pods: Mapping[str, Any], allowed: int, current_healthy: int,
               desired_healthy: int, expected_count: int, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if observed_generation:
        status["observedGeneration"] = observed_generation
    if disrupted_pods:
        status["disruptedPods"] = dict(disrupted_pods)
    status.update(disruptionsAllowed=allowed, currentHealthy=current_healthy, desiredHealthy=desired_healthy,
                  expectedPods=expected_count)
    if conditions:
        status["conditions"] = conditions
    return status


def new_status(pdb: Obj, current_healthy: int, desired_healthy: int, expected_count: int,
               disrupted_pods: Mapping[str, Any], now: float) -> dict[str, Any]:
    """The status ``updatePdbStatus`` writes: every count recomputed, this generation observed, the
    DisruptionAllowed condition brought in line, other conditions kept."""
    generation = _int(meta(pdb).get("generation"))
    allowed = disruptions_allowed(current_healthy, desired_healthy, expected_count)
    conditions = set_status_condition((pdb.get("status") or {}).get("conditions"),
                                      _disruption_allowed_condition(allowed, generation), now)
    return _serialise(generation, disrupted_pods, allowed, current_healthy, desired_healthy, expected_count,
                      conditions)


def fail_safe_status(pdb: Obj, message: str, now: float) -> dict[str, Any]:
    """The status ``failSafe`` writes: the old one with no disruption allowed and a SyncFailed condition."""
    status = dict(pdb.get("status") or {})
    observed = _int(status.get("observedGeneration"))
    status["disruptionsAllowed"] = 0
    status["conditions"] = set_status_condition(
        status.get("conditions"),
        {"type": DISRUPTION_ALLOWED_CONDITION, "status": "False", "reason": SYNC_FAILED_REASON,
         "message": message, "observedGeneration": observed},
        now)
    for field in ("currentHealthy", "desiredHealthy", "expectedPods"):
        status[field] = _int(status.get(field))
    return status
