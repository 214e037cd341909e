"""Upstream's endpoints_controller_test.go tables (pkg/controller/endpoint), against a recording in-memory client:
what the controller sends for a Service, and when it sends nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller_manager.api.endpoints import sort_subsets
from controller_manager.api.meta import format_time
from controller_manager.api.resources import ENDPOINTS, PODS, SERVICES
from controller_manager.client.errors import Forbidden
from controller_manager.controllers.endpoint import CONTROLLER_NAME, LABEL_MANAGED_BY, StaleEndpoints
from controller_manager.controllers.endpoint.pods import endpoint_port, pod_to_endpoint_address
from controller_manager.controllers.endpoint.subsets import MAX_CAPACITY

from .fakes import IPV4, IPV4_IPV6, IPV6, IPV6_IPV4, T0, Env, address, endpoints, make_pod, new_env, service

HEADLESS = "service.kubernetes.io/headless"
TRIGGER_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time"
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
MANAGED = {LABEL_MANAGED_BY: CONTROLLER_NAME}
MANAGED_HEADLESS = {LABEL_MANAGED_BY: CONTROLLER_NAME, HEADLESS: ""}
PORT_8080 = [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
TRIGGER = 1_514_764_800.0  # 2018-01-01T00:00:00Z
TRIGGER_TEXT = "2018-01-01T00:00:00Z"


def old_subsets() -> list[dict[str, Any]]:
    return [{"addresses": [{"ip": "6.7.8.9", "nodeName": ""}], "ports": [{"port": 1000}]}]


async def sync(env: Env, key: str) -> None:
    await env.ctrl.sync(key)


# --- nothing to write ---------------------------------------------------------------------------------------

async def test_preserve_no_selector() -> None:
    """TestSyncEndpointsItemsPreserveNoSelector: a Service without selector is someone else's."""
    env = new_env()
    env.add_endpoints(endpoints("default", old_subsets()))
    env.add_service(service("default", ports=[{"port": 80}], families=None))
    await sync(env, "default/foo")
    assert env.client.requests == []


@pytest.mark.parametrize("subsets", [None, []], ids=["nil subsets", "empty subsets"])
async def test_existing_empty_subsets(subsets: list[dict[str, Any]] | None) -> None:
    """TestSyncEndpointsExistingNilSubsets / ExistingEmptySubsets."""
    env = new_env()
    env.add_endpoints(endpoints("default", subsets, labels=dict(MANAGED)))
    env.add_service(service("default", selector={"foo": "bar"}, ports=[{"port": 80}], families=None))
    await sync(env, "default/foo")
    assert env.client.requests == []


async def test_pod_resource_version_update_only() -> None:
    """TestSyncEndpointsWithPodResourceVersionUpdateOnly: only the pods' resourceVersions moved."""
    env = new_env()
    pod0, pod1 = make_pod("default", 0, 1, True), make_pod("default", 1, 1, False)
    ref0 = {"kind": "Pod", "name": "pod0", "namespace": "default", "resourceVersion": "1"}
    ref1 = {"kind": "Pod", "name": "pod1", "namespace": "default", "resourceVersion": "2"}
    env.add_endpoints(endpoints("default", [{
        "addresses": [{"ip": "1.2.3.4", "nodeName": "", "targetRef": ref0}],
        "notReadyAddresses": [{"ip": "1.2.3.5", "nodeName": "", "targetRef": ref1}],
        "ports": [{"port": 8080, "protocol": "TCP"}]}], labels=dict(MANAGED)))
    env.add_service(service("default", selector={"foo": "bar"}, ports=PORT_8080))
    pod0["metadata"]["resourceVersion"], pod1["metadata"]["resourceVersion"] = "3", "4"
    env.add(PODS, pod0, pod1)
    await sync(env, "default/foo")
    assert env.client.requests == []


async def test_headless_service_label_alone_is_no_change() -> None:
    """TestSyncEndpointsHeadlessServiceLabel."""
    env = new_env()
    env.add_endpoints(endpoints("default", [], labels=dict(MANAGED_HEADLESS)))
    env.add_service(service("default", selector={"foo": "bar"}, ports=[{"port": 80}], families=None))
    await sync(env, "default/foo")
    assert env.client.requests == []


