"""The API resources a real kube-apiserver 1.37 serves by default that kube-sim added late (issue 13): each
created, read, listed and printed as a Table through the HTTP face and the real kubectl, with upstream's
validation messages and discovery facts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from controller_manager.sim.apiserver import ApiServer, ApiServerOptions
from controller_manager.sim.apiserver.component_status import Health, http_probe
from tests.sim.apiserver.conftest import ADMIN, Client
from tests.sim.apiserver.kubectl_harness import Kubectl, serve

TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with serve(ApiServer(options=ApiServerOptions()), tmp_path) as k:
        yield k


def _causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["message"]) for c in body["details"]["causes"]]


async def _discovered(client: Client, group_version: str) -> dict[str, dict[str, Any]]:
    path = f"/api/{group_version}" if group_version == "v1" else f"/apis/{group_version}"
    status, body = await client.get(path)
    assert status == 200
    return {r["name"]: r for r in body["resources"]}


# --- core/v1 componentstatuses ---------------------------------------------------------------------------------


@pytest.fixture
async def healthz() -> AsyncIterator[str]:
    """A component's /healthz: ``ok`` at /healthz, a failing check at /bad."""

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def bad(_: web.Request) -> web.Response:
        return web.Response(text="[-]leaderelection failed", status=500)

    app = web.Application()
    app.router.add_get("/healthz", ok)
    app.router.add_get("/bad", bad)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_component_statuses_report_each_probe(api: ApiServer, client: Client, healthz: str) -> None:
    api.component_probes["controller-manager"] = http_probe(f"{healthz}/healthz")
    api.component_probes["scheduler"] = http_probe(f"{healthz}/bad")
    resp = await client.tc.get("/api/v1/componentstatuses", headers=ADMIN)
    assert resp.status == 200
    assert resp.headers.getall("Warning") == ['299 - "v1 ComponentStatus is deprecated in v1.19+"']
    body = await resp.json()
    assert body["kind"] == "ComponentStatusList"
    assert {i["metadata"]["name"]: i["conditions"] for i in body["items"]} == {
        "controller-manager": [{"type": "Healthy", "status": "True", "message": "ok"}],
        "scheduler": [{"type": "Healthy", "status": "False", "message": "[-]leaderelection failed"}],
        "etcd-0": [{"type": "Healthy", "status": "True", "message": "ok"}],
    }
    status, one = await client.get("/api/v1/componentstatuses/etcd-0")
    assert (status, one["kind"], one["metadata"]) == (200, "ComponentStatus", {"name": "etcd-0"})
    status, listed = await client.get("/api/v1/componentstatuses", params={"fieldSelector": "metadata.name=etcd-0"})
    assert [i["metadata"]["name"] for i in listed["items"]] == ["etcd-0"]
    status, err = await client.get("/api/v1/componentstatuses/nope")
    assert (status, err["message"], err.get("reason", "")) == (500, "Component not found: nope", "")
    status, err = await client.post("/api/v1/componentstatuses", {"metadata": {"name": "x"}})
    assert status == 405
    status, table = await client.get("/api/v1/componentstatuses", headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Status", "Message", "Error"]
    assert table["rows"][1]["cells"] == ["etcd-0", "Healthy", "ok", ""]


async def test_an_unreachable_component_is_unhealthy_with_the_dial_error() -> None:
    health = await http_probe("https://127.0.0.1:1/healthz")()
    assert health == Health("False", 'Get "https://127.0.0.1:1/healthz": dial tcp 127.0.0.1:1: connect: '
                                     "connection refused")


async def test_kubectl_get_cs(kubectl: Kubectl) -> None:
    lines = (await kubectl("get", "cs")).splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "MESSAGE", "ERROR"]
    assert lines[2].split() == ["etcd-0", "Healthy", "ok"]


# --- core/v1 podtemplates --------------------------------------------------------------------------------------

POD_TEMPLATE = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                "template": {"metadata": {"labels": {"a": "b"}},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}


