"""deployment util: DeploymentConditions and messages (TestGetCondition, TestSetCondition, TestRemoveCondition)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.deployment.util_conditions import (
    DEPLOYMENT_AVAILABLE,
    DEPLOYMENT_PROGRESSING,
    DEPLOYMENT_REPLICA_FAILURE,
    FAILED_RS_CREATE_REASON,
    FOUND_NEW_RS_REASON,
    MINIMUM_REPLICAS_AVAILABLE,
    MINIMUM_REPLICAS_AVAILABLE_MESSAGE,
    MINIMUM_REPLICAS_UNAVAILABLE,
    MINIMUM_REPLICAS_UNAVAILABLE_MESSAGE,
    NEW_REPLICA_SET_REASON,
    NEW_RS_AVAILABLE_REASON,
    PAUSED_DEPLOY_MESSAGE,
    PAUSED_DEPLOY_REASON,
    REPLICA_SET_UPDATED_REASON,
    RESUMED_DEPLOY_MESSAGE,
    RESUMED_DEPLOY_REASON,
    ROLLBACK_DONE,
    ROLLBACK_REVISION_NOT_FOUND,
    ROLLBACK_TEMPLATE_UNCHANGED,
    TIMED_OUT_REASON,
    created_new_replica_set_message,
    failed_create_replica_set_message,
    found_new_replica_set_message,
    get_deployment_condition,
    new_deployment_condition,
    progressing_message,
    remove_deployment_condition,
    replica_set_to_deployment_condition,
    scaled_replica_set_message,
    set_deployment_condition,
    successfully_progressed_message,
    timed_out_message,
)

T = 1_451_606_400.0  # 2016-01-01T00:00:00Z


def cond_progressing() -> dict[str, Any]:
    return {"type": "Progressing", "status": "False", "reason": "ForSomeReason"}


def cond_progressing2() -> dict[str, Any]:
    return {"type": "Progressing", "status": "True", "reason": "BecauseItIs"}


def cond_available() -> dict[str, Any]:
    return {"type": "Available", "status": "True", "reason": "AwesomeController"}


def status() -> dict[str, Any]:
    return {"conditions": [cond_progressing(), cond_available()]}


def test_constants_are_upstreams() -> None:
    assert (DEPLOYMENT_AVAILABLE, DEPLOYMENT_PROGRESSING, DEPLOYMENT_REPLICA_FAILURE) == (
        "Available", "Progressing", "ReplicaFailure")
    assert REPLICA_SET_UPDATED_REASON == "ReplicaSetUpdated"
    assert FAILED_RS_CREATE_REASON == "ReplicaSetCreateError"
    assert NEW_REPLICA_SET_REASON == "NewReplicaSetCreated"
    assert FOUND_NEW_RS_REASON == "FoundNewReplicaSet"
    assert NEW_RS_AVAILABLE_REASON == "NewReplicaSetAvailable"
    assert TIMED_OUT_REASON == "ProgressDeadlineExceeded"
    assert PAUSED_DEPLOY_REASON == "DeploymentPaused"
    assert RESUMED_DEPLOY_REASON == "DeploymentResumed"
    assert MINIMUM_REPLICAS_AVAILABLE == "MinimumReplicasAvailable"
    assert MINIMUM_REPLICAS_UNAVAILABLE == "MinimumReplicasUnavailable"
    assert MINIMUM_REPLICAS_AVAILABLE_MESSAGE == "Deployment has minimum availability."
    assert MINIMUM_REPLICAS_UNAVAILABLE_MESSAGE == "Deployment does not have minimum availability."
    assert PAUSED_DEPLOY_MESSAGE == "Deployment is paused"
    assert RESUMED_DEPLOY_MESSAGE == "Deployment is resumed"
    assert ROLLBACK_REVISION_NOT_FOUND == "DeploymentRollbackRevisionNotFound"
    assert ROLLBACK_TEMPLATE_UNCHANGED == "DeploymentRollbackTemplateUnchanged"
    assert ROLLBACK_DONE == "DeploymentRollback"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(created_new_replica_set_message("web-5d4f"), 'Created new replica set "web-5d4f"',
                     id="created"),
        pytest.param(found_new_replica_set_message("web-5d4f"), 'Found new replica set "web-5d4f"', id="found"),
        pytest.param(failed_create_replica_set_message("web-5d4f", "quota"),
                     'Failed to create new replica set "web-5d4f": quota', id="failed create"),
        pytest.param(progressing_message("web", "web-5d4f"), 'ReplicaSet "web-5d4f" is progressing.',
                     id="progressing rs"),
        pytest.param(progressing_message("web", None), 'Deployment "web" is progressing.', id="progressing d"),
        pytest.param(successfully_progressed_message("web", "web-5d4f"),
                     'ReplicaSet "web-5d4f" has successfully progressed.', id="complete rs"),
        pytest.param(successfully_progressed_message("web", None),
                     'Deployment "web" has successfully progressed.', id="complete d"),
        pytest.param(timed_out_message("web", "web-5d4f"), 'ReplicaSet "web-5d4f" has timed out progressing.',
                     id="timed out rs"),
        pytest.param(timed_out_message("web", None), 'Deployment "web" has timed out progressing.',
                     id="timed out d"),
        pytest.param(scaled_replica_set_message("up", "web-5d4f", 0, 3),
                     "Scaled up replica set web-5d4f from 0 to 3", id="scaled"),
    ],
)
def test_messages(message: str, expected: str) -> None:
    assert message == expected


def test_new_deployment_condition() -> None:
    assert new_deployment_condition("Available", "True", "R", "M", T) == {
        "type": "Available", "status": "True", "lastUpdateTime": "2016-01-01T00:00:00Z",
        "lastTransitionTime": "2016-01-01T00:00:00Z", "reason": "R", "message": "M",
    }


@pytest.mark.parametrize(
    ("cond_type", "expected"),
    [pytest.param("Available", True, id="condition exists"),
     pytest.param("ReplicaFailure", False, id="condition does not exist")],
)
def test_get_condition(cond_type: str, expected: bool) -> None:
    assert (get_deployment_condition(status(), cond_type) is not None) is expected
    assert get_deployment_condition(None, cond_type) is None


@pytest.mark.parametrize(
    ("before", "cond", "expected"),
    [
        pytest.param({}, cond_available(), {"conditions": [cond_available()]}, id="set for the first time"),
        pytest.param({"conditions": [cond_progressing()]}, cond_available(), status(), id="simple set"),
        pytest.param({"conditions": [cond_progressing()]}, cond_progressing2(), {"conditions": [cond_progressing2()]},
                     id="overwrite"),
    ],
)
def test_set_condition(before: dict[str, Any], cond: dict[str, Any], expected: dict[str, Any]) -> None:
    snapshot = copy.deepcopy(before)
    assert set_deployment_condition(before, cond) == expected
    assert before == snapshot


def test_set_condition_keeps_transition_time_and_ignores_same_reason() -> None:
    old = new_deployment_condition("Progressing", "True", "A", "old", T)
    base = {"replicas": 3, "conditions": [old, cond_available()]}
    # Same status and reason: nothing changes, not even the message.
    same = set_deployment_condition(base, new_deployment_condition("Progressing", "True", "A", "new", T + 60))
    assert same == base
    assert same is not base
    # Same status, new reason: updated, the transition time kept, moved to the end.
    moved = set_deployment_condition(base, new_deployment_condition("Progressing", "True", "B", "m", T + 60))
    assert [c["type"] for c in moved["conditions"]] == ["Available", "Progressing"]
    assert moved["conditions"][1]["lastTransitionTime"] == "2016-01-01T00:00:00Z"
    assert moved["conditions"][1]["lastUpdateTime"] == "2016-01-01T00:01:00Z"
    assert moved["replicas"] == 3
    # New status: a transition.
    flip = new_deployment_condition("Progressing", "False", "C", "m", T + 60)
    flipped = set_deployment_condition(base, flip)
    assert flipped["conditions"][1]["lastTransitionTime"] == "2016-01-01T00:01:00Z"


@pytest.mark.parametrize(
    ("before", "cond_type", "expected"),
    [
        pytest.param({}, "Progressing", {}, id="remove from empty status"),
        pytest.param({"conditions": [cond_progressing()]}, "Progressing", {}, id="simple remove"),
        pytest.param(status(), "ReplicaFailure", status(), id="doesn't remove anything"),
    ],
)
def test_remove_condition(before: dict[str, Any], cond_type: str, expected: dict[str, Any]) -> None:
    snapshot = copy.deepcopy(before)
    assert remove_deployment_condition(before, cond_type) == expected
    assert before == snapshot


def test_replica_set_to_deployment_condition() -> None:
    rs_cond = {"type": "ReplicaFailure", "status": "True", "lastTransitionTime": "2016-01-01T00:00:00Z",
               "reason": "FailedCreate", "message": "pods \"x\" is forbidden"}
    assert replica_set_to_deployment_condition(rs_cond) == {
        "type": "ReplicaFailure", "status": "True", "lastUpdateTime": "2016-01-01T00:00:00Z",
        "lastTransitionTime": "2016-01-01T00:00:00Z", "reason": "FailedCreate", "message": "pods \"x\" is forbidden",
    }