@pytest.mark.parametrize("spec", [
    pytest.param({"selector": {"foo": "bar"}, "ports": [{"port": 80}]}, id="with selector and ports"),
    pytest.param({"ports": [{"port": 80}]}, id="with ports"),
    pytest.param({"selector": {"foo": "bar"}}, id="with selector"),
    pytest.param({}, id="without selector and ports"),
])
async def test_external_name_gets_no_endpoints(spec: dict[str, Any]) -> None:
    """TestSyncServiceExternalNameType."""
    env = new_env()
    env.add_service(service("default", name="testing-1", families=None, type="ExternalName", **spec))
    await sync(env, "default/testing-1")
    assert env.client.requests == []


async def test_preexisting_identical() -> None:
    """TestSyncEndpointsItemsPreexistingIdentical."""
    env = new_env()
    env.add_endpoints(endpoints("default", [{"addresses": [address("1.2.3.4", "pod0", "default")],
                                             "ports": [{"port": 8080, "protocol": "TCP"}]}], labels=dict(MANAGED)))
    env.add_pods("default", 1, 1, 0)
    env.add_service(service("default", selector={"foo": "bar"}, ports=PORT_8080))
    await sync(env, "default/foo")
    assert env.client.requests == []


# --- creates and updates ------------------------------------------------------------------------------------

async def test_new_service_without_pods_creates_endpoints() -> None:
    """TestSyncEndpointsNewNoSubsets."""
    env = new_env()
    env.add_service(service("default", selector={"foo": "bar"}, ports=[{"port": 80}], families=None))
    await sync(env, "default/foo")
    assert env.client.verbs() == ["create"]
    assert env.client.body() == {"apiVersion": "v1", "kind": "Endpoints",
                                 "metadata": {"name": "foo", "labels": MANAGED_HEADLESS}}


@pytest.mark.parametrize("protocol", ["TCP", "UDP", "SCTP"])
async def test_protocol(protocol: str) -> None:
    """TestSyncEndpointsProtocolTCP / UDP / SCTP: an empty selector selects every pod of the namespace."""
    env = new_env()
    env.add_endpoints(endpoints("other", [{"addresses": [{"ip": "6.7.8.9", "nodeName": ""}],
                                           "ports": [{"port": 1000, "protocol": protocol}]}]))
    env.add_pods("other", 1, 1, 0)
    env.add_service(service("other", selector={}, ports=[{"port": 80, "targetPort": 8080, "protocol": protocol}]))
    await sync(env, "other/foo")
    assert env.client.verbs() == ["update"]
    assert env.client.body() == endpoints("other", [{"addresses": [address("1.2.3.4", "pod0", "other")],
                                                     "ports": [{"port": 8080, "protocol": protocol}]}],
                                          labels=MANAGED_HEADLESS)


@pytest.mark.parametrize(("ready", "not_ready", "expected"), [
    pytest.param(1, 0, {"addresses": [address("1.2.3.4", "pod0", "other")]}, id="all ready"),
    pytest.param(0, 1, {"notReadyAddresses": [address("1.2.3.4", "pod0", "other")]}, id="not ready"),
    pytest.param(1, 1, {"addresses": [address("1.2.3.4", "pod0", "other")],
                        "notReadyAddresses": [address("1.2.3.5", "pod1", "other")]}, id="mixed"),
])
async def test_empty_selector_selects_all(ready: int, not_ready: int, expected: dict[str, Any]) -> None:
    """TestSyncEndpointsItemsEmptySelectorSelectsAll / AllNotReady / AllMixed."""
    env = new_env()
    env.add_endpoints(endpoints("other", []))
    env.add_pods("other", ready, 1, not_ready)
    env.add_service(service("other", selector={}, ports=PORT_8080))
    await sync(env, "other/foo")
    assert env.client.body() == endpoints("other", [{**expected, "ports": [{"port": 8080, "protocol": "TCP"}]}],
                                          labels=MANAGED_HEADLESS)


