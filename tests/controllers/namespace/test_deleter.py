"""The deleter's pass over one namespace, on a recording fake client: upstream's
``namespaced_resources_deleter_test.go`` tables, plus the estimate, finalizer and leftover paths."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.api.resources import Resource
from controller_manager.client import Conflict, ServerError
from controller_manager.clock import FakeClock
from controller_manager.controllers.namespace.conditions import (
    CONDITION_TYPES,
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    DISCOVERY_FAILURE,
    FINALIZERS_REMAINING,
    OK_REASONS,
    GroupDiscoveryFailed,
    get_condition,
)
from controller_manager.controllers.namespace.deleter import (
    AggregateError,
    NamespacedResourcesDeleter,
    ResourcesRemainingError,
    finalized,
    gvr_string,
    preferred_namespaced,
)
from tests.controllers.namespace.fakes import FakeClient, api_resource, fixed_discovery, not_found, sample_resources

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def namespace(name: str = "test", *, deleting: bool = True, finalizers: tuple[str, ...] = ("kubernetes",),
              phase: str = "Terminating", deleted_at: float = NOW, uid: str = "uid-1") -> Obj:
    meta: Obj = {"name": name, "resourceVersion": "1", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = format_time(deleted_at)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta,
            "spec": {"finalizers": list(finalizers)} if finalizers else {}, "status": {"phase": phase}}


def deleter(client: FakeClient, resources: list[Resource] | None = None, error: BaseException | None = None,
            clock: FakeClock | None = None) -> NamespacedResourcesDeleter:
    return NamespacedResourcesDeleter(client.as_client(), fixed_discovery(sample_resources() if resources is None
                                                                          else resources, error),
                                      clock or FakeClock(NOW))


def collection_actions(name: str, resources: list[Resource]) -> set[str]:
    """Upstream's expectation: a GET (list) and a DELETE (deletecollection) of every resource's collection."""
    out: set[str] = set()
    for res in resources:
        out |= {f"GET={res.path(name)}", f"DELETE={res.path(name)}"}
    return out


@pytest.mark.parametrize(("finalizers", "expected"), [
    pytest.param(["a", "b"], False, id="finalizers-left"),
    pytest.param([], True, id="empty"),
    pytest.param(None, True, id="none"),
])
def test_finalized(finalizers: list[str] | None, expected: bool) -> None:
    assert finalized({"spec": {"finalizers": finalizers}}) is expected


async def test_finalize_namespace_func() -> None:
    ns = namespace(deleting=False, finalizers=("kubernetes", "other"))
    client = FakeClient(ns)
    await deleter(client).finalize_namespace(ns)
    assert client.actions == ["update-namespaces-finalize"]
    assert client.finalized_with["spec"]["finalizers"] == ["other"]
    assert client.finalized_with["metadata"]["name"] == "test"


PENDING = namespace()
COMPLETE = namespace(finalizers=())


@pytest.mark.parametrize(("ns", "kube_actions", "collections", "discovery_error", "expected_error", "condition"), [
    pytest.param(PENDING, {"get-namespaces-", "update-namespaces-finalize", "list-pods-", "update-namespaces-status"},
                 True, None, None, None, id="pending-finalize"),
    pytest.param(COMPLETE, {"get-namespaces-"}, False, None, None, None, id="complete-finalize"),
    pytest.param(COMPLETE, {"get-namespaces-"}, False, RuntimeError("test error"), None, None,
                 id="groupVersionResourceErr"),
    pytest.param(PENDING, {"get-namespaces-", "list-pods-", "update-namespaces-status"}, True,
                 RuntimeError("test error"), "test error", DISCOVERY_FAILURE, id="groupVersionResourceErr-finalize"),
])
async def test_sync_namespace_that_is_terminating(ns: Obj, kube_actions: set[str], collections: bool,
                                                  discovery_error: BaseException | None, expected_error: str | None,
                                                  condition: str | None) -> None:
    client = FakeClient(ns)
    d = deleter(client, error=discovery_error)
    if expected_error is None:
        await d.delete("test")
    else:
        with pytest.raises(AggregateError) as caught:
            await d.delete("test")
        assert str(caught.value) == expected_error
    assert set(client.actions) == kube_actions
    assert set(client.metadata_actions) == (collection_actions("test", sample_resources()) if collections else set())
    stored = client.namespaces["test"]
    assert stored["status"]["phase"] == "Terminating"
    if condition is not None:
        found = get_condition(stored["status"]["conditions"], condition)
        assert found is not None
        assert found["status"] == "True"


async def test_pending_finalize_writes_every_ok_condition_and_keeps_other_finalizers() -> None:
    client = FakeClient(namespace(finalizers=("kubernetes", "example.com/also")))
    await deleter(client).delete("test")
    stored = client.namespaces["test"]
    assert stored["spec"]["finalizers"] == ["example.com/also"]
    conditions = stored["status"]["conditions"]
    assert [c["type"] for c in conditions] == list(CONDITION_TYPES)
    assert all(c["status"] == "False" and c["reason"] == OK_REASONS[c["type"]] for c in conditions)


async def test_retry_on_conflict_error() -> None:
    tries = 0

    async def retry_once(ns: Obj) -> Obj:
        nonlocal tries
        tries += 1
        if tries <= 1:
            raise Conflict(409, "Conflict", 'Operation cannot be fulfilled on namespaces "test": ERROR')
        return ns

    ns = namespace()
    client = FakeClient(ns)
    await deleter(client).retry_on_conflict(ns, retry_once)
    assert tries == 2
    assert client.actions == ["get-namespaces-"]


async def test_retry_on_conflict_refuses_a_recreated_namespace() -> None:
    async def always_conflict(ns: Obj) -> Obj:
        raise Conflict(409, "Conflict", "conflict")

    client = FakeClient(namespace(uid="uid-2"))
    with pytest.raises(RuntimeError, match="namespace uid has changed across retries"):
        await deleter(client).retry_on_conflict(namespace(uid="uid-1"), always_conflict)


async def test_sync_namespace_that_is_active() -> None:
    client = FakeClient(namespace(deleting=False, phase="Active"))
    await deleter(client).delete("test")
    assert client.actions == ["get-namespaces-"]
    assert client.metadata_actions == []


async def test_sync_namespace_that_is_gone() -> None:
    client = FakeClient()
    await deleter(client).delete("test")
    assert client.actions == ["get-namespaces-"]


async def test_phase_is_set_to_terminating_when_the_server_did_not() -> None:
    client = FakeClient(namespace(phase="Active"))
    await deleter(client, resources=[]).delete("test")
    assert client.actions[:2] == ["get-namespaces-", "update-namespaces-status"]
    assert client.namespaces["test"]["status"]["phase"] == "Terminating"
    assert client.namespaces["test"]["spec"]["finalizers"] == []


async def test_delete_encounters_404() -> None:
    """A resource answering 404 in one namespace is not remembered as unsupported for the next."""
    ns1 = namespace("ns1", phase="Active")
    ns2 = namespace("ns2", phase="Active")
    client = FakeClient(ns1, ns2)

    def ns1_flakes_not_found(ns: str | None) -> Any:
        if ns == "ns1":
            raise not_found()
        return None

    client.reactors[("deletecollection", "flakes")] = ns1_flakes_not_found
    client.reactors[("list", "flakes")] = ns1_flakes_not_found
    flakes = api_resource("example.com", "v1", "flakes", "Flake")
    d = deleter(client, resources=[flakes])

    await d.delete("ns1")
    path1 = flakes.path("ns1")
    assert client.metadata_actions == [f"DELETE={path1}", f"GET={path1}", f"GET={path1}"]

    client.metadata_actions.clear()
    await d.delete("ns2")
    path2 = flakes.path("ns2")
    assert client.metadata_actions == [f"DELETE={path2}", f"GET={path2}"]


async def test_resource_without_deletecollection_is_listed_and_deleted_item_by_item() -> None:
    widgets = api_resource("example.com", "v1", "widgets", "Widget", verbs=("get", "list", "delete"))
    items = [{"metadata": {"name": "a", "namespace": "test"}}, {"metadata": {"name": "b", "namespace": "test"}}]
    client = FakeClient(namespace())
    lists = iter([items, []])
    client.reactors[("list", "widgets")] = lambda ns: next(lists)
    await deleter(client, resources=[widgets]).delete("test")
    base = widgets.path("test")
    assert client.metadata_actions == [f"GET={base}", f"DELETE={base}/a", f"DELETE={base}/b", f"GET={base}"]


async def test_resources_without_delete_or_namespace_scope_are_not_touched() -> None:
    bindings = api_resource("", "v1", "bindings", "Binding", verbs=("create",))
    client = FakeClient(namespace())
    await deleter(client, resources=[bindings]).delete("test")
    assert client.metadata_actions == []
    assert client.namespaces["test"]["spec"]["finalizers"] == []


def pod(name: str, grace: int | None, phase: str = "Running") -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "x"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"metadata": {"name": name, "namespace": "test"}, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(("pods", "age", "expected"), [
    pytest.param([pod("a", 30), pod("b", 10)], 0.0, 30, id="longest-grace"),
    pytest.param([pod("a", 30)], 29.0, 30, id="grace-not-yet-over"),
    pytest.param([pod("a", 30)], 30.0, 0, id="grace-over-since-deletion"),
    pytest.param([pod("a", 60, "Succeeded"), pod("b", 45, "Failed"), pod("c", 5)], 0.0, 5, id="terminal-pods-ignored"),
    pytest.param([pod("a", None)], 0.0, 0, id="no-grace"),
    pytest.param([], 0.0, 0, id="no-pods"),
])
async def test_estimate_graceful_termination_for_pods(pods: list[Obj], age: float, expected: int) -> None:
    client = FakeClient(content={"pods": pods})
    clock = FakeClock(NOW + age)
    d = deleter(client, clock=clock)
    assert await d.estimate_graceful_termination(sample_resources()[0], "test", NOW) == expected
    # Only pods have a grace period to wait for.
    assert await d.estimate_graceful_termination(sample_resources()[1], "test", NOW) == 0


async def test_pods_in_their_grace_period_mean_wait_for_the_estimate() -> None:
    client = FakeClient(namespace(), content={"pods": [pod("a", 30)]})
    with pytest.raises(ResourcesRemainingError) as caught:
        await deleter(client, clock=FakeClock(NOW + 1)).delete("test")
    assert caught.value.estimate == 30
    assert str(caught.value) == "some content remains in the namespace, estimate 30 seconds before it is removed"
    conditions = client.namespaces["test"]["status"]["conditions"]
    remaining = get_condition(conditions, CONTENT_REMAINING)
    assert remaining is not None
    assert remaining["status"] == "True"
    assert remaining["message"] == "Some resources are remaining: pods. has 1 resource instances"
    assert "update-namespaces-finalize" not in client.actions


async def test_items_held_by_finalizers_report_them_and_wait_15_seconds() -> None:
    def held(name: str, *finalizers: str) -> Obj:
        return {"metadata": {"name": name, "namespace": "test", "finalizers": list(finalizers)}}

    content = {"services": [held("s1", "example.com/hold")],
               "deployments": [held("d1", "example.com/hold", "foregroundDeletion"), held("d2")]}
    client = FakeClient(namespace(), content=content)
    with pytest.raises(ResourcesRemainingError) as caught:
        await deleter(client).delete("test")
    assert caught.value.estimate == 15
    conditions = client.namespaces["test"]["status"]["conditions"]
    remaining = get_condition(conditions, CONTENT_REMAINING)
    finalizers = get_condition(conditions, FINALIZERS_REMAINING)
    assert remaining is not None
    assert finalizers is not None
    assert (remaining["status"], remaining["reason"]) == ("True", "SomeResourcesRemain")
    assert remaining["message"] == ("Some resources are remaining: deployments.apps has 2 resource instances, "
                                    "services. has 1 resource instances")
    assert (finalizers["status"], finalizers["reason"]) == ("True", "SomeFinalizerRemain")
    assert finalizers["message"] == ("Some finalizers are remaining: example.com/hold in 2 resource instances, "
                                     "foregroundDeletion in 1 resource instances")
    assert client.namespaces["test"]["spec"]["finalizers"] == ["kubernetes"]


async def test_leftovers_with_nothing_holding_them_are_a_content_failure() -> None:
    client = FakeClient(namespace(), content={"services": [{"metadata": {"name": "s", "namespace": "test"}}]})
    with pytest.raises(AggregateError) as caught:
        await deleter(client).delete("test")
    message = "unexpected items still remain in namespace: test for gvr: /v1, Resource=services"
    assert str(caught.value) == message
    failure = get_condition(client.namespaces["test"]["status"]["conditions"], CONTENT_FAILURE)
    assert failure is not None
    assert (failure["status"], failure["reason"]) == ("True", "ContentDeletionFailed")
    assert failure["message"] == f"Failed to delete all resource types, 1 remaining: {message}"
    assert "update-namespaces-finalize" not in client.actions


async def test_a_failing_resource_does_not_stop_the_others() -> None:
    client = FakeClient(namespace())

    def broken(ns: str | None) -> Any:
        raise ServerError(500, "InternalError", "etcd is sad")

    client.reactors[("deletecollection", "services")] = broken
    with pytest.raises(AggregateError, match=r"^etcd is sad$"):
        await deleter(client).delete("test")
    deployments = sample_resources()[2].path("test")
    assert f"DELETE={deployments}" in client.metadata_actions
    failure = get_condition(client.namespaces["test"]["status"]["conditions"], CONTENT_FAILURE)
    assert failure is not None
    assert failure["message"] == "Failed to delete all resource types, 1 remaining: etcd is sad"


async def test_partial_discovery_failure_deletes_what_was_found_and_reports_the_groups() -> None:
    error = GroupDiscoveryFailed({"metrics.k8s.io/v1beta1": ServerError(503, "ServiceUnavailable",
                                                                         "the server is currently unable to handle "
                                                                         "the request")})
    client = FakeClient(namespace())
    with pytest.raises(AggregateError):
        await deleter(client, error=error).delete("test")
    assert set(client.metadata_actions) == collection_actions("test", sample_resources())
    found = get_condition(client.namespaces["test"]["status"]["conditions"], DISCOVERY_FAILURE)
    assert found is not None
    assert (found["status"], found["reason"]) == ("True", "DiscoveryFailed")
    assert found["message"] == (
        "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: "
        "metrics.k8s.io/v1beta1: the server is currently unable to handle the request")
    # Not finalized while discovery is incomplete: content of the missing groups might remain.
    assert client.namespaces["test"]["spec"]["finalizers"] == ["kubernetes"]


async def test_unchanged_conditions_are_not_rewritten() -> None:
    client = FakeClient(namespace(finalizers=("kubernetes", "other")))
    d = deleter(client)
    await d.delete("test")
    client.actions.clear()
    await d.delete("test")
    assert "update-namespaces-status" not in client.actions


@pytest.mark.parametrize(("errors", "expected"), [
    pytest.param([RuntimeError("a")], "a", id="one"),
    pytest.param([RuntimeError("a"), RuntimeError("b")], "[a, b]", id="two"),
    pytest.param([RuntimeError("a"), RuntimeError("a")], "a", id="duplicates"),
])
def test_aggregate_error_message(errors: list[BaseException], expected: str) -> None:
    assert str(AggregateError(errors)) == expected


def test_gvr_string() -> None:
    assert gvr_string(api_resource("", "v1", "pods", "Pod")) == "/v1, Resource=pods"
    assert gvr_string(api_resource("apps", "v1", "deployments", "Deployment")) == "apps/v1, Resource=deployments"


def test_preferred_namespaced_keeps_the_first_version_of_each_namespaced_resource() -> None:
    found = [
        api_resource("", "v1", "pods", "Pod"),
        api_resource("", "v1", "nodes", "Node", namespaced=False),
        api_resource("example.com", "v2", "widgets", "Widget"),
        api_resource("example.com", "v1", "widgets", "Widget"),
        api_resource("example.com", "v1", "gadgets", "Gadget"),
        api_resource("events.k8s.io", "v1", "events", "Event"),
        api_resource("", "v1", "events", "Event"),
    ]
    assert [(r.group, r.version, r.plural) for r in preferred_namespaced(found)] == [
        ("", "v1", "pods"), ("example.com", "v2", "widgets"), ("example.com", "v1", "gadgets"),
        ("events.k8s.io", "v1", "events"), ("", "v1", "events")]
