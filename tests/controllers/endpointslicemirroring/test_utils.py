"""Upstream's utils and reconciler-helper tables (``utils_test.go``: TestNewEndpointSlice, TestAddressToEndpoint;
``reconciler_helpers_test.go``: TestRecycleSlices), plus the metrics cache's figures (``metrics/cache_test.go``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.endpointslicemirroring import CONTROLLER_NAME
from controller_manager.controllers.endpointslicemirroring.metrics import (
    DESIRED_ENDPOINT_SLICES,
    ENDPOINTS_DESIRED,
    NUM_ENDPOINT_SLICES,
    EfficiencyInfo,
    MetricsCache,
)
from controller_manager.controllers.endpointslicemirroring.reconciler import SlicesByAction, recycle_slices
from controller_manager.controllers.endpointslicemirroring.utils import (
    addr_type_port_map_key,
    address_to_endpoint,
    ep_ports_to_eps_ports,
    new_endpoint_slice,
)
from controller_manager.controllerutil.endpoints import LAST_CHANGE_TRIGGER_TIME
from controller_manager.controllerutil.endpointslice import LABEL_MANAGED_BY, LABEL_SERVICE_NAME

Obj = dict[str, Any]
PORTS = [{"name": "foo", "protocol": "TCP"}]
OWNER = {"apiVersion": "v1", "kind": "Endpoints", "name": "foo", "uid": "uid-foo", "controller": True,
         "blockOwnerDeletion": True}


@pytest.mark.parametrize(("labels", "annotations", "want_labels", "want_annotations"), [
    (None, None, {}, {}),
    (None, {"foo": "bar"}, {}, {"foo": "bar"}),
    ({"foo": "bar"}, None, {"foo": "bar"}, {}),
    ({"foo": "bar"}, {"foo2": "bar2"}, {"foo": "bar"}, {"foo2": "bar2"}),
    ({"foo": "bar"}, {"foo2": "bar2", LAST_CHANGE_TRIGGER_TIME: "date"}, {"foo": "bar"}, {"foo2": "bar2"}),
], ids=["create slice from endpoints", "create slice from endpoints with annotations",
        "create slice from endpoints with labels", "create slice from endpoints with labels and annotations",
        "create slice from endpoints with labels and annotations triggertime"])
def test_new_endpoint_slice(labels: dict[str, str] | None, annotations: dict[str, str] | None,
                            want_labels: dict[str, str], want_annotations: dict[str, str]) -> None:
    ep: Obj = {"metadata": {"name": "foo", "namespace": "test", "uid": "uid-foo"},
               "subsets": [{"ports": [{"port": 80}]}]}
    if labels is not None:
        ep["metadata"]["labels"] = labels
    if annotations is not None:
        ep["metadata"]["annotations"] = annotations
    before = copy.deepcopy(ep)
    assert new_endpoint_slice(ep, PORTS, "IPv4", "") == {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"generateName": "foo-", "namespace": "test",
                     "labels": {**want_labels, LABEL_SERVICE_NAME: "foo", LABEL_MANAGED_BY: CONTROLLER_NAME},
                     "annotations": want_annotations, "ownerReferences": [OWNER]},
        "ports": PORTS, "addressType": "IPv4", "endpoints": [],
    }
    assert ep == before  # the Endpoints is not modified


def test_new_endpoint_slice_with_a_name_keeps_it() -> None:
    ep = {"metadata": {"name": "foo", "namespace": "test", "uid": "uid-foo"}}
    slice_ = new_endpoint_slice(ep, PORTS, "IPv6", "foo-abcde")
    assert slice_["metadata"]["name"] == "foo-abcde"
    assert "generateName" not in slice_["metadata"]
    assert slice_["addressType"] == "IPv6"


def test_address_to_endpoint() -> None:
    address = {"ip": "10.1.2.3", "hostname": "foo", "nodeName": "node-abc",
               "targetRef": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "foo"}}
    assert address_to_endpoint(address, True) == ({
        "addresses": ["10.1.2.3"], "hostname": "foo", "conditions": {"ready": True},
        "targetRef": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "foo"},
        "nodeName": "node-abc",
    }, "IPv4")


@pytest.mark.parametrize(("ip", "want"), [
    ("0010.001.002.003", ("10.1.2.3", "IPv4")),
    ("2001:0db8:0000:0000:0000:0000:0000:0001", ("2001:db8::1", "IPv6")),
    ("::ffff:10.1.2.3", ("10.1.2.3", "IPv4")),
    ("not-an-ip", None),
])
def test_address_to_endpoint_canonicalizes_ips(ip: str, want: tuple[str, str] | None) -> None:
    converted = address_to_endpoint({"ip": ip}, False)
    got = None if converted is None else (converted[0]["addresses"][0], converted[1])
    assert got == want
    if converted is not None:
        assert converted[0]["conditions"] == {"ready": False}
        assert "hostname" not in converted[0]
        assert "nodeName" not in converted[0]


def test_ports_convert_and_key_alike_in_any_order() -> None:
    ports = [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP",
                                                               "appProtocol": "dns"}]
    converted = ep_ports_to_eps_ports(ports)
    assert converted == ports
    assert addr_type_port_map_key(converted, "IPv4") == addr_type_port_map_key(converted[::-1], "IPv4")
    assert addr_type_port_map_key(converted, "IPv4") != addr_type_port_map_key(converted, "IPv6")


def simple(name: str, ip: str, address_type: str = "IPv4") -> Obj:
    """``simpleEndpointSlice``."""
    return {"metadata": {"name": name}, "addressType": address_type, "endpoints": [{"addresses": [ip]}]}


def created(name: str, ip: str, address_type: str = "IPv4") -> Obj:
    """A slice to create: named by generateName only, as the reconciler builds them (``name`` is kept aside to
    tell them apart in the expectations)."""
    return {"metadata": {"generateName": "svc-", "x-test-name": name}, "addressType": address_type,
            "endpoints": [{"addresses": [ip]}]}


V6A, V6B = "2001:db8:1111:3333:4444:5555:6666:7777", "2001:db8:2222:3333:4444:5555:6666:7777"

RECYCLE_CASES = [
    ("Empty slices", SlicesByAction(), ([], [], [])),
    ("1 to create and 1 to delete",
     SlicesByAction(to_create=[created("foo", "10.1.2.3")], to_delete=[simple("bar", "10.2.3.4")]),
     ([], [("bar", "10.1.2.3")], [])),
    ("1 to create, update, and delete",
     SlicesByAction(to_create=[created("foo", "10.1.2.3")], to_update=[simple("baz", "10.2.3.4")],
                    to_delete=[simple("bar", "10.3.4.5")]),
     ([], [("bar", "10.1.2.3"), ("baz", "10.2.3.4")], [])),
    ("2 to create and 1 to delete",
     SlicesByAction(to_create=[created("foo1", "10.1.2.3"), created("foo2", "10.3.4.5")],
                    to_delete=[simple("bar", "10.2.3.4")]),
     ([("foo2", "10.3.4.5")], [("bar", "10.1.2.3")], [])),
    ("1 to create and 2 to delete",
     SlicesByAction(to_create=[created("foo1", "10.1.2.3")],
                    to_delete=[simple("bar1", "10.2.3.4"), simple("bar2", "10.3.4.5")]),
     ([], [("bar1", "10.1.2.3")], [("bar2", "10.3.4.5")])),
    ("1 to create and 1 to delete for each IP family",
     SlicesByAction(to_create=[created("foo-v4", "10.1.2.3"), created("foo-v6", V6A, "IPv6")],
                    to_delete=[simple("bar-v4", "10.2.2.3"), simple("bar-v6", V6B, "IPv6")]),
     ([], [("bar-v4", "10.1.2.3"), ("bar-v6", V6A)], [])),
    ("1 to create and 1 to delete, wrong IP family",
     SlicesByAction(to_create=[created("foo-v4", "10.1.2.3")], to_delete=[simple("bar-v6", V6B, "IPv6")]),
     ([("foo-v4", "10.1.2.3")], [], [("bar-v6", V6B)])),
]


def _summary(slices: list[Any]) -> list[tuple[str, str]]:
    out = []
    for s in slices:
        m = s["metadata"]
        out.append((m.get("name") or m["x-test-name"], s["endpoints"][0]["addresses"][0]))
    return sorted(out)


@pytest.mark.parametrize(("start", "want"), [(c[1], c[2]) for c in RECYCLE_CASES], ids=[c[0] for c in RECYCLE_CASES])
def test_recycle_slices(start: SlicesByAction, want: tuple[list[Any], list[Any], list[Any]]) -> None:
    slices = copy.deepcopy(start)
    recycle_slices(slices)
    assert (_summary(slices.to_create), _summary(slices.to_update), _summary(slices.to_delete)) == want
    for s in slices.to_update:
        assert "generateName" not in s["metadata"]  # a recycled create is an update of a named slice


def _gauges() -> tuple[float, float, float]:
    return (ENDPOINTS_DESIRED._value.get(), NUM_ENDPOINT_SLICES._value.get(), DESIRED_ENDPOINT_SLICES._value.get())


def test_metrics_cache_totals() -> None:
    """``metrics/cache_test.go``: endpoints and slices add up over Endpoints; desired slices are ceil(n/max)."""
    cache = MetricsCache(max_endpoints_per_subset=1000)
    cache.update_endpoint_port_cache(("ns", "a"), {("IPv4", ()): EfficiencyInfo(2000, 3),
                                                   ("IPv6", ()): EfficiencyInfo(1, 1)})
    cache.update_endpoint_port_cache(("ns", "b"), {("IPv4", ()): EfficiencyInfo(0, 0)})
    assert _gauges() == (2001, 4, 3)
    cache.update_endpoint_port_cache(("ns", "a"), {("IPv4", ()): EfficiencyInfo(10, 1)})
    assert _gauges() == (10, 1, 1)
    cache.delete_endpoints(("ns", "a"))
    cache.delete_endpoints(("ns", "unknown"))
    assert _gauges() == (0, 0, 0)
