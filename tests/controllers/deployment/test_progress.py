"""progress_test.go's tables (TestRequeueStuckDeployment, TestSyncRolloutStatus) against
:mod:`controller_manager.controllers.deployment.progress`."""

from __future__ import annotations

import calendar
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.controllers.deployment.progress import (
    NO_REQUEUE,
    get_replica_failures,
    requeue_stuck_deployment,
    sync_rollout_status,
)
from controller_manager.controllers.deployment.util_conditions import (
    DEPLOYMENT_PROGRESSING,
    NEW_RS_AVAILABLE_REASON,
    REPLICA_SET_UPDATED_REASON,
    TIMED_OUT_REASON,
    get_deployment_condition,
)
from tests.controllers.deployment.test_sync import fake_control, rs

T_STUCK = float(calendar.timegm((2017, 2, 15, 18, 49, 0)))  # the stuck condition's lastUpdateTime
TEST_TIME = format_time(T_STUCK)
PDS = 60


def status(replicas: int, updated: int, available: int) -> dict[str, Any]:
    return {"replicas": replicas, "updatedReplicas": updated, "availableReplicas": available}


def current_deployment(pds: int | None, replicas: int, status_replicas: int, updated: int, available: int,
                       conditions: list[dict[str, Any]] | None) -> dict[str, Any]:
    """currentDeployment: a Recreate Deployment, already observed, with the given status."""
    spec: dict[str, Any] = {"replicas": replicas, "strategy": {"type": "Recreate"}}
    if pds is not None:
        spec["progressDeadlineSeconds"] = pds
    d: dict[str, Any] = {"metadata": {"name": "progress-test", "namespace": "default"}, "spec": spec,
                         "status": status(status_replicas, updated, available)}
    if conditions is not None:
        d["status"]["conditions"] = conditions
    return d


FAILED = [{"type": "Progressing", "status": "False", "reason": TIMED_OUT_REASON}]
STUCK = [{"type": "Progressing", "status": "True", "lastUpdateTime": TEST_TIME}]


@pytest.mark.parametrize(("d", "new_status", "now", "expected"), [
    pytest.param(current_deployment(None, 4, 3, 3, 2, None), status(3, 3, 2), T_STUCK, NO_REQUEUE,
                 id="no progressDeadlineSeconds specified"),
    pytest.param(current_deployment(PDS, 4, 3, 3, 2, None), status(3, 3, 2), T_STUCK, NO_REQUEUE,
                 id="no progressing condition found"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 3, None), status(3, 3, 3), T_STUCK, NO_REQUEUE,
                 id="complete deployment does not need to be requeued"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 0, FAILED), status(3, 3, 0), T_STUCK, NO_REQUEUE,
                 id="already failed deployment does not need to be requeued"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 1, STUCK), status(3, 3, 1), T_STUCK + 30, 30.0,
                 id="stuck deployment - 30s"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 1, STUCK), status(3, 3, 1), T_STUCK + 59, 1.0,
                 id="stuck deployment - 1s"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 1, STUCK), status(3, 3, 1), T_STUCK + 59.5, 0.0,
                 id="failed deployment - less than a second => now"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 1, STUCK), status(3, 3, 1), T_STUCK + 60, 0.0,
                 id="failed deployment - now"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 1, STUCK), status(3, 3, 1), T_STUCK + 61, 0.0,
                 id="failed deployment - 1s after deadline"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 1, STUCK), status(3, 3, 1), T_STUCK + 120, 0.0,
                 id="failed deployment - 60s after deadline"),
])
def test_requeue_stuck_deployment(d: dict[str, Any], new_status: dict[str, Any], now: float,
                                  expected: float) -> None:
    assert requeue_stuck_deployment(d, new_status, now) == pytest.approx(expected)


def rs_with_available(name: str, spec_replicas: int, status_replicas: int, available: int) -> dict[str, Any]:
    return rs(name, spec_replicas, None, None, replicas=status_replicas, availableReplicas=available)


FAILED_TIMED_OUT = {"type": "Progressing", "status": "False", "reason": TIMED_OUT_REASON}
NEW_RS_AVAILABLE = {"type": "Progressing", "status": "True", "reason": NEW_RS_AVAILABLE_REASON,
                    "lastUpdateTime": TEST_TIME, "lastTransitionTime": TEST_TIME}
RS_UPDATED = {"type": "Progressing", "status": "True", "reason": REPLICA_SET_UPDATED_REASON,
              "lastUpdateTime": TEST_TIME, "lastTransitionTime": TEST_TIME}