async def test_preexisting() -> None:
    """TestSyncEndpointsItemsPreexisting."""
    env = new_env()
    env.add_endpoints(endpoints("bar", old_subsets(), labels=dict(MANAGED)))
    env.add_pods("bar", 1, 1, 0)
    env.add_service(service("bar", selector={"foo": "bar"}, ports=PORT_8080))
    await sync(env, "bar/foo")
    assert env.client.body() == endpoints("bar", [{"addresses": [address("1.2.3.4", "pod0", "bar")],
                                                   "ports": [{"port": 8080, "protocol": "TCP"}]}],
                                          labels=MANAGED_HEADLESS)


def two_port_service(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return service("other", selector={"foo": "bar"}, labels=labels, ports=[
        {"name": "port0", "port": 80, "protocol": "TCP", "targetPort": 8080},
        {"name": "port1", "port": 88, "protocol": "TCP", "targetPort": 8088}])


def three_pods_two_ports() -> list[dict[str, Any]]:
    return sort_subsets([{
        "addresses": [address(f"1.2.3.{4 + i}", f"pod{i}", "other") for i in range(3)],
        "ports": [{"name": "port0", "port": 8080, "protocol": "TCP"},
                  {"name": "port1", "port": 8088, "protocol": "TCP"}]}])


async def test_items_create() -> None:
    """TestSyncEndpointsItems: pods of other namespaces are not found; one subset for both ports."""
    env = new_env()
    env.add_pods("other", 3, 2, 0)
    env.add_pods("blah", 5, 2, 0)
    env.add_service(two_port_service())
    await sync(env, "other/foo")
    assert env.client.verbs() == ["create"]
    _, namespace, _, body = env.client.requests[0]
    assert namespace == "other"
    assert body == {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "foo", "labels": MANAGED_HEADLESS},
                    "subsets": three_pods_two_ports()}


async def test_items_with_labels() -> None:
    """TestSyncEndpointsItemsWithLabels: the Service's labels are copied."""
    env = new_env()
    env.add_pods("other", 3, 2, 0)
    env.add_service(two_port_service({"foo": "bar"}))
    await sync(env, "other/foo")
    assert env.client.body()["metadata"]["labels"] == {"foo": "bar", **MANAGED_HEADLESS}
    assert env.client.body()["subsets"] == three_pods_two_ports()


async def test_preexisting_labels_change() -> None:
    """TestSyncEndpointsItemsPreexistingLabelsChange: labels follow the Service's, not the old ones."""
    env = new_env()
    env.add_endpoints(endpoints("bar", old_subsets(), labels={"foo": "bar"}))
    env.add_pods("bar", 1, 1, 0)
    env.add_service(service("bar", selector={"foo": "bar"}, labels={"baz": "blah"}, ports=PORT_8080))
    await sync(env, "bar/foo")
    assert env.client.body() == endpoints("bar", [{"addresses": [address("1.2.3.4", "pod0", "bar")],
                                                   "ports": [{"port": 8080, "protocol": "TCP"}]}],
                                          labels={"baz": "blah", **MANAGED_HEADLESS})


async def test_labels_only_change_is_written() -> None:
    """An Endpoints equal in all but the managed-by label gets it (upstream's tests add it to stay quiet)."""
    env = new_env()
    env.add_endpoints(endpoints("default", []))
    env.add_service(service("default", selector={"foo": "bar"}, ports=[{"port": 80}], families=None))
    await sync(env, "default/foo")
    assert env.client.verbs() == ["update"]
    assert env.client.body()["metadata"]["labels"] == MANAGED_HEADLESS


async def test_headless_service() -> None:
    """TestSyncEndpointsHeadlessService: no ports, the Service left untouched."""
    env = new_env()
    env.add_endpoints(endpoints("headless", [{"addresses": [{"ip": "6.7.8.9", "nodeName": ""}],
                                              "ports": [{"port": 1000, "protocol": "TCP"}]}]))
    env.add_pods("headless", 1, 1, 0)
    svc = service("headless", selector={}, labels={"a": "b"}, clusterIP="None", ports=[])
    env.add_service(svc)
    original = copy.deepcopy(svc)
    await sync(env, "headless/foo")
    assert env.client.verbs() == ["update"]
    assert env.client.body() == endpoints("headless", [{"addresses": [address("1.2.3.4", "pod0", "headless")]}],
                                          labels={"a": "b", **MANAGED_HEADLESS})
    assert env.ctrl.service_informer.store.get("headless/foo") == original


