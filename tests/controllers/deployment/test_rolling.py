"""rolling_test.go's tables (reconcileNewReplicaSet, reconcileOldReplicaSets, cleanupUnhealthyReplicas,
scaleDownOldReplicaSetsForRollingUpdate) against :mod:`controller_manager.controllers.deployment.rolling`.

Rows that exercise the alpha DeploymentPodReplacementPolicy gate (off by default, not implemented) are left out.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import meta
from controller_manager.controllers.deployment.rolling import (
    cleanup_unhealthy_replicas,
    reconcile_new_replica_set,
    reconcile_old_replica_sets,
    scale_down_old_replica_sets_for_rolling_update,
)
from tests.controllers.deployment.test_sync import fake_control, new_deployment, rs


@pytest.mark.parametrize(("deployment_replicas", "max_surge", "old_replicas", "new_replicas", "scale_expected",
                          "expected_new_replicas"), [
    pytest.param(10, 0, 10, 0, False, 0, id="should not scale up when old replica set is fully saturated"),
    pytest.param(10, 2, 10, 0, True, 2,
                 id="should scale up according to the maxSurge when old replica set is fully saturated"),
    pytest.param(10, 2, 5, 0, True, 7, id="should scale up according to the maxSurge"),
    pytest.param(10, 2, 10, 2, False, 0, id="should not scale when maxSurge is fully saturated"),
    pytest.param(10, 2, 2, 11, True, 10, id="should scale down when there are replicas above maxSurge"),
])
async def test_reconcile_new_replica_set(deployment_replicas: int, max_surge: int, old_replicas: int,
                                         new_replicas: int, scale_expected: bool, expected_new_replicas: int) -> None:
    new_rs = rs("foo-v2", new_replicas, observedGeneration=1)
    old_rs = rs("foo-v1", old_replicas, observedGeneration=1)
    d = new_deployment("foo", deployment_replicas, max_surge=max_surge, max_unavailable=0, selector={"foo": "bar"})
    dc, client, _ = fake_control()
    scaled = await reconcile_new_replica_set(dc, [new_rs, old_rs], new_rs, d)
    if not scale_expected:
        assert not scaled
        assert client.actions == []
        return
    assert scaled
    assert len(client.actions) == 1
    assert client.verbs("update")[0]["spec"]["replicas"] == expected_new_replicas


@pytest.mark.parametrize(("deployment_replicas", "max_unavailable", "old_replicas", "new_replicas",
                          "ready_old", "ready_new", "scale_expected", "expected_old_replicas"), [
    pytest.param(10, 0, 10, 0, 10, 0, True, 9, id="both fenceposts zero: one unavailable allowed"),
    pytest.param(10, 2, 10, 0, 10, 0, True, 8, id="maxUnavailable 2"),
    pytest.param(10, 2, 10, 0, 8, 0, True, 8, id="unhealthy old replicas are cleaned up"),
    pytest.param(10, 2, 10, 0, 9, 0, True, 8, id="one unhealthy cleaned up, one ready scaled down"),
    pytest.param(10, 2, 8, 2, 8, 0, False, 8,
                 id="unavailable new pods do not make us scale down old ones further"),
])
async def test_reconcile_old_replica_sets(deployment_replicas: int, max_unavailable: int, old_replicas: int,
                                          new_replicas: int, ready_old: int, ready_new: int, scale_expected: bool,
                                          expected_old_replicas: int) -> None:
    new_rs = rs("foo-new", new_replicas, {"foo": "new"}, availableReplicas=ready_new)
    old_rs = rs("foo-old", old_replicas, {"foo": "old"}, availableReplicas=ready_old)
    d = new_deployment("foo", deployment_replicas, max_surge=0, max_unavailable=max_unavailable,
                       selector={"foo": "new"})
    dc, client, _ = fake_control()
    scaled = await reconcile_old_replica_sets(dc, [old_rs, new_rs], [old_rs], new_rs, d)
    assert scaled == scale_expected
    sizes = [w["spec"]["replicas"] for w in client.verbs("update") if meta(w)["name"] == "foo-old"]
    assert (sizes[-1] if sizes else old_replicas) == expected_old_replicas


@pytest.mark.parametrize(("old_replicas", "ready_pods", "max_cleanup_count", "expected"), [
    pytest.param(10, 8, 1, 1, id="bounded by the budget"),
    pytest.param(10, 8, 3, 2, id="bounded by the unhealthy pods"),
    pytest.param(10, 8, 0, 0, id="no budget"),
    pytest.param(10, 10, 3, 0, id="all healthy"),
])
async def test_cleanup_unhealthy_replicas(old_replicas: int, ready_pods: int, max_cleanup_count: int,
                                          expected: int) -> None:
    old_rs = rs("foo-v2", old_replicas, availableReplicas=ready_pods)
    d = new_deployment("foo", 10, max_surge=2, max_unavailable=2)
    dc, _client, _ = fake_control()
    written, count = await cleanup_unhealthy_replicas(dc, [old_rs], d, max_cleanup_count)
    assert count == expected
    assert written[0]["spec"]["replicas"] == old_replicas - expected


@pytest.mark.parametrize(("deployment_replicas", "max_unavailable", "ready_pods", "old_replicas", "scale_expected",
                          "expected_old_replicas"), [
    pytest.param(10, 0, 10, 10, True, 9, id="fenceposts resolve to one unavailable"),
    pytest.param(10, 2, 10, 10, True, 8, id="maxUnavailable 2"),
    pytest.param(10, 2, 8, 10, False, 0, id="at the availability floor"),
    pytest.param(10, 2, 10, 0, False, 0, id="nothing to scale down"),
    pytest.param(10, 2, 1, 10, False, 0, id="below the availability floor"),
])
async def test_scale_down_old_replica_sets_for_rolling_update(deployment_replicas: int, max_unavailable: int,
                                                              ready_pods: int, old_replicas: int,
                                                              scale_expected: bool,
                                                              expected_old_replicas: int) -> None:
    old_rs = rs("foo-v2", old_replicas, availableReplicas=ready_pods)
    d = new_deployment("foo", deployment_replicas, max_surge=0, max_unavailable=max_unavailable,
                       selector={"foo": "bar"})
    dc, client, _ = fake_control()
    scaled = await scale_down_old_replica_sets_for_rolling_update(dc, [old_rs], [old_rs], d)
    if not scale_expected:
        assert scaled == 0
        assert client.actions == []
        return
    assert scaled > 0
    updates: list[Any] = client.verbs("update")
    assert len(updates) == 1
    assert updates[0]["spec"]["replicas"] == expected_old_replicas
