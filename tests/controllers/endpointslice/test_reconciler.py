"""Upstream's reconciler tables (``staging/src/k8s.io/endpointslice/reconciler_test.go``, TestReconcile*), against
a recording in-memory client. Topology-hint and trafficDistribution tables are not ported (not implemented)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.endpointslice.reconciler import ReconcileError
from controller_manager.controllers.endpointslice.util import (
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    LAST_CHANGE_TRIGGER_TIME,
    new_endpoint_slice,
    placeholder_slice_equal,
    pod_to_endpoint,
)

from .fakes import (
    CONTROLLER_NAME,
    FakeSliceClient,
    expected_metrics,
    lengths,
    metric_changes,
    metric_snapshot,
    new_empty_slice,
    new_pod,
    new_reconciler,
    new_service,
    node,
)

NS = "test"
TRIGGER = 1_700_000_000.0
TRIGGER_TEXT = "2023-11-14T22:13:20Z"
HEADLESS = "service.kubernetes.io/headless"


def pods(count: int) -> list[dict[str, Any]]:
    return [new_pod(i, NS, ready=i % 3 != 0) for i in range(count)]


def endpoints_of(pod_list: list[dict[str, Any]], service: dict[str, Any]) -> list[dict[str, Any]]:
    return [pod_to_endpoint(p, {}, service, "IPv4") for p in pod_list]


async def test_reconcile_empty() -> None:
    """TestReconcileEmpty: no pods still gets a placeholder slice."""
    client, before = FakeSliceClient(), metric_snapshot()
    svc = new_service()
    r = new_reconciler(client)
    await r.reconcile(svc, [], [], TRIGGER)
    assert client.verbs() == ["create"]
    [slice_] = client.list()
    assert slice_["metadata"]["name"].startswith("foo")
    assert slice_["metadata"]["labels"][LABEL_SERVICE_NAME] == "foo"
    assert (slice_["ports"], slice_["endpoints"]) == ([], [])
    assert r.tracker.generations_for(slice_) == {slice_["metadata"]["uid"]: 1}
    assert metric_changes(before) == expected_metrics(1, 1, 0, created=1, changed_per_sync=1)


def _ready_endpoint(address: str, **extra: Any) -> dict[str, Any]:
    return {"addresses": [address], "conditions": {"ready": True, "serving": True, "terminating": False},
            "zone": "us-central1-a", "nodeName": "node-1",
            "targetRef": {"kind": "Pod", "namespace": NS, "name": "pod1"}, **extra}


def _svc(**spec: Any) -> dict[str, Any]:
    svc = new_service()
    svc["spec"].update(spec)
    return svc


def _svc_labels(labels: dict[str, str]) -> dict[str, Any]:
    svc = new_service()
    svc["metadata"]["labels"] = labels
    return svc


V4 = {"IPv4": _ready_endpoint("1.2.3.4")}
V6 = {"IPv6": _ready_endpoint("1234::5678:0:0:9abc:def0")}
BASE_LABELS = {LABEL_MANAGED_BY: CONTROLLER_NAME, LABEL_SERVICE_NAME: "foo"}
BAD_LABELS = {LABEL_SERVICE_NAME: "bad", LABEL_MANAGED_BY: "actor", HEADLESS: "invalid"}


@pytest.mark.parametrize(("service", "expected", "labels"), [
    pytest.param(_svc(clusterIP="10.0.0.10", ipFamilies=None), V4, BASE_LABELS, id="no-family-service"),
    pytest.param(_svc(), V4, {**BASE_LABELS, HEADLESS: ""}, id="ipv4"),
    pytest.param(_svc(clusterIP="1.1.1.1"), V4, BASE_LABELS, id="ipv4-clusterip"),
    pytest.param(_svc_labels({"foo": "bar"}), V4, {**BASE_LABELS, "foo": "bar", HEADLESS: ""}, id="ipv4-labels"),
    pytest.param(_svc_labels(BAD_LABELS), V4, {**BASE_LABELS, HEADLESS: ""}, id="ipv4-bad-labels"),
    pytest.param(_svc(ipFamilies=["IPv6"]), V6, {**BASE_LABELS, HEADLESS: ""}, id="ipv6"),
    pytest.param(_svc(clusterIP="1234::5678:0000:0000:9abc:def1", ipFamilies=["IPv6"]), V6, BASE_LABELS,
                 id="ipv6-clusterip"),
    pytest.param(_svc(ipFamilies=["IPv4", "IPv6"], clusterIP="10.0.0.10", clusterIPs=["10.0.0.10", "2000::1"]),
                 {**V4, **V6}, BASE_LABELS, id="dualstack-service"),
])
async def test_reconcile_1_pod(service: dict[str, Any], expected: dict[str, dict[str, Any]],
                               labels: dict[str, str]) -> None:
    """TestReconcile1Pod: one pod, one slice per address type with the right endpoint, labels and trigger time."""
    pod = new_pod(1, NS)
    pod["status"]["podIPs"] = [{"ip": "1.2.3.4"}, {"ip": "1234::5678:0000:0000:9abc:def0"}]
    pod["spec"]["hostname"] = "example-hostname"
    client, before = FakeSliceClient(), metric_snapshot()
    r = new_reconciler(client, [node("node-1", zone="us-central1-a")])
    await r.reconcile(service, [pod], [], TRIGGER)
    assert len(client.actions) == len(expected)
    slices = client.list()
    assert len(slices) == len(expected)
    for slice_ in slices:
        assert slice_["metadata"]["name"].startswith("foo")
        assert slice_["metadata"]["labels"] == labels
        assert slice_["metadata"]["annotations"][LAST_CHANGE_TRIGGER_TIME] == TRIGGER_TEXT
        assert slice_["endpoints"] == [expected[slice_["addressType"]]]
        assert r.tracker.generations_for(slice_) is not None
        assert r.tracker.generations_for(slice_)[slice_["metadata"]["uid"]] == 1  # type: ignore[index]
    families = service["spec"].get("ipFamilies") or ()
    assert metric_changes(before) == expected_metrics(
        len(expected), len(expected), len(expected), added=len(expected), created=len(expected),
        changed_per_sync=len(families) or 1)


def _placeholder() -> dict[str, Any]:
    return new_endpoint_slice(new_service(), [], "IPv4", CONTROLLER_NAME) | {
        "metadata": new_endpoint_slice(new_service(), [], "IPv4", CONTROLLER_NAME)["metadata"] | {"name": "foo-x"}}


def _labelled_empty_slice() -> dict[str, Any]:
    slice_ = new_empty_slice(1, new_service())
    slice_["metadata"]["labels"] = {"bar": "baz"}
    return slice_


@pytest.mark.parametrize(("existing", "want_update", "want_metrics"), [
    pytest.param(None, True, expected_metrics(1, 1, 0, created=1, changed_per_sync=1), id="no-existing-placeholder"),
    pytest.param(_placeholder(), False, expected_metrics(1, 1, 0), id="existing-placeholder-same"),
    pytest.param(_labelled_empty_slice(), True, expected_metrics(1, 1, 0, updated=1, changed_per_sync=1),
                 id="existing-placeholder-different"),
])
async def test_reconcile_1_endpoint_slice(existing: dict[str, Any] | None, want_update: bool,
                                          want_metrics: dict[str, float]) -> None:
    """TestReconcile1EndpointSlice: an identical placeholder is left alone, a different one rewritten."""
    client, before = FakeSliceClient(), metric_snapshot()
    existing_slices = [existing] if existing is not None else []
    client.seed(existing_slices)
    r = new_reconciler(client)
    await r.reconcile(new_service(), [], existing_slices, TRIGGER)
    assert len(client.actions) == (1 if want_update else 0)
    slices = client.list()
    assert len(slices) == 1
    assert slices[0]["metadata"]["name"].startswith("foo")
    assert slices[0]["ports"] == [] or not want_update
    assert metric_changes(before) == want_metrics


_EMPTY: dict[str, Any] = {}


@pytest.mark.parametrize(("x", "y", "want"), [
    pytest.param(None, None, True, id="both-nil"),
    pytest.param(_EMPTY, None, False, id="y-nil"),
    pytest.param(None, _EMPTY, False, id="x-nil"),
    pytest.param(_EMPTY, _EMPTY, True, id="both-empty"),
    pytest.param({"metadata": {"name": "foo"}}, {"metadata": {"name": "bar"}}, True, id="only-name-differs"),
    pytest.param({"metadata": {"labels": {"foo": "true"}}}, {"metadata": {"labels": {"bar": "true"}}}, False,
                 id="only-labels-differ"),
    pytest.param({"metadata": {"creationTimestamp": "1970-01-01T00:00:01Z"}},
                 {"metadata": {"creationTimestamp": "1970-01-01T00:00:02Z"}}, True, id="creation-time-differs"),
    pytest.param({"addressType": "IPv4"}, {"addressType": "IPv6"}, False, id="differs-beyond-metadata"),
])
def test_placeholder_slice_compare(x: dict[str, Any] | None, y: dict[str, Any] | None, want: bool) -> None:
    """TestPlaceHolderSliceCompare."""
    assert placeholder_slice_equal(x, y) is want


async def test_reconcile_publish_not_ready_addresses() -> None:
    """TestReconcile1EndpointSlicePublishNotReadyAddresses: every endpoint ready when not-ready ones are
    published."""
    client = FakeSliceClient()
    svc = _svc(publishNotReadyAddresses=True)
    await new_reconciler(client).reconcile(svc, pods(50), [], TRIGGER)
    assert client.verbs() == ["create"]
    slices = client.list()
    assert lengths(slices) == [50]
    assert all(e["conditions"]["ready"] for s in slices for e in s["endpoints"])


async def test_reconcile_many_pods() -> None:
    """TestReconcileManyPods: 250 pods -> three creates of 100, 100 and 50."""
    client, before = FakeSliceClient(), metric_snapshot()
    await new_reconciler(client).reconcile(new_service(), pods(250), [], TRIGGER)
    assert client.verbs() == ["create"] * 3
    assert lengths(client.list()) == [50, 100, 100]
    assert metric_changes(before) == expected_metrics(3, 3, 250, added=250, created=3, changed_per_sync=3)


def _preexisting(pod_list: list[dict[str, Any]], svc: dict[str, Any]) -> list[dict[str, Any]]:
    """Two slices holding every 4th pod from 1 and from 3 (upstream's "approximately 1/4 in each")."""
    first, second = new_empty_slice(1, svc), new_empty_slice(2, svc)
    first["endpoints"] = endpoints_of(pod_list[1:len(pod_list) - 4:4], svc)
    second["endpoints"] = endpoints_of(pod_list[3:len(pod_list) - 4:4], svc)
    return [first, second]


async def test_reconcile_some_preexisting() -> None:
    """TestReconcileEndpointSlicesSomePreexisting: 127 to add -> one new full slice and 27 into the fuller."""
    client, before, svc = FakeSliceClient(), metric_snapshot(), new_service()
    pod_list = pods(250)
    existing = _preexisting(pod_list, svc)
    frozen = copy.deepcopy(existing)
    client.seed(existing)
    await new_reconciler(client).reconcile(svc, pod_list, existing, TRIGGER)
    assert client.verbs() == ["create", "update"]
    assert lengths(client.list()) == [61, 89, 100]
    assert metric_changes(before) == expected_metrics(3, 3, 250, added=127, created=1, updated=1,
                                                      changed_per_sync=2)
    assert existing == frozen  # the cache was not mutated


async def test_reconcile_some_preexisting_worse_allocation() -> None:
    """TestReconcileEndpointSlicesSomePreexistingWorseAllocation: 152 to add -> two creates, no updates."""
    client, before, svc = FakeSliceClient(), metric_snapshot(), new_service()
    pod_list = pods(300)
    existing = _preexisting(pod_list, svc)
    frozen = copy.deepcopy(existing)
    client.seed(existing)
    await new_reconciler(client).reconcile(svc, pod_list, existing, TRIGGER)
    assert client.verbs() == ["create", "create"]
    assert lengths(client.list()) == [52, 74, 74, 100]
    assert metric_changes(before) == expected_metrics(3, 4, 300, added=152, created=2, changed_per_sync=2)
    assert existing == frozen


@pytest.mark.parametrize("change", [
    pytest.param("port", id="service-port-changes"),
    pytest.param("labels", id="service-labels-change"),
])
async def test_reconcile_slices_updating(change: str) -> None:
    """TestReconcileEndpointSlicesUpdating / ServicesLabelsUpdating: every slice updated in place, no
    create/delete."""
    client, svc = FakeSliceClient(), new_service()
    pod_list = pods(250)
    r = new_reconciler(client)
    await r.reconcile(svc, pod_list, [], TRIGGER)
    slices = client.list()
    assert lengths(slices) == [50, 100, 100]
    svc = copy.deepcopy(svc)
    if change == "port":
        svc["spec"]["ports"][0]["targetPort"] = 81
    else:
        svc["metadata"]["labels"] = {"foo": "bar"}
    await r.reconcile(svc, pod_list, slices, TRIGGER)
    assert client.verbs() == ["create"] * 3 + ["update"] * 3
    new_slices = client.list()
    assert lengths(new_slices) == [50, 100, 100]
    if change == "labels":
        assert all(s["metadata"]["labels"]["foo"] == "bar" for s in new_slices)
    else:
        assert all(s["ports"][0]["port"] == 81 for s in new_slices)


async def test_reconcile_services_reserved_labels() -> None:
    """TestReconcileEndpointSlicesServicesReservedLabels: reserved labels on the Service change nothing."""
    client, svc = FakeSliceClient(), new_service()
    pod_list = pods(250)
    r = new_reconciler(client)
    await r.reconcile(svc, pod_list, [], TRIGGER)
    slices = client.list()
    svc = copy.deepcopy(svc)
    svc["metadata"]["labels"] = dict(BAD_LABELS)
    await r.reconcile(svc, pod_list, slices, TRIGGER)
    assert client.verbs() == ["create"] * 3
    assert lengths(client.list()) == [50, 100, 100]


async def test_reconcile_recycling() -> None:
    """TestReconcileEndpointSlicesRecycling: 10 slices of 30 repack into 3 full ones when the port changes."""
    client, before, svc = FakeSliceClient(), metric_snapshot(), new_service()
    pod_list = pods(300)
    existing = []
    for i in range(10):
        slice_ = new_empty_slice(i, svc)
        slice_["endpoints"] = endpoints_of(pod_list[i * 30:(i + 1) * 30], svc)
        existing.append(slice_)
    frozen = copy.deepcopy(existing)
    client.seed(existing)
    r = new_reconciler(client)
    await r.reconcile(svc, pod_list, existing, TRIGGER)
    assert client.actions == []  # everything is where it should be: no repacking for its own sake
    svc = copy.deepcopy(svc)
    svc["spec"]["ports"][0]["targetPort"] = 81
    await r.reconcile(svc, pod_list, existing, TRIGGER)
    assert sorted(client.verbs()) == ["delete"] * 7 + ["update"] * 3
    assert lengths(client.list()) == [100, 100, 100]
    assert metric_changes(before) == expected_metrics(3, 3, 300, added=300, updated=3, deleted=7,
                                                      changed_per_sync=10)
    assert existing == frozen


async def test_reconcile_update_packing() -> None:
    """TestReconcileEndpointSlicesUpdatePacking: new endpoints go to the fuller of the slices being updated."""
    client, before, svc = FakeSliceClient(), metric_snapshot(), new_service()
    first, second = new_empty_slice(1, svc), new_empty_slice(2, svc)
    pod_list = [new_pod(i, NS) for i in range(80)] + [new_pod(i, NS) for i in range(100, 120)]
    first["endpoints"] = endpoints_of(pod_list[:80], svc)
    second["endpoints"] = endpoints_of(pod_list[80:], svc)
    existing = [first, second]
    frozen = copy.deepcopy(existing)
    client.seed(existing)
    for i, pod in enumerate(pod_list):
        if i % 10 == 0:  # an endpoint of each slice changes, so both are updated
            pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    pod_list += [new_pod(i, NS) for i in range(200, 215)]
    await new_reconciler(client).reconcile(svc, pod_list, existing, TRIGGER)
    assert client.verbs() == ["update", "update"]
    assert metric_changes(before) == expected_metrics(2, 2, 115, added=15, updated=2, changed_per_sync=2)
    assert lengths(client.list()) == [20, 95]
    assert existing == frozen


async def test_reconcile_replace_deprecated_address_type() -> None:
    """TestReconcileEndpointSlicesReplaceDeprecated: slices of the old "IP" type are replaced, packed anew."""
    client, svc = FakeSliceClient(), new_service()
    first, second = new_empty_slice(1, svc, address_type="IP"), new_empty_slice(2, svc, address_type="IP")
    pod_list = [new_pod(i, NS) for i in range(80)] + [new_pod(i, NS) for i in range(100, 150)]
    first["endpoints"] = endpoints_of(pod_list[:80], {"spec": {}})
    second["endpoints"] = endpoints_of(pod_list[80:], {"spec": {}})
    existing = [first, second]
    client.seed(existing)
    frozen = copy.deepcopy(existing)
    await new_reconciler(client).reconcile(svc, pod_list, existing, TRIGGER)
    assert client.verbs()[-2:] == ["delete", "delete"]
    slices = client.list()
    assert lengths(slices) == [30, 100]
    assert {s["addressType"] for s in slices} == {"IPv4"}
    assert existing == frozen


@pytest.mark.parametrize(("owned", "expect_changes"), [
    pytest.param(True, False, id="slice-owned-by-service"),
    pytest.param(False, True, id="slice-owned-by-other-service-uid"),
])
async def test_reconcile_recreation(owned: bool, expect_changes: bool) -> None:
    """TestReconcileEndpointSlicesRecreation: a slice of an older Service of this name is replaced."""
    client, svc = FakeSliceClient(), new_service()
    slice_ = new_empty_slice(1, svc)
    pod = new_pod(1, NS)
    slice_["endpoints"] = endpoints_of([pod], {"spec": {}})
    if not owned:
        slice_["metadata"]["ownerReferences"][0]["uid"] = "different"
    client.seed([slice_])
    frozen = copy.deepcopy(slice_)
    await new_reconciler(client).reconcile(svc, [pod], [slice_], TRIGGER)
    if expect_changes:
        assert client.verbs() == ["create", "delete"]
        assert len(client.list()) == 1
    else:
        assert client.actions == []
    assert slice_ == frozen


async def test_reconcile_named_ports() -> None:
    """TestReconcileEndpointSlicesNamedPorts: a named port resolving five ways gives five slices."""
    client, before = FakeSliceClient(), metric_snapshot()
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "named-port-example", "namespace": NS, "uid": "named"},
           "spec": {"ports": [{"targetPort": "http", "protocol": "TCP"}], "selector": {"foo": "bar"},
                    "ipFamilies": ["IPv4"]}}
    pod_list = pods(300)
    for i, pod in enumerate(pod_list):
        pod["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8080 + i % 5, "protocol": "TCP"}]
    await new_reconciler(client).reconcile(svc, pod_list, [], TRIGGER)
    assert client.verbs() == ["create"] * 5
    assert metric_changes(before) == expected_metrics(5, 5, 300, added=300, created=5, changed_per_sync=5)
    slices = client.list()
    assert lengths(slices) == [60] * 5
    assert sorted((s["addressType"], s["ports"][0]["port"]) for s in slices) == [
        ("IPv4", 8080 + i) for i in range(5)]
    assert all(s["ports"] == [{"name": "", "port": s["ports"][0]["port"], "protocol": "TCP"}] for s in slices)


@pytest.mark.parametrize(("max_endpoints", "expected_lengths", "slices"), [
    pytest.param(50, [50, 50, 50, 50, 50], 5, id="max-50"),
    pytest.param(80, [10, 80, 80, 80], 4, id="max-80"),
    pytest.param(150, [100, 150], 2, id="max-150"),
    pytest.param(250, [250], 1, id="max-250"),
    pytest.param(500, [250], 1, id="max-500"),
])
async def test_reconcile_max_endpoints_per_slice(max_endpoints: int, expected_lengths: list[int],
                                                 slices: int) -> None:
    """TestReconcileMaxEndpointsPerSlice."""
    client, before = FakeSliceClient(), metric_snapshot()
    await new_reconciler(client, max_endpoints=max_endpoints).reconcile(new_service(), pods(250), [], TRIGGER)
    assert lengths(client.list()) == expected_lengths
    assert metric_changes(before) == expected_metrics(slices, slices, 250, added=250, created=slices,
                                                      changed_per_sync=slices)


async def test_reconcile_metrics() -> None:
    """TestReconcileEndpointSlicesMetrics: half the pods go -> one update, 10 endpoints removed."""
    client, before, svc = FakeSliceClient(), metric_snapshot(), new_service()
    pod_list = [new_pod(i, NS) for i in range(20)]
    r = new_reconciler(client)
    await r.reconcile(svc, pod_list, [], TRIGGER)
    assert client.verbs() == ["create"]
    assert metric_changes(before) == expected_metrics(1, 1, 20, added=20, created=1, changed_per_sync=1)
    await r.reconcile(svc, pod_list[:10], client.list(), TRIGGER)
    assert metric_changes(before) == expected_metrics(1, 1, 10, added=20, removed=10, created=1, updated=1,
                                                      changed_per_sync=2)


@pytest.mark.parametrize(("deleting", "create", "update", "delete", "want_created", "want_updated", "want_deleted"), [
    pytest.param(False, True, True, False, True, True, True, id="create-update"),
    pytest.param(True, True, True, False, False, True, True, id="create-update-service-deleting"),
    pytest.param(False, True, True, True, False, True, True, id="create-update-delete-recycling"),
    pytest.param(True, True, True, True, False, True, True, id="create-update-delete-service-deleting-recycling"),
    pytest.param(True, False, True, True, False, True, False, id="update-delete-service-deleting"),
])
async def test_finalize_service_deletion_timestamp(deleting: bool, create: bool, update: bool, delete: bool,
                                                   want_created: bool, want_updated: bool,
                                                   want_deleted: bool) -> None:
    """TestReconcilerFinalizeSvcDeletionTimestamp: no creates for a Service being deleted; updates and deletes
    go on (a create paired with a delete is an update of the slice to delete)."""
    client, svc = FakeSliceClient(), new_service()
    if deleting:
        svc["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    base = new_empty_slice(0, svc)
    to_create = copy.deepcopy(base) | {"metadata": base["metadata"] | {"name": "to-create"}}
    to_update = copy.deepcopy(base) | {"metadata": base["metadata"] | {"name": "to-update"}}
    to_delete = copy.deepcopy(base) | {"metadata": base["metadata"] | {"name": "to-delete"}}
    client.seed([to_update, to_delete])
    to_update = client.list()[0]
    to_update["endpoints"] = [{"addresses": ["10.2.3.4"]}]
    error = await new_reconciler(client).finalize(
        svc, [to_create] if create else [], [to_update] if update else [], [to_delete] if delete else [], TRIGGER)
    assert error is None
    names = {s["metadata"]["name"]: s for s in client.list()}
    assert ("to-create" in names) is want_created
    assert ("to-update" in names) is want_updated
    assert ("to-delete" in names) is want_deleted
    assert len(names["to-update"]["endpoints"]) == 1


def _missing_node_slice() -> dict[str, Any]:
    svc = new_service()
    slice_ = new_empty_slice(1, svc)
    p0, p1 = new_pod(0, NS), new_pod(1, NS)
    p1["spec"]["nodeName"] = "node-1"
    p0["spec"]["nodeName"] = "node-0"
    slice_["endpoints"] = [pod_to_endpoint(p0, node("node-0"), svc, "IPv4"),
                           pod_to_endpoint(p1, node("node-1"), svc, "IPv4")]
    return slice_


@pytest.mark.parametrize(("publish", "nodes", "existing", "want", "expect_error"), [
    pytest.param(False, ["node-0"], None, expected_metrics(1, 1, 1, added=1, created=1, changed_per_sync=1), True,
                 id="create-publish-not-ready-false"),
    pytest.param(True, ["node-0"], None, expected_metrics(1, 1, 2, added=2, created=1, changed_per_sync=1), False,
                 id="create-publish-not-ready-true"),
    pytest.param(False, ["node-0"], _missing_node_slice(),
                 expected_metrics(1, 1, 1, removed=1, updated=1, changed_per_sync=1), True,
                 id="update-publish-not-ready-false"),
    pytest.param(True, [], _missing_node_slice(), expected_metrics(1, 1, 2), False,
                 id="update-publish-not-ready-true-all-nodes-missing"),
    pytest.param(True, ["node-0"], _missing_node_slice(), expected_metrics(1, 1, 2), False,
                 id="update-publish-not-ready-true"),
    pytest.param(False, [], _missing_node_slice(), expected_metrics(1, 1, 0, removed=2, updated=1,
                                                                    changed_per_sync=1), True,
                 id="update-publish-not-ready-false-no-nodes"),
])
async def test_reconcile_pod_missing_node(publish: bool, nodes: list[str], existing: dict[str, Any] | None,
                                          want: dict[str, float], expect_error: bool) -> None:
    """TestReconcilerPodMissingNode: a pod on an unknown node is left out (and the sync fails, to be retried)
    unless not-ready addresses are published."""
    client, before = FakeSliceClient(), metric_snapshot()
    svc = _svc(publishNotReadyAddresses=publish)
    pod_list = [new_pod(0, NS), new_pod(1, NS)]
    pod_list[0]["spec"]["nodeName"] = "node-0"
    existing_slices = [copy.deepcopy(existing)] if existing is not None else []
    client.seed(existing_slices)
    r = new_reconciler(client, [node(n) for n in nodes])
    if expect_error:
        with pytest.raises(ReconcileError, match="Node node-1 Not Found"):
            await r.reconcile(svc, pod_list, existing_slices, TRIGGER)
    else:
        await r.reconcile(svc, pod_list, existing_slices, TRIGGER)
    assert len(client.list()) == want["actual_slices"]
    assert metric_changes(before) == want
