"""A Pod's /status write is checked as ValidatePodStatusUpdate checks it: condition types, nominatedNodeName,
qosClass, container state transitions, resource claim statuses, pod and host IPs, container users and
allocated resource health (cases after upstream's validation_test.go)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.sim.apiserver import validation_pod_status
from tests.sim.apiserver.conftest import Client, pod

PODS = "/api/v1/namespaces/default/pods"
Mut = Callable[[dict[str, Any]], None]


def _running(name: str) -> dict[str, Any]:
    return {"name": name, "image": "nginx", "imageID": "", "ready": True, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


def _terminated(name: str, code: int) -> dict[str, Any]:
    return {"name": name, "image": "nginx", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "startedAt": "2026-01-01T00:00:00Z",
                                     "finishedAt": "2026-01-01T00:01:00Z"}}}


async def _put_status(client: Client, name: str, change: Mut) -> tuple[int, Any]:
    _, current = await client.get(f"{PODS}/{name}")
    body = copy.deepcopy(current)
    change(body["status"])
    return await client.put(f"{PODS}/{name}/status", body)


def _messages(body: Any) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in body["details"]["causes"]]


def _set(**fields: Any) -> Mut:
    def change(status: dict[str, Any]) -> None:
        status.update(copy.deepcopy(fields))
    return change


@pytest.mark.parametrize(("change", "want"), [
    pytest.param(_set(conditions=[{"type": "example.com/ok", "status": "True"}, {"type": "Ready", "status": "True"}]),
                 [], id="qualified-and-system-conditions"),
    pytest.param(_set(conditions=[{"type": "bad type!", "status": "True"}]),
                 ['metadata.conditions[0].Type: Invalid value: "bad type!": name part must consist of alphanumeric '
                  "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                  "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"], id="bad-condition-type"),
    pytest.param(_set(nominatedNodeName="Node_1"),
                 ['status.nominatedNodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist of '
                  "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                  "character (e.g. 'example.com', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"], id="bad-nominated-node"),
    pytest.param(_set(nominatedNodeName="node-1"), [], id="nominated-node"),
    pytest.param(_set(qosClass="Guaranteed"),
                 ['status.qosClass: Invalid value: "Guaranteed": field is immutable'], id="qos-immutable"),
    pytest.param(_set(podIP="10.0.0.1", podIPs=[{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]), [], id="dual-stack"),
    pytest.param(_set(podIP="10.0.0.1", podIPs=[{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]),
                 ['status.podIPs: Invalid value: [{"IP":"10.0.0.1"},{"IP":"10.0.0.2"}]: may specify no more than '
                  "one IP for each IP family"], id="two-v4-pod-ips"),
    pytest.param(_set(podIP="10.0.0.1", podIPs=[{"ip": "10.0.0.1"}, {"ip": "10.0.0.1"}]),
                 ['status.podIPs: Invalid value: [{"IP":"10.0.0.1"},{"IP":"10.0.0.1"}]: may specify no more than '
                  "one IP for each IP family",
                  'status.podIPs[1]: Duplicate value: {"IP":"10.0.0.1"}'], id="repeated-pod-ip"),
    pytest.param(_set(podIP="010.0.0.1", podIPs=[{"ip": "010.0.0.1"}]),
                 ['status.podIPs[0]: Invalid value: "010.0.0.1": must not have leading 0s'], id="leading-zero"),
    pytest.param(_set(podIP="fd00:0::1", podIPs=[{"ip": "fd00:0::1"}]),
                 ['status.podIPs[0]: Invalid value: "fd00:0::1": must be in canonical form ("fd00::1")'],
                 id="not-canonical"),
    pytest.param(_set(podIP="bad", podIPs=[{"ip": "10.0.0.9"}]),
                 ['status.podIPs[0]: Invalid value: "bad": must be a valid IP address, (e.g. 10.9.8.7 or '
                  "2001:db8::ffff)"], id="pod-ip-wins-over-pod-ips"),
    pytest.param(_set(hostIP="10.1.0.1", hostIPs=[{"ip": "10.1.0.2"}]),
                 ['status.hostIPs[0].ip: Invalid value: "10.1.0.2": must be equal to `hostIP`'], id="host-ip-mismatch"),
    pytest.param(_set(hostIP="10.1.0.1", hostIPs=[{"ip": "10.1.0.1"}, {"ip": "10.1.0.1"}]),
                 ['status.hostIPs[1]: Duplicate value: {"IP":"10.1.0.1"}',
                  'status.hostIPs: Invalid value: [{"IP":"10.1.0.1"},{"IP":"10.1.0.1"}]: may specify no more than '
                  "one IP for each IP family"], id="repeated-host-ip"),
    pytest.param(_set(resourceClaimStatuses=[{"name": "gpu", "resourceClaimName": "x"}]),
                 ['status.resourceClaimStatuses[0].name: Invalid value: "gpu": must match the name of an entry in '
                  "`spec.resourceClaims`"], id="unknown-claim"),
    pytest.param(_set(containerStatuses=[{**_running("c"), "user": {"linux": {"uid": -1, "gid": 0,
                                                                             "supplementalGroups": [2**31]}}}]),
                 ["status.containerStatuses[0].linux.uid: Invalid value: -1: must be between 0 and 2147483647, "
                  "inclusive",
                  "status.containerStatuses[0].linux.supplementalGroups[0]: Invalid value: 2147483648: must be "
                  "between 0 and 2147483647, inclusive"], id="user-ids"),
    pytest.param(_set(containerStatuses=[{**_running("c"), "allocatedResourcesStatus": [
        {"name": "example.com/gpu", "resources": [{"resourceID": "a", "health": "Healthy"},
                                                  {"resourceID": "a", "health": "Sick"}]}]}]),
                 ['status.containerStatuses[0].allocatedResourcesStatus[0].name: Invalid value: "example.com/gpu": '
                  "must match one of the container's resource requests",
                  'status.containerStatuses[0].allocatedResourcesStatus[0].resources[1].health: Unsupported value: '
                  '"Sick": supported values: "Healthy", "Unhealthy", "Unknown"',
                  'status.containerStatuses[0].allocatedResourcesStatus[0].resources[1].resourceID: Duplicate value: '
                  '"a"'], id="allocated-health"),
])
async def test_status_fields(client: Client, change: Mut, want: list[str]) -> None:
    code, _ = await client.post(PODS, pod("p"))
    assert code == 201
    code, body = await _put_status(client, "p", change)
    if not want:
        assert code == 200, body
        return
    assert code == 422, body
    assert _messages(body) == want


@pytest.mark.parametrize(("policy", "code", "refused"), [
    ("Never", 0, True), ("Never", 1, True), ("OnFailure", 0, True), ("OnFailure", 1, False), ("Always", 0, False),
])
async def test_terminated_container_may_not_run_again(client: Client, policy: str, code: int, refused: bool) -> None:
    created, _ = await client.post(PODS, pod("p", restartPolicy=policy))
    assert created == 201
    status, body = await _put_status(client, "p", _set(containerStatuses=[_terminated("c", code)]))
    assert status == 200, body
    status, body = await _put_status(client, "p", _set(containerStatuses=[_running("c")]))
    if not refused:
        assert status == 200, body
        return
    assert status == 422, body
    assert _messages(body) == ["status.containerStatuses[0].state: Forbidden: may not be transitioned to "
                               "non-terminated state"]


async def test_sidecar_init_containers_may_restart(client: Client) -> None:
    body = pod("p", restartPolicy="Never", initContainers=[
        {"name": "side", "image": "nginx", "restartPolicy": "Always"}, {"name": "init", "image": "busybox"}])
    created, got = await client.post(PODS, body)
    assert created == 201, got
    code, got = await _put_status(client, "p", _set(initContainerStatuses=[_terminated("side", 0),
                                                                           _terminated("init", 0)]))
    assert code == 200, got
    code, got = await _put_status(client, "p", _set(initContainerStatuses=[_running("side"), _terminated("init", 0)]))
    assert code == 200, got
    code, got = await _put_status(client, "p", _set(initContainerStatuses=[_running("side"), _running("init")]))
    assert code == 422, got
    assert _messages(got) == ["status.initContainerStatuses[1].state: Forbidden: may not be transitioned to "
                              "non-terminated state"]


async def test_an_empty_qos_class_is_filled_from_the_stored_one(client: Client) -> None:
    code, created = await client.post(PODS, pod("p"))
    assert code == 201
    code, body = await _put_status(client, "p", lambda status: status.pop("qosClass", None))
    assert code == 200, body
    assert body["status"]["qosClass"] == created["status"]["qosClass"] == "BestEffort"


_GPU = "example.com/gpu"


def _extended(*mappings: dict[str, str], claim: str = "p-extended-resources-abcde") -> Mut:
    return _set(extendedResourceClaimStatus={"requestMappings": list(mappings), "resourceClaimName": claim})


def _mapping(container: str = "c", resource: str = _GPU, request: str = "container-0-request-0") -> dict[str, str]:
    return {"containerName": container, "resourceName": resource, "requestName": request}


@pytest.mark.parametrize(("change", "want"), [
    pytest.param(_extended(_mapping(), _mapping("init")), [], id="valid"),
    pytest.param(_extended(), ["status.extendedResourceClaimStatus.requestMappings: Required value: at least one "
                               "request mapping is required"], id="no-mappings"),
    pytest.param(_extended(_mapping("ghost")),
                 ['status.extendedResourceClaimStatus.requestMappings[0].containerName: Invalid value: "ghost": '
                  "must match the name of an entry in spec.initContainers.name or spec.containers.name"],
                 id="unknown-container"),
    pytest.param(_extended(_mapping(resource="example.com/fpga")),
                 ['status.extendedResourceClaimStatus.requestMappings[0].resourceName: Invalid value: '
                  '"example.com/fpga": must match the extended resource name of an entry in '
                  "spec.initContainers.resources.requests or spec.containers.resources.requests"],
                 id="resource-not-requested"),
    pytest.param(_extended(_mapping(request="Request_0")),
                 ['status.extendedResourceClaimStatus.requestName: Invalid value: "Request_0": a lowercase RFC 1123 '
                  "label must consist of lower case alphanumeric characters or '-', and must start and end with an "
                  "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"], id="bad-request-name"),
    pytest.param(_extended(_mapping(), _mapping()),
                 ['status.extendedResourceClaimStatus.requestMappings[1].containerName: Duplicate value: "c"',
                  'status.extendedResourceClaimStatus.requestMappings[1].resourceName: Duplicate value: '
                  '"example.com/gpu"',
                  'status.extendedResourceClaimStatus.requestMappings[1].requestName: Duplicate value: '
                  '"container-0-request-0"'], id="repeated-mapping"),
    pytest.param(_extended(_mapping(), claim=""),
                 ["status.extendedResourceClaimStatus.resourceClaimName: Required value"], id="no-claim-name"),
    pytest.param(_extended(_mapping(), claim="Claim"),
                 ['status.extendedResourceClaimStatus.resourceClaimName: Invalid value: "Claim": a lowercase RFC 1123 '
                  "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
                  "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"], id="bad-claim-name"),
])
async def test_extended_resource_claim_status(client: Client, change: Mut, want: list[str]) -> None:
    requests = {"resources": {"requests": {_GPU: "1"}, "limits": {_GPU: "1"}}}
    body = pod("p", containers=[{"name": "c", "image": "nginx", **requests}],
               initContainers=[{"name": "init", "image": "busybox", **requests}])
    code, got = await client.post(PODS, body)
    assert code == 201, got
    code, got = await _put_status(client, "p", change)
    if not want:
        assert code == 200, got
        assert got["status"]["extendedResourceClaimStatus"]["requestMappings"][1]["containerName"] == "init"
        return
    assert code == 422, got
    assert _messages(got) == want


_NA = "status.nodeAllocatableResourceClaimStatuses"


def _node_allocatable(*entries: dict[str, Any]) -> Mut:
    return _set(nodeAllocatableResourceClaimStatuses=list(entries))


def _claim(name: str = "claim-1", **fields: Any) -> dict[str, Any]:
    return {"resourceClaimName": name, **fields}


@pytest.mark.parametrize(("change", "want"), [
    pytest.param(_node_allocatable(_claim(containers=["c"], mapping=[{"name": "cpu", "quantity": "1"}],
                                          overhead=[{"name": "memory", "perPod": "64Mi", "perContainer": "0"}])),
                 [], id="valid"),
    pytest.param(_node_allocatable(_claim(overhead=[{"name": "cpu"}])),
                 [f'{_NA}[0].overhead[0]: Invalid value: "": at least one of perPod or perContainer must be set'],
                 id="overhead-without-amount"),
    pytest.param(_node_allocatable(_claim(overhead=[{"name": "cpu", "perPod": "-100m", "perContainer": "-1"}])),
                 [f'{_NA}[0].overhead[0].perPod: Invalid value: "-100m": must be non-negative',
                  f'{_NA}[0].overhead[0].perContainer: Invalid value: "-1": must be non-negative'],
                 id="negative-overhead"),
    pytest.param(_node_allocatable(_claim(mapping=[{"name": "cpu", "quantity": "1"},
                                                   {"name": "cpu", "quantity": "2"}])),
                 [f'{_NA}[0].mapping[1]: Duplicate value: "cpu"'], id="repeated-mapping"),
    pytest.param(_node_allocatable(_claim(mapping=[{"name": "cpu", "quantity": "1"}]),
                                   _claim(mapping=[{"name": "memory", "quantity": "1G"}])),
                 [f'{_NA}[1]: Duplicate value: "claim-1"'], id="repeated-claim"),
    pytest.param(_node_allocatable(_claim(containers=["c", "c"])),
                 [f'{_NA}[0].containers[1]: Duplicate value: "c"'], id="repeated-container"),
    pytest.param(_node_allocatable(_claim(mapping=[{"quantity": "1"}, {"name": "memory"}])),
                 [f"{_NA}[0].mapping[0].name: Required value", f"{_NA}[0].mapping[1].quantity: Required value"],
                 id="mapping-fields-required"),
    pytest.param(_node_allocatable(_claim(overhead=[{"perPod": "100m"}, {"name": "cpu", "perPod": "1"},
                                                    {"name": "cpu", "perContainer": "2"}])),
                 [f"{_NA}[0].overhead[0].name: Required value", f'{_NA}[0].overhead[2]: Duplicate value: "cpu"'],
                 id="overhead-name"),
    pytest.param(_node_allocatable(_claim("", mapping=[{"name": "cpu", "quantity": "1"}])),
                 [f"{_NA}[0].resourceClaimName: Required value"], id="no-claim-name"),
])
async def test_node_allocatable_resource_claim_statuses(client: Client, change: Mut, want: list[str]) -> None:
    code, got = await client.post(PODS, pod("p"))
    assert code == 201, got
    code, got = await _put_status(client, "p", change)
    if not want:
        assert code == 200, got
        assert got["status"]["nodeAllocatableResourceClaimStatuses"][0]["overhead"][0]["perPod"] == "64Mi"
        return
    assert code == 422, got
    assert _messages(got) == want


_octets = st.one_of(st.integers(0, 300).map(str),
                    st.sampled_from(["00", "01", "007", "0255", "\u0663", "1e1", "", "-1"]))


@given(st.lists(_octets, min_size=3, max_size=5).map(".".join))
def test_the_canonical_ipv4_shortcut_answers_as_the_full_check(text: str) -> None:
    # is_valid_ip passes a plain dotted quad at once; anything else, and what it passes, the full check reads.
    shortcut = validation_pod_status.is_valid_ip("status.podIP", text)
    saved = validation_pod_status._CANONICAL_V4
    validation_pod_status._CANONICAL_V4 = re.compile(r"(?!)")  # (matches nothing)
    try:
        assert validation_pod_status.is_valid_ip("status.podIP", text) == shortcut
    finally:
        validation_pod_status._CANONICAL_V4 = saved
