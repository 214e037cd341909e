"""Upstream's ``disruption_test.go`` scenarios, on the controller with hand-filled caches and a fake client."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.client.errors import Conflict, NotFound
from controller_manager.controllers.disruption.finders import FinderError
from controller_manager.controllers.disruption.status import SYNC_FAILED_REASON, find_condition

from .fakes import (
    CUSTOM_GROUP,
    CUSTOM_KIND,
    CUSTOM_RESOURCE,
    CUSTOM_VERSION,
    NS,
    add,
    new_controller,
    new_deployment,
    new_pdb,
    new_pod,
    new_replica_set,
    new_replication_controller,
    new_stateful_set,
    owned_by,
    set_ready,
    status_of,
    verify_disruption_allowed,
    verify_pdb_status,
    with_name,
)


def _no_sync_failed_for_unmanaged(status: dict[str, Any]) -> bool:
    """Upstream's VerifyNoStatusError: unmanaged pods never fail the sync."""
    return not any("found no controller ref" in (c.get("message") or "") and c.get("reason") == SYNC_FAILED_REASON
                   for c in status.get("conditions") or [])


async def test_no_selector() -> None:
    """An empty selector matches every pod of the namespace (policy/v1)."""
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(min_available=3, selector={})
    add(dc.pdb_informer, pdb)
    await dc.sync(key)
    verify_pdb_status(client, key, 0, 0, 3, 0)

    add(dc.pod_informer, new_pod("yo-yo-yo"))
    await dc.sync(key)
    verify_pdb_status(client, key, 0, 1, 3, 1)


async def test_unavailable() -> None:
    """Counts go up as pods come, and down when one becomes unready."""
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(min_available=3)
    add(dc.pdb_informer, pdb)
    await dc.sync(key)

    pods = []
    for i in range(4):
        verify_pdb_status(client, key, 0, i, 3, i)
        pod = new_pod(f"yo-yo-yo {i}")
        pods.append(pod)
        add(dc.pod_informer, pod)
        await dc.sync(key)
    verify_pdb_status(client, key, 1, 4, 3, 4)

    add(dc.pod_informer, set_ready(pods[0], False))
    await dc.sync(key)
    verify_pdb_status(client, key, 0, 3, 3, 4)


async def test_integer_max_unavailable() -> None:
    """An integer maxUnavailable allows nothing for pods without a controller."""
    dc, client, _, recorder = new_controller()
    pdb, key = new_pdb(max_unavailable=1)
    add(dc.pdb_informer, pdb)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)

    add(dc.pod_informer, new_pod("naked"))
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)
    assert "UnmanagedPods" in recorder.reasons()


@pytest.mark.parametrize(("max_unavailable", "first", "rescaled_to", "second"), [
    pytest.param(2, (0, 1, 5, 7), 5, (0, 1, 3, 5), id="integer"),
    pytest.param("30%", (0, 1, 4, 7), 3, (0, 1, 2, 3), id="percentage"),
])
async def test_max_unavailable_with_scaling(max_unavailable: int | str, first: tuple[int, int, int, int],
                                            rescaled_to: int, second: tuple[int, int, int, int]) -> None:
    """maxUnavailable is recomputed when the scale of the pods' controller changes
    (TestIntegerMaxUnavailableWithScaling, TestPercentageMaxUnavailableWithScaling)."""
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(max_unavailable=max_unavailable)
    add(dc.pdb_informer, pdb)
    rs = new_replica_set(7)
    add(dc.rs_informer, rs)
    add(dc.pod_informer, owned_by(new_pod("pod"), rs))
    await dc.sync(key)
    verify_pdb_status(client, key, *first)

    add(dc.rs_informer, {**rs, "spec": {**rs["spec"], "replicas": rescaled_to}})
    await dc.sync(key)
    verify_pdb_status(client, key, *second)