# (deployment, old ReplicaSets, new ReplicaSet, expected (status, reason) or None, lastUpdate kept,
#  lastTransition kept)
SYNC_CASES = [
    pytest.param(current_deployment(None, 3, 2, 2, 2, [RS_UPDATED]), [rs_with_available("bar", 0, 1, 1)],
                 rs_with_available("foo", 3, 2, 2), None, False, False,
                 id="General: remove Progressing condition and do not estimate progress if no Progress Deadline"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 3, [NEW_RS_AVAILABLE]), [rs_with_available("bar", 3, 3, 3)],
                 None, ("True", NEW_RS_AVAILABLE_REASON), True, True,
                 id="General: do not estimate progress of deployment with only one active ReplicaSet"),
    pytest.param(current_deployment(PDS, 3, 2, 2, 2, [RS_UPDATED]), [rs_with_available("bar", 0, 1, 1)],
                 rs_with_available("foo", 3, 2, 2), ("True", REPLICA_SET_UPDATED_REASON), False, True,
                 id="DeploymentProgressing: dont update lastTransitionTime if deployment already has Progressing=True"),
    pytest.param(current_deployment(PDS, 3, 2, 2, 2, [FAILED_TIMED_OUT]), [rs_with_available("bar", 0, 1, 1)],
                 rs_with_available("foo", 3, 2, 2), ("True", REPLICA_SET_UPDATED_REASON), False, False,
                 id="DeploymentProgressing: update everything if deployment has Progressing=False"),
    pytest.param(current_deployment(PDS, 3, 2, 2, 2, []), [rs_with_available("bar", 0, 1, 1)],
                 rs_with_available("foo", 3, 2, 2), ("True", REPLICA_SET_UPDATED_REASON), False, False,
                 id="DeploymentProgressing: create Progressing condition if it does not exist"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 3, [RS_UPDATED]), [], rs_with_available("foo", 3, 3, 3),
                 ("True", NEW_RS_AVAILABLE_REASON), False, True,
                 id="DeploymentComplete: dont update lastTransitionTime if deployment already has Progressing=True"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 3, [FAILED_TIMED_OUT]), [], rs_with_available("foo", 3, 3, 3),
                 ("True", NEW_RS_AVAILABLE_REASON), False, False,
                 id="DeploymentComplete: update everything if deployment has Progressing=False"),
    pytest.param(current_deployment(PDS, 3, 3, 3, 3, []), [], rs_with_available("foo", 3, 3, 3),
                 ("True", NEW_RS_AVAILABLE_REASON), False, False,
                 id="DeploymentComplete: create Progressing condition if it does not exist"),
    pytest.param(current_deployment(PDS, 0, 3, 3, 3, [RS_UPDATED]), [rs_with_available("foo", 0, 0, 0)], None,
                 ("True", NEW_RS_AVAILABLE_REASON), False, False,
                 id="DeploymentComplete: defend against NPE when newRS=nil"),
    pytest.param(current_deployment(PDS, 3, 2, 2, 2, [RS_UPDATED]), [], rs_with_available("foo", 3, 2, 2),
                 ("False", TIMED_OUT_REASON), False, False,
                 id="DeploymentTimedOut: update status if rollout exceeds Progress Deadline"),
    pytest.param(current_deployment(PDS, 3, 2, 2, 2, [FAILED_TIMED_OUT]), [], rs_with_available("foo", 3, 2, 2),
                 ("False", TIMED_OUT_REASON), False, False,
                 id="DeploymentTimedOut: do not update status if deployment has existing timedOut condition"),
]


@pytest.mark.parametrize(("d", "old_rss", "new_rs", "expected", "keeps_update", "keeps_transition"), SYNC_CASES)
async def test_sync_rollout_status(d: dict[str, Any], old_rss: list[dict[str, Any]], new_rs: dict[str, Any] | None,
                                   expected: tuple[str, str] | None, keeps_update: bool,
                                   keeps_transition: bool) -> None:
    dc, _, _ = fake_control(now=T_STUCK + 3600)  # long after the deadline of any condition above
    all_rss = [*old_rss, new_rs] if new_rs is not None else old_rss
    _, d = await sync_rollout_status(dc, all_rss, new_rs, d)
    cond = get_deployment_condition(d["status"], DEPLOYMENT_PROGRESSING)
    if expected is None:
        assert cond is None
        return
    assert cond is not None
    assert (cond["status"], cond["reason"]) == expected
    if keeps_update:
        assert cond["lastUpdateTime"] == TEST_TIME
    if keeps_transition:
        assert cond["lastTransitionTime"] == TEST_TIME


async def test_replica_failure_is_mirrored_and_cleared() -> None:
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": "quota",
               "lastTransitionTime": TEST_TIME}
    new_rs = rs_with_available("foo", 3, 0, 0)
    new_rs["status"]["conditions"] = [failure]
    d = current_deployment(PDS, 3, 0, 0, 0, [])
    dc, _, _ = fake_control(now=T_STUCK)
    _, d = await sync_rollout_status(dc, [new_rs], new_rs, d)
    mirrored = get_deployment_condition(d["status"], "ReplicaFailure")
    assert mirrored is not None
    assert (mirrored["status"], mirrored["reason"], mirrored["message"]) == ("True", "FailedCreate", "quota")
    del new_rs["status"]["conditions"]
    _, d = await sync_rollout_status(dc, [new_rs], new_rs, d)
    assert get_deployment_condition(d["status"], "ReplicaFailure") is None


def test_new_replica_set_failures_win_over_old_ones() -> None:
    def failing(name: str, reason: str) -> dict[str, Any]:
        obj = rs_with_available(name, 1, 0, 0)
        obj["status"]["conditions"] = [{"type": "ReplicaFailure", "status": "True", "reason": reason}]
        return obj
    old, new = failing("old", "FailedDelete"), failing("new", "FailedCreate")
    assert [c["reason"] for c in get_replica_failures([old, new], new)] == ["FailedCreate"]
    assert [c["reason"] for c in get_replica_failures([old], None)] == ["FailedDelete"]


async def test_unchanged_stuck_rollout_is_requeued_at_its_deadline() -> None:
    d = current_deployment(PDS, 3, 3, 3, 1, [dict(STUCK[0], reason=REPLICA_SET_UPDATED_REASON,
                                                  message='ReplicaSet "foo" is progressing.')])
    new_rs = rs_with_available("foo", 3, 3, 1)
    dc, client, _ = fake_control(now=T_STUCK + 30)
    # Bring the status to what the ReplicaSets imply first, so the next pass sees no change.
    _, d = await sync_rollout_status(dc, [new_rs], new_rs, d)
    writes = len(client.actions)
    delay, d = await sync_rollout_status(dc, [new_rs], new_rs, d)
    assert len(client.actions) == writes
    assert delay == pytest.approx(31.0)  # 30 s left, plus one against timer skew
