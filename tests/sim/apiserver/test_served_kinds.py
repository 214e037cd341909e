"""The API resources a real kube-apiserver 1.37 serves by default that kube-sim added late (issue 13): each
created, read, listed and printed as a Table through the HTTP face and the real kubectl, with upstream's
validation messages and discovery facts."""

from __future__ import annotations

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


async def test_an_unreachable_component_is_unknown() -> None:
    health = await http_probe("https://127.0.0.1:1/healthz")()
    assert health == Health("Unknown", "", 'Get "https://127.0.0.1:1/healthz": dial tcp 127.0.0.1:1: '
                                           "connect: connection refused")


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