@pytest.mark.parametrize("pod_name", ["naked", "unmanaged"])
async def test_naked_pod(pod_name: str) -> None:
    """A percentage minAvailable allows nothing for a pod without a controller, reports it and does not fail
    (TestNakedPod, TestStatusForUnmanagedPod, TestTotalUnmanagedPods)."""
    dc, client, _, recorder = new_controller()
    pdb, key = new_pdb(min_available="28%")
    add(dc.pdb_informer, pdb)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)

    pod = new_pod(pod_name)
    add(dc.pod_informer, pod)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)
    assert _no_sync_failed_for_unmanaged(status_of(client, key))
    assert "UnmanagedPods" in recorder.reasons()
    _, unmanaged = await dc.expected_scale([pod])
    assert unmanaged == [pod_name]


async def test_unmanaged_pods_event_message() -> None:
    dc, _, _, recorder = new_controller()
    pdb, key = new_pdb(min_available="28%")
    add(dc.pdb_informer, pdb)
    add(dc.pod_informer, new_pod("naked"))
    await dc.sync(key)
    assert (key, "Warning", "UnmanagedPods",
            "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{foo: "
            "bar,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the "
            "status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account "
            "for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.") \
        in recorder.events


async def test_unsupported_controller_pod() -> None:
    """A controller kind nobody serves fails the sync: fail-safe status and CalculateExpectedPodCountFailed."""
    dc, client, _, recorder = new_controller()
    pdb, key = new_pdb(min_available="28%")
    add(dc.pdb_informer, pdb)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)

    pod = new_pod("naked")
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps.test.io/v1", "kind": "TestWorkload",
                                           "name": "fake-controller", "uid": "b7329742-8daa-493a-8881-6ca07139172b",
                                           "controller": True}]
    add(dc.pod_informer, pod)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)
    message = 'no matches for kind "TestWorkload" in version "apps.test.io/v1"'
    assert (key, "Warning", "CalculateExpectedPodCountFailed",
            f"Failed to calculate the number of expected pods: {message}") in recorder.events
    cond = find_condition(status_of(client, key)["conditions"], "DisruptionAllowed")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SyncFailed", message)


async def test_replica_set() -> None:
    """The scale of a ReplicaSet counts even when no Deployment owns it."""
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(min_available="20%")
    add(dc.pdb_informer, pdb)
    rs = new_replica_set(10)
    add(dc.rs_informer, rs)
    add(dc.pod_informer, owned_by(new_pod("pod"), rs))
    await dc.sync(key)
    verify_pdb_status(client, key, 0, 1, 2, 10)


async def test_scale_resource() -> None:
    """A custom controller's scale comes from its /scale subresource."""
    replicas, pods, max_unavailable = 10, 4, 5
    dc, client, _, _ = new_controller()
    custom_uid = "custom-uid"
    client.discovery = [CUSTOM_RESOURCE]
    client.scales[(CUSTOM_RESOURCE.plural, "")] = {
        "kind": "Scale", "metadata": {"namespace": NS, "uid": custom_uid}, "spec": {"replicas": replicas}}
    pdb, key = new_pdb(max_unavailable=max_unavailable)
    add(dc.pdb_informer, pdb)
    for i in range(pods):
        pod = new_pod(f"pod-{i}")
        pod["metadata"]["ownerReferences"] = [{"kind": CUSTOM_KIND, "apiVersion": f"{CUSTOM_GROUP}/{CUSTOM_VERSION}",
                                               "controller": True, "uid": custom_uid}]
        add(dc.pod_informer, pod)
    await dc.sync(key)
    allowed = max_unavailable - (replicas - pods) if replicas - pods < max_unavailable else 0
    verify_pdb_status(client, key, allowed, pods, replicas - max_unavailable, replicas)


_SCALE_ENTRY = {"kind": "Scale", "group": "autoscaling", "version": "v1", "name": "customresources/scale"}


