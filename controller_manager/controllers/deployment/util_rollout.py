"""Rollout arithmetic: counting replicas, sizing the new ReplicaSet, proportional scaling, and judging a
rollout complete, progressing or timed out (``deployment_util.go``, the scaling half of ``sync.go``).

Guarantees:
- Counting helpers sum ``spec.replicas`` / ``status.{replicas,readyReplicas,availableReplicas}`` over the
  non-None ReplicaSets. :func:`get_terminating_replica_count_for_replica_sets` follows the
  DeploymentReplicaSetTerminatingReplicas rules (beta, on since 1.35): a ReplicaSet never synced
  (``observedGeneration`` 0) without ``status.terminatingReplicas`` counts 0; a synced one without it makes the
  total unknown (None).
- :func:`new_rs_new_replicas` never sizes the new ReplicaSet above ``spec.replicas`` nor the total above
  ``spec.replicas + maxSurge`` (maxSurge rounded up).
- Proportional scaling is ``getReplicaSetFraction`` / ``GetReplicaSetProportion`` / ``scale``: each active
  ReplicaSet's share is ``round(rs * (replicas + maxSurge) / max-replicas-annotation)`` (half away from zero,
  falling back to ``status.replicas`` when the annotation is missing, invalid or 0, and to no change when that
  is 0 too), bounded by what is left to add or remove; the rounding leftover goes to the first (largest)
  ReplicaSet, never below 0. :func:`proportional_scale_sizes` therefore hands out exactly the delta unless that
  floor at 0 bites.
- Time is the ``now`` argument (epoch seconds); timestamps are read with ``parse_time`` and a missing or
  unparsable one reads as the distant past (Go's zero time).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from controller_manager.api.intstr import scaled_value
from controller_manager.api.meta import meta, parse_time
from controller_manager.controllers.deployment.util_annotations import (
    DESIRED_REPLICAS_ANNOTATION,
    get_max_replicas_annotation,
)
from controller_manager.controllers.deployment.util_conditions import (
    DEPLOYMENT_PROGRESSING,
    NEW_RS_AVAILABLE_REASON,
    TIMED_OUT_REASON,
    get_deployment_condition,
)
from controller_manager.controllers.deployment.util_strategy import (
    RECREATE,
    ROLLING_UPDATE,
    deployment_replicas,
    max_surge,
    replica_set_replicas,
    rolling_update_params,
)
from controller_manager.controllerutil.controller_utils import replica_sets_by_size_newer, replica_sets_by_size_older

__all__ = [
    "deployment_complete",
    "deployment_progressing",
    "deployment_timed_out",
    "get_actual_replica_count_for_replica_sets",
    "get_available_replica_count_for_replica_sets",
    "get_proportion",
    "get_ready_replica_count_for_replica_sets",
    "get_replica_count_for_replica_sets",
    "get_replica_set_fraction",
    "get_replica_set_proportion",
    "get_terminating_replica_count_for_replica_sets",
    "has_progress_deadline",
    "has_revision_history_limit",
    "is_saturated",
    "new_rs_new_replicas",
    "proportional_scale_sizes",
]

Obj = Mapping[str, Any]

_INT32_MAX = 2**31 - 1


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _status(obj: Obj | None) -> Mapping[str, Any]:
    status = obj.get("status") if obj is not None else None
    return status if isinstance(status, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


# --- counting ---------------------------------------------------------------------------------------


def get_replica_count_for_replica_sets(replica_sets: Iterable[Obj | None]) -> int:
    """Sum of ``spec.replicas`` (pods wanted)."""
    return sum(replica_set_replicas(rs) for rs in replica_sets if rs is not None)


def _sum_status(replica_sets: Iterable[Obj | None], field: str) -> int:
    return sum(_int(_status(rs).get(field)) for rs in replica_sets if rs is not None)


def get_actual_replica_count_for_replica_sets(replica_sets: Iterable[Obj | None]) -> int:
    """Sum of ``status.replicas`` (non-terminating pods that exist)."""
    return _sum_status(replica_sets, "replicas")


def get_ready_replica_count_for_replica_sets(replica_sets: Iterable[Obj | None]) -> int:
    return _sum_status(replica_sets, "readyReplicas")


def get_available_replica_count_for_replica_sets(replica_sets: Iterable[Obj | None]) -> int:
    return _sum_status(replica_sets, "availableReplicas")


def get_terminating_replica_count_for_replica_sets(replica_sets: Iterable[Obj | None]) -> int | None:
    """Sum of ``status.terminatingReplicas``; None when a synced ReplicaSet does not report it."""
    total = 0
    for rs in replica_sets:
        if rs is None:
            continue
        status = _status(rs)
        terminating = status.get("terminatingReplicas")
        if terminating is None:
            if _int(status.get("observedGeneration")) == 0:
                # Never synced by the ReplicaSet controller yet: it has no pods of its own to report.
                continue
            # Synced but silent: its controller does not track terminating pods, so the total is unknown.
            return None
        total += _int(terminating)
    return total


# --- the new ReplicaSet ------------------------------------------------------------------------------


def new_rs_new_replicas(deployment: Obj, all_rss: Iterable[Obj | None], new_rs: Obj) -> int:
    """How many replicas the new ReplicaSet should have now (``NewRSNewReplicas``).

    RollingUpdate: grow toward ``spec.replicas`` while the total stays within ``spec.replicas + maxSurge``.
    Recreate: ``spec.replicas``. ValueError for another strategy type or an invalid maxSurge.
    """
    strategy_type = (_spec(deployment).get("strategy") or {}).get("type")
    desired = deployment_replicas(deployment)
    if strategy_type == ROLLING_UPDATE:
        surge_value, _ = rolling_update_params(deployment)
        surge = scaled_value(surge_value, desired, True)
        current = get_replica_count_for_replica_sets(all_rss)
        max_total = desired + surge
        new_replicas = replica_set_replicas(new_rs)
        if current >= max_total:
            return new_replicas
        return new_replicas + min(max_total - current, desired - new_replicas)
    if strategy_type == RECREATE:
        return desired
    raise ValueError(f"deployment type {strategy_type or ''} isn't supported")


def is_saturated(deployment: Obj, rs: Obj | None) -> bool:
    """Whether the ReplicaSet is fully scaled to the Deployment and all its pods are available."""
    if rs is None:
        return False
    annotations = meta(rs).get("annotations") or {}
    desired_text = annotations.get(DESIRED_REPLICAS_ANNOTATION, "")
    if not _is_int32_text(desired_text):
        return False
    desired_annotation = int(desired_text)
    desired = deployment_replicas(deployment)
    return (
        replica_set_replicas(rs) == desired
        and desired_annotation == desired
        and _int(_status(rs).get("availableReplicas")) == desired
    )


def _is_int32_text(text: object) -> bool:
    # strconv.ParseInt(s, 10, 32): optional sign, ASCII digits, int32 range.
    if not isinstance(text, str):
        return False
    body = text[1:] if text[:1] in "+-" and text else text
    if not body or not body.isascii() or not body.isdigit():
        return False
    return -(2**31) <= int(text) <= _INT32_MAX


# --- proportional scaling ---------------------------------------------------------------------------


def _round_half_away(value: Fraction) -> int:
    """math.Round: halves go away from zero."""
    magnitude = math.floor(abs(value) + Fraction(1, 2))
    return magnitude if value >= 0 else -magnitude


def get_replica_set_fraction(rs: Obj, deployment: Obj) -> int:
    """How many replicas this ReplicaSet should gain (or lose, negative) when the Deployment is resized."""
    rs_replicas = replica_set_replicas(rs)
    desired = deployment_replicas(deployment)
    if desired == 0:
        return -rs_replicas
    max_replicas = desired + max_surge(deployment)
    before, ok = get_max_replicas_annotation(rs)
    if not ok or before == 0:
        # Someone removed or broke the annotation: estimate from the current size. Inexact if ReplicaSets
        # disagree, but the bounds in get_replica_set_proportion keep the total within limits.
        before = _int(_status(deployment).get("replicas"))
        if before == 0:
            return 0
    return _round_half_away(Fraction(rs_replicas * max_replicas, before)) - rs_replicas


def get_replica_set_proportion(
    rs: Obj | None, deployment: Obj, deployment_replicas_to_add: int, deployment_replicas_added: int
) -> int:
    """This ReplicaSet's share of ``deployment_replicas_to_add``, given ``deployment_replicas_added`` so far."""
    if (
        rs is None
        or replica_set_replicas(rs) == 0
        or deployment_replicas_to_add == 0
        or deployment_replicas_to_add == deployment_replicas_added
    ):
        return 0
    fraction = get_replica_set_fraction(rs, deployment)
    allowed = deployment_replicas_to_add - deployment_replicas_added
    if deployment_replicas_to_add > 0:
        return min(fraction, allowed)
    return max(fraction, allowed)