@pytest.mark.parametrize(("restart_policy", "phase"), [
    ("Never", "Failed"), ("Never", "Succeeded"), ("OnFailure", "Succeeded")])
async def test_terminal_pods_excluded(restart_policy: str, phase: str) -> None:
    """TestSyncEndpointsItemsExcludeNotReadyPodsWithRestartPolicy{Never,OnFailure}AndPhase{Failed,Succeeded}."""
    env = new_env()
    env.add_endpoints(endpoints("other", [], labels={LABEL_MANAGED_BY: CONTROLLER_NAME, "foo": "bar"}))
    pod = make_pod("other", 0, 1, False)
    pod["spec"]["restartPolicy"] = restart_policy
    pod["status"]["phase"] = phase
    env.add(PODS, pod)
    env.add_service(service("other", selector={"foo": "bar"}, ports=PORT_8080))
    await sync(env, "other/foo")
    assert env.client.body() == endpoints("other", None, labels=MANAGED_HEADLESS)


async def test_headless_without_port() -> None:
    """TestSyncEndpointsHeadlessWithoutPort."""
    env = new_env()
    env.add_service(service("default", selector={"foo": "bar"}, clusterIP="None"))
    env.add_pods("default", 1, 1, 0)
    await sync(env, "default/foo")
    assert env.client.verbs() == ["create"]
    assert env.client.body() == {"apiVersion": "v1", "kind": "Endpoints",
                                 "metadata": {"name": "foo", "labels": MANAGED_HEADLESS},
                                 "subsets": [{"addresses": [address("1.2.3.4", "pod0", "default")]}]}


async def test_cluster_ip_service_has_no_headless_label() -> None:
    env = new_env()
    env.add_service(service("default", selector={"foo": "bar"}, clusterIP="10.0.0.1", ports=PORT_8080))
    await sync(env, "default/foo")
    assert env.client.body()["metadata"]["labels"] == MANAGED


# --- addresses ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("families", "cluster_ip", "service_families", "expected"), [
    pytest.param(IPV4, "10.0.0.1", IPV4, "IPv4", id="v4 service, in a single stack cluster"),
    pytest.param(IPV4_IPV6, "10.0.0.1", IPV4, "IPv4", id="v4 service, in a dual stack cluster"),
    pytest.param(IPV6_IPV4, "10.0.0.1", IPV4, "IPv4", id="v4 service, in a dual stack ipv6-primary cluster"),
    pytest.param(IPV4, "None", IPV4, "IPv4", id="v4 headless service, in a single stack cluster"),
    pytest.param(IPV4_IPV6, "None", IPV4, "IPv4", id="v4 headless service, in a dual stack cluster"),
    pytest.param(IPV4_IPV6, "3000::1", IPV6, "IPv6", id="v6 service, in a dual stack cluster"),
    pytest.param(IPV6, "None", IPV6, "IPv6", id="v6 headless service, in a single stack cluster"),
    pytest.param(IPV4_IPV6, "None", IPV6, "IPv6", id="v6 headless service, in a dual stack cluster"),
    pytest.param(IPV4, "3000::1", IPV6, None, id="v6 service, in a v4 only cluster"),
])
def test_pod_to_endpoint_address_for_service(families: list[str], cluster_ip: str, service_families: list[str],
                                             expected: str | None) -> None:
    """TestPodToEndpointAddressForService, with upstream's bad IP (a leading zero) fixed up."""
    pod = make_pod("test", 0, 1, True, families)
    pod["status"]["podIPs"][0]["ip"] = "0" + pod["status"]["podIPs"][0]["ip"]
    pod["status"]["podIP"] = pod["status"]["podIPs"][0]["ip"]
    svc = {"spec": {"clusterIP": cluster_ip, "ipFamilies": service_families}}
    epa = pod_to_endpoint_address(svc, pod)
    if expected is None:
        assert epa is None
        return
    assert epa is not None
    assert (":" in epa["ip"]) == (expected == "IPv6")
    assert not epa["ip"].startswith("0")
    assert epa["nodeName"] == ""
    assert epa["targetRef"] == {"kind": "Pod", "namespace": "test", "name": "pod0"}


