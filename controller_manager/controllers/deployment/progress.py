"""Rollout status and the progress deadline: upstream's ``pkg/controller/deployment/progress.go``.

Guarantees:
- :func:`sync_rollout_status` writes the status :func:`~.sync.calculate_status` computes plus the Progressing
  condition: none without a progress deadline; ``NewReplicaSetAvailable`` once the rollout is complete;
  ``ReplicaSetUpdated`` (refreshing ``lastUpdateTime``, keeping ``lastTransitionTime`` while it stays True)
  whenever the new status shows progress; ``ProgressDeadlineExceeded`` (False) once ``progressDeadlineSeconds``
  passed since the last progress. A completed rollout is not re-judged on resyncs.
- A ReplicaSet's ReplicaFailure condition (the new one's first, else any old one's) is mirrored on the
  Deployment, and removed once no ReplicaSet has one.
- The status is written through ``/status`` only when it changed. When it did not and the rollout is neither
  complete nor timed out, the Deployment is synced again at the deadline (``lastUpdateTime +
  progressDeadlineSeconds``, plus a second against timer skew), or now, rate-limited, if less than a second
  remains: :func:`sync_rollout_status` returns that delay (``NOW_RATE_LIMITED`` for "now, rate-limited") for
  the caller to hand to the runner as its :class:`~controller_manager.runtime.controller.Result`, with the
  Deployment as it now is (the one given is never edited).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.meta import meta, parse_time
from controller_manager.controllers.deployment import util_conditions
from controller_manager.controllers.deployment.util_conditions import (
    CONDITION_FALSE,
    CONDITION_TRUE,
    DEPLOYMENT_PROGRESSING,
    DEPLOYMENT_REPLICA_FAILURE,
    NEW_RS_AVAILABLE_REASON,
    REPLICA_SET_UPDATED_REASON,
    TIMED_OUT_REASON,
    get_deployment_condition,
    new_deployment_condition,
    progressing_message,
    remove_deployment_condition,
    replica_set_to_deployment_condition,
    successfully_progressed_message,
    timed_out_message,
)
from controller_manager.controllers.deployment.util_rollout import (
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
    has_progress_deadline,
)

from .control import DeploymentControl, Obj, status_of, with_status
from .sync import calculate_status, normalized_status

__all__ = ["NOW_RATE_LIMITED", "NO_REQUEUE", "get_replica_failures", "requeue_stuck_deployment", "sync_rollout_status"]

NO_REQUEUE = -1.0
# What sync_rollout_status returns to be synced again now through the queue's rate limiter (upstream's
# enqueueRateLimited from the sync, whose nil error then forgets the key's failures).
NOW_RATE_LIMITED = 0.0
REPLICA_SET_REPLICA_FAILURE = "ReplicaFailure"


async def sync_rollout_status(dc: DeploymentControl, all_rss: Sequence[Obj | None], new_rs: Obj | None,
                              d: Obj) -> tuple[float | None, Obj]:
    """Write the rollout's status; returns seconds until the Deployment must be looked at again (or None), and
    the Deployment as it now is."""
    now = dc.now()
    new_status = calculate_status(all_rss, new_rs, d, now)
    if not has_progress_deadline(d):
        new_status = remove_deployment_condition(new_status, DEPLOYMENT_PROGRESSING)

    current = get_deployment_condition(status_of(d), DEPLOYMENT_PROGRESSING)
    # Only one active ReplicaSet and it completed before: a resync, no progress to estimate.
    is_complete = (int(new_status.get("replicas") or 0) == int(new_status.get("updatedReplicas") or 0)
                   and current is not None and current.get("reason") == NEW_RS_AVAILABLE_REASON)
    if has_progress_deadline(d) and not is_complete:
        new_status = _judge_progress(d, new_rs, new_status, current, now)

    failures = get_replica_failures(all_rss, new_rs)
    if failures:
        new_status = util_conditions.set_deployment_condition(new_status, failures[0])
    else:
        new_status = remove_deployment_condition(new_status, DEPLOYMENT_REPLICA_FAILURE)

    if normalized_status(status_of(d)) == normalized_status(new_status):
        delay = requeue_stuck_deployment(d, new_status, now)
        if delay == NO_REQUEUE:
            return None, d
        if delay < 1.0:
            # (Almost) at the deadline: look again now, rate-limited, until it is Complete or TimedOut.
            dc.log.debug("queueing up deployment for a progress check now", deployment=meta(d).get("name"))
            return NOW_RATE_LIMITED, d
        dc.log.debug("queueing up deployment for a progress check", deployment=meta(d).get("name"),
                     queue_after=int(delay))
        # One more second against millisecond skew of the delayed add.
        return delay + 1.0, d
    return None, await dc.update_deployment_status(with_status(d, new_status))


def _judge_progress(d: Obj, new_rs: Obj | None, new_status: dict[str, Any], current: Mapping[str, Any] | None,
                    now: float) -> dict[str, Any]:
    name = str(meta(d).get("name", ""))
    rs_name = str(meta(new_rs).get("name", "")) if new_rs is not None else None
    if deployment_complete(d, new_status):
        condition = new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_TRUE,
                                                  NEW_RS_AVAILABLE_REASON,
                                                  successfully_progressed_message(name, rs_name), now)
        return util_conditions.set_deployment_condition(new_status, condition)
    if deployment_progressing(d, new_status):
        condition = new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_TRUE,
                                                  REPLICA_SET_UPDATED_REASON,
                                                  progressing_message(name, rs_name), now)
        # Progress refreshes lastUpdateTime even with an unchanged reason (set_deployment_condition would keep
        # the old condition), and keeps lastTransitionTime while the condition stays True.
        if current is not None:
            if current.get("status") == CONDITION_TRUE and "lastTransitionTime" in current:
                condition["lastTransitionTime"] = current["lastTransitionTime"]
            new_status = remove_deployment_condition(new_status, DEPLOYMENT_PROGRESSING)
        return util_conditions.set_deployment_condition(new_status, condition)
    if deployment_timed_out(d, new_status, now):
        condition = new_deployment_condition(DEPLOYMENT_PROGRESSING, CONDITION_FALSE,
                                                  TIMED_OUT_REASON, timed_out_message(name, rs_name), now)
        return util_conditions.set_deployment_condition(new_status, condition)
    return new_status


def get_replica_failures(all_rss: Sequence[Obj | None], new_rs: Obj | None) -> list[dict[str, Any]]:
    """ReplicaFailure conditions of the new ReplicaSet, else of any ReplicaSet, as Deployment conditions."""
    def failures(rs: Obj | None) -> list[dict[str, Any]]:
        conditions = status_of(rs).get("conditions") or ()
        return [replica_set_to_deployment_condition(c) for c in conditions
                if isinstance(c, Mapping) and c.get("type") == REPLICA_SET_REPLICA_FAILURE]

    found = failures(new_rs)
    if found:
        return found
    return [c for rs in all_rss for c in failures(rs)]


def requeue_stuck_deployment(d: Obj, new_status: Obj, now: float) -> float:
    """Seconds until the deadline of a rollout that shows no progress now; 0 if due; -1 if no check is needed."""
    current = get_deployment_condition(status_of(d), DEPLOYMENT_PROGRESSING)
    if not has_progress_deadline(d) or current is None:
        return NO_REQUEUE
    if deployment_complete(d, new_status) or current.get("reason") == TIMED_OUT_REASON:
        return NO_REQUEUE
    last_update = parse_time(current.get("lastUpdateTime"))
    deadline = int((d.get("spec") or {}).get("progressDeadlineSeconds") or 0)
    after = (last_update or 0.0) + deadline - now
    return 0.0 if after < 1.0 else after
