"""Upstream's TestReconcile table (``pkg/controller/endpointslicemirroring/reconciler_test.go``), against the
recording in-memory slice client, with its checks of every slice written (``expectEndpointSlices``)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller_manager.api.endpoints import repack_subsets
from controller_manager.controllers.endpointslicemirroring import CONTROLLER_NAME
from controller_manager.controllers.endpointslicemirroring.utils import (
    LAST_APPLIED_CONFIG_ANNOTATION,
    address_to_endpoint,
    ep_ports_to_eps_ports,
)
from controller_manager.controllerutil.endpoints import LAST_CHANGE_TRIGGER_TIME
from controller_manager.controllerutil.endpointslice import LABEL_MANAGED_BY, LABEL_SERVICE_NAME, port_map_key

from .fakes import (
    HTTP,
    HTTPS_UDP,
    FakeSliceClient,
    addr,
    endpoints,
    metric_changes,
    metric_snapshot,
    new_reconciler,
    port,
    slice_,
    subset,
)

Obj = dict[str, Any]
UID = "d8f2c1f6-5285-4b3c-b3c1-9b89f9e7ed7a"
LAST_APPLIED = '{"apiVersion":"v1","kind":"Endpoints","subsets":[]}'

TWO_PORTS = [HTTP, HTTPS_UDP]
OTHER_PORTS = [port("http", 3000), port("https", 3001, "UDP")]
TWO_ADDRS = [addr("10.0.0.1", "pod-1", "node-1"), addr("10.0.0.2", "pod-2", "node-2")]
THREE_ADDRS = [addr("10.0.1.1", "pod-11", "node-1"), addr("10.0.1.2", "pod-12", "node-2"),
               addr("10.0.1.3", "pod-13", "node-3")]
TWO_SUBSETS = [subset(TWO_PORTS, TWO_ADDRS), subset(OTHER_PORTS, THREE_ADDRS)]
ONE = [subset([HTTP], [addr("10.0.0.1", "pod-1")])]
READY_EP = {"addresses": ["10.0.0.1"], "hostname": "pod-1", "conditions": {"ready": True}}


def metrics(**values: int) -> dict[str, int]:
    keys = ("desired_slices", "actual_slices", "desired_endpoints", "added", "updated", "removed", "skipped",
            "created", "updated_slices", "deleted")
    return {k: values.get(k, 0) for k in keys}


def created(n: int, endpoints_: int, added: int | None = None, **more: int) -> dict[str, int]:
    return metrics(desired_slices=n, actual_slices=n, desired_endpoints=endpoints_,
                   added=endpoints_ if added is None else added, created=n, **more)


@dataclass
class Case:
    name: str
    subsets: list[Obj]
    existing: list[Obj] = field(default_factory=list)
    num_slices: int = 0
    actions: int = 0
    metrics: dict[str, int] | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str = ""
    deletion_pending: bool = False
    max_per_subset: int = 1000


CASES = [
    Case("Endpoints with no subsets", [], metrics=metrics()),
    Case("Endpoints with no addresses", [subset([HTTP])], metrics=metrics()),
    Case("Endpoints with 1 subset, port, and address", [subset([HTTP], [addr("10.0.0.1", "pod-1", "node-1")])],
         num_slices=1, actions=1, metrics=created(1, 1)),
    Case("Endpoints with 2 subset, different port and address",
         [subset([HTTP], [addr("10.0.0.1", "pod-1", "node-1")]),
          subset([port("https", 443)], [addr("10.0.0.2", "pod-2", "node-1")])],
         num_slices=2, actions=2, metrics=created(2, 2)),
    Case("Endpoints with 2 subset, different port and same address",
         [subset([HTTP], [addr("10.0.0.1", "pod-1", "node-1")]),
          subset([port("https", 443)], [addr("10.0.0.1", "pod-1", "node-1")])],
         num_slices=1, actions=1, metrics=created(1, 1)),
    Case("Endpoints with 2 subset, different address and same port",
         [subset([HTTP], [addr("10.0.0.1", "pod-1", "node-1")]), subset([HTTP], [addr("10.0.0.2", "pod-2", "node-1")])],
         num_slices=1, actions=1, metrics=created(1, 2)),
    Case("Endpoints with 1 subset, port, and address, pending deletion",
         [subset([HTTP], [addr("10.0.0.1", "pod-1", "node-1")])], deletion_pending=True),
    Case("Endpoints with 1 subset, port, and address and existing slice with same fields", ONE,
         existing=[slice_("test-ep-1", [HTTP], [READY_EP], owner_uid=UID)], uid=UID, num_slices=1, actions=0),
    Case("Endpoints with 1 subset, port, and address and existing slice with same fields but different "
         "OwnerReferences", ONE,
         existing=[slice_("test-ep-1", [HTTP], [READY_EP], owner_uid="fb91e798-1875-4857-b5eb-e2c878157b4d")],
         uid=UID, num_slices=1, actions=1),
    Case("Endpoints with 1 subset, port, and address and existing slice with an additional annotation", ONE,
         existing=[slice_("test-ep-1", [HTTP], [READY_EP], annotations={"foo": "bar"})], num_slices=1, actions=1),
    Case("Endpoints with 1 subset, port, label and address and existing slice with same fields but the label", ONE,
         existing=[slice_("test-ep-1", [HTTP], [READY_EP], annotations={"foo": "bar"})], labels={"foo": "bar"},
         num_slices=1, actions=1),
    Case("Endpoints with 1 subset, 2 ports, and 2 addresses", [subset(TWO_PORTS, TWO_ADDRS)],
         num_slices=1, actions=1, metrics=created(1, 2)),
    Case("Endpoints with 1 subset, 2 ports, and 2 not ready addresses", [subset(TWO_PORTS, not_ready=TWO_ADDRS)],
         num_slices=1, actions=1, metrics=created(1, 2)),
    Case("Endpoints with 1 subset, 2 ports, and 2 ready and 2 not ready addresses",
         [subset(TWO_PORTS, [addr("10.1.1.1", "pod-11", "node-1"), addr("10.1.1.2", "pod-12", "node-2")], TWO_ADDRS)],
         num_slices=1, actions=1, metrics=created(1, 4)),
    Case("Endpoints with 2 subsets, multiple ports and addresses", TWO_SUBSETS,
         num_slices=2, actions=2, metrics=created(2, 5)),
    Case("Endpoints with 2 subsets, multiple ports and addresses, existing empty EndpointSlice", TWO_SUBSETS,
         existing=[slice_("test-ep-1", TWO_PORTS)], num_slices=2, actions=2,
         metrics=metrics(desired_slices=2, actual_slices=2, desired_endpoints=5, added=5, created=1,
                         updated_slices=1)),
    Case("Endpoints with 2 subsets, multiple ports and addresses, existing EndpointSlice with some addresses",
         TWO_SUBSETS,
         existing=[slice_("test-ep-1", TWO_PORTS, [{"addresses": ["10.0.0.2"], "hostname": "pod-2"},
                                                   {"addresses": ["10.0.0.1", "10.0.0.3"], "hostname": "pod-1"}])],
         num_slices=2, actions=2,
         metrics=metrics(desired_slices=2, actual_slices=2, desired_endpoints=5, added=4, updated=1, removed=1,
                         created=1, updated_slices=1)),
    Case("Endpoints with 2 subsets, multiple ports and addresses, existing EndpointSlice identical to subset",
         TWO_SUBSETS,
         existing=[slice_("test-ep-1", TWO_PORTS, [
             {"addresses": ["10.0.0.1"], "hostname": "pod-1", "nodeName": "node-1", "conditions": {"ready": True}},
             {"addresses": ["10.0.0.2"], "hostname": "pod-2", "nodeName": "node-2", "conditions": {"ready": True}}])],
         num_slices=2, actions=1,
         metrics=metrics(desired_slices=2, actual_slices=2, desired_endpoints=5, added=3, created=1)),
    Case("Endpoints with 2 subsets, multiple ports, and dual stack addresses",
         [subset(TWO_PORTS, [addr("2001:db8:2222:3333:4444:5555:6666:7777", "pod-1", "node-1"),
                             addr("10.0.0.2", "pod-2", "node-2")]),
          subset(OTHER_PORTS, [addr("10.0.1.1", "pod-11", "node-1"), addr("10.0.1.2", "pod-12", "node-2"),
                               addr("2001:db8:3333:4444:5555:6666:7777:8888", "pod-13", "node-3")])],
         num_slices=4, actions=4, metrics=created(4, 5)),
    Case("Endpoints with 2 subsets, multiple ports, ipv6 only addresses",
         [subset(TWO_PORTS, [addr("2001:db8:1111:3333:4444:5555:6666:7777", "pod-1", "node-1"),
                             addr("2001:db8:2222:3333:4444:5555:6666:7777", "pod-2", "node-2")]),
          subset(OTHER_PORTS, [addr("2001:db8:3333:3333:4444:5555:6666:7777", "pod-11", "node-1"),
                               addr("2001:db8:4444:3333:4444:5555:6666:7777", "pod-12", "node-2"),
                               addr("2001:db8:5555:3333:4444:5555:6666:7777", "pod-13", "node-3")])],
         num_slices=2, actions=2, metrics=created(2, 5)),
    Case("Endpoints with 2 subsets, multiple ports, some invalid addresses",
         [subset(TWO_PORTS, [addr("2001:db8:1111:3333:4444:5555:6666:7777", "pod-1", "node-1"),
                             addr("this-is-not-an-ip", "pod-2", "node-2")]),
          subset(OTHER_PORTS, [addr("this-is-also-not-an-ip", "pod-11", "node-1"),
                               addr("2001:db8:4444:3333:4444:5555:6666:7777", "pod-12", "node-2"),
                               addr("2001:db8:5555:3333:4444:5555:6666:7777", "pod-13", "node-3")])],
         num_slices=2, actions=2, metrics=created(2, 3, skipped=2)),
    Case("Endpoints with 2 subsets, multiple ports, all invalid addresses",
         [subset(TWO_PORTS, [addr("this-is-not-an-ip1", "pod-1", "node-1"),
                             addr("this-is-not-an-ip12", "pod-2", "node-2")]),
          subset(OTHER_PORTS, [addr("this-is-not-an-ip11", "pod-11", "node-1"),
                               addr("this-is-not-an-ip12", "pod-12", "node-2"),
                               addr("this-is-not-an-ip3", "pod-13", "node-3")])],
         metrics=metrics(skipped=5)),
    Case("Endpoints with 2 subsets, 1 exceeding maxEndpointsPerSubset", TWO_SUBSETS, num_slices=2, actions=2,
         max_per_subset=2, metrics=created(2, 4, skipped=1)),
    Case("The last-applied-configuration annotation should not get mirrored to created or updated endpoint slices",
         ONE, annotations={LAST_APPLIED_CONFIG_ANNOTATION: LAST_APPLIED}, num_slices=1, actions=1,
         metrics=created(1, 1)),
    Case("The last-applied-configuration annotation shouldn't get added to created endpoint slices", ONE,
         num_slices=1, actions=1, metrics=created(1, 1)),
    Case("The last-applied-configuration shouldn't get mirrored to endpoint slices when it's value is empty", ONE,
         annotations={LAST_APPLIED_CONFIG_ANNOTATION: ""}, num_slices=1, actions=1, metrics=created(1, 1)),
    Case("Annotations other than last-applied-configuration should get correctly mirrored", ONE,
         annotations={LAST_APPLIED_CONFIG_ANNOTATION: LAST_APPLIED, "foo": "bar"}, num_slices=1, actions=1,
         metrics=created(1, 1)),
    Case("Annotation mirroring should remove the last-applied-configuration annotation from existing endpoint "
         "slices", ONE,
         existing=[slice_("test-ep-1", [HTTP], [READY_EP], annotations={LAST_APPLIED_CONFIG_ANNOTATION: LAST_APPLIED})],
         num_slices=1, actions=1),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reconcile(case: Case) -> None:
    client = FakeSliceClient()
    ep = endpoints(case.subsets, labels=case.labels, annotations=case.annotations, uid=case.uid)
    if case.deletion_pending:
        ep["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    existing = copy.deepcopy(case.existing)
    for s in existing:
        s["metadata"]["labels"] = {LABEL_SERVICE_NAME: "test-ep", LABEL_MANAGED_BY: CONTROLLER_NAME}
    client.seed(existing)
    # What the reconciler sees is what the server stored (uid and generation set).
    seen = client.list()
    before = metric_snapshot()

    asyncio.run(new_reconciler(client, case.max_per_subset).reconcile(ep, seen))

    assert len(client.actions) == case.actions, client.actions
    if case.metrics is not None:
        assert {k: int(v) for k, v in metric_changes(before).items()} == case.metrics
    expect_endpoint_slices(case.num_slices, case.max_per_subset, ep, client.list())


def expect_endpoint_slices(num: int, max_per_subset: int, ep: Obj, slices: list[Obj]) -> None:
    """``expectEndpointSlices``: names, labels, annotations, and per subset and address type the endpoints."""
    assert len(slices) == num
    if num == 0:
        return
    name = ep["metadata"]["name"]
    annotations = ep["metadata"].get("annotations") or {}
    for s in slices:
        assert s["metadata"]["name"].startswith(name)
        assert s["metadata"]["labels"][LABEL_SERVICE_NAME] == name
        slice_annotations = s["metadata"].get("annotations") or {}
        assert LAST_APPLIED_CONFIG_ANNOTATION not in slice_annotations
        assert LAST_CHANGE_TRIGGER_TIME not in slice_annotations
        for key, value in annotations.items():
            if key not in (LAST_CHANGE_TRIGGER_TIME, LAST_APPLIED_CONFIG_ANNOTATION):
                assert slice_annotations.get(key) == value
    for sub in repack_subsets(ep.get("subsets") or []):
        if not sub.get("addresses") and not sub.get("notReadyAddresses"):
            continue
        key = port_map_key(ep_ports_to_eps_ports(sub.get("ports")))
        by_type: dict[str, list[Obj]] = {"IPv4": [], "IPv6": []}
        for s in slices:
            if port_map_key(s["ports"]) == key:
                by_type[s["addressType"]].extend(s["endpoints"])
        assert by_type["IPv4"] or by_type["IPv6"], f"no EndpointSlice matches subset ports {sub.get('ports')}"
        for address_type, found in by_type.items():
            expect_matching_addresses(sub, found, address_type, max_per_subset)


def expect_matching_addresses(sub: Obj, found: list[Obj], address_type: str, max_per_subset: int) -> None:
    expected: dict[str, tuple[bool, Obj]] = {}
    for field_name, ready in (("addresses", True), ("notReadyAddresses", False)):
        for address in sub.get(field_name) or ():
            converted = address_to_endpoint(address, True)
            if converted is not None and converted[1] == address_type and len(expected) < max_per_subset:
                expected[address["ip"]] = (ready, address)
    assert len(found) == len(expected)
    for endpoint in found:
        assert len(endpoint["addresses"]) == 1
        ready, address = expected[endpoint["addresses"][0]]
        assert endpoint["conditions"]["ready"] is ready
        assert endpoint.get("hostname", "") == address.get("hostname", "")
        if address.get("nodeName") is not None:
            assert endpoint.get("nodeName") == address["nodeName"]