# Upstream's older name for the same function.
get_proportion = get_replica_set_proportion


def proportional_scale_sizes(deployment: Obj, active_rss: Sequence[Obj]) -> tuple[list[tuple[Obj, int]], str]:
    """The new size of each active ReplicaSet when a rolling Deployment is resized mid-rollout (``scale``).

    ``active_rss`` are the ReplicaSets with pods wanted (``filter_active_replica_sets(old + [new])``).
    Returns ``([(rs, new_size), ...], operation)`` in the order upstream scales them (largest first; on ties
    newest first when growing, oldest first when shrinking) and ``operation`` "up", "down" or "" (no change).
    """
    desired = deployment_replicas(deployment)
    allowed_size = desired + max_surge(deployment) if desired > 0 else 0
    to_add = allowed_size - get_replica_count_for_replica_sets(active_rss)
    if to_add > 0:
        ordered, operation = replica_sets_by_size_newer(active_rss), "up"
    elif to_add < 0:
        ordered, operation = replica_sets_by_size_older(active_rss), "down"
    else:
        return [(rs, replica_set_replicas(rs)) for rs in active_rss], ""
    added = 0
    sizes: list[int] = []
    for rs in ordered:
        proportion = get_replica_set_proportion(rs, deployment, to_add, added)
        sizes.append(replica_set_replicas(rs) + proportion)
        added += proportion
    if sizes:
        # Rounding leaves a remainder: the largest ReplicaSet absorbs it.
        sizes[0] = max(sizes[0] + to_add - added, 0)
    return list(zip(ordered, sizes, strict=True)), operation


