"""kube-sim's OpenAPI documents over HTTP: the v3 discovery and group-version documents (hashes, caching,
negotiation), the v2 document (JSON, gnostic protobuf, gzip), and the schemas' shape as upstream publishes
them."""

from __future__ import annotations

import gzip
import hashlib
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.resources import BUILTIN, Resource
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, build_app, openapi
from controller_manager.sim.apiserver.crd import CUSTOMRESOURCEDEFINITIONS
from tests.sim.apiserver.conftest import ADMIN, Client

META = "io.k8s.apimachinery.pkg.apis.meta.v1."
V2_PB = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


async def _raw(client: Client, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    resp = await client.tc.get(path, headers={**ADMIN, "Accept-Encoding": "identity", **(headers or {})},
                               allow_redirects=False,
                               auto_decompress=False)
    return resp.status, dict(resp.headers), await resp.read()


async def test_v3_discovery_lists_every_served_group_version_with_the_documents_hash(client: Client) -> None:
    status, listing = await client.get("/openapi/v3")
    assert status == 200
    expected = {"api", "apis", "version"}
    for r in (*BUILTIN, CUSTOMRESOURCEDEFINITIONS):  # the CRD kind is in the schema as the built-in kinds are
        expected.add(f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}")
        if r.group:
            expected.add(f"apis/{r.group}")
    assert set(listing["paths"]) == expected
    for name, entry in listing["paths"].items():
        url = entry["serverRelativeURL"]
        path, _, query = url.partition("?")
        assert path == f"/openapi/v3/{name}"
        status, _headers, body = await _raw(client, path)
        assert status == 200
        assert query == "hash=" + hashlib.sha512(body).hexdigest().upper()


async def test_v3_hash_url_is_immutable_stale_hash_redirects_and_etag_answers_304(client: Client) -> None:
    _, listing = await client.get("/openapi/v3")
    url = listing["paths"]["apis/apps/v1"]["serverRelativeURL"]
    etag = url.partition("hash=")[2]
    status, headers, body = await _raw(client, url)
    assert status == 200
    assert headers["Cache-Control"] == "public, immutable"
    assert headers["Etag"] == f'"{etag}"'
    assert headers["Content-Type"] == "application/json"
    assert "Expires" in headers
    assert orjson.loads(body)["openapi"] == "3.0.0"

    status, headers, _ = await _raw(client, "/openapi/v3/apis/apps/v1?hash=STALE")
    assert status == 301
    assert headers["Location"] == url

    status, headers, body = await _raw(client, "/openapi/v3/apis/apps/v1", {"If-None-Match": f'"{etag}"'})
    assert (status, body) == (304, b"")
    status, headers, _ = await _raw(client, "/openapi/v3/apis/apps/v1")
    assert "Cache-Control" not in headers  # only the hashed URL is immutable

    status, _, _ = await _raw(client, "/openapi/v3/apis/apps/v1",
                              {"Accept": "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"})
    assert status == 406
    status, _, _ = await _raw(client, "/openapi/v3/apis/nothing.example.com/v1")
    assert status == 404


def _schemas(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["components"]["schemas"]  # type: ignore[no-any-return]


def _ref(name: str) -> dict[str, Any]:
    return {"allOf": [{"$ref": f"#/components/schemas/{name}"}]}


async def test_v3_apps_document_schemas_as_upstream(client: Client) -> None:
    _, doc = await client.get("/openapi/v3/apis/apps/v1")
    assert doc["openapi"] == "3.0.0"
    assert doc["info"] == {"title": "Kubernetes", "version": "v1.37.0"}
    s = _schemas(doc)
    assert s["io.k8s.api.apps.v1.Deployment"] == {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {**_ref(META + "ObjectMeta"), "default": {}},
            "spec": {**_ref("io.k8s.api.apps.v1.DeploymentSpec"), "default": {}},
            "status": {**_ref("io.k8s.api.apps.v1.DeploymentStatus"), "default": {}}},
        "required": ["spec"],
        "x-kubernetes-group-version-kind": [{"group": "apps", "kind": "Deployment", "version": "v1"}]}
    spec = s["io.k8s.api.apps.v1.DeploymentSpec"]
    assert spec["required"] == ["selector", "template"]
    assert spec["properties"]["replicas"] == {"type": "integer", "format": "int32"}
    assert spec["properties"]["selector"] == _ref(META + "LabelSelector")  # a pointer: no default
    assert spec["properties"]["strategy"] == {**_ref("io.k8s.api.apps.v1.DeploymentStrategy"), "default": {},
                                              "x-kubernetes-patch-strategy": "retainKeys"}
    status = s["io.k8s.api.apps.v1.DeploymentStatus"]["properties"]
    assert status["conditions"] == {
        "type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentCondition"},
        "x-kubernetes-list-map-keys": ["type"], "x-kubernetes-list-type": "map",
        "x-kubernetes-patch-merge-key": "type", "x-kubernetes-patch-strategy": "merge"}
    condition = s["io.k8s.api.apps.v1.DeploymentCondition"]
    assert condition["properties"]["lastTransitionTime"] == _ref(META + "Time")  # Time decodes itself: no default
    assert condition["properties"]["status"] == {"type": "string", "default": ""}
    assert s["io.k8s.api.apps.v1.RollingUpdateDeployment"]["properties"]["maxSurge"] == _ref(
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString")
    assert s["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] == {
        "format": "int-or-string", "oneOf": [{"type": "integer"}, {"type": "string"}]}
    assert s["io.k8s.apimachinery.pkg.api.resource.Quantity"] == {"oneOf": [{"type": "string"}, {"type": "number"}]}
    assert s[META + "Time"] == {"type": "string", "format": "date-time"}
    assert s["io.k8s.apimachinery.pkg.runtime.RawExtension"] == {"type": "object"}
    assert s[META + "Patch"] == {"type": "object"}
    assert s["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["limits"] == {
        "type": "object",
        "additionalProperties": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"}}
    port = s["io.k8s.api.core.v1.ContainerPort"]
    assert port["required"] == ["containerPort"]
    assert port["properties"]["protocol"] == {"type": "string", "enum": ["SCTP", "TCP", "UDP"], "default": "TCP"}
    assert port["properties"]["containerPort"] == {"type": "integer", "format": "int32", "default": 0}
    containers = s["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers == {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"},
                          "x-kubernetes-list-map-keys": ["name"], "x-kubernetes-list-type": "map",
                          "x-kubernetes-patch-merge-key": "name", "x-kubernetes-patch-strategy": "merge"}
    assert s["io.k8s.api.core.v1.NodeSelectorTerm"]["x-kubernetes-map-type"] == "atomic"
    assert s["io.k8s.api.core.v1.SeccompProfile"]["x-kubernetes-unions"] == [
        {"discriminator": "type", "fields-to-discriminateBy": {"localhostProfile": "LocalhostProfile"}}]
    # The meta types every group registers keep the core entry and this group-version's.
    assert s[META + "DeleteOptions"]["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "DeleteOptions", "version": "v1"},
        {"group": "apps", "kind": "DeleteOptions", "version": "v1"}]
    assert s["io.k8s.api.autoscaling.v1.Scale"]["x-kubernetes-group-version-kind"] == [
        {"group": "autoscaling", "kind": "Scale", "version": "v1"}]
    assert "io.k8s.api.core.v1.Pod" not in s  # only what the group-version's operations reach


async def test_v3_paths_carry_operations_kubectl_reads(client: Client) -> None:
    _, doc = await client.get("/openapi/v3/apis/apps/v1")
    paths = doc["paths"]
    item = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    assert set(item) == {"get", "put", "patch", "delete", "parameters"}
    patch = item["patch"]
    assert patch["operationId"] == "patchAppsV1NamespacedDeployment"
    assert patch["x-kubernetes-action"] == "patch"
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert [p["name"] for p in patch["parameters"]] == ["dryRun", "fieldManager", "fieldValidation", "force"]
    assert patch["requestBody"]["content"]["application/strategic-merge-patch+json"]["schema"] == {
        "$ref": f"#/components/schemas/{META}Patch"}
    assert [p["name"] for p in item["parameters"]] == ["name", "namespace", "pretty"]
    collection = paths["/apis/apps/v1/namespaces/{namespace}/deployments"]
    assert collection["get"]["operationId"] == "listAppsV1NamespacedDeployment"
    assert collection["post"]["operationId"] == "createAppsV1NamespacedDeployment"
    assert collection["delete"]["x-kubernetes-action"] == "deletecollection"
    assert paths["/apis/apps/v1/deployments"]["get"]["operationId"] == "listAppsV1DeploymentForAllNamespaces"
    watch = paths["/apis/apps/v1/watch/namespaces/{namespace}/deployments/{name}"]["get"]
    assert watch["x-kubernetes-action"] == "watch"
    scale = paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]
    assert scale["put"]["operationId"] == "replaceAppsV1NamespacedDeploymentScale"
    assert scale["get"]["x-kubernetes-group-version-kind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    assert paths["/apis/apps/v1/"]["get"]["operationId"] == "getAppsV1APIResources"
    _, core = await client.get("/openapi/v3/api/v1")
    assert core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"]["operationId"] == (
        "createCoreV1NamespacedPodEviction")
    assert core["paths"]["/api/v1/namespaces/{name}/finalize"]["put"]["operationId"] == "replaceCoreV1NamespaceFinalize"
    _, rbac = await client.get("/openapi/v3/apis/rbac.authorization.k8s.io/v1")
    assert rbac["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["get"]["operationId"] == (
        "readRbacAuthorizationV1ClusterRole")