@pytest.mark.parametrize(("api_resources", "expect_error"), [
    pytest.param([{"kind": CUSTOM_KIND, "name": "customresources/status"}, _SCALE_ENTRY,
                  {"kind": CUSTOM_KIND, "name": "customresources"}], False, id="resource implements scale"),
    pytest.param([{"kind": CUSTOM_KIND, "name": "customresources"},
                  {"kind": CUSTOM_KIND, "name": "customresources/scale"}], True,
                 id="resource implements unsupported data format for scale subresource"),
    pytest.param([{"kind": CUSTOM_KIND, "name": "customresources"}], True, id="resource does not implement scale"),
])
async def test_scale_finder_no_resource(api_resources: list[dict[str, Any]], expect_error: bool) -> None:
    """A 404 on /scale is "no controller" only if the resource serves a Scale subresource."""
    dc, client, _, _ = new_controller()
    client.discovery = [CUSTOM_RESOURCE]
    client.scales[(CUSTOM_RESOURCE.plural, "")] = NotFound(404, "NotFound", 'customresources "name" not found')
    client.group_versions[f"/apis/{CUSTOM_GROUP}/{CUSTOM_VERSION}"] = {
        "groupVersion": f"{CUSTOM_GROUP}/{CUSTOM_VERSION}", "resources": api_resources}
    ref = {"kind": CUSTOM_KIND, "apiVersion": f"{CUSTOM_GROUP}/{CUSTOM_VERSION}", "controller": True,
           "uid": "custom-uid"}
    if expect_error:
        with pytest.raises(FinderError, match=r"customresources\.custom\.k8s\.io does not implement the scale"):
            await dc.finders.scale_controller(ref, NS)
    else:
        assert await dc.finders.scale_controller(ref, NS) is None


async def test_multiple_controllers() -> None:
    """Pods with no controller allow nothing; once an RC controls them, 200% > 1% allows one."""
    pod_count = 2
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(min_available="1%")
    add(dc.pdb_informer, pdb)
    pods = [new_pod(f"pod {i}") for i in range(pod_count)]
    add(dc.pod_informer, *pods)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 0)

    rc = with_name(new_replication_controller(1), "rc 1")
    pods = [owned_by(p, rc) for p in pods]
    add(dc.pod_informer, *pods)
    add(dc.rc_informer, rc)
    await dc.sync(key)
    verify_disruption_allowed(client, key, 1)

    rc2 = with_name(new_replication_controller(1), "rc 2")
    pods = [owned_by(p, rc2) for p in pods]
    add(dc.pod_informer, *pods)
    add(dc.rc_informer, rc2)
    await dc.sync(key)
    # Upstream leaves this assertion disabled: only the first controller reference counts.
    verify_disruption_allowed(client, key, 1)


@pytest.mark.parametrize("kind", ["ReplicationController", "StatefulSet"])
async def test_single_controller(kind: str) -> None:
    """34% of 3 rounds up to 2; a rogue pod with no controller then adds a healthy pod
    (TestReplicationController, TestStatefulSetController)."""
    labels = {"foo": "bar", "baz": "quux"}
    dc, client, _, _ = new_controller()
    pdb, key = new_pdb(min_available="34%")
    add(dc.pdb_informer, pdb)
    if kind == "ReplicationController":
        owner = {**new_replication_controller(3)}
        owner["spec"] = {**owner["spec"], "selector": labels}
        add(dc.rc_informer, owner)
    else:
        owner = new_stateful_set(3)
        add(dc.statefulset_informer, owner)
    await dc.sync(key)
    # With no pods the PDB does not know the controller yet (a known upstream limitation).
    verify_pdb_status(client, key, 0, 0, 0, 0)

    for i in range(3):
        add(dc.pod_informer, owned_by(new_pod(f"foobar {i}", labels=labels), owner))
        await dc.sync(key)
        if i < 2:
            verify_pdb_status(client, key, 0, i + 1, 2, 3)
        else:
            verify_pdb_status(client, key, 1, 3, 2, 3)

    if kind == "ReplicationController":
        add(dc.pod_informer, new_pod("rogue"))
        await dc.sync(key)
        verify_disruption_allowed(client, key, 2)


