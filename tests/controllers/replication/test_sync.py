"""The ReplicationController controller where it differs from the ReplicaSet one (upstream's
replication_controller_test.go and replication_controller_utils_test.go, and what the RC<->RS conversions of
conversion.go mean as a client sees them): the owner reference and events name a v1 ReplicationController, the
selector is a plain map, status goes to ``replicationcontrollers/status`` and never carries terminatingReplicas,
and pods controlled by other kinds are left alone. The shared logic is tested in depth by the ReplicaSet tests."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.api.resources import REPLICASETS, REPLICATIONCONTROLLERS
from controller_manager.clock import FakeClock
from controller_manager.controllers.replication import BURST_REPLICAS, ReplicationManager
from controller_manager.controllerutil.replicamanager import map_selector
from controller_manager.controllerutil.replicamanager.status import (
    get_condition,
    remove_condition,
    set_condition,
)
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformerFactory
from tests.controllers.replicaset.fakes import RecordingClient, cache, drain, fake_server_error
from tests.controllers.replicaset.objects import terminating

SELECTOR = {"foo": "bar"}


def new_rc(replicas: int, selector: Mapping[str, str] | None = SELECTOR, *, name: str = "foobar",
           generation: int = 1) -> dict[str, Any]:
    """upstream's newReplicationController: template labels name=foo,type=production."""
    spec: dict[str, Any] = {
        "replicas": replicas,
        "template": {"metadata": {"labels": {"name": "foo", "type": "production"}},
                     "spec": {"containers": [{"name": "c", "image": "foo/bar"}], "restartPolicy": "Always"}},
    }
    if selector is not None:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": name, "namespace": "default", "uid": str(uuid.uuid4()), "resourceVersion": "18",
                         "generation": generation},
            "spec": spec}


def rc_pod(name: str, rc: Mapping[str, Any], phase: str = "Running", *, kind: str = "ReplicationController",
           api_version: str = "v1", owned: bool = True, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": str(uuid.uuid4()), "resourceVersion": "1",
                            "labels": dict(labels if labels is not None else rc["spec"]["selector"])}
    if owned:
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": rc["metadata"]["name"],
                                    "uid": rc["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    conditions = [{"type": "Ready", "status": "True"}] if phase == "Running" else []
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "foo/bar"}]},
            "status": {"phase": phase, "conditions": conditions}}


def new_manager(client: RecordingClient | None = None) -> tuple[ReplicationManager, RecordingClient, FakeClock]:
    client = client or RecordingClient()
    clock = FakeClock()
    events = EventBroadcaster(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=events)
    return ReplicationManager(ctx), client, clock


def test_identity_matches_upstream() -> None:
    assert ReplicationManager.name == "replicationcontroller-controller"
    assert ReplicationManager.alias == "replicationcontroller"
    assert ReplicationManager.workers_option == "concurrent-rc-syncs"
    assert ReplicationManager.default_workers == 5
    assert BURST_REPLICAS == 500
    manager, _, _ = new_manager()
    assert manager.queue.name == "replicationmanager"
    assert manager.rs_informer.resource is REPLICATIONCONTROLLERS


async def test_sync_does_nothing_in_step() -> None:
    """TestSyncReplicationControllerDoesNothing / TestStatusUpdatesWithoutReplicasChange: no writes at all."""
    manager, client, _ = new_manager()
    rc = {**new_rc(2), "status": {"replicas": 2, "fullyLabeledReplicas": 0, "readyReplicas": 2,
                                  "availableReplicas": 2, "observedGeneration": 1}}
    cache(manager.rs_informer, rc)
    cache(manager.pod_informer, rc_pod("pod0", rc), rc_pod("pod1", rc))
    assert await manager.sync(key_of(rc)) is None
    assert (client.creates, client.deletes, client.patches, client.status_updates) == ([], [], [], [])


async def test_sync_creates_pods_owned_by_the_rc() -> None:
    """TestSyncReplicationControllerCreates: the pods' controller reference is the v1 ReplicationController."""
    manager, client, _ = new_manager()
    rc = new_rc(2)
    cache(manager.rs_informer, rc)
    await manager.sync(key_of(rc))
    assert len(client.creates) == 2
    for pod in client.creates:
        assert pod["metadata"]["generateName"] == "foobar-"
        assert pod["metadata"]["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "ReplicationController", "name": "foobar", "uid": rc["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}]
        assert pod["metadata"]["labels"] == {"name": "foo", "type": "production"}


async def test_status_goes_to_the_rc_without_terminating_replicas() -> None:
    """TestControllerUpdateReplicas: one PUT of replicationcontrollers/status with the counts and the generation;
    terminating pods are not counted and the field RCs lack is never written."""
    manager, client, _ = new_manager()
    rc = {**new_rc(5, generation=1), "status": {"replicas": 2, "fullyLabeledReplicas": 6, "observedGeneration": 0}}
    extra = {**SELECTOR, "extraKey": "extraValue"}
    pods = [rc_pod("pod0", rc), rc_pod("pod1", rc),
            rc_pod("extra0", rc, labels={**extra, "name": "foo", "type": "production"}),
            rc_pod("extra1", rc, labels={**extra, "name": "foo", "type": "production"}),
            terminating(rc_pod("going", rc))]
    cache(manager.rs_informer, rc)
    cache(manager.pod_informer, *pods)
    await manager.sync(key_of(rc))
    assert len(client.creates) == 1
    [update] = client.status_updates
    assert (update["apiVersion"], update["kind"]) == ("v1", "ReplicationController")
    assert update["status"] == {"replicas": 4, "fullyLabeledReplicas": 2, "readyReplicas": 4,
                                "availableReplicas": 4, "observedGeneration": 1}