async def test_pod_templates(client: Client) -> None:
    status, created = await client.post("/api/v1/namespaces/default/podtemplates", POD_TEMPLATE)
    assert status == 201, created
    assert created["metadata"]["generation"] == 1
    assert created["template"]["spec"]["restartPolicy"] == "Always"  # the pod template defaults
    status, patched = await client.patch("/api/v1/namespaces/default/podtemplates/t",
                                         {"metadata": {"labels": {"x": "y"}}})
    assert patched["metadata"]["generation"] == 1  # metadata alone: no new generation
    status, patched = await client.patch("/api/v1/namespaces/default/podtemplates/t",
                                         {"template": {"metadata": {"labels": {"a": "c"}}}})
    assert patched["metadata"]["generation"] == 2
    status, table = await client.get("/api/v1/namespaces/default/podtemplates", headers=TABLE)
    assert table["rows"][0]["cells"][:4] == ["t", "c", "nginx", "a=c"]
    bad = {**POD_TEMPLATE, "metadata": {"name": "u"}, "template": {"spec": {"containers": [{"name": "c"}]}}}
    status, err = await client.post("/api/v1/namespaces/default/podtemplates", bad)
    assert status == 422
    assert ("template.spec.containers[0].image", "Required value") in _causes(err)
    resources = await _discovered(client, "v1")
    assert resources["podtemplates"]["verbs"] == ["create", "delete", "deletecollection", "get", "list", "patch",
                                                  "update", "watch"]
    assert (resources["componentstatuses"]["verbs"], resources["componentstatuses"]["shortNames"]) == (
        ["get", "list"], ["cs"])


async def test_kubectl_pod_template(kubectl: Kubectl) -> None:
    assert (await kubectl("create", "-f", "-", stdin=json.dumps(POD_TEMPLATE))).strip() == "podtemplate/t created"
    assert (await kubectl("get", "podtemplates")).splitlines()[1].split() == ["t", "c", "nginx", "a=b"]


# --- node.k8s.io/v1 runtimeclasses ------------------------------------------------------------------------------

RUNTIME_CLASS = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"},
                 "handler": "runsc", "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}},
                 "scheduling": {"nodeSelector": {"sandbox": "gvisor"},
                                "tolerations": [{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}]}}