async def test_two_controllers() -> None:
    """An RC and a Deployment's ReplicaSet under one PDB: intermediate counts as each pod arrives."""
    rc_labels = {"foo": "bar", "baz": "quux"}
    d_labels = {"foo": "bar", "baz": "quuux"}
    dc, client, _, _ = new_controller()
    collection_size, minimum_one, minimum_two = 11, 4, 7

    pdb, key = new_pdb(min_available="28%")
    add(dc.pdb_informer, pdb)
    rc = new_replication_controller(collection_size)
    rc["spec"] = {**rc["spec"], "selector": rc_labels}
    add(dc.rc_informer, rc)
    await dc.sync(key)
    verify_pdb_status(client, key, 0, 0, 0, 0)

    pods: list[dict[str, Any]] = []
    unavailable = collection_size - minimum_one - 1
    for i in range(1, collection_size + 1):
        pod = owned_by(new_pod(f"quux {i}", labels=rc_labels, ready=i > unavailable), rc)
        pods.append(pod)
        add(dc.pod_informer, pod)
        await dc.sync(key)
        if i <= unavailable:
            verify_pdb_status(client, key, 0, 0, minimum_one, collection_size)
        elif i - unavailable <= minimum_one:
            verify_pdb_status(client, key, 0, i - unavailable, minimum_one, collection_size)
        else:
            verify_pdb_status(client, key, 1, i - unavailable, minimum_one, collection_size)

    d = new_deployment(collection_size)
    d["spec"] = {**d["spec"], "selector": {"matchLabels": d_labels}}
    add(dc.deployment_informer, d)
    await dc.sync(key)
    verify_pdb_status(client, key, 1, minimum_one + 1, minimum_one, collection_size)

    rs = new_replica_set(collection_size)
    rs["spec"] = {**rs["spec"], "selector": {"matchLabels": d_labels}}
    rs["metadata"] = {**rs["metadata"], "labels": d_labels}
    add(dc.rs_informer, rs)
    await dc.sync(key)
    verify_pdb_status(client, key, 1, minimum_one + 1, minimum_one, collection_size)

    # By the end of this loop, N+2 pods are ready (hence minimum_two + 2).
    unavailable = 2 * collection_size - (minimum_two + 2) - unavailable
    for i in range(1, collection_size + 1):
        pod = owned_by(new_pod(f"quuux {i}", labels=d_labels, ready=i > unavailable), rs)
        pods.append(pod)
        add(dc.pod_informer, pod)
        await dc.sync(key)
        if i <= unavailable:
            verify_pdb_status(client, key, 0, minimum_one + 1, minimum_two, 2 * collection_size)
        elif i - unavailable <= minimum_two - (minimum_one + 1):
            verify_pdb_status(client, key, 0, (minimum_one + 1) + (i - unavailable), minimum_two,
                              2 * collection_size)
        else:
            verify_pdb_status(client, key, i - unavailable - (minimum_two - (minimum_one + 1)),
                              (minimum_one + 1) + (i - unavailable), minimum_two, 2 * collection_size)

    # One pod down still allows a disruption, two do not; one back allows one again.
    verify_pdb_status(client, key, 2, 2 + minimum_two, minimum_two, 2 * collection_size)
    add(dc.pod_informer, set_ready(pods[collection_size - 1], False))
    await dc.sync(key)
    verify_pdb_status(client, key, 1, 1 + minimum_two, minimum_two, 2 * collection_size)

    add(dc.pod_informer, set_ready(pods[collection_size - 2], False))
    await dc.sync(key)
    verify_pdb_status(client, key, 0, minimum_two, minimum_two, 2 * collection_size)

    add(dc.pod_informer, set_ready(pods[collection_size - 1], True))
    await dc.sync(key)
    verify_pdb_status(client, key, 1, 1 + minimum_two, minimum_two, 2 * collection_size)