async def test_v2_json_protobuf_gzip_and_406(client: Client) -> None:
    status, headers, body = await _raw(client, "/openapi/v2", {"Accept": "application/json"})
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    doc = orjson.loads(body)
    assert doc["swagger"] == "2.0"
    deployment = doc["definitions"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["properties"]["spec"] == {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"}
    # v2 prunes defaults (what is left are properties named "default": LimitRangeItem's, a Volume's default mode,
    # (and JSONSchemaProps' "default", a reference to apiextensions' JSON; DRA's CapacityRequestPolicy.default)
    assert b'"default"' not in body.replace(b'"default":{"type"', b"").replace(b'"default":{"additionalProperties"',
                                                                              b"").replace(
        b'"default":{"$ref":"#/definitions/io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"}', b""
    ).replace(b'"default":{"$ref":"#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}', b"")
    assert doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] == {
        "type": "string", "format": "int-or-string"}
    op = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert op["parameters"][0] == {"name": "body", "in": "body", "required": True,
                                   "schema": {"$ref": f"#/definitions/{META}Patch"}}
    assert "fieldValidation" in [p["name"] for p in op["parameters"]]
    etag = headers["Etag"]

    status, headers, pb = await _raw(client, "/openapi/v2", {"Accept": f"{V2_PB}, application/json"})
    assert status == 200
    assert headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert headers["Etag"] == etag
    assert pb.startswith(b"\n\x032.0")

    status, headers, zipped = await _raw(client, "/openapi/v2", {"Accept": V2_PB, "Accept-Encoding": "gzip"})
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped) == pb

    status, _, _ = await _raw(client, "/openapi/v2", {"Accept": "text/html"})
    assert status == 406
    status, _, body = await _raw(client, "/openapi/v2", {"Accept": "application/json", "If-None-Match": etag})
    assert (status, body) == (304, b"")