def test_address_family_without_ip_families() -> None:
    """An API server that sets no ipFamilies: the cluster IP decides, or for a headless Service the pod's IP."""
    pod = make_pod("test", 0, 1, True, IPV6_IPV4)
    assert pod_to_endpoint_address({"spec": {"clusterIP": "10.0.0.1"}}, pod)["ip"] == "1.2.3.4"  # type: ignore[index]
    assert pod_to_endpoint_address({"spec": {"clusterIP": "None"}}, pod)["ip"] == "2000::4"  # type: ignore[index]


def test_hostname_only_for_own_subdomain() -> None:
    pod = make_pod("ns", 0, 1, True)
    pod["spec"].update(hostname="h", subdomain="foo")
    svc = {"metadata": {"name": "foo", "namespace": "ns"}, "spec": {"ipFamilies": IPV4}}
    assert pod_to_endpoint_address(svc, pod)["hostname"] == "h"  # type: ignore[index]
    other = {"metadata": {"name": "bar", "namespace": "ns"}, "spec": {"ipFamilies": IPV4}}
    assert "hostname" not in pod_to_endpoint_address(other, pod)  # type: ignore[operator]


@pytest.mark.parametrize(("app_protocol", "expected"), [(None, None), ("http", "http")],
                         ids=["empty app protocol", "http app protocol"])
def test_endpoint_port_from_service_port(app_protocol: str | None, expected: str | None) -> None:
    """TestEndpointPortFromServicePort."""
    sp: dict[str, Any] = {"name": "test"}
    if app_protocol is not None:
        sp["appProtocol"] = app_protocol
    assert endpoint_port(sp, 80).get("appProtocol") == expected


# --- trigger time -------------------------------------------------------------------------------------------

async def test_last_change_trigger_time_annotation() -> None:
    """TestLastTriggerChangeTimeAnnotation: a new Service's creation time."""
    env = new_env()
    env.add_endpoints(endpoints("other", old_subsets()))
    env.add_pods("other", 1, 1, 0)
    env.add_service(service("other", selector={}, ports=PORT_8080, created=TRIGGER))
    await sync(env, "other/foo")
    assert env.client.body()["metadata"]["annotations"] == {TRIGGER_ANNOTATION: TRIGGER_TEXT}


async def test_last_change_trigger_time_overridden() -> None:
    """TestLastTriggerChangeTimeAnnotation_AnnotationOverridden."""
    env = new_env()
    env.add_endpoints(endpoints("other", old_subsets(), annotations={TRIGGER_ANNOTATION: "2017-12-31T23:00:00Z"}))
    env.add_pods("other", 1, 1, 0)
    env.add_service(service("other", selector={}, ports=PORT_8080, created=TRIGGER))
    await sync(env, "other/foo")
    assert env.client.body()["metadata"]["annotations"] == {TRIGGER_ANNOTATION: TRIGGER_TEXT}


async def test_last_change_trigger_time_cleared() -> None:
    """TestLastTriggerChangeTimeAnnotation_AnnotationCleared: neither pod nor Service has a trigger time."""
    env = new_env()
    env.add_endpoints(endpoints("other", old_subsets(), annotations={TRIGGER_ANNOTATION: TRIGGER_TEXT}))
    env.add_pods("other", 1, 1, 0)
    env.add_service(service("other", selector={}, ports=PORT_8080))
    await sync(env, "other/foo")
    assert "annotations" not in env.client.body()["metadata"]


async def test_trigger_time_is_the_earliest_changed_ready_transition() -> None:
    env = new_env()
    env.add_service(service("other", selector={"foo": "bar"}, ports=PORT_8080, created=TRIGGER))
    await sync(env, "other/foo")
    env.add_endpoints(env.client.endpoints["other/foo"])
    pods = [make_pod("other", i, 1, True) for i in range(2)]
    for i, pod in enumerate(pods):
        pod["status"]["conditions"][0]["lastTransitionTime"] = format_time(T0 + 10 * (2 - i))
    env.add(PODS, *pods)
    await sync(env, "other/foo")
    assert env.client.body()["metadata"]["annotations"][TRIGGER_ANNOTATION] == format_time(T0 + 10)


