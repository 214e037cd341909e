"""DeploymentConditions and the words the Deployment controller uses (``deployment_util.go``, ``sync.go``,
``progress.go``).

Guarantees:
- Condition types, reasons, event reasons and message texts are upstream's exactly, so ``kubectl describe`` and
  ``kubectl rollout status`` read our Deployments as they read kube-controller-manager's.
- A new condition carries ``lastUpdateTime`` and ``lastTransitionTime`` both set to ``now`` (RFC 3339, second
  precision, as metav1.Time serialises).
- :func:`set_deployment_condition` is ``SetDeploymentCondition``: a condition with the same status and reason as
  the current one changes nothing; the same status with another reason keeps the old ``lastTransitionTime``;
  the condition moves to the end of the list. It and :func:`remove_deployment_condition` return a new status
  dict (an emptied list drops the ``conditions`` key, as Go's nil slice is omitted) and never touch their input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller_manager.api.meta import format_time

__all__ = [
    "CONDITION_FALSE",
    "CONDITION_TRUE",
    "CONDITION_UNKNOWN",
    "DEPLOYMENT_AVAILABLE",
    "DEPLOYMENT_PROGRESSING",
    "DEPLOYMENT_REPLICA_FAILURE",
    "FAILED_RS_CREATE_REASON",
    "FOUND_NEW_RS_REASON",
    "MINIMUM_REPLICAS_AVAILABLE",
    "MINIMUM_REPLICAS_AVAILABLE_MESSAGE",
    "MINIMUM_REPLICAS_UNAVAILABLE",
    "MINIMUM_REPLICAS_UNAVAILABLE_MESSAGE",
    "NEW_REPLICA_SET_REASON",
    "NEW_RS_AVAILABLE_REASON",
    "PAUSED_DEPLOY_MESSAGE",
    "PAUSED_DEPLOY_REASON",
    "REPLICA_SET_UPDATED_REASON",
    "RESUMED_DEPLOY_MESSAGE",
    "RESUMED_DEPLOY_REASON",
    "ROLLBACK_DONE",
    "ROLLBACK_REVISION_NOT_FOUND",
    "ROLLBACK_TEMPLATE_UNCHANGED",
    "SCALING_REPLICA_SET_REASON",
    "SELECTING_ALL_MESSAGE",
    "SELECTING_ALL_REASON",
    "TIMED_OUT_REASON",
    "created_new_replica_set_message",
    "failed_create_replica_set_message",
    "found_new_replica_set_message",
    "get_deployment_condition",
    "new_deployment_condition",
    "progressing_message",
    "remove_deployment_condition",
    "replica_set_to_deployment_condition",
    "scaled_replica_set_message",
    "set_deployment_condition",
    "successfully_progressed_message",
    "timed_out_message",
]

Obj = Mapping[str, Any]

# Condition types (apps.DeploymentConditionType) and statuses (v1.ConditionStatus).
DEPLOYMENT_AVAILABLE = "Available"
DEPLOYMENT_PROGRESSING = "Progressing"
DEPLOYMENT_REPLICA_FAILURE = "ReplicaFailure"
CONDITION_TRUE = "True"
CONDITION_FALSE = "False"
CONDITION_UNKNOWN = "Unknown"

# Progressing reasons.
REPLICA_SET_UPDATED_REASON = "ReplicaSetUpdated"
FAILED_RS_CREATE_REASON = "ReplicaSetCreateError"
NEW_REPLICA_SET_REASON = "NewReplicaSetCreated"
FOUND_NEW_RS_REASON = "FoundNewReplicaSet"
NEW_RS_AVAILABLE_REASON = "NewReplicaSetAvailable"
TIMED_OUT_REASON = "ProgressDeadlineExceeded"
PAUSED_DEPLOY_REASON = "DeploymentPaused"
RESUMED_DEPLOY_REASON = "DeploymentResumed"
# Available reasons.
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"

# Event reasons.
ROLLBACK_REVISION_NOT_FOUND = "DeploymentRollbackRevisionNotFound"
ROLLBACK_TEMPLATE_UNCHANGED = "DeploymentRollbackTemplateUnchanged"
ROLLBACK_DONE = "DeploymentRollback"
SCALING_REPLICA_SET_REASON = "ScalingReplicaSet"
SELECTING_ALL_REASON = "SelectingAll"

# Fixed messages.
MINIMUM_REPLICAS_AVAILABLE_MESSAGE = "Deployment has minimum availability."
MINIMUM_REPLICAS_UNAVAILABLE_MESSAGE = "Deployment does not have minimum availability."
PAUSED_DEPLOY_MESSAGE = "Deployment is paused"
RESUMED_DEPLOY_MESSAGE = "Deployment is resumed"
SELECTING_ALL_MESSAGE = "This deployment is selecting all pods. A non-empty selector is required."


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the names we print (DNS names: printable ASCII, so only \\ and " need escaping)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def created_new_replica_set_message(rs_name: str) -> str:
    return f"Created new replica set {_go_quote(rs_name)}"


def found_new_replica_set_message(rs_name: str) -> str:
    return f"Found new replica set {_go_quote(rs_name)}"


def failed_create_replica_set_message(rs_name: str, error: str) -> str:
    return f"Failed to create new replica set {_go_quote(rs_name)}: {error}"


def progressing_message(deployment_name: str, rs_name: str | None) -> str:
    """The ReplicaSetUpdated message: about the new ReplicaSet if there is one, else the Deployment."""
    if rs_name is not None:
        return f"ReplicaSet {_go_quote(rs_name)} is progressing."
    return f"Deployment {_go_quote(deployment_name)} is progressing."


def successfully_progressed_message(deployment_name: str, rs_name: str | None) -> str:
    """The NewReplicaSetAvailable message."""
    if rs_name is not None:
        return f"ReplicaSet {_go_quote(rs_name)} has successfully progressed."
    return f"Deployment {_go_quote(deployment_name)} has successfully progressed."


def timed_out_message(deployment_name: str, rs_name: str | None) -> str:
    """The ProgressDeadlineExceeded message."""
    if rs_name is not None:
        return f"ReplicaSet {_go_quote(rs_name)} has timed out progressing."
    return f"Deployment {_go_quote(deployment_name)} has timed out progressing."


def scaled_replica_set_message(operation: str, rs_name: str, old_scale: int, new_scale: int) -> str:
    """The ScalingReplicaSet event message (``operation`` is "up" or "down")."""
    return f"Scaled {operation} replica set {rs_name} from {old_scale} to {new_scale}"


# --- conditions --------------------------------------------------------------------------------------


def new_deployment_condition(cond_type: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    """A condition observed at ``now`` (both timestamps)."""
    stamp = format_time(now)
    return {
        "type": cond_type,
        "status": status,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def _conditions(status: Obj | None) -> list[Mapping[str, Any]]:
    conditions = status.get("conditions") if status is not None else None
    if not isinstance(conditions, list):
        return []
    return [c for c in conditions if isinstance(c, Mapping)]


def get_deployment_condition(status: Obj | None, cond_type: str) -> Mapping[str, Any] | None:
    """The status's condition of ``cond_type`` (read-only), or None."""
    for condition in _conditions(status):
        if condition.get("type") == cond_type:
            return condition
    return None


