"""ReplicaSet status: counts, the ReplicaFailure condition, and the status write (replica_set_utils_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ServerError
from controller_manager.controllers.replicaset.status import (
    calculate_status,
    get_condition,
    remove_condition,
    set_condition,
    update_replica_set_status,
)

from .objects import new_pod, new_replica_set, terminating

NOW = 1_700_000_000.0
LABELS = {"name": "foo"}
FULL_LABELS = {"name": "foo", "type": "production"}

NOT_FULLY_LABELLED = new_replica_set(1, LABELS)
FULLY_LABELLED = new_replica_set(2, FULL_LABELS)
LONG_MIN_READY = {**new_replica_set(1, FULL_LABELS), "spec": {**new_replica_set(1, FULL_LABELS)["spec"],
                                                                "minReadySeconds": 3600}}


def _pod(name: str, rs: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    return new_pod(name, rs, phase, ready_since=NOW - 10)


def _counts(replicas: int, fully: int, ready: int, available: int, terminating_: int = 0) -> dict[str, int]:
    return {"replicas": replicas, "fullyLabeledReplicas": fully, "readyReplicas": ready,
            "availableReplicas": available, "terminatingReplicas": terminating_}


@pytest.mark.parametrize(("rs", "active", "terminating_pods", "expected"), [
    pytest.param(FULLY_LABELLED, [_pod("pod1", FULLY_LABELLED)], [], _counts(1, 1, 1, 1),
                 id="1 fully labelled pod"),
    pytest.param(NOT_FULLY_LABELLED, [_pod("pod1", NOT_FULLY_LABELLED)], [], _counts(1, 0, 1, 1),
                 id="1 not fully labelled pod"),
    pytest.param(FULLY_LABELLED, [_pod("pod1", FULLY_LABELLED), _pod("pod2", FULLY_LABELLED)], [],
                 _counts(2, 2, 2, 2), id="2 fully labelled pods"),
    pytest.param(FULLY_LABELLED, [_pod("pod1", FULLY_LABELLED), _pod("pod2", FULLY_LABELLED)],
                 [terminating(_pod("pod3", FULLY_LABELLED)), terminating(_pod("pod4", FULLY_LABELLED))],
                 _counts(2, 2, 2, 2, 2), id="2 fully labelled pods and 2 terminating"),
    pytest.param(NOT_FULLY_LABELLED, [_pod("pod1", NOT_FULLY_LABELLED), _pod("pod2", NOT_FULLY_LABELLED)], [],
                 _counts(2, 0, 2, 2), id="2 not fully labelled pods"),
    pytest.param(NOT_FULLY_LABELLED, [_pod("pod1", NOT_FULLY_LABELLED), _pod("pod2", FULLY_LABELLED)], [],
                 _counts(2, 1, 2, 2), id="1 fully labelled pod, 1 not fully labelled pod"),
    pytest.param(FULLY_LABELLED, [_pod("pod1", FULLY_LABELLED, "Pending")], [], _counts(1, 1, 0, 0),
                 id="1 non-ready pod"),
    pytest.param(LONG_MIN_READY, [_pod("pod1", LONG_MIN_READY)], [], _counts(1, 1, 1, 0),
                 id="1 ready but non-available pod"),
    pytest.param(LONG_MIN_READY, [_pod("pod1", LONG_MIN_READY)], [terminating(_pod("pod2", LONG_MIN_READY))],
                 _counts(1, 1, 1, 0, 1), id="1 ready but non-available pod and 1 terminating"),
])
def test_calculate_status(rs: dict[str, Any], active: list[dict[str, Any]], terminating_pods: list[dict[str, Any]],
                          expected: dict[str, int]) -> None:
    assert calculate_status(rs, active, terminating_pods, None, NOW) == expected


def test_calculate_status_keeps_other_fields_and_never_mutates() -> None:
    rs = {**FULLY_LABELLED, "status": {"replicas": 5, "observedGeneration": 3,
                                       "conditions": [{"type": "Other", "status": "True"}]}}
    status = calculate_status(rs, [], [], None, NOW)
    assert status["observedGeneration"] == 3
    assert status["conditions"] == [{"type": "Other", "status": "True"}]
    assert rs["status"]["replicas"] == 5


RS2 = new_replica_set(2, LABELS)
FAILURE_RS = {**new_replica_set(10, LABELS), "status": {"conditions": [{"type": "ReplicaFailure", "status": "True"}]}}


@pytest.mark.parametrize(("rs", "pods", "error", "expected"), [
    pytest.param(RS2, 1, "fake manageReplicasErr",
                 [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
                   "message": "fake manageReplicasErr"}], id="error, no condition yet, diff < 0"),
    pytest.param(RS2, 3, "fake manageReplicasErr",
                 [{"type": "ReplicaFailure", "status": "True", "reason": "FailedDelete",
                   "message": "fake manageReplicasErr"}], id="error, no condition yet, diff > 0"),
    pytest.param(FAILURE_RS, 1, None, None, id="no error, condition present: removed"),
    pytest.param(FAILURE_RS, 1, "fake manageReplicasErr", [{"type": "ReplicaFailure", "status": "True"}],
                 id="error, condition present: kept as is"),
    pytest.param(RS2, 1, None, None, id="no error, no condition"),
])
def test_calculate_status_conditions(rs: dict[str, Any], pods: int, error: str | None,
                                     expected: list[dict[str, Any]] | None) -> None:
    active = [_pod(f"pod{i}", rs) for i in range(pods)]
    status = calculate_status(rs, active, [], RuntimeError(error) if error else None, NOW)
    conditions = status.get("conditions")
    if conditions and "reason" in conditions[0]:
        # A condition added now carries now as its transition time.
        assert conditions[0].pop("lastTransitionTime") == format_time(NOW)
    assert conditions == expected


PULL = {"type": "ImagePullBackOff", "status": "True", "reason": "NonExistentImage"}
FAILURE = {"type": "ReplicaFailure", "status": "True", "reason": "OtherFailure"}
FAILURE2 = {"type": "ReplicaFailure", "status": "True", "reason": "AnotherFailure"}


@pytest.mark.parametrize(("status", "cond_type", "exists"), [
    pytest.param({"conditions": [FAILURE]}, "ReplicaFailure", True, id="condition exists"),
    pytest.param({"conditions": [FAILURE]}, "ImagePullBackOff", False, id="condition does not exist"),
])
def test_get_condition(status: dict[str, Any], cond_type: str, exists: bool) -> None:
    assert (get_condition(status, cond_type) is not None) is exists


@pytest.mark.parametrize(("status", "cond", "expected"), [
    pytest.param({}, FAILURE, {"conditions": [FAILURE]}, id="set for the first time"),
    pytest.param({"conditions": [PULL]}, FAILURE, {"conditions": [PULL, FAILURE]}, id="simple set"),
    pytest.param({"conditions": [FAILURE]}, FAILURE2, {"conditions": [FAILURE2]}, id="overwrite"),
    pytest.param({"conditions": [FAILURE]}, {**FAILURE, "message": "new"}, {"conditions": [FAILURE]},
                 id="same status and reason: kept"),
])
def test_set_condition(status: dict[str, Any], cond: dict[str, Any], expected: dict[str, Any]) -> None:
    set_condition(status, cond)
    assert status == expected


@pytest.mark.parametrize(("status", "cond_type", "expected"), [
    pytest.param({}, "ReplicaFailure", {}, id="remove from empty status"),
    pytest.param({"conditions": [FAILURE]}, "ReplicaFailure", {}, id="simple remove"),
    pytest.param({"conditions": [FAILURE]}, "ImagePullBackOff", {"conditions": [FAILURE]},
                 id="doesn't remove anything"),
])
def test_remove_condition(status: dict[str, Any], cond_type: str, expected: dict[str, Any]) -> None:
    remove_condition(status, cond_type)
    assert status == expected


class StatusClient:
    """Answers update_status and get; ``fail_updates`` makes the first N updates fail."""

    def __init__(self, stored: dict[str, Any], fail_updates: int = 0) -> None:
        self.stored = stored
        self.fail_updates = fail_updates
        self.calls: list[tuple[str, dict[str, Any] | None]] = []

    async def update_status(self, res: Resource, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("update", obj))
        if self.fail_updates > 0:
            self.fail_updates -= 1
            raise ServerError(500, "InternalError", "fake error")
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": "999"}}

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.calls.append(("get", None))
        return self.stored


async def test_update_status_skips_when_unchanged() -> None:
    rs = {**FULLY_LABELLED, "status": {**_counts(1, 1, 1, 1), "observedGeneration": 1}}
    client = StatusClient(rs)
    assert await update_replica_set_status(client, rs, dict(rs["status"])) is rs  # type: ignore[arg-type]
    assert client.calls == []


@pytest.mark.parametrize("status", [
    pytest.param({**_counts(1, 1, 1, 1), "observedGeneration": 0}, id="generation not observed"),
    pytest.param({**_counts(1, 1, 1, 1), "observedGeneration": 1, "terminatingReplicas": None},
                 id="terminatingReplicas unset"),
    pytest.param({**_counts(1, 1, 0, 0), "observedGeneration": 1}, id="ready changed"),
])
async def test_update_status_writes_with_observed_generation(status: dict[str, Any]) -> None:
    rs = {**FULLY_LABELLED, "status": status}
    client = StatusClient(rs)
    updated = await update_replica_set_status(client, rs, _counts(1, 1, 1, 1))  # type: ignore[arg-type]
    assert [verb for verb, _ in client.calls] == ["update"]
    assert updated["status"] == {**_counts(1, 1, 1, 1), "observedGeneration": 1}


async def test_update_status_with_failure_gets_and_retries_once() -> None:
    """TestControllerUpdateStatusWithFailure: 1 GET and 2 updates, both carrying the new replicas."""
    rs = new_replica_set(1, LABELS)
    client = StatusClient(rs, fail_updates=5)
    with pytest.raises(ServerError):
        await update_replica_set_status(client, rs, {"replicas": 10})  # type: ignore[arg-type]
    assert [verb for verb, _ in client.calls] == ["update", "get", "update"]
    assert all(obj["status"]["replicas"] == 10 for verb, obj in client.calls if obj is not None)


async def test_update_status_succeeds_on_retry() -> None:
    rs = new_replica_set(1, LABELS)
    client = StatusClient({**rs, "metadata": {**rs["metadata"], "resourceVersion": "20"}}, fail_updates=1)
    updated = await update_replica_set_status(client, rs, {"replicas": 1})  # type: ignore[arg-type]
    assert updated["metadata"]["resourceVersion"] == "999"
    assert client.calls[-1][1]["metadata"]["resourceVersion"] == "20"  # type: ignore[index]