async def test_pdb_not_exist() -> None:
    dc, client, _, _ = new_controller()
    pdb, _ = new_pdb(min_available="67%")
    add(dc.pdb_informer, pdb)
    assert await dc.sync("notExist") is None
    assert client.writes == 0


async def test_update_disrupted_pods() -> None:
    """Entries of pods being deleted, expired or gone are dropped; the PDB is rechecked when the next expires."""
    dc, client, clock, recorder = new_controller()
    now = clock.now()
    pdb, key = new_pdb(min_available=1)
    pdb["status"] = {"disruptedPods": {
        "p1": format_time(now),  # removed: its deletion started
        "p2": format_time(now - 180),  # removed: expired
        "p3": format_time(now - 60),  # kept: pod untouched
        "notthere": format_time(now),  # removed: pod deleted
    }}
    add(dc.pdb_informer, pdb)
    p1 = new_pod("p1")
    p1["metadata"]["deletionTimestamp"] = format_time(now)
    add(dc.pod_informer, p1, new_pod("p2"), new_pod("p3"))

    await dc.sync(key)
    verify_pdb_status(client, key, 0, 1, 1, 3, {"p3": format_time(now - 60)})
    assert (f"{NS}/p2", "Warning", "NotDeleted",
            f"Pod was expected by PDB {NS}/{NS} to be deleted but it wasn't") in recorder.events

    # p3's entry expires in 60s: the PDB waits in the recheck queue until then.
    assert dc.recheck_queue.waiting() == 1
    assert len(dc.recheck_queue) == 0
    clock.advance(59)
    assert len(dc.recheck_queue) == 0
    clock.advance(1)
    assert len(dc.recheck_queue) == 1


