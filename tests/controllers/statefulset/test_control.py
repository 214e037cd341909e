"""StatefulSetControl sync by sync, as upstream's ``stateful_set_control_test.go`` drives it (CreatesPods,
ScaleUp/ScaleDown, ReplacesPods, Recreates{Failed,Succeeded}Pod, Parallel, RollingUpdate with partition and
maxUnavailable, OnDelete, history truncation and rollback, start ordinals, retention policy, deletion)."""

from __future__ import annotations

import pytest

from controller_manager.client.errors import ServerError
from controller_manager.controllers.statefulset.util import REVISION_LABEL
from tests.controllers.statefulset.fakes import Cluster, new_stateful_set


async def test_ordered_ready_creates_one_pod_per_sync_and_waits_for_ready() -> None:
    c = Cluster()
    await c.create(new_stateful_set(3))
    status = await c.sync()
    assert c.names() == ["web-0"]
    assert status.replicas == 0
    assert sorted(c.claims()) == ["data-web-0"]
    await c.sync()
    assert c.names() == ["web-0"]  # web-0 is Pending: nothing more
    c.make_ready("web-0")
    await c.sync()
    assert c.names() == ["web-0", "web-1"]
    status = await c.settle()
    assert c.names() == ["web-0", "web-1", "web-2"]
    assert (status.replicas, status.ready_replicas, status.current_replicas, status.updated_replicas,
            status.available_replicas) == (3, 3, 3, 3, 3)
    assert status.current_revision == status.update_revision
    stored = c.set()["status"]
    assert stored["readyReplicas"] == 3
    assert stored["observedGeneration"] == 1
    assert stored["collisionCount"] == 0
    assert ("Normal", "SuccessfulCreate", "create Pod web-1 in StatefulSet web successful") in c.recorder.events
    assert ("Normal", "SuccessfulCreate", "create Claim data-web-2 Pod web-2 in StatefulSet web success") in (
        c.recorder.events)


async def test_ordered_ready_blocks_behind_terminating_and_unready_predecessors() -> None:
    c = Cluster()
    await c.create(new_stateful_set(3))
    await c.settle()
    c.remove_pod("web-1")
    c.set_phase("web-0", "Pending")  # not ready any more
    await c.sync()
    assert c.names() == ["web-0", "web-2"]  # web-1 waits for web-0
    c.make_ready("web-0")
    await c.sync()
    assert c.names() == ["web-0", "web-1", "web-2"]
    c.mark_terminating("web-0")
    c.make_ready("web-1")
    c.remove_pod("web-2")
    await c.sync()
    assert "web-2" not in c.pods()  # waits for web-0 to finish terminating


async def test_ordered_ready_scale_down_in_reverse_order_one_at_a_time() -> None:
    c = Cluster()
    await c.create(new_stateful_set(5))
    await c.settle()
    c.edit_spec(replicas=2)
    deleted: list[str] = []
    for _ in range(3):
        before = set(c.pods())
        await c.sync()
        deleted += sorted(before - set(c.pods()))
    assert deleted == ["web-4", "web-3", "web-2"]
    assert sorted(c.claims()) == [f"data-web-{i}" for i in range(5)]  # Retain
    status = await c.sync()
    assert status.replicas == 2


async def test_scale_down_waits_while_another_pod_is_unhealthy() -> None:
    c = Cluster()
    await c.create(new_stateful_set(3))
    await c.settle()
    c.edit_spec(replicas=1)
    c.set_phase("web-0", "Pending")
    await c.sync()
    assert c.names() == ["web-0", "web-1", "web-2"]  # the first unhealthy pod is not the condemned one
    c.make_ready("web-0")
    c.set_phase("web-2", "Pending")
    await c.sync()
    assert c.names() == ["web-0", "web-1"]  # the unhealthy pod itself may go


async def test_parallel_creates_and_deletes_all_at_once() -> None:
    c = Cluster()
    await c.create(new_stateful_set(4, policy="Parallel"))
    await c.sync()
    assert c.names() == ["web-0", "web-1", "web-2", "web-3"]
    c.edit_spec(replicas=1)
    await c.sync()
    assert c.names() == ["web-0"]


@pytest.mark.parametrize("phase", [pytest.param("Failed", id="RecreatesFailedPod"),
                                   pytest.param("Succeeded", id="RecreatesSucceededPod")])