async def test_failed_create_sets_replica_failure_on_the_rc() -> None:
    manager, client, _ = new_manager(RecordingClient(create_error=fake_server_error("fake error")))
    rc = new_rc(1)
    cache(manager.rs_informer, rc)
    with pytest.raises(Exception, match="fake error"):
        await manager.sync(key_of(rc))
    [update] = client.status_updates
    [cond] = update["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "ReplicaFailure", "True", "FailedCreate", "fake error")
    assert "terminatingReplicas" not in update["status"]


async def test_sync_deletes_extra_pods() -> None:
    """TestSyncReplicationControllerDeletes."""
    manager, client, _ = new_manager()
    rc = new_rc(1)
    cache(manager.rs_informer, rc)
    cache(manager.pod_informer, rc_pod("pod0", rc), rc_pod("pod1", rc))
    await manager.sync(key_of(rc))
    assert len(client.deletes) == 1


async def test_pods_of_another_kind_with_the_same_name_are_left_alone() -> None:
    """A ReplicaSet named like the RC controls these pods: the RC neither counts nor adopts them."""
    manager, client, _ = new_manager()
    rc = new_rc(2)
    twin = {**rc, "metadata": {**rc["metadata"], "uid": str(uuid.uuid4())}}
    foreign = [rc_pod(f"rs{i}", twin, kind="ReplicaSet", api_version="apps/v1") for i in range(2)]
    cache(manager.rs_informer, rc)
    cache(manager.pod_informer, *foreign)
    await manager.sync(key_of(rc))
    assert len(client.creates) == 2
    assert client.patches == []
    assert client.deletes == []


async def test_orphans_matching_the_map_selector_are_adopted() -> None:
    manager, client, _ = new_manager()
    rc = new_rc(1)
    client.objects[("replicationcontrollers", "foobar")] = rc
    cache(manager.rs_informer, rc)
    cache(manager.pod_informer, rc_pod("orphan", rc, owned=False))
    await manager.sync(key_of(rc))
    assert client.gets == ["replicationcontrollers/foobar"]  # the live check before adopting
    [(name, patch)] = client.patches
    assert name == "orphan"
    [ref] = patch["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["uid"]) == ("v1", "ReplicationController", rc["metadata"]["uid"])
    assert client.creates == []


async def test_pod_events_wake_the_rc_that_selects_them() -> None:
    """TestPodControllerLookup: same namespace and matching labels; no selector or another namespace: nothing."""
    manager, _, _ = new_manager()
    matching = new_rc(1, name="bar")
    no_selector = new_rc(1, None, name="none")
    other_ns = {**new_rc(1, name="other"), "metadata": {**new_rc(1)["metadata"], "name": "other",
                                                        "namespace": "ns"}}
    cache(manager.rs_informer, matching, no_selector, other_ns)
    manager.pods.added(rc_pod("p", matching, owned=False))
    assert await drain(manager) == ["default/bar"]
    manager.pods.added(rc_pod("q", matching, owned=False, labels={"foo": "baz"}))
    assert await drain(manager) == []


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ({"foo": "bar"}, {"foo": "bar", "x": "y"}, True),
    ({"foo": "bar"}, {"foo": "baz"}, False),
    ({"foo": "bar", "a": "b"}, {"foo": "bar"}, False),
    (None, {"foo": "bar"}, False),  # no selector at all matches nothing, as the conversion's nil selector
])
def test_map_selector(selector: dict[str, str] | None, labels: dict[str, str], matches: bool) -> None:
    assert map_selector(selector).matches(labels) is matches


async def test_invalid_selector_is_skipped() -> None:
    manager, client, _ = new_manager()
    rc = new_rc(2, {"bad key!": "v"})
    cache(manager.rs_informer, rc)
    assert await manager.sync(key_of(rc)) is None
    assert client.creates == []
    assert client.status_updates == []


def test_replica_failure_condition_helpers() -> None:
    """replication_controller_utils_test.go: TestGetCondition, TestSetCondition, TestRemoveCondition (RC status
    shares the ReplicaSet condition helpers)."""
    failure = {"type": "ReplicaFailure", "status": "True", "reason": "ReplicaFailure", "message": ""}
    status: dict[str, Any] = {}
    assert get_condition(status, "ReplicaFailure") is None
    set_condition(status, failure)
    assert get_condition(status, "ReplicaFailure") == failure
    # same status and reason: kept as it is
    set_condition(status, {**failure, "message": "changed"})
    assert status["conditions"] == [failure]
    # another reason replaces it
    set_condition(status, {**failure, "reason": "Other"})
    assert status["conditions"] == [{**failure, "reason": "Other"}]
    remove_condition(status, "ReplicaFailure")
    assert "conditions" not in status
    remove_condition(status, "ReplicaFailure")  # removing what is not there is fine
    assert status == {}


def test_shares_the_orphan_index_with_the_replicaset_controller() -> None:
    """Both kinds in one manager register the same pod index without conflict."""
    from controller_manager.controllers.replicaset import ReplicaSetController

    client = RecordingClient()
    clock = FakeClock()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock),  # type: ignore[arg-type]
                            clock=clock, events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    rs = ReplicaSetController(ctx)
    rc = ReplicationManager(ctx)
    assert rs.pod_informer is rc.pod_informer
    assert rs.rs_informer.resource is REPLICASETS
    assert rc.rs_informer.resource is REPLICATIONCONTROLLERS