async def test_runtime_classes(client: Client) -> None:
    base = "/apis/node.k8s.io/v1/runtimeclasses"
    status, created = await client.post(base, RUNTIME_CLASS)
    assert status == 201, created
    assert created["overhead"] == {"podFixed": {"cpu": "250m", "memory": "64Mi"}}
    status, err = await client.patch(f"{base}/gvisor", {"handler": "kata"})
    assert status == 422
    assert err["message"] == 'RuntimeClass.node.k8s.io "gvisor" is invalid: handler: Invalid value: "kata": ' \
                             "field is immutable"
    bad = {**RUNTIME_CLASS, "metadata": {"name": "bad"}, "handler": "Not_A_Label",
           "overhead": {"podFixed": {"cpu": "-1", "pods": "1"}},
           "scheduling": {"nodeSelector": {"-x": "y"}, "tolerations": [{"operator": "Exists", "value": "v"}]}}
    status, err = await client.post(base, bad)
    assert status == 422
    assert _causes(err) == [
        ("handler", "Invalid value: \"Not_A_Label\": a lowercase RFC 1123 label must consist of lower case "
                    "alphanumeric characters or '-', and must start and end with an alphanumeric character "
                    "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        ("overhead.limits[cpu]", 'Invalid value: "-1": must be greater than or equal to 0'),
        ("overhead.limits[pods]", 'Invalid value: "pods": must be a standard resource for containers'),
        ("scheduling.nodeSelector", "Invalid value: \"-x\": name part must consist of alphanumeric characters, "
                                    "'-', '_' or '.', and must start and end with an alphanumeric character "
                                    "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                                    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ("scheduling.tolerations[0].operator", "Invalid value: \"v\": value must be empty when `operator` is "
                                               "'Exists'"),
    ]
    status, table = await client.get(base, headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Handler", "Age"]
    assert table["rows"][0]["cells"][:2] == ["gvisor", "runsc"]


# --- storage.k8s.io/v1 csistoragecapacities ---------------------------------------------------------------------

CAPACITY = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity", "metadata": {"name": "csisc-a"},
            "storageClassName": "standard", "capacity": "100Gi", "maximumVolumeSize": "10Gi",
            "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "zone-a"}}}


async def test_csi_storage_capacities(client: Client) -> None:
    base = "/apis/storage.k8s.io/v1/namespaces/kube-system/csistoragecapacities"
    status, created = await client.post(base, CAPACITY)
    assert status == 201, created
    assert created["metadata"]["namespace"] == "kube-system"
    status, patched = await client.patch(f"{base}/csisc-a", {"capacity": "50Gi"})
    assert (status, patched["capacity"]) == (200, "50Gi")
    status, err = await client.patch(f"{base}/csisc-a", {"storageClassName": "fast"})
    assert status == 422
    assert _causes(err) == [("storageClassName", 'Invalid value: "fast": field is immutable')]
    bad = {**CAPACITY, "metadata": {"name": "csisc-b"}, "storageClassName": "", "capacity": "-1",
           "nodeTopology": {"matchExpressions": [{"key": "zone", "operator": "In"}]}}
    status, err = await client.post(base, bad)
    assert status == 422
    assert _causes(err) == [
        ("nodeTopology.matchExpressions[0].values", "Required value: must be specified when `operator` is 'In' "
                                                     "or 'NotIn'"),
        ("storageClassName", 'Invalid value: "": a lowercase RFC 1123 subdomain must consist of lower case '
                             "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                             "character (e.g. 'example.com', regex used for validation is "
                             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        ("capacity", 'Invalid value: "-1": must be greater than or equal to 0'),
    ]
    status, table = await client.get(base, headers=TABLE)
    assert table["rows"][0]["cells"][:3] == ["csisc-a", "standard", "50Gi"]
    resources = await _discovered(client, "storage.k8s.io/v1")
    assert resources["csistoragecapacities"]["namespaced"] is True


# --- resource.k8s.io/v1 (dynamic resource allocation) ----------------------------------------------------------

DRA = "/apis/resource.k8s.io/v1"
CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "gpu"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}


async def test_resource_claims(client: Client) -> None:
    base = f"{DRA}/namespaces/default/resourceclaims"
    status, created = await client.post(base, CLAIM)
    assert status == 201, created
    assert created["spec"]["devices"]["requests"][0]["exactly"] == {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}
    assert created["status"] == {}
    status, err = await client.patch(f"{base}/gpu", {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "other"}}]}}})
    assert status == 422
    assert _causes(err) == [("spec", "Invalid value: null: field is immutable")]
    status, err = await client.patch(f"{base}/gpu/status", {"status": {"reservedFor": [{"resource": "pods"}]}})
    assert status == 422
    assert _causes(err) == [("status.reservedFor[0].name", "Required value"),
                            ("status.reservedFor[0].uid", "Required value"),
                            ("status.reservedFor", "Forbidden: may not be specified when `allocated` is not set")]
    allocation = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1",
                                           "device": "gpu-0"}]}}
    status, written = await client.patch(f"{base}/gpu/status", {"status": {
        "allocation": allocation, "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}})
    assert status == 200, written
    status, table = await client.get(base, headers=TABLE)
    assert table["rows"][0]["cells"][:2] == ["gpu", "allocated,reserved"]
    bad = {**CLAIM, "metadata": {"name": "bad"}, "spec": {"devices": {
        "requests": [{"name": "a", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}},
                     {"name": "b"},
                     {"name": "c", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2,
                                               "selectors": [{}]}}],
        "constraints": [{"requests": ["a", "x/y/z"]}],
        "config": [{"requests": ["zz"], "opaque": {"driver": "gpu.example.com"}}]}}}
    status, err = await client.post(base, bad)
    assert status == 422
    assert _causes(err) == [
        ("spec.devices.requests[0].exactly.allocationMode", 'Unsupported value: "Some": supported values: "All", '
                                                             '"ExactCount"'),
        ("spec.devices.requests[1]", "Required value: exactly one of `exactly` or `firstAvailable` is required"),
        ("spec.devices.requests[2].exactly.selectors[0].cel", "Required value"),
        ("spec.devices.requests[2].exactly.count", "Invalid value: 2: must not be specified when allocationMode is "
                                                   "'All'"),
        ("spec.devices.constraints[0].requests[1]", 'Invalid value: "x/y/z": must be the name of a request in the '
                                                    "claim or the name of a request and a subrequest separated "
                                                    "by '/'"),
        ("spec.devices.constraints[0].matchAttribute", "Required value"),
        ("spec.devices.config[0].requests[0]", 'Invalid value: "zz": must be the name of a request in the claim '
                                               "or the name of a request and a subrequest separated by '/'"),
        ("spec.devices.config[0].opaque.parameters", "Required value"),
    ]


async def test_device_classes_templates_and_slices(client: Client) -> None:
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    status, created = await client.post(f"{DRA}/deviceclasses", device_class)
    assert (status, created["metadata"]["generation"]) == (201, 1)
    status, patched = await client.patch(f"{DRA}/deviceclasses/gpu", {"spec": {"selectors": []}})
    assert patched["metadata"]["generation"] == 2

    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "t"},
                "spec": {"spec": CLAIM["spec"]}}
    status, created = await client.post(f"{DRA}/namespaces/default/resourceclaimtemplates", template)
    assert status == 201, created
    assert created["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    status, err = await client.patch(f"{DRA}/namespaces/default/resourceclaimtemplates/t",
                                     {"spec": {"metadata": {"labels": {"a": "b"}}}})
    assert status == 422
    assert [c[0] for c in _causes(err)] == ["spec"]
    # the new spec as json.Marshal writes the internal type (no JSON tags: Go names, every field)
    assert _causes(err)[0][1].startswith('Invalid value: {"ObjectMeta":{"creationTimestamp":null,"labels":{"a":"b"}},'
                                         '"Spec":{"Devices":{"Requests":[{"Name":"gpu","Exactly":{"DeviceClassName":'
                                         '"gpu.example.com","Selectors":null,"AllocationMode":"ExactCount","Count":1,')
    assert _causes(err)[0][1].endswith('"Constraints":null,"Config":null}}}: field is immutable')

    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1-gpu"},
              "spec": {"driver": "gpu.example.com", "pool": {"name": "n1", "resourceSliceCount": 1},
                       "nodeName": "n1", "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}
    status, created = await client.post(f"{DRA}/resourceslices", slice_)
    assert (status, created["metadata"]["generation"]) == (201, 1)
    status, listed = await client.get(f"{DRA}/resourceslices", params={"fieldSelector": "spec.nodeName=n1"})
    assert [s["metadata"]["name"] for s in listed["items"]] == ["n1-gpu"]
    status, err = await client.patch(f"{DRA}/resourceslices/n1-gpu", {"spec": {"nodeName": "n2"}})
    assert _causes(err) == [("spec.nodeName", 'Invalid value: "n2": field is immutable')]
    bad = {**slice_, "metadata": {"name": "bad"},
           "spec": {"driver": "", "pool": {"name": "", "resourceSliceCount": 0}, "allNodes": True, "nodeName": "n1",
                    "devices": [{"name": "d"}, {"name": "d"}]}}
    status, err = await client.post(f"{DRA}/resourceslices", bad)
    assert status == 422
    causes = _causes(err)
    assert causes[0] == ("spec.driver", "Required value")
    assert ("spec.pool.name", "Required value") in causes
    assert ("spec.pool.resourceSliceCount", "Invalid value: 0: must be greater than zero") in causes
    assert ("spec", 'Invalid value: "{`nodeName`, `allNodes`}": exactly one of `nodeName`, `nodeSelector`, '
                    "`allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set") in causes
    assert ("spec.devices[1].name", 'Duplicate value: "d"') in causes
    status, table = await client.get(f"{DRA}/resourceslices", headers=TABLE)
    assert table["rows"][0]["cells"][:4] == ["n1-gpu", "n1", "gpu.example.com", "n1"]
    resources = await _discovered(client, "resource.k8s.io/v1")
    assert sorted(resources) == ["deviceclasses", "resourceclaims", "resourceclaims/status",
                                 "resourceclaimtemplates", "resourceslices"]


# --- flowcontrol.apiserver.k8s.io/v1 (API Priority and Fairness) ------------------------------------------------

APF = "/apis/flowcontrol.apiserver.k8s.io/v1"


def _without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields")}
    conditions = [{k: v for k, v in c.items() if k != "lastTransitionTime"}
                  for c in obj.get("status", {}).get("conditions", [])]
    return {**obj, "metadata": meta, "status": {**obj.get("status", {}), "conditions": conditions}}


def test_the_bootstrap_configuration_is_stored_as_a_create_stores_it(api: ApiServer) -> None:
    from controller_manager.api.resources import FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS
    from controller_manager.sim.apiserver import flowcontrol_bootstrap

    installed = {(res.kind, o["metadata"]["name"]): o for res in (PRIORITYLEVELCONFIGURATIONS, FLOWSCHEMAS)
                 for o in api.list(res)[0]}
    assert len(installed) == 19
    for res in (FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS):
        for o in api.list(res)[0]:
            api.delete(res, None, o["metadata"]["name"])
    for level in flowcontrol_bootstrap.priority_levels():
        api.create(PRIORITYLEVELCONFIGURATIONS, level)
    for schema in flowcontrol_bootstrap.flow_schemas():
        api.create(FLOWSCHEMAS, schema)
    for res in (PRIORITYLEVELCONFIGURATIONS, FLOWSCHEMAS):
        for o in api.list(res)[0]:
            assert _without_server_fields(o) == _without_server_fields(installed[(res.kind, o["metadata"]["name"])])


async def test_flow_schemas_and_priority_levels(client: Client) -> None:
    status, listed = await client.get(f"{APF}/flowschemas")
    assert sorted(fs["metadata"]["name"] for fs in listed["items"]) == [
        "catch-all", "exempt", "global-default", "kube-controller-manager", "kube-scheduler",
        "kube-system-service-accounts", "probes", "service-accounts", "system-leader-election", "system-node-high",
        "system-nodes"]
    status, table = await client.get(f"{APF}/flowschemas", headers=TABLE)
    assert [r["cells"][:3] for r in table["rows"][:3]] == [["exempt", "exempt", 1], ["probes", "exempt", 2],
                                                             ["system-leader-election", "leader-election", 100]]
    assert table["rows"][0]["cells"][5] == "False"
    status, level = await client.get(f"{APF}/prioritylevelconfigurations/workload-high")
    assert level["spec"] == {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 40, "lendablePercent": 50,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}

    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "team"},
              "spec": {"priorityLevelConfiguration": {"name": "team-level"},
                       "rules": [{"subjects": [{"kind": "Group", "group": {"name": "team"}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                     "namespaces": ["*"]}]}]}}
    status, created = await client.post(f"{APF}/flowschemas", schema)
    assert status == 201, created
    assert created["spec"]["matchingPrecedence"] == 1000
    status, got = await client.get(f"{APF}/flowschemas/team")
    assert [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in got["status"]["conditions"]] == [
        {"type": "Dangling", "status": "True", "reason": "NotFound",
         "message": 'This FlowSchema references the PriorityLevelConfiguration object named "team-level" but there '
                    "is no such object"}]
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": "team-level"},
             "spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}}
    status, created = await client.post(f"{APF}/prioritylevelconfigurations", level)
    assert status == 201, created
    assert created["spec"]["limited"] == {"nominalConcurrencyShares": 30, "lendablePercent": 0, "limitResponse": {
        "type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}
    status, got = await client.get(f"{APF}/flowschemas/team")
    assert got["status"]["conditions"][0]["status"] == "False"
    assert got["status"]["conditions"][0]["reason"] == "Found"
    await client.delete(f"{APF}/prioritylevelconfigurations/team-level")
    status, got = await client.get(f"{APF}/flowschemas/team")
    assert got["status"]["conditions"][0]["reason"] == "NotFound"


async def test_flow_control_validation(client: Client) -> None:
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "bad"},
              "spec": {"priorityLevelConfiguration": {"name": ""}, "matchingPrecedence": 1,
                       "distinguisherMethod": {"type": "ByPod"},
                       "rules": [{"subjects": [],
                                  "resourceRules": [{"verbs": ["*", "get"], "apiGroups": ["*"],
                                                     "resources": ["pods"]}]}]}}
    status, err = await client.post(f"{APF}/flowschemas", schema)
    assert status == 422
    assert _causes(err) == [
        ("spec.matchingPrecedence", "Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"),
        ("spec.distinguisherMethod.type", 'Unsupported value: "ByPod": supported values: "ByUser", "ByNamespace"'),
        ("spec.priorityLevelConfiguration.name", "Required value: must reference a priority level"),
        ("spec.rules[0].subjects", "Required value: subjects must contain at least one value"),
        ("spec.rules[0].resourceRules[0].verbs", 'Invalid value: ["*","get"]: if \'*\' is present, must not specify '
                                                 "other verbs"),
        ("spec.rules[0].resourceRules[0].namespaces", "Required value: resource rules that are not cluster scoped "
                                                      "must supply at least one namespace"),
    ]
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": "bad"},
             "spec": {"type": "Limited", "limited": {"lendablePercent": 101, "limitResponse": {
                 "type": "Queue", "queuing": {"queues": 2, "handSize": 4}}}}}
    status, err = await client.post(f"{APF}/prioritylevelconfigurations", level)
    assert status == 422
    assert _causes(err) == [
        ("spec.limited.lendablePercent", "Invalid value: 101: must be between 0 and 100, inclusive"),
        ("spec.limited.limitResponse.queuing.handSize", "Invalid value: 4: should not be greater than queues (2)"),
    ]
    status, err = await client.post(f"{APF}/prioritylevelconfigurations",
                                    {**level, "metadata": {"name": "exempt-ish"}, "spec": {"type": "Exempt"}})
    assert status == 422
    assert _causes(err) == [("spec.type", 'Invalid value: "Exempt": type must be \'Exempt\' if and only if name is '
                                          "'exempt'")]


