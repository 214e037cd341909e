"""The ReplicaSet controller's sync against a recording client (replica_set_test.go's sync tests:
TestSyncReplicaSetCreateFailures, TestSyncReplicaSetDormancy, TestControllerBurstReplicas, TestRSSyncExpectations,
TestDeleteControllerAndExpectations, TestExpectationsOnRecreate, TestPatchPodFails, ...)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.client.errors import Forbidden
from controller_manager.controllers.replicaset import ReplicaSetController
from controller_manager.controllerutil.controller_ref import ClaimError
from controller_manager.runtime.controller import run_controller

from .fakes import RecordingClient, cache, drain, fake_server_error, new_controller
from .objects import new_pod, new_replica_set, with_meta

LABELS = {"foo": "bar"}


def _pods(count: int, rs: dict[str, Any], phase: str = "Running", prefix: str = "pod") -> list[dict[str, Any]]:
    return [new_pod(f"{prefix}{i}", rs, phase) for i in range(count)]


def _with_status(rs: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {**rs, "status": status}


def _scaled(rs: dict[str, Any], replicas: int) -> dict[str, Any]:
    return {**rs, "spec": {**rs["spec"], "replicas": replicas}}


async def test_sync_does_nothing_when_in_step() -> None:
    controller, client, _ = new_controller()
    rs = new_replica_set(2, LABELS)
    cache(controller.rs_informer, rs)
    cache(controller.pod_informer, *_pods(2, rs))
    assert await controller.sync(key_of(rs)) is None
    assert (client.creates, client.deletes, client.patches) == ([], [], [])


async def test_sync_create_failures_stop_the_slow_start() -> None:
    """Ask for 100 replicas with a quota of 10: 10 pods, and far fewer than 100 create calls."""
    controller, client, _ = new_controller(RecordingClient(create_limit=10))
    rs = new_replica_set(100, LABELS)
    cache(controller.rs_informer, rs)
    with pytest.raises(Forbidden):
        await controller.sync(key_of(rs))
    assert len(client.creates) == 10
    assert client.create_calls <= 1 + 2 + 4 + 8
    status = client.status_updates[-1]["status"]
    assert status["conditions"][0]["reason"] == "FailedCreate"
    assert status["conditions"][0]["message"] == "exceeded quota"
    # Creates never attempted or failed are not waited for; the 10 that worked are.
    assert controller.expectations.get_expectations(key_of(rs)).add == 10  # type: ignore[union-attr]


async def test_sync_dormancy() -> None:
    controller, client, _ = new_controller()
    rs = new_replica_set(2, LABELS)
    key = key_of(rs)
    cache(controller.pod_informer, *_pods(1, rs))
    in_step = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "terminatingReplicas": 0,
               "observedGeneration": 1}

    # Creates a replica and sets expectations.
    cache(controller.rs_informer, _with_status(rs, **in_step))
    await controller.sync(key)
    assert len(client.creates) == 1

    # Expectations prevent replicas, not a status update.
    cache(controller.rs_informer, _with_status(rs, **{**in_step, "replicas": 0, "readyReplicas": 0,
                                                      "availableReplicas": 0}))
    client.clear()
    await controller.sync(key)
    assert client.creates == []

    # Lowering expectations allows a sync that creates a replica; its failure leaves expectations at 0.
    controller.expectations.creation_observed(key)
    cache(controller.rs_informer, _with_status(rs, **in_step))
    client.clear()
    client.create_error = fake_server_error()
    with pytest.raises(Exception, match="fake error"):
        await controller.sync(key)
    assert client.create_calls == 1

    # No lowering needed now, since the previous create failed.
    client.clear()
    client.create_error = None
    await controller.sync(key)
    assert len(client.creates) == 1

    # Two status writes in all: the dormant sync's and the failed one's (adding ReplicaFailure).
    assert [u["status"]["replicas"] for u in client.status_updates] == [1, 1]
    assert "conditions" not in client.status_updates[0]["status"]
    assert client.status_updates[1]["status"]["conditions"][0]["reason"] == "FailedCreate"


@pytest.mark.parametrize(("burst", "replicas"), [
    pytest.param(5, 30, id="burst 5, 30 replicas"),
    pytest.param(5, 12, id="burst 5, 12 replicas"),
    pytest.param(3, 2, id="burst 3, 2 replicas"),
])
async def test_burst_replicas(burst: int, replicas: int) -> None:
    """Scale up then down; every sync acts on at most ``burst`` pods and then waits for all of them."""
    controller, client, _ = new_controller(burst_replicas=burst)
    rs = new_replica_set(replicas, LABELS)
    key = key_of(rs)
    pods = _pods(replicas, rs, "Pending")

    for target in (replicas, 0):
        rs = _scaled(rs, target)
        cache(controller.rs_informer, rs)
        for _ in range(0, replicas, burst):
            client.clear()
            await controller.sync(key)
            active = len(controller.pod_informer.store)
            if target != 0:
                expected = min(target - active, burst)
                assert (len(client.creates), len(client.deletes)) == (expected, 0)
                # The watch shows all but one of them: still waiting for exactly one.
                for pod in pods[:expected - 1]:
                    controller.pod_informer.apply("ADDED", pod)
                assert controller.expectations.get_expectations(key).add == 1  # type: ignore[union-attr]
            else:
                expected = min(active - target, burst)
                assert (len(client.creates), len(client.deletes)) == (0, expected)
                waiting = sorted(controller.expectations.get_uids(key) or ())
                assert len(waiting) == expected
                for pod_key in waiting[1:]:
                    controller.pod_informer.apply("DELETED", controller.pod_informer.store.get(pod_key) or {})
                assert controller.expectations.get_expectations(key).delete == 1  # type: ignore[union-attr]

            # Nothing more happens until the last one is seen.
            client.clear()
            await controller.sync(key)
            assert (client.creates, client.deletes) == ([], [])

            if target != 0:
                controller.pod_informer.apply("ADDED", pods[expected - 1])
                pods = pods[expected:]
            else:
                (last,) = controller.expectations.get_uids(key) or set()
                controller.pod_informer.apply("DELETED", controller.pod_informer.store.get(last) or {})
            assert controller.expectations.satisfied(key)
        assert len(controller.pod_informer.store) == target
        pods = _pods(replicas, rs, "Running", prefix="again")
        await drain(controller)


async def test_sync_checks_expectations_before_listing_pods() -> None:
    """TestRSSyncExpectations: a pod showing up between the expectations check and the listing is no reason to
    create another."""
    controller, client, _ = new_controller(burst_replicas=2)
    rs = new_replica_set(2, LABELS)
    cache(controller.rs_informer, rs)
    first, late = _pods(2, rs, "Pending")
    cache(controller.pod_informer, first)

    real = controller.expectations.satisfied

    def satisfied_then_pod_arrives(key: str) -> bool:
        cache(controller.pod_informer, late)
        return real(key)

    controller.expectations.satisfied = satisfied_then_pod_arrives  # type: ignore[method-assign]
    await controller.sync(key_of(rs))
    assert (client.creates, client.deletes) == ([], [])


async def test_delete_controller_and_expectations() -> None:
    controller, client, _ = new_controller(burst_replicas=10)
    rs = new_replica_set(1, LABELS)
    key = key_of(rs)
    cache(controller.rs_informer, rs)
    await controller.sync(key)
    assert len(client.creates) == 1
    client.clear()
    client.status_updates.clear()
    assert controller.expectations.get_expectations(key) is not None

    controller.rs_informer.apply("DELETED", rs)
    await controller.sync(key)
    assert controller.expectations.get_expectations(key) is None

    # Nothing happens for a deleted ReplicaSet.
    await controller.sync(key)
    assert (client.creates, client.deletes, client.status_updates) == ([], [], [])


async def test_expectations_on_recreate() -> None:
    controller, client, _ = new_controller(burst_replicas=100)
    old = new_replica_set(1, LABELS)
    key = key_of(old)
    controller.rs_informer.apply("ADDED", old)
    assert await drain(controller) == [key]
    await controller.sync(key)
    assert len(client.creates) == 1
    assert not controller.expectations.satisfied(key)

    controller.rs_informer.apply("DELETED", old)
    assert controller.expectations.get_expectations(key) is None
    assert await drain(controller) == [key]

    client.clear()
    controller.rs_informer.apply("ADDED", with_meta(old, uid="new-uid"))
    assert await drain(controller) == [key]
    await controller.sync(key)
    assert len(client.creates) == 1
    assert client.creates[0]["metadata"]["ownerReferences"][0]["uid"] == "new-uid"
    assert not controller.expectations.satisfied(key)


async def test_do_not_patch_pod_with_other_controller_ref() -> None:
    controller, client, _ = new_controller()
    rs = new_replica_set(2, LABELS)
    cache(controller.rs_informer, rs)
    other = new_pod("pod", rs, "Running")
    other = with_meta(other, ownerReferences=[{**other["metadata"]["ownerReferences"][0], "uid": "someone-else",
                                               "name": "AnotherRS"}])
    cache(controller.pod_informer, other)
    await controller.sync(key_of(rs))
    assert (len(client.creates), client.patches) == (2, [])


async def test_patch_pod_fails() -> None:
    controller, client, _ = new_controller(RecordingClient(patch_error=fake_server_error("fake Error")))
    rs = new_replica_set(2, LABELS)
    client.objects[("replicasets", rs["metadata"]["name"])] = rs
    cache(controller.rs_informer, rs)
    cache(controller.pod_informer, new_pod("pod1", rs, "Running", owned=False),
          new_pod("pod2", rs, "Running", owned=False))
    with pytest.raises(ClaimError, match="fake Error"):
        await controller.sync(key_of(rs))
    assert sorted(name for name, _ in client.patches) == ["pod1", "pod2"]
    assert client.creates == []


async def test_do_not_adopt_or_create_if_being_deleted() -> None:
    controller, client, _ = new_controller()
    rs = with_meta(new_replica_set(2, LABELS), deletionTimestamp="2024-01-01T00:00:00Z")
    cache(controller.rs_informer, rs)
    cache(controller.pod_informer, new_pod("pod1", rs, "Running", owned=False))
    await controller.sync(key_of(rs))
    assert (client.creates, client.patches) == ([], [])


async def test_do_not_adopt_or_create_if_being_deleted_race() -> None:
    """The cache says alive, a live read says deleting: the sync aborts before adopting or creating."""
    controller, client, _ = new_controller()
    rs = new_replica_set(2, LABELS)
    client.objects[("replicasets", rs["metadata"]["name"])] = with_meta(rs, deletionTimestamp="2024-01-01T00:00:00Z")
    cache(controller.rs_informer, rs)
    cache(controller.pod_informer, new_pod("pod1", rs, "Running", owned=False))
    with pytest.raises(ClaimError, match="has just been deleted"):
        await controller.sync(key_of(rs))
    assert (client.creates, client.patches) == ([], [])
    assert client.gets == ["replicasets/foobar"]


async def test_adopts_orphans_and_releases_unmatched_pods() -> None:
    controller, client, _ = new_controller()
    rs = new_replica_set(2, LABELS)
    client.objects[("replicasets", rs["metadata"]["name"])] = rs
    cache(controller.rs_informer, rs)
    orphan = new_pod("orphan", rs, "Running", owned=False)
    relabelled = new_pod("relabelled", rs, "Running", labels={"foo": "other"})
    cache(controller.pod_informer, orphan, relabelled)
    await controller.sync(key_of(rs))
    adopt, release = sorted(client.patches, key=lambda p: p[0])
    assert adopt[0] == "orphan"
    assert adopt[1]["metadata"]["ownerReferences"][0]["uid"] == rs["metadata"]["uid"]
    assert release[0] == "relabelled"
    assert release[1]["metadata"]["ownerReferences"] == [{"$patch": "delete", "uid": rs["metadata"]["uid"]}]
    # The adopted orphan counts; the released pod does not: one pod is missing.
    assert len(client.creates) == 1


async def test_scale_down_deletes_by_rank_with_uid_precondition() -> None:
    controller, client, _ = new_controller()
    rs = new_replica_set(1, LABELS)
    cache(controller.rs_informer, rs)
    running = new_pod("running", rs, "Running", node="n1")
    pending = new_pod("pending", rs, "Pending", node="n1")
    unscheduled = new_pod("unscheduled", rs, "Pending")
    cache(controller.pod_informer, running, pending, unscheduled)
    await controller.sync(key_of(rs))
    assert sorted(client.deletes) == sorted([("pending", pending["metadata"]["uid"]),
                                             ("unscheduled", unscheduled["metadata"]["uid"])])
    assert controller.expectations.get_uids(key_of(rs)) == {"default/pending", "default/unscheduled"}


async def test_invalid_selector_is_skipped() -> None:
    controller, client, _ = new_controller()
    rs = new_replica_set(2, LABELS)
    rs = {**rs, "spec": {**rs["spec"], "selector": {"matchExpressions": [{"key": "foo", "operator": "Bogus"}]}}}
    cache(controller.rs_informer, rs)
    assert await controller.sync(key_of(rs)) is None
    assert (client.creates, client.status_updates) == ([], [])


async def test_min_ready_seconds_requeues_when_the_next_pod_turns_available() -> None:
    controller, client, clock = new_controller()
    rs = new_replica_set(2, LABELS)
    rs = {**rs, "spec": {**rs["spec"], "minReadySeconds": 30}}
    cache(controller.rs_informer, rs)
    now = clock.now()
    cache(controller.pod_informer, new_pod("a", rs, "Running", ready_since=now - 20),
          new_pod("b", rs, "Running", ready_since=now - 5))
    result = await controller.sync(key_of(rs))
    assert result is not None
    assert result.requeue_after == pytest.approx(10.0)
    status = client.status_updates[-1]["status"]
    assert (status["readyReplicas"], status["availableReplicas"]) == (2, 0)


async def test_status_update_failure_requeues_with_backoff() -> None:
    """TestControllerUpdateRequeue: a failed status write sends the key back through the rate limiter."""
    controller, client, _ = new_controller(RecordingClient(status_error=fake_server_error("failed to update status")))
    rs = _with_status(new_replica_set(1, LABELS), replicas=2)
    client.objects[("replicasets", rs["metadata"]["name"])] = rs
    cache(controller.rs_informer, rs)
    cache(controller.pod_informer, *_pods(1, rs))
    await _run_once(controller, key_of(rs))
    assert controller.queue.num_requeues(key_of(rs)) == 1
    assert len(client.status_updates) == 2  # the write and its one retry after a re-read


async def _run_once(controller: ReplicaSetController, key: str) -> None:
    controller.queue.add(key)
    runner = asyncio.create_task(run_controller(controller, 1), name="test-runner")
    for _ in range(1000):
        if controller.queue.num_requeues(key):
            break
        await asyncio.sleep(0)
    controller.queue.shut_down()
    await runner
