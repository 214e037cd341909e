"""recreate_test.go's tables (scaleDownOldReplicaSetsForRecreate, oldPodsRunning) against
:mod:`controller_manager.controllers.deployment.recreate`."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllers.deployment.recreate import (
    old_pods_running,
    rollout_recreate,
    scale_down_old_replica_sets_for_recreate,
)
from tests.controllers.deployment.test_sync import fake_control, new_deployment, rs


async def test_scale_down_old_replica_sets() -> None:
    d = new_deployment("foo", 3, selector={"foo": "bar"})
    old = [rs("foo-0", 3, {"foo": "bar"})]
    dc, client, recorder = fake_control()
    assert await scale_down_old_replica_sets_for_recreate(dc, old, d)
    assert [w["spec"]["replicas"] for w in client.verbs("update")] == [0]
    assert recorder.events == [("Normal", "ScalingReplicaSet", "Scaled down replica set foo-0 from 3 to 0")]


def _pod(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": f"p-{phase}"}, "status": {"phase": phase}}


def _with_uid(uid: str) -> dict[str, Any]:
    obj = rs(uid, 0)
    obj["metadata"]["uid"] = uid
    return obj


@pytest.mark.parametrize(("new_rs", "old_rss", "pod_map", "expected"), [
    pytest.param(None, [], {}, False, id="no old RSs"),
    pytest.param(None, [_with_uid("some-uid"), _with_uid("other-uid")],
                 {"some-uid": [_pod("Running")], "other-uid": [_pod("Running")]}, True,
                 id="old RSs with running pods"),
    pytest.param(None, [rs("rs-1", 0, replicas=1)], {}, True,
                 id="old RSs without pods but with non-zero status replicas"),
    pytest.param(None, [rs("rs-1", 0, replicas=0)], {}, False,
                 id="old RSs without pods or non-zero status replicas"),
    pytest.param(None, [rs("rs-1", 0)], {"uid-1": [_pod("Failed"), _pod("Succeeded")]}, False,
                 id="pods in terminal state only"),
    pytest.param(None, [rs("rs-1", 0)], {"uid-1": [_pod("Unknown")]}, True, id="pod in unknown phase"),
    pytest.param(None, [rs("rs-1", 0)], {"uid-1": [_pod("Pending")]}, True, id="pending pod"),
    pytest.param(None, [rs("rs-1", 0)], {"uid-1": [_pod("Running")]}, True, id="running pod"),
    pytest.param(None, [rs("rs-1", 0)],
                 {"uid-1": [_pod("Failed"), _pod("Succeeded")], "uid-2": [], "uid-3": [_pod("Pending")]}, True,
                 id="terminal and pending pods"),
    pytest.param(_with_uid("new-uid"), [rs("rs-1", 0)], {"new-uid": [_pod("Running")]}, False,
                 id="pods of the new replica set do not count"),
])
def test_old_pods_running(new_rs: dict[str, Any] | None, old_rss: list[dict[str, Any]],
                          pod_map: dict[str, list[dict[str, Any]]], expected: bool) -> None:
    assert old_pods_running(new_rs, old_rss, pod_map) is expected


async def test_new_replica_set_waits_for_old_pods_to_be_gone() -> None:
    d = new_deployment("foo", 3, selector={"foo": "bar"})
    d["spec"]["strategy"] = {"type": "Recreate"}
    old = _with_uid("old-uid")
    old["spec"]["selector"] = {"matchLabels": {"foo": "bar"}}
    dc, client, _ = fake_control()
    await rollout_recreate(dc, d, [old], {"old-uid": [_pod("Running")]})
    assert client.verbs("create") == []
    await rollout_recreate(dc, d, [old], {"old-uid": [_pod("Succeeded")]})
    created = client.verbs("create")
    assert len(created) == 1
    assert created[0]["spec"]["replicas"] == 3