# --- deletion, leftovers, staleness -------------------------------------------------------------------------

async def test_service_not_found_deletes_endpoints() -> None:
    """TestSyncEndpointsServiceNotFound."""
    env = new_env()
    env.add_endpoints(endpoints("default", None))
    await sync(env, "default/foo")
    assert env.client.requests == [("delete", "default", "foo", None)]
    await sync(env, "default/foo")  # already gone: NotFound is success
    assert env.client.verbs() == ["delete", "delete"]


async def test_check_leftover_endpoints() -> None:
    """TestCheckLeftoverEndpoints (leader-election records are skipped)."""
    env = new_env()
    env.add_endpoints(endpoints("default", old_subsets()))
    env.add_endpoints(endpoints("kube-system", None, name="lock",
                                annotations={"control-plane.alpha.kubernetes.io/leader": "{}"}))
    await env.ctrl.run_background()
    assert len(env.ctrl.queue) == 1
    assert await env.ctrl.queue.get() == "default/foo"


async def test_endpoints_deletion_queues_the_service() -> None:
    """TestEndpointsDeletionEvents."""
    from controller_manager.runtime.informers import Deleted

    env = new_env()
    env.ctrl._on_endpoints(Deleted(endpoints("default", None)))
    assert len(env.ctrl.queue) == 1


async def test_stale_cache_waits_for_the_written_version() -> None:
    """TestMultiplePodChanges: after an update the cache still shows the old Endpoints; a sync then must not
    write from it, and writes again once the cache has caught up."""
    env = new_env()
    pod = make_pod("default", 0, 1, True)
    env.add(PODS, pod)
    ready = endpoints("default", [{"addresses": [address("1.2.3.4", "pod0", "default")],
                                   "ports": [{"port": 8080, "protocol": "TCP"}]}], labels=dict(MANAGED))
    env.add_endpoints(ready)
    env.add_service(service("default", selector={"foo": "bar"}, clusterIP="10.0.0.1", ports=PORT_8080))
    not_ready = copy.deepcopy(pod)
    not_ready["metadata"]["resourceVersion"] = "2"
    not_ready["status"]["conditions"][0]["status"] = "False"
    env.add(PODS, not_ready)
    await sync(env, "default/foo")
    assert env.client.verbs() == ["update"]
    env.add(PODS, pod)  # ready again, but the cache has not seen our write
    with pytest.raises(StaleEndpoints, match="already processed"):
        await sync(env, "default/foo")
    assert env.client.verbs() == ["update"]
    env.add(ENDPOINTS, env.client.endpoints["default/foo"])  # the watch catches up
    await sync(env, "default/foo")
    assert env.client.verbs() == ["update", "update"]
    assert env.client.body()["subsets"][0]["addresses"][0]["ip"] == "1.2.3.4"


async def test_service_recreated_after_stale_delete() -> None:
    """TestMultipleServiceChanges: deleted then recreated before the cache dropped the Endpoints; once it does,
    the Endpoints is created again."""
    env = new_env()
    env.add_pods("default", 1, 1, 0)
    svc = service("default", selector={"foo": "bar"}, clusterIP="None")
    env.add_service(svc)
    await sync(env, "default/foo")
    env.add(ENDPOINTS, env.client.endpoints["default/foo"])
    env.remove(SERVICES, svc)
    await sync(env, "default/foo")
    env.add_service(svc)
    await sync(env, "default/foo")  # the cache still has the Endpoints: nothing to write
    assert env.client.verbs() == ["create", "delete"]
    env.remove(ENDPOINTS, env.client.endpoints.get("default/foo") or endpoints("default", None))
    from controller_manager.runtime.informers import Deleted

    env.ctrl._on_endpoints(Deleted(endpoints("default", None)))
    assert await env.ctrl.queue.get() == "default/foo"
    await sync(env, "default/foo")
    assert env.client.verbs() == ["create", "delete", "create"]