def _with_conditions(status: Obj | None, conditions: list[Any]) -> dict[str, Any]:
    updated = dict(status or {})
    if conditions:
        updated["conditions"] = conditions
    else:
        updated.pop("conditions", None)
    return updated


def set_deployment_condition(status: Obj | None, condition: Obj) -> dict[str, Any]:
    """The status with ``condition`` set (see the module's guarantees)."""
    current = get_deployment_condition(status, str(condition.get("type")))
    if (
        current is not None
        and current.get("status") == condition.get("status")
        and current.get("reason") == condition.get("reason")
    ):
        return _with_conditions(status, [dict(c) for c in _conditions(status)])
    new_condition = dict(condition)
    if current is not None and current.get("status") == condition.get("status"):
        if "lastTransitionTime" in current:
            new_condition["lastTransitionTime"] = current["lastTransitionTime"]
        else:
            new_condition.pop("lastTransitionTime", None)
    kept = [dict(c) for c in _conditions(status) if c.get("type") != condition.get("type")]
    return _with_conditions(status, [*kept, new_condition])


def remove_deployment_condition(status: Obj | None, cond_type: str) -> dict[str, Any]:
    """The status without conditions of ``cond_type``."""
    return _with_conditions(status, [dict(c) for c in _conditions(status) if c.get("type") != cond_type])


def replica_set_to_deployment_condition(condition: Obj) -> dict[str, Any]:
    """A ReplicaSet condition (e.g. ReplicaFailure) promoted to a Deployment condition.

    Both timestamps are the ReplicaSet condition's ``lastTransitionTime`` (it has no update time).
    """
    promoted: dict[str, Any] = {"type": condition.get("type"), "status": condition.get("status")}
    transition = condition.get("lastTransitionTime")
    if transition is not None:
        promoted["lastUpdateTime"] = transition
        promoted["lastTransitionTime"] = transition
    for key in ("reason", "message"):
        if condition.get(key):
            promoted[key] = condition[key]
    return promoted