# --- rollout judgements ------------------------------------------------------------------------------


def has_progress_deadline(deployment: Obj) -> bool:
    """Whether ``spec.progressDeadlineSeconds`` is set to something other than MaxInt32 (no deadline)."""
    value = _spec(deployment).get("progressDeadlineSeconds")
    return isinstance(value, int) and not isinstance(value, bool) and value != _INT32_MAX


def has_revision_history_limit(deployment: Obj) -> bool:
    """Whether ``spec.revisionHistoryLimit`` is set to something other than MaxInt32 (keep everything)."""
    value = _spec(deployment).get("revisionHistoryLimit")
    return isinstance(value, int) and not isinstance(value, bool) and value != _INT32_MAX


def deployment_complete(deployment: Obj, new_status: Obj) -> bool:
    """All desired replicas updated and available, no old ones left, and the status is for this generation."""
    desired = deployment_replicas(deployment)
    return (
        _int(new_status.get("updatedReplicas")) == desired
        and _int(new_status.get("replicas")) == desired
        and _int(new_status.get("availableReplicas")) == desired
        and _int(new_status.get("observedGeneration")) >= _int(meta(deployment).get("generation"))
    )


def deployment_progressing(deployment: Obj, new_status: Obj) -> bool:
    """Whether ``new_status`` shows progress over the Deployment's current status: more updated, ready or
    available pods, or fewer old ones."""
    old_status = _status(deployment)
    old_old_replicas = _int(old_status.get("replicas")) - _int(old_status.get("updatedReplicas"))
    new_old_replicas = _int(new_status.get("replicas")) - _int(new_status.get("updatedReplicas"))
    return (
        _int(new_status.get("updatedReplicas")) > _int(old_status.get("updatedReplicas"))
        or new_old_replicas < old_old_replicas
        or _int(new_status.get("readyReplicas")) > _int(old_status.get("readyReplicas"))
        or _int(new_status.get("availableReplicas")) > _int(old_status.get("availableReplicas"))
    )


def deployment_timed_out(deployment: Obj, new_status: Obj, now: float) -> bool:
    """Whether the rollout has made no progress for ``progressDeadlineSeconds`` (judged on the Progressing
    condition of ``new_status``; a completed rollout never times out, a timed-out one stays timed out)."""
    if not has_progress_deadline(deployment):
        return False
    condition = get_deployment_condition(new_status, DEPLOYMENT_PROGRESSING)
    if condition is None:
        return False
    if condition.get("reason") == NEW_RS_AVAILABLE_REASON:
        # A resync racing the creation of a new ReplicaSet may still see the last rollout's condition.
        return False
    if condition.get("reason") == TIMED_OUT_REASON:
        return True
    last_update = parse_time(condition.get("lastUpdateTime"))
    if last_update is None:
        return True
    return bool(last_update + _int(_spec(deployment).get("progressDeadlineSeconds")) < now)

