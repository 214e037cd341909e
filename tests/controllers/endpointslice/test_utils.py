"""Upstream's utils tables (``staging/src/k8s.io/endpointslice/utils_test.go``) and the tracker's behaviour
(``util/endpointslice_tracker.go``, ``util/trigger_time_tracker.go``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.controllers.endpointslice.util import (
    IS_HEADLESS_SERVICE,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    address_types_for_service,
    endpoint_slice_prefix,
    format_trigger_time,
    get_endpoint_ports,
    new_endpoint_slice,
    pod_to_endpoint,
    set_endpoint_slice_labels,
)
from controller_manager.controllerutil.endpoints import (
    TriggerTimeTracker,
    determine_needed_service_updates,
    pod_endpoints_changed,
)
from controller_manager.controllerutil.endpointslice import (
    EndpointSet,
    EndpointSliceTracker,
    endpoints_equal_beyond_hash,
    port_map_key,
    service_controller_key,
)

from .fakes import CONTROLLER_NAME, new_pod, new_service, node

NS = "test"


def _pod(**changes: Any) -> dict[str, Any]:
    pod = new_pod(1, NS, ready=changes.pop("ready", True), terminating=changes.pop("terminating", False))
    pod["metadata"]["uid"] = "uid-1"
    for path, value in changes.items():
        section, key = path.split("__")
        pod[section][key] = value
    return pod


def _ep(ready: bool, serving: bool, terminating: bool, **extra: Any) -> dict[str, Any]:
    return {"addresses": ["1.2.3.5"], "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
            "nodeName": "node-1", "targetRef": {"kind": "Pod", "namespace": NS, "name": "pod1", "uid": "uid-1"},
            **extra}


SVC = new_service()
SVC_PUBLISH = new_service("publishnotready") | {"spec": new_service()["spec"] | {"publishNotReadyAddresses": True}}
ZONE_NODE = node("node-1", zone="us-central1-a")


@pytest.mark.parametrize(("pod", "node_obj", "svc", "expected"), [
    pytest.param(_pod(), None, SVC, _ep(True, True, False), id="ready-pod"),
    pytest.param(_pod(), None, SVC_PUBLISH, _ep(True, True, False), id="ready-pod-publish-not-ready"),
    pytest.param(_pod(ready=False), None, SVC, _ep(False, False, False), id="unready-pod"),
    pytest.param(_pod(ready=False), None, SVC_PUBLISH, _ep(True, False, False), id="unready-pod-publish-not-ready"),
    pytest.param(_pod(), ZONE_NODE, SVC, _ep(True, True, False, zone="us-central1-a"), id="ready-pod-node-labels"),
    pytest.param(_pod(status__podIPs=[{"ip": "1.2.3.4"}, {"ip": "1234::5678:0000:0000:9abc:def0"}]), ZONE_NODE, SVC,
                 _ep(True, True, False, zone="us-central1-a") | {"addresses": ["1.2.3.4"]},
                 id="multi-ip-ready-pod-node-labels"),
    pytest.param(_pod(spec__subdomain="foo", spec__hostname="example-hostname"), ZONE_NODE, SVC,
                 _ep(True, True, False, zone="us-central1-a", hostname="example-hostname"), id="ready-pod-hostname"),
    pytest.param(_pod(spec__subdomain="other", spec__hostname="example-hostname"), None, SVC,
                 _ep(True, True, False), id="hostname-other-subdomain"),
    pytest.param(_pod(terminating=True), None, SVC, _ep(False, True, True), id="ready-terminating-pod"),
    pytest.param(_pod(ready=False, terminating=True), None, SVC, _ep(False, False, True),
                 id="not-ready-terminating-pod"),
    pytest.param(_pod(status__podIPs=[], status__podIP="010.001.002.003"), None, SVC,
                 _ep(True, True, False) | {"addresses": ["10.1.2.3"]}, id="pod-ip-only-sloppy-form"),
])
def test_pod_to_endpoint(pod: dict[str, Any], node_obj: dict[str, Any] | None, svc: dict[str, Any],
                         expected: dict[str, Any]) -> None:
    """TestPodToEndpoint (plus the podIP fallback and a sloppy IPv4 form)."""
    assert pod_to_endpoint(pod, node_obj, svc, "IPv4") == expected


def _port_pod(*ports: dict[str, Any], sidecar: bool = False) -> dict[str, Any]:
    container = {"name": "c", "ports": list(ports)}
    spec = {"initContainers": [container | {"restartPolicy": "Always"}], "containers": []} if sidecar else {
        "containers": [container]}
    return {"metadata": {"uid": "u"}, "spec": spec}


HTTPS = {"name": "https", "containerPort": 443, "protocol": "TCP"}
TWO_PORTS = {"spec": {"ports": [
    {"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"},
    {"name": "https", "protocol": "TCP", "targetPort": "https", "appProtocol": "https"}]}}


@pytest.mark.parametrize(("service", "pod", "expected"), [
    pytest.param({"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP",
                                      "appProtocol": "example.com/custom-protocol"}]}}, _port_pod(),
                 [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "example.com/custom-protocol"}],
                 id="app-protocol-on-one-port"),
    pytest.param(TWO_PORTS, _port_pod(HTTPS),
                 [{"name": "http", "port": 80, "protocol": "TCP"},
                  {"name": "https", "port": 443, "protocol": "TCP", "appProtocol": "https"}],
                 id="named-port-and-app-protocol"),
    pytest.param(TWO_PORTS, _port_pod(HTTPS, sidecar=True),
                 [{"name": "http", "port": 80, "protocol": "TCP"},
                  {"name": "https", "port": 443, "protocol": "TCP", "appProtocol": "https"}],
                 id="named-port-on-sidecar"),
    pytest.param(TWO_PORTS, _port_pod(HTTPS | {"protocol": "UDP"}), [{"name": "http", "port": 80, "protocol": "TCP"}],
                 id="named-port-other-protocol-unresolved"),
    pytest.param({"spec": {"clusterIP": "None"}}, _port_pod(), [], id="headless-without-ports"),
])
def test_get_endpoint_ports(service: dict[str, Any], pod: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    """TestGetEndpointPorts."""
    assert get_endpoint_ports(service, pod) == expected


BASE = {LABEL_SERVICE_NAME: "foo", LABEL_MANAGED_BY: CONTROLLER_NAME}
HEADLESS = BASE | {IS_HEADLESS_SERVICE: ""}


def _ls_svc(labels: dict[str, str] | None = None, headless: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "foo", "namespace": NS, "labels": labels or {}},
            "spec": {"ports": [{"port": 80}], "selector": {"foo": "bar"},
                     "clusterIP": "None" if headless else "1.1.1.1"}}


def _ls_slice(labels: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"labels": labels}} if labels is not None else {}


@pytest.mark.parametrize(("slice_labels", "svc", "expected", "updated"), [
    pytest.param(None, _ls_svc(), BASE, False, id="no-labels-empty-slice"),
    pytest.param(None, _ls_svc({"foo": "bar"}, headless=True), HEADLESS | {"foo": "bar"}, True,
                 id="headless-with-labels-empty-slice"),
    pytest.param(None, _ls_svc(headless=True), HEADLESS, False, id="headless-no-labels-empty-slice"),
    pytest.param(None, _ls_svc({IS_HEADLESS_SERVICE: ""}), BASE, False, id="non-headless-with-headless-label"),
    pytest.param(HEADLESS, _ls_svc({IS_HEADLESS_SERVICE: ""}), BASE, False,
                 id="headless-to-clusterip-with-headless-label"),
    pytest.param(HEADLESS, _ls_svc(), BASE, False, id="headless-to-clusterip"),
    pytest.param(BASE | {"foo": "bar"}, _ls_svc({"foo": "bar"}, headless=True), HEADLESS | {"foo": "bar"}, False,
                 id="headless-same-labels"),
    pytest.param(None, _ls_svc({"foo": "bar"}), BASE | {"foo": "bar"}, True, id="labels-empty-slice"),
    pytest.param(BASE | {"foo": "bar"}, _ls_svc(), BASE, True, id="slice-labels-service-none"),
    pytest.param(HEADLESS, _ls_svc(), BASE, False, id="slice-headless-service-clusterip"),
    pytest.param(BASE, _ls_svc({"foo": "bar"}), BASE | {"foo": "bar"}, True, id="reserved-slice-labels"),
    pytest.param(BASE, _ls_svc({LABEL_SERVICE_NAME: "bad", LABEL_MANAGED_BY: "actor", IS_HEADLESS_SERVICE: "x"}),
                 BASE, False, id="evil-service-reserved-only"),
    pytest.param(BASE, _ls_svc({LABEL_SERVICE_NAME: "bad", LABEL_MANAGED_BY: "actor", "foo": "bar"}),
                 BASE | {"foo": "bar"}, True, id="evil-service-with-updates"),
])
def test_set_endpoint_slice_labels(slice_labels: dict[str, str] | None, svc: dict[str, Any],
                                   expected: dict[str, str], updated: bool) -> None:
    """TestSetEndpointSliceLabels."""
    assert set_endpoint_slice_labels(_ls_slice(slice_labels), svc, CONTROLLER_NAME) == (expected, updated)


def test_new_endpoint_slice() -> None:
    """TestNewEndpointSlice: generateName, owner, labels (reserved ones not hijacked), no annotations copied."""
    svc = _ls_svc({"foo": "bar", LABEL_SERVICE_NAME: "bad"}) | {"metadata": {
        "name": "foo", "namespace": NS, "uid": "u1", "labels": {"foo": "bar", LABEL_SERVICE_NAME: "bad"},
        "annotations": {"a": "b"}}}
    ports = [{"name": "foo", "protocol": "TCP"}]
    assert new_endpoint_slice(svc, ports, "IPv4", CONTROLLER_NAME) == {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"generateName": "foo-", "namespace": NS, "labels": BASE | {"foo": "bar"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "foo", "uid": "u1",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "addressType": "IPv4", "endpoints": [], "ports": ports}
    assert endpoint_slice_prefix("a" * 253) == "a" * 253


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"clusterIP": "10.0.0.10"}, ["IPv4"], id="v4-no-families"),
    pytest.param({"clusterIP": "2000::1"}, ["IPv6"], id="v6-no-families"),
    pytest.param({"ipFamilies": ["IPv4"]}, ["IPv4"], id="v4"),
    pytest.param({"ipFamilies": ["IPv6"]}, ["IPv6"], id="v6"),
    pytest.param({"ipFamilies": ["IPv4", "IPv6"]}, ["IPv4", "IPv6"], id="v4-v6"),
    pytest.param({"ipFamilies": ["IPv6", "IPv4"]}, ["IPv6", "IPv4"], id="v6-v4"),
    pytest.param({"clusterIP": "None"}, ["IPv4", "IPv6"], id="headless-no-selector-no-families"),
    pytest.param({"clusterIP": "None", "selector": {"foo": "bar"}}, ["IPv4", "IPv6"],
                 id="headless-selector-no-families"),
    pytest.param({"clusterIP": "None", "ipFamilies": ["IPv4", "IPv6"]}, ["IPv4", "IPv6"],
                 id="headless-no-selector-families"),
    pytest.param({"clusterIP": "None", "selector": {"foo": "bar"}, "ipFamilies": ["IPv4", "IPv6"]},
                 ["IPv4", "IPv6"], id="headless-selector-families"),
])
def test_supported_service_address_type(spec: dict[str, Any], expected: list[str]) -> None:
    """TestSupportedServiceAddressType."""
    assert sorted(address_types_for_service({"spec": spec})) == sorted(expected)


@pytest.mark.parametrize(("slice_", "key", "error"), [
    pytest.param(None, None, "nil EndpointSlice passed to ServiceControllerKey()", id="nil"),
    pytest.param({}, None, "EndpointSlice missing kubernetes.io/service-name label", id="empty"),
    pytest.param({"metadata": {"namespace": "ns", "labels": {LABEL_SERVICE_NAME: "svc"}}}, "ns/svc", None,
                 id="valid"),
])
def test_service_controller_key(slice_: dict[str, Any] | None, key: str | None, error: str | None) -> None:
    """TestServiceControllerKey."""
    if error is None:
        assert service_controller_key(slice_) == key
    else:
        with pytest.raises(ValueError, match="EndpointSlice") as raised:
            service_controller_key(slice_)
        assert str(raised.value) == error


def test_trigger_time_format() -> None:
    assert format_trigger_time(1_700_000_000.0) == "2023-11-14T22:13:20Z"
    assert format_trigger_time(1_700_000_000.25) == "2023-11-14T22:13:20.25Z"


def test_endpoint_identity_and_comparison() -> None:
    ep = pod_to_endpoint(_pod(), None, SVC, "IPv4")
    changed = copy.deepcopy(ep)
    changed["conditions"]["ready"] = False
    s = EndpointSet()
    s.insert(ep)
    assert s.get(changed) is ep  # conditions are not part of the identity
    assert not endpoints_equal_beyond_hash(ep, changed)
    rv = copy.deepcopy(ep)
    rv["targetRef"]["resourceVersion"] = "7"
    assert endpoints_equal_beyond_hash(ep, rv)
    assert port_map_key([{"name": "a", "port": 1}, {"name": "b", "port": 2, "protocol": "TCP"}]) == port_map_key(
        [{"name": "b", "port": 2}, {"name": "a", "port": 1, "protocol": "TCP"}])
    assert port_map_key(None) == port_map_key([])


@pytest.mark.parametrize(("change", "expected"), [
    pytest.param({}, (False, False), id="nothing"),
    pytest.param({"ready": False}, (True, False), id="readiness"),
    pytest.param({"terminating": True}, (True, False), id="deletion"),
    pytest.param({"status__podIPs": [{"ip": "9.9.9.9"}]}, (True, False), id="ips"),
    pytest.param({"spec__hostname": "h"}, (False, True), id="hostname"),
])
def test_pod_endpoints_changed(change: dict[str, Any], expected: tuple[bool, bool]) -> None:
    assert pod_endpoints_changed(_pod(), _pod(**change)) == expected


def test_determine_needed_service_updates() -> None:
    assert determine_needed_service_updates({"a", "b"}, {"b", "c"}, pod_changed=True) == {"a", "b", "c"}
    assert determine_needed_service_updates({"a", "b"}, {"b", "c"}, pod_changed=False) == {"a", "c"}


def _slice(uid: str, generation: int, service: str = "svc1") -> dict[str, Any]:
    return {"metadata": {"namespace": "ns1", "uid": uid, "generation": generation,
                         "labels": {LABEL_SERVICE_NAME: service}}}


SVC1 = {"metadata": {"namespace": "ns1", "name": "svc1", "uid": "svc-uid"}}


def test_tracker_should_sync_and_deletion() -> None:
    tracker = EndpointSliceTracker()
    assert tracker.should_sync(_slice("a", 1))
    tracker.update(_slice("a", 1))
    assert tracker.has(_slice("a", 1))
    assert not tracker.should_sync(_slice("a", 1))  # the echo of our own write
    assert tracker.should_sync(_slice("a", 2))
    assert not tracker.handle_deletion(_slice("a", 1))  # not deleted by us
    tracker.update(_slice("b", 1))
    tracker.expect_deletion(_slice("b", 1))
    assert tracker.handle_deletion(_slice("b", 1))
    assert not tracker.has(_slice("b", 1))


@pytest.mark.parametrize(("tracked", "cache", "stale"), [
    pytest.param([], [_slice("a", 1)], False, id="nothing-tracked"),
    pytest.param([("a", 1)], [_slice("a", 1)], False, id="same-generation"),
    pytest.param([("a", 2)], [_slice("a", 1)], True, id="older-generation-in-cache"),
    pytest.param([("a", 1)], [_slice("a", 2)], False, id="newer-generation-in-cache"),
    pytest.param([("a", 1)], [], True, id="created-slice-missing"),
    pytest.param([("a", -1)], [_slice("a", 1)], True, id="deleted-slice-still-shown"),
    pytest.param([("a", -1)], [], False, id="deleted-slice-gone"),
])
def test_tracker_stale_slices(tracked: list[tuple[str, int]], cache: list[dict[str, Any]], stale: bool) -> None:
    tracker = EndpointSliceTracker()
    for uid, generation in tracked:
        if generation < 0:
            tracker.expect_deletion(_slice(uid, 1))
        else:
            tracker.update(_slice(uid, generation))
    assert tracker.stale_slices(SVC1, cache) is stale


def test_tracker_forgets_writes_of_a_previous_service() -> None:
    tracker = EndpointSliceTracker()
    assert not tracker.stale_slices(SVC1, [])
    tracker.update(_slice("a", 1))
    assert tracker.stale_slices(SVC1, [])
    recreated = {"metadata": SVC1["metadata"] | {"uid": "new-uid"}}
    assert not tracker.stale_slices(recreated, [])


def test_trigger_time_tracker() -> None:
    tracker = TriggerTimeTracker()
    svc = {"metadata": {"name": "s", "creationTimestamp": "2024-01-01T00:00:00Z"}}

    def ready_pod(name: str, at: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": at}]}}

    p1 = ready_pod("p1", "2024-01-01T00:01:00Z")
    assert tracker.compute("ns", svc, [p1]) == 1704067200.0  # first sight: the Service's creation
    assert tracker.compute("ns", svc, [p1]) is None  # nothing changed
    p2 = ready_pod("p2", "2024-01-01T00:03:00Z")
    p1b = ready_pod("p1", "2024-01-01T00:02:00Z")
    assert tracker.compute("ns", svc, [p1b, p2]) == 1704067320.0  # the earliest change
    tracker.delete_service("ns", "s")
    assert tracker.compute("ns", svc, [p1b, p2]) == 1704067200.0