# --- over capacity ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("starting", "existing", "desired", "desired_not_ready", "want_ready", "want_not_ready",
                          "annotated"), [
    pytest.param(None, 0, 0, 0, 0, 0, False, id="empty"),
    pytest.param(None, MAX_CAPACITY - 1, MAX_CAPACITY - 3, 4, MAX_CAPACITY - 3, 3, True,
                 id="annotation added past capacity, < than maxCapacity of Ready Addresses"),
    pytest.param(None, MAX_CAPACITY - 1, MAX_CAPACITY, 10, MAX_CAPACITY, 0, True,
                 id="annotation added past capacity, maxCapacity of Ready Addresses"),
    pytest.param("truncated", MAX_CAPACITY - 1, MAX_CAPACITY - 1, 0, MAX_CAPACITY - 1, 0, False,
                 id="annotation removed below capacity"),
    pytest.param("warning", MAX_CAPACITY, MAX_CAPACITY, 0, MAX_CAPACITY, 0, False,
                 id="annotation was set to warning previously, annotation removed at capacity"),
    pytest.param("warning", MAX_CAPACITY + 1, MAX_CAPACITY + 1, 0, MAX_CAPACITY, 0, True,
                 id="annotation was set to warning previously but still over capacity"),
    pytest.param("truncated", MAX_CAPACITY, MAX_CAPACITY, 0, MAX_CAPACITY, 0, False,
                 id="annotation removed at capacity"),
    pytest.param("invalid", MAX_CAPACITY + 1, MAX_CAPACITY + 1, 0, MAX_CAPACITY, 0, True,
                 id="no endpoints change, annotation value corrected"),
])
async def test_sync_service_over_capacity(starting: str | None, existing: int, desired: int, desired_not_ready: int,
                                          want_ready: int, want_not_ready: int, annotated: bool) -> None:
    """TestSyncServiceOverCapacity."""
    env = new_env()
    env.add_pods("test", desired, 1, desired_not_ready)
    svc = service("test", selector={"foo": "bar"}, ports=[{"port": 80}])
    env.add_service(svc)
    pods = [make_pod("test", i, 1, i < desired) for i in range(desired + desired_not_ready)]
    addresses = [pod_to_endpoint_address(svc, p) for p in pods[:existing]]
    annotations = {} if starting is None else {OVER_CAPACITY: starting}
    env.add_endpoints(endpoints("test", [{"addresses": addresses}], annotations=annotations))
    await sync(env, "test/foo")
    actual = env.client.endpoints["test/foo"]
    got = (actual["metadata"].get("annotations") or {}).get(OVER_CAPACITY)
    assert got == ("truncated" if annotated else None)
    subsets = actual.get("subsets") or []
    assert sum(len(s.get("addresses") or ()) for s in subsets) == want_ready
    assert sum(len(s.get("notReadyAddresses") or ()) for s in subsets) == want_not_ready


# --- readiness ----------------------------------------------------------------------------------------------