async def test_terminated_pod_is_deleted_then_recreated(phase: str) -> None:
    c = Cluster()
    await c.create(new_stateful_set(3))
    await c.settle()
    uid = c.pods()["web-1"]["metadata"]["uid"]
    c.set_phase("web-1", phase)
    await c.sync()
    assert "web-1" not in c.pods()
    assert ("Normal", "SuccessfulDelete", "delete Pod web-1 in StatefulSet web successful") in c.recorder.events
    await c.sync()
    assert c.pods()["web-1"]["metadata"]["uid"] != uid


async def test_replaces_deleted_pods_with_same_identity_and_claims() -> None:
    c = Cluster()
    await c.create(new_stateful_set(3))
    await c.settle()
    claims_before = {n: cl["metadata"]["uid"] for n, cl in c.claims().items()}
    for name in ("web-0", "web-2"):
        c.remove_pod(name)
    await c.settle()
    assert c.names() == ["web-0", "web-1", "web-2"]
    assert {n: cl["metadata"]["uid"] for n, cl in c.claims().items()} == claims_before


async def test_rolling_update_from_highest_ordinal_down_to_partition() -> None:
    c = Cluster()
    await c.create(new_stateful_set(5, strategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}))
    await c.settle()
    old_revision = c.set()["status"]["currentRevision"]
    c.set_image("nginx:2")
    order: list[str] = []
    for _ in range(20):
        before = {n: p["metadata"]["uid"] for n, p in c.pods().items()}
        await c.sync()
        order += [n for n in before if n not in c.pods()]
        c.make_all_ready()
    assert order == ["web-4", "web-3", "web-2"]
    pods = c.pods()
    assert {n: p["metadata"]["labels"][REVISION_LABEL] for n, p in pods.items()} == {
        "web-0": old_revision, "web-1": old_revision, **{f"web-{i}": c.set()["status"]["updateRevision"]
                                                          for i in (2, 3, 4)}}
    assert pods["web-4"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert pods["web-0"]["spec"]["containers"][0]["image"] == "nginx:1"
    status = c.set()["status"]
    assert status["currentRevision"] == old_revision
    assert status["updatedReplicas"] == 3
    assert status["currentReplicas"] == 2
    # Lowering the partition finishes the rollout, and the update revision becomes current.
    c.edit_spec(updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    await c.settle()
    status = c.set()["status"]
    assert status["currentRevision"] == status["updateRevision"] != old_revision
    assert status["currentReplicas"] == status["updatedReplicas"] == 5


async def test_rolling_update_waits_for_each_pod_to_be_ready() -> None:
    c = Cluster()
    await c.create(new_stateful_set(3))
    await c.settle()
    c.set_image("nginx:2")
    await c.sync()
    assert c.names() == ["web-0", "web-1"]  # web-2 deleted
    await c.sync()
    assert c.names() == ["web-0", "web-1", "web-2"]  # recreated at the new revision, Pending
    await c.sync()
    assert c.names() == ["web-0", "web-1", "web-2"]  # nothing else deleted while web-2 is unavailable


async def test_max_unavailable_deletes_several_at_once() -> None:
    c = Cluster()
    await c.create(new_stateful_set(5, policy="Parallel", strategy={
        "type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 2}}))
    await c.settle()
    c.set_image("nginx:2")
    await c.sync()
    assert c.names() == ["web-0", "web-1", "web-2"]
    status = c.set()["status"]
    assert status["currentReplicas"] == 3  # the deleted ones no longer count as current


async def test_on_delete_updates_only_deleted_pods() -> None:
    c = Cluster()
    await c.create(new_stateful_set(3, strategy={"type": "OnDelete"}))
    await c.settle()
    c.set_image("nginx:2")
    await c.settle()
    assert {p["spec"]["containers"][0]["image"] for p in c.pods().values()} == {"nginx:1"}
    c.remove_pod("web-1")
    await c.settle()
    images = {n: p["spec"]["containers"][0]["image"] for n, p in c.pods().items()}
    assert images == {"web-0": "nginx:1", "web-1": "nginx:2", "web-2": "nginx:1"}
    status = c.set()["status"]
    assert status["updatedReplicas"] == 1
    assert status["currentReplicas"] == 2
    assert status["currentRevision"] != status["updateRevision"]


async def test_history_is_truncated_to_the_limit_keeping_live_revisions() -> None:
    c = Cluster()
    await c.create(new_stateful_set(1, history_limit=2))
    await c.settle()
    for i in range(2, 7):
        c.set_image(f"nginx:{i}")
        await c.settle()
    revisions = c.revisions()
    assert [r["revision"] for r in revisions] == [4, 5, 6]  # two old ones kept, plus the live one
    assert c.set()["status"]["updateRevision"] == revisions[-1]["metadata"]["name"]


async def test_rollback_renumbers_the_equal_revision() -> None:
    c = Cluster()
    await c.create(new_stateful_set(2))
    await c.settle()
    first = c.set()["status"]["updateRevision"]
    c.set_image("nginx:2")
    await c.settle()
    c.set_image("nginx:1")
    await c.settle()
    revisions = c.revisions()
    assert [(r["metadata"]["name"], r["revision"]) for r in revisions][-1] == (first, 3)
    assert len(revisions) == 2
    status = c.set()["status"]
    assert status["currentRevision"] == status["updateRevision"] == first


async def test_revision_name_collision_bumps_collision_count() -> None:
    c = Cluster()
    sts = new_stateful_set(1)
    await c.create(sts)
    from controller_manager.controllers.statefulset.history import new_revision
    squatter = new_revision(sts, 1, 0)
    squatter["data"] = {"spec": {"template": {"$patch": "replace", "metadata": {"labels": {"other": "x"}}}}}
    squatter["metadata"]["ownerReferences"] = []
    squatter["metadata"]["labels"] = {"other": "x"}
    from controller_manager.api.resources import CONTROLLERREVISIONS
    await c.api.create(CONTROLLERREVISIONS, squatter, "default")
    status = await c.settle()
    assert status.collision_count == 1
    assert c.set()["status"]["collisionCount"] == 1
    assert c.set()["status"]["updateRevision"] != squatter["metadata"]["name"]


async def test_start_ordinal_shifts_the_range() -> None:
    c = Cluster()
    await c.create(new_stateful_set(2, start=3))
    await c.settle()
    assert c.names() == ["web-3", "web-4"]
    assert c.pods()["web-3"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "3"
    c.edit_spec(ordinals={"start": 4})
    await c.settle()
    assert c.names() == ["web-4", "web-5"]


async def test_set_being_deleted_only_updates_status() -> None:
    c = Cluster()
    await c.create(new_stateful_set(2))
    c.set()["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    status = await c.sync()
    assert c.pods() == {}
    assert status.replicas == 0


async def test_min_ready_seconds_gates_ordered_creation_and_availability() -> None:
    c = Cluster()
    await c.create(new_stateful_set(2, min_ready=10))
    await c.sync()
    c.make_ready("web-0")
    status = await c.sync()
    assert c.names() == ["web-0"]
    assert status.available_replicas == 0
    c.clock.advance(11)
    status = await c.sync()
    assert c.names() == ["web-0", "web-1"]
    assert status.available_replicas == 1


async def test_retention_policy_owner_refs_on_claims() -> None:
    c = Cluster()
    await c.create(new_stateful_set(2, retention=("Delete", "Delete")))
    await c.settle()
    set_uid = c.set()["metadata"]["uid"]
    claim = c.claims()["data-web-1"]
    assert [(r["kind"], r["uid"], r["controller"]) for r in claim["metadata"]["ownerReferences"]] == [
        ("StatefulSet", set_uid, True)]
    c.edit_spec(replicas=1)
    await c.sync()  # the condemned pod's claim moves to the pod before the pod goes
    pod_uid = None
    refs = c.claims()["data-web-1"]["metadata"]["ownerReferences"]
    assert [r["kind"] for r in refs] == ["Pod"]
    pod_uid = refs[0]["uid"]
    assert pod_uid
    assert "web-1" not in c.pods()
    # Scaling up again before the claim is collected: its stale pod reference blocks the new pod.
    c.edit_spec(replicas=2)
    await c.sync()
    assert "web-1" not in c.pods()
    del c.api.objects[("persistentvolumeclaims", "default", "data-web-1")]  # the garbage collector's work
    await c.sync()
    assert "web-1" in c.pods()


async def test_failed_pod_create_records_warning_and_raises() -> None:
    c = Cluster()
    await c.create(new_stateful_set(1, claims=()))
    from controller_manager.api.resources import PODS
    c.api.fail[("create", PODS.plural)] = ServerError(500, "InternalError", "boom")
    with pytest.raises(ServerError):
        await c.sync()
    assert ("Warning", "FailedCreate", "create Pod web-0 in StatefulSet web failed error: boom") in c.recorder.events
    assert c.set()["status"]["observedGeneration"] == 1  # status written before the failure is raised
    await c.sync()
    assert c.names() == ["web-0"]