# --- /healthz, /livez, /readyz ---------------------------------------------------------------------------------


async def test_health_endpoints_list_their_checks(client: Client) -> None:
    status, text = await client.get("/readyz")
    assert (status, text) == (200, "ok")
    status, text = await client.get("/readyz?verbose")
    lines = text.splitlines()
    assert lines[:5] == ["[+]ping ok", "[+]log ok", "[+]etcd ok", "[+]etcd-readiness ok", "[+]informer-sync ok"]
    assert "[+]poststarthook/rbac/bootstrap-roles ok" in lines
    assert "[+]autoregister-completion ok" in lines
    assert lines[-2:] == ["[+]shutdown ok", "readyz check passed"]
    assert all(line.startswith("[+]") and line.endswith(" ok") for line in lines[:-1])
    status, text = await client.get("/livez?verbose")
    assert text.splitlines()[-1] == "livez check passed"
    assert "[+]shutdown ok" not in text.splitlines()
    status, text = await client.get("/healthz", params={"verbose": "1", "exclude": "etcd"})
    assert "[+]etcd excluded: ok" in text.splitlines()
    resp = await client.tc.get("/readyz?verbose&exclude=nope&exclude=etcd&exclude=also-nope", headers=ADMIN)
    text = await resp.text()
    assert resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert 'warn: some health checks cannot be excluded: no matches for "also-nope","nope"' in text.splitlines()
    assert (await client.get("/readyz/etcd")) == (200, "ok")
    assert (await client.get("/livez/poststarthook/rbac/bootstrap-roles")) == (200, "ok")
    status, _ = await client.get("/readyz/no-such-check")
    assert status == 404