@pytest.mark.parametrize(("api_version", "kind", "owner", "expected_scale"), [
    pytest.param("apps/v1", "ReplicaSet", "rs", 10, id="replicaset controller with apps group"),
    pytest.param("invalid/v1", "ReplicaSet", "rs", None, id="replicaset controller with invalid group"),
    pytest.param("/v1", "ReplicationController", "rc", 12, id="replicationcontroller with empty group"),
    pytest.param("apps/v1", "ReplicationController", "rc", None, id="replicationcontroller with invalid group"),
    pytest.param("apps/v1", "StatefulSet", "ss", 14, id="statefulset controller with extensions group"),
    pytest.param("apps/v1", "ReplicaSet", "ss", None, id="statefulset controller with invalid kind"),
])
async def test_basic_finder_functions(api_version: str, kind: str, owner: str, expected_scale: int | None) -> None:
    dc, _, _, _ = new_controller()
    rs, rc, ss = new_replica_set(10), new_replication_controller(12), new_stateful_set(14)
    add(dc.rs_informer, rs)
    add(dc.rc_informer, rc)
    add(dc.statefulset_informer, ss)
    obj, finder = {"rs": (rs, dc.finders.replica_set), "rc": (rc, dc.finders.replication_controller),
                   "ss": (ss, dc.finders.stateful_set)}[owner]
    ref = {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"]}
    found = await finder(ref, NS)
    if expected_scale is None:
        assert found is None
    else:
        assert found == (obj["metadata"]["uid"], expected_scale)


@pytest.mark.parametrize(("rs_api_version", "rs_kind", "dep_api_version", "dep_kind", "finds"), [
    pytest.param("apps/v1", "ReplicaSet", "extensions/v1", "Deployment", True, id="happy path"),
    pytest.param("invalid/v1", "ReplicaSet", "apps/v1", "Deployment", False, id="invalid rs apiVersion"),
    pytest.param("apps/v1", "InvalidKind", "apps/v1", "Deployment", False, id="invalid rs kind"),
    pytest.param("extensions/v1", "ReplicaSet", "deployment/v1", "Deployment", False,
                 id="invalid deployment apiVersion"),
    pytest.param("apps/v1", "ReplicaSet", "extensions/v1", "InvalidKind", False, id="invalid deployment kind"),
])
async def test_deployment_finder_function(rs_api_version: str, rs_kind: str, dep_api_version: str, dep_kind: str,
                                          finds: bool) -> None:
    dc, _, _, _ = new_controller()
    dep = new_deployment(10)
    add(dc.deployment_informer, dep)
    rs = new_replica_set(5)
    rs["metadata"]["ownerReferences"] = [{"apiVersion": dep_api_version, "kind": dep_kind,
                                          "name": dep["metadata"]["name"], "uid": dep["metadata"]["uid"],
                                          "controller": True}]
    add(dc.rs_informer, rs)
    ref = {"apiVersion": rs_api_version, "kind": rs_kind, "name": rs["metadata"]["name"],
           "uid": rs["metadata"]["uid"]}
    found = await dc.finders.deployment(ref, NS)
    assert found == ((dep["metadata"]["uid"], 10) if finds else None)


async def test_update_pdb_status_retries() -> None:
    """A status write that conflicts with evictions is retried, never forced: the evictions' count stands.

    disruptionsAllowed starts at 2. (A) One pod is deleted and the controller wants 1. (B) As it writes, two more
    pods are evicted and the server's status says 0. (C) The controller's stale write must not land."""
    dc, client, clock, _ = new_controller()
    pdb, key = new_pdb(min_available=1)
    add(dc.pdb_informer, pdb)
    names = ["moe", "larry", "curly"]
    add(dc.pod_informer, *(new_pod(n) for n in names))
    await dc.sync(key)
    verify_disruption_allowed(client, key, 2)
    add(dc.pdb_informer, client.statuses[key])  # the informer sees the written status

    def evict(attempt: dict[str, Any]) -> Conflict:
        server = client.statuses[key]
        status = dict(server["status"])
        status["disruptionsAllowed"] -= 2
        status["disruptedPods"] = {n: format_time(clock.now()) for n in names[1:]}
        client.statuses[key] = {**server, "status": status}
        return Conflict(409, "Conflict", "conflict")

    client.before_status_write = evict
    dc.pod_informer.store._remove(f"{NS}/{names[0]}")  # (A)
    with pytest.raises(Conflict):
        await dc.sync(key)
    verify_disruption_allowed(client, key, 0)


@pytest.mark.parametrize("selector", [
    pytest.param({"matchLabels": {"k8s.io/too/many/slashes": "value"}}, id="illegal value key"),
    pytest.param({"matchExpressions": [{"key": "foo", "operator": "illegal", "values": ["bar"]}]},
                 id="illegal operator"),
])
async def test_invalid_selectors(selector: dict[str, Any]) -> None:
    """A selector that cannot be parsed takes the fail-safe path."""
    dc, client, _, recorder = new_controller()
    pdb, key = new_pdb(min_available=3, selector=selector)
    add(dc.pdb_informer, pdb)
    await dc.sync(key)
    verify_pdb_status(client, key, 0, 0, 0, 0)
    cond = find_condition(status_of(client, key)["conditions"], "DisruptionAllowed")
    assert cond is not None
    assert cond["reason"] == SYNC_FAILED_REASON
    assert [(t, r) for _, t, r, _ in recorder.events] == [("Warning", "NoPods")]


async def test_keep_existing_pdb_condition_during_sync() -> None:
    dc, client, clock, _ = new_controller()
    pdb, key = new_pdb(min_available=3, selector={})
    pdb["status"] = {"conditions": [{"type": "ExistingTestCondition", "status": "True",
                                     "message": "This is a test condition", "reason": "Test",
                                     "lastTransitionTime": format_time(clock.now())}]}
    add(dc.pdb_informer, pdb)
    assert await dc.sync(key) is None
    verify_pdb_status(client, key, 0, 0, 3, 0)
    conditions = status_of(client, key)["conditions"]
    assert len(conditions) == 2
    assert find_condition(conditions, "ExistingTestCondition") is not None