async def test_documents_are_built_on_first_request_only() -> None:
    api = ApiServer(options=ApiServerOptions(git_version="v1.37.0-lazy"))
    docs = openapi.documents(api.resources, "v1.37.0-lazy")
    async with TestClient(TestServer(build_app(api))) as tc:
        client = Client(tc)
        assert (await client.get("/version"))[0] == 200
        assert docs.built() == []
        assert (await client.get("/openapi/v3/apis/apps/v1"))[0] == 200
        assert docs.built() == ["apis/apps/v1"]
        first = docs.v3("apis/apps/v1")
        assert (await client.get("/openapi/v3/apis/apps/v1"))[0] == 200
        assert docs.v3("apis/apps/v1") is first


def _refs_resolve(doc: dict[str, Any], prefix: str, names: set[str]) -> None:
    stack: list[Any] = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            ref = x.get("$ref")
            if ref is not None:
                assert ref.startswith(prefix), ref
                assert ref[len(prefix):] in names, ref
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sets(st.sampled_from(BUILTIN), min_size=1))
def test_every_reference_resolves_and_every_kind_has_its_schema(served: set[Resource]) -> None:
    resources = tuple(r for r in BUILTIN if r in served)
    docs = openapi.Documents(resources, "v1.37.0")
    listing = orjson.loads(docs.v3_discovery().body)["paths"]
    for name in listing:
        built = docs.v3(name)
        assert built is not None
        doc = orjson.loads(built.body)
        _refs_resolve(doc, "#/components/schemas/", set(doc["components"]["schemas"]))
    for r in resources:
        gv = f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}"
        built = docs.v3(gv)
        assert built is not None
        schemas = orjson.loads(built.body)["components"]["schemas"]
        gvks = [s.get("x-kubernetes-group-version-kind") for s in schemas.values()]
        assert [{"group": r.group, "kind": r.kind, "version": r.version}] in gvks
    v2 = orjson.loads(docs.v2().body)
    _refs_resolve(v2, "#/definitions/", set(v2["definitions"]))


async def test_openapi_answers_json_even_when_yaml_is_preferred(client: Client) -> None:
    """The OpenAPI handlers know JSON (and v2's protobuf) only; a YAML preference does not turn them into YAML."""
    status, headers, body = await _raw(client, "/openapi/v3", {"Accept": "application/yaml, application/json"})
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert "paths" in orjson.loads(body)
    status, headers, _ = await _raw(client, "/openapi/v3/api/v1", {"Accept": "application/yaml, */*"})
    assert (status, headers["Content-Type"]) == (200, "application/json")


async def test_v2_lists_the_discovery_routes_and_honours_if_modified_since(client: Client) -> None:
    status, headers, body = await _raw(client, "/openapi/v2", {"Accept": "application/json"})
    doc = orjson.loads(body)
    for path, op_id in (("/api/", "getCoreAPIVersions"), ("/apis/", "getAPIVersions"),
                        ("/apis/apps/", "getAppsAPIGroup"), ("/version/", "getCodeVersion")):
        assert doc["paths"][path]["get"]["operationId"] == op_id
    assert doc["definitions"]["io.k8s.apimachinery.pkg.version.Info"]["required"][:3] == [
        "major", "minor", "gitVersion"]
    status, _, body = await _raw(client, "/openapi/v2", {"Accept": "application/json",
                                                         "If-Modified-Since": headers["Last-Modified"]})
    assert (status, body) == (304, b"")
    status, _, _ = await _raw(client, "/openapi/v2", {"Accept": "application/json",
                                                      "If-Modified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"})
    assert status == 200