# --- events.k8s.io/v1 view of core/v1 Events --------------------------------------------------------------------


async def test_a_core_event_read_through_events_v1_has_a_null_event_time(client: Client) -> None:
    """Upstream's Convert_core_Event_To_v1_Event copies eventTime as it is, and MicroTime's zero value marshals
    as null (the field has no omitempty): a real server answers ``"eventTime": null`` for an Event created through
    core/v1 without one, and so does kube-sim (the typed client libraries that insist on it are stricter than the
    server)."""
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "reason": "Started", "message": "m",
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "type": "Normal",
             "firstTimestamp": "2026-01-01T00:00:00Z"}
    status, created = await client.post("/api/v1/namespaces/default/events", event)
    assert status == 201, created
    status, got = await client.get("/apis/events.k8s.io/v1/namespaces/default/events/e")
    assert status == 200
    assert "eventTime" in got
    assert got["eventTime"] is None
    assert got["deprecatedFirstTimestamp"] == "2026-01-01T00:00:00Z"
    assert got["deprecatedLastTimestamp"] is None


# --- apiregistration.k8s.io/v1 apiservices --------------------------------------------------------------------

AGG = "/apis/apiregistration.k8s.io/v1/apiservices"


async def test_local_api_services(client: Client) -> None:
    status, listed = await client.get(AGG)
    assert status == 200
    by_name = {s["metadata"]["name"]: s for s in listed["items"]}
    served = await client.get("/apis")
    groups = {(gv["groupVersion"].split("/")[0], gv["version"]) for g in served[1]["groups"] for gv in g["versions"]}
    assert set(by_name) == {"v1."} | {f"{v}.{g}" for g, v in groups}
    core = by_name["v1."]
    assert core["spec"] == {"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}
    assert core["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "onstart"}
    assert [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in core["status"]["conditions"]] == [
        {"type": "Available", "status": "True", "reason": "Local", "message": "Local APIServices are always available"}]
    assert by_name["v2.autoscaling"]["spec"]["versionPriority"] == 30
    assert by_name["v1beta1.metrics.k8s.io"]["spec"]["service"] == {"namespace": "kube-system",
                                                                     "name": "metrics-server", "port": 443}
    _, table = await client.get(AGG, headers=TABLE)
    rows = {r["cells"][0]: r["cells"][1:3] for r in table["rows"]}
    assert rows["v1.apps"] == ["Local", "True"]
    assert rows["v1beta1.metrics.k8s.io"] == ["kube-system/metrics-server", "True"]


async def test_api_service_validation_and_custom_resource_registration(client: Client) -> None:
    bad = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.wrong"},
           "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 0, "versionPriority": 1001,
                    "insecureSkipTLSVerify": True}}
    status, err = await client.post(AGG, bad)
    assert status == 422
    assert _causes(err) == [
        ("metadata.name", 'Invalid value: "v1.wrong": must be `spec.version+"."+spec.group`: "v1.example.com"'),
        ("spec.groupPriorityMinimum", "Invalid value: 0: must be positive and less than 20000"),
        ("spec.versionPriority", "Invalid value: 1001: must be positive and less than 1000"),
        ("spec.insecureSkipTLSVerify", "Invalid value: true: local APIServices may not have insecureSkipTLSVerify"),
    ]
    remote = {**bad, "metadata": {"name": "v1.example.com"},
              "spec": {"group": "example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10,
                       "service": {"namespace": "ns", "name": "api"}}}
    status, created = await client.post(AGG, remote)
    assert status == 201, created
    assert created["spec"]["service"]["port"] == 443
    assert created["status"] == {}

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.stable.example.com"},
           "spec": {"group": "stable.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    status, created = await client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201, created
    status, registered = await client.get(f"{AGG}/v1.stable.example.com")
    assert status == 200, registered
    assert registered["spec"] == {"group": "stable.example.com", "version": "v1", "groupPriorityMinimum": 1000,
                                  "versionPriority": 100}
    assert registered["metadata"]["labels"] == {"kube-aggregator.kubernetes.io/automanaged": "true"}
    await client.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.stable.example.com")
    for _ in range(100):
        status, _ = await client.get(f"{AGG}/v1.stable.example.com")
        if status == 404:
            break
        await asyncio.sleep(0.05)
    assert status == 404


async def test_kubectl_api_services_and_resources(kubectl: Kubectl) -> None:
    lines = (await kubectl("get", "apiservices")).splitlines()
    assert lines[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
    assert lines[1].split()[:3] == ["v1.", "Local", "True"]
    resources = {line.split()[0] for line in (await kubectl("api-resources", "--no-headers")).splitlines()}
    assert {"componentstatuses", "podtemplates", "runtimeclasses", "csistoragecapacities", "deviceclasses",
            "resourceclaims", "resourceclaimtemplates", "resourceslices", "flowschemas",
            "prioritylevelconfigurations", "apiservices"} <= resources
    explained = await kubectl("explain", "resourceclaims.spec.devices.requests")
    assert "exactly" in explained
    assert "apiservice.apiregistration.k8s.io/v1.apps" in (await kubectl("get", "api-extensions", "-o",
                                                                       "name")).splitlines()


async def test_a_sim_cluster_reports_its_own_scheduler() -> None:
    from controller_manager.sim.cluster import SimCluster

    async with SimCluster(nodes=0, kubelets=False) as cluster:
        assert await cluster.api.component_probes["scheduler"]() == Health("True", "ok")
        assert await cluster.api.component_probes["etcd-0"]() == Health("True", "ok")


async def test_device_request_tolerations(client: Client) -> None:
    claim = {**CLAIM, "metadata": {"name": "tolerating"}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com",
        "tolerations": [{"key": "dead", "operator": "Exists", "value": "x"}, {"key": "k", "value": "a b"},
                        {"key": "k", "operator": "Exists", "effect": "Evict"}, {"key": "k", "effect": "None"}]}}]}}}
    status, err = await client.post(f"{DRA}/namespaces/default/resourceclaims", claim)
    assert status == 422
    path = "spec.devices.requests[0].exactly.tolerations"
    assert _causes(err) == [
        (f"{path}[0].value", 'Invalid value: "x": must be empty for operator `Exists`'),
        (f"{path}[1].value", 'Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric '
                             "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
                             "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                             "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
        (f"{path}[2].effect", 'Unsupported value: "Evict": supported values: "NoExecute", "NoSchedule", "None"'),
    ]


async def test_groups_are_discovered_in_the_aggregators_order(client: Client) -> None:
    """/apis lists groups as kube-aggregator sorts their APIServices: groupPriorityMinimum, highest first, then by
    name; versions by versionPriority (autoscaling/v2 is preferred); custom resources at 1000, metrics-server at 100."""
    status, _ = await client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    assert status == 201
    status, apis = await client.get("/apis")
    names = [g["name"] for g in apis["groups"]]
    assert names[:8] == ["apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
                         "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io"]
    assert names.index("admissionregistration.k8s.io") + 1 == names.index("apiextensions.k8s.io")
    assert names[-3:] == ["flowcontrol.apiserver.k8s.io", "stable.example.com", "metrics.k8s.io"]
    autoscaling = next(g for g in apis["groups"] if g["name"] == "autoscaling")
    assert [v["version"] for v in autoscaling["versions"]] == ["v2", "v1"]
    assert autoscaling["preferredVersion"]["version"] == "v2"