def _pod(phase: str, ready: bool, terminating: bool) -> dict[str, Any]:
    m: dict[str, Any] = {"namespace": "ns", "name": "fakepod", "labels": {"foo": "bar"}}
    if terminating:
        m["deletionTimestamp"] = format_time(T0)
    return {"metadata": m, "spec": {"containers": [{"ports": [{"name": "port1", "containerPort": 8080}]}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "podIP": "10.1.1.1", "podIPs": [{"ip": "10.1.1.1"}]}}


@pytest.mark.parametrize(("phase", "ready", "terminating", "tolerate", "want_ready", "want_unready"), [
    pytest.param("Running", True, False, False, 1, 0, id="pod running phase"),
    pytest.param("Running", True, True, False, 0, 0, id="pod running phase being deleted"),
    pytest.param("Unknown", True, False, False, 1, 0, id="pod unknown phase container ready"),
    pytest.param("Unknown", True, True, False, 0, 0, id="pod unknown phase container ready being deleted"),
    pytest.param("Pending", True, False, False, 1, 0, id="pod pending phase container ready"),
    pytest.param("Pending", True, True, False, 0, 0, id="pod pending phase container ready being deleted"),
    pytest.param("Unknown", False, False, False, 0, 1, id="pod unknown phase container not ready"),
    pytest.param("Pending", False, False, False, 0, 1, id="pod pending phase container not ready"),
    pytest.param("Failed", False, False, False, 0, 0, id="pod failed phase"),
    pytest.param("Succeeded", False, False, False, 0, 0, id="pod succeeded phase"),
    pytest.param("Running", False, False, True, 1, 0, id="pod running phase and tolerate unready"),
    pytest.param("Running", False, True, True, 1, 0, id="pod running phase and tolerate unready being deleted"),
    pytest.param("Unknown", False, False, True, 1, 0, id="pod unknown phase and tolerate unready"),
    pytest.param("Unknown", False, True, True, 1, 0, id="pod unknown phase and tolerate unready being deleted"),
    pytest.param("Pending", False, False, True, 1, 0, id="pod pending phase and tolerate unready"),
    pytest.param("Pending", False, True, True, 1, 0, id="pod pending phase and tolerate unready being deleted"),
    pytest.param("Failed", False, False, True, 0, 0, id="pod failed phase and tolerate unready"),
    pytest.param("Succeeded", False, False, True, 0, 0, id="pod succeeded phase and tolerate unready endpoints"),
])
async def test_sync_service_addresses(phase: str, ready: bool, terminating: bool, tolerate: bool, want_ready: int,
                                      want_unready: int) -> None:
    """TestSyncServiceAddresses."""
    env = new_env()
    env.add(PODS, _pod(phase, ready, terminating))
    env.add_service(service("ns", selector={"foo": "bar"}, publishNotReadyAddresses=tolerate, type="ClusterIP",
                            clusterIP="1.1.1.1", ports=[{"port": 80}]))
    await sync(env, "ns/foo")
    subsets = env.client.endpoints["ns/foo"].get("subsets") or []
    assert sum(len(s.get("addresses") or ()) for s in subsets) == want_ready
    assert sum(len(s.get("notReadyAddresses") or ()) for s in subsets) == want_unready


async def test_named_target_port_resolved_per_pod() -> None:
    """Pods naming the target port differently land in different subsets; a pod without it is left out."""
    env = new_env()
    pods = [make_pod("ns", i, 0, True) for i in range(3)]
    pods[0]["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    pods[1]["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    env.add(PODS, *pods)
    env.add_service(service("ns", selector={"foo": "bar"}, clusterIP="10.0.0.1",
                            ports=[{"name": "web", "port": 80, "protocol": "TCP", "targetPort": "http"}]))
    await sync(env, "ns/foo")
    subsets = env.client.body()["subsets"]
    by_port = {s["ports"][0]["port"]: [a["ip"] for a in s["addresses"]] for s in subsets}
    assert by_port == {8080: ["1.2.3.4"], 9090: ["1.2.3.5"]}


# --- failures -----------------------------------------------------------------------------------------------

async def test_failed_create_is_an_event_and_retried() -> None:
    env = new_env()
    env.client.fail["create"] = Forbidden(403, "Forbidden", "nope")
    env.add_service(service("ns", selector={"foo": "bar"}, ports=[{"port": 80}]))
    with pytest.raises(Forbidden):
        await sync(env, "ns/foo")
    assert env.events.events == [("foo", "Warning", "FailedToCreateEndpoint",
                                  "Failed to create endpoint for service ns/foo: nope")]


async def test_create_in_terminating_namespace_is_dropped() -> None:
    env = new_env()
    env.client.fail["create"] = Forbidden(403, "Forbidden", "namespace ns is being terminated",
                                          details={"causes": [{"reason": "NamespaceTerminating"}]})
    env.add_service(service("ns", selector={"foo": "bar"}, ports=[{"port": 80}]))
    await sync(env, "ns/foo")
    assert env.events.events == []


async def test_failed_update_is_an_event() -> None:
    env = new_env()
    env.client.fail["update"] = Forbidden(403, "Forbidden", "nope")
    env.add_endpoints(endpoints("ns", old_subsets()))
    env.add_service(service("ns", selector={"foo": "bar"}, ports=[{"port": 80}]))
    with pytest.raises(Forbidden):
        await sync(env, "ns/foo")
    assert env.events.events == [("foo", "Warning", "FailedToUpdateEndpoint", "Failed to update endpoint ns/foo: nope")]
