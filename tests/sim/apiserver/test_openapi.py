"""kube-sim's OpenAPI documents over HTTP: the v3 discovery and group-version documents (hashes, caching,
negotiation), the v2 document (JSON, gnostic protobuf, gzip), and the schemas' shape and descriptions as
upstream publishes them."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from typing import Any

import orjson
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller_manager.api.resources import BUILTIN, Resource
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, build_app, openapi
from controller_manager.sim.apiserver.crd import CUSTOMRESOURCEDEFINITIONS
from controller_manager.sim.apiserver.openapi import descriptions
from tests.sim.apiserver.conftest import ADMIN, Client
from tests.sim.apiserver.upstream_schema import definitions, without_enum_values

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


def _bare(s: Any) -> Any:
    """A schema without its descriptions: the structure the assertions state (a property named
    ``description``, as JSONSchemaProps has, stays)."""
    if isinstance(s, list):
        return [_bare(x) for x in s]
    if not isinstance(s, dict):
        return s
    return {k: ({name: _bare(p) for name, p in v.items()} if k == "properties" else _bare(v))
            for k, v in s.items() if k != "description"}


async def test_v3_apps_document_schemas_as_upstream(client: Client) -> None:
    _, doc = await client.get("/openapi/v3/apis/apps/v1")
    assert doc["openapi"] == "3.0.0"
    assert doc["info"] == {"title": "Kubernetes", "version": "v1.37.0"}
    s = {name: _bare(schema) for name, schema in _schemas(doc).items()}
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


_DEPLOYMENT_TYPES = ("Deployment", "DeploymentCondition", "DeploymentList", "DeploymentSpec", "DeploymentStatus",
                     "DeploymentStrategy", "RollingUpdateDeployment")
_EXTENSIONS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-patch-strategy",
               "x-kubernetes-patch-merge-key", "x-kubernetes-map-type", "x-kubernetes-group-version-kind")


def _what(s: dict[str, Any]) -> tuple[Any, ...]:
    """A property's type, format and reference (a v3 ``allOf`` reference unwrapped; the package's nullable
    type lists made single)."""
    ref = s["allOf"][0]["$ref"] if "allOf" in s else s.get("$ref", "")
    t = s.get("type")
    if isinstance(t, list):
        t = next(x for x in t if x != "null")
    items = s.get("items")
    return t, s.get("format"), ref.rsplit("/", 1)[-1], _what(items) if isinstance(items, dict) else None


async def test_v3_deployment_components_match_upstream(client: Client) -> None:
    """/openapi/v3/apis/apps/v1's Deployment schemas against upstream 1.37's: the same properties with the
    same types, formats and references, descriptions (the type's and every property's), required lists and
    x-kubernetes-* keys. An enum property's description ends with its values, one per line."""
    _, doc = await client.get("/openapi/v3/apis/apps/v1")
    ours_all, theirs_all = _schemas(doc), definitions()
    for kind in _DEPLOYMENT_TYPES:
        name = f"io.k8s.api.apps.v1.{kind}"
        ours, theirs = ours_all[name], theirs_all[name]
        assert ours["description"] == theirs["description"], name
        assert ours.get("required", []) == theirs.get("required", []), name
        assert sorted(ours["properties"]) == sorted(theirs["properties"]), name
        for prop, mine in ours["properties"].items():
            upstream = theirs["properties"][prop]
            assert _what(mine) == _what(upstream), (name, prop)
            assert without_enum_values(mine["description"]) == upstream["description"], (name, prop)
            for key in _EXTENSIONS:
                assert mine.get(key) == upstream.get(key), (name, prop, key)
            if "enum" in mine:
                values = mine["description"].partition("\n\nPossible enum values:\n")[2].splitlines()
                assert [line.split("`")[1] for line in values] == [f'"{v}"' for v in mine["enum"]], (name, prop)
        for key in _EXTENSIONS:
            assert ours.get(key) == theirs.get(key), (name, key)
    strategy_type = ours_all["io.k8s.api.apps.v1.DeploymentStrategy"]["properties"]["type"]
    assert strategy_type["enum"] == ["Recreate", "RollingUpdate"]
    assert "Possible enum values:\n - `\"Recreate\"` " in strategy_type["description"]


_UPSTREAM_PATHS = Path(__file__).with_name("data") / "upstream-1.36-swagger-deployment-paths.json.gz"


def _without_schema(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.items() if k != "schema"} for p in params]


async def test_deployment_paths_describe_as_upstream(client: Client) -> None:
    """The deployments' path items against upstream's swagger (release-1.36's file: the installer's wording and
    the options' field comments read the same in 1.37): each operation's description, id, action and kind; each
    parameter's name, place, description and type, in upstream's order, the parameters every operation of a
    path takes listed once on the path. The v3 document describes its operations and parameters alike."""
    upstream = orjson.loads(gzip.decompress(_UPSTREAM_PATHS.read_bytes()))["paths"]
    status, _, body = await _raw(client, "/openapi/v2", {"Accept": "application/json"})
    assert status == 200
    ours = orjson.loads(body)["paths"]
    _, v3 = await client.get("/openapi/v3/apis/apps/v1")
    for path, theirs in upstream.items():
        item = ours[path]
        assert sorted(item) == sorted(theirs), path
        assert item["parameters"] == theirs["parameters"], path
        v3_item = v3["paths"][path]
        assert [{k: v for k, v in p.items() if k != "schema"} for p in v3_item["parameters"]] == [
            {k: v for k, v in p.items() if k not in ("type", "uniqueItems")} for p in theirs["parameters"]], path
        for method, op in theirs.items():
            if method == "parameters":
                continue
            mine = item[method]
            for key in ("description", "operationId", "x-kubernetes-action", "x-kubernetes-group-version-kind"):
                assert mine[key] == op[key], (path, method, key)
            assert _without_schema(mine.get("parameters", [])) == op.get("parameters", []), (path, method)
            assert v3_item[method]["description"] == op["description"], (path, method)
            v3_params = {p["name"]: p.get("description") for p in v3_item[method].get("parameters", [])}
            assert v3_params == {p["name"]: p.get("description") for p in op.get("parameters", ()) if p["in"] != "body"}


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


def _with_defaults(definitions: dict[str, Any]) -> list[str]:
    """The schemas (``Type.property``...) that carry a ``default``."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = list(definitions.items())
    while stack:
        where, s = stack.pop()
        if not isinstance(s, dict):
            continue
        if "default" in s:
            found.append(where)
        for key, value in s.items():
            if key == "properties":
                stack.extend((f"{where}.{name}", p) for name, p in value.items())
            elif key in ("items", "additionalProperties"):
                stack.append((f"{where}[]", value))
    return found


async def test_v2_json_protobuf_gzip_and_406(client: Client) -> None:
    status, headers, body = await _raw(client, "/openapi/v2", {"Accept": "application/json"})
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    doc = orjson.loads(body)
    assert doc["swagger"] == "2.0"
    deployment = doc["definitions"]["io.k8s.api.apps.v1.Deployment"]
    upstream = definitions()["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]
    # v2 keeps a reference's description beside it (no allOf)
    assert deployment["properties"]["spec"] == {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec",
                                                "description": upstream["description"]}
    # v2 prunes defaults (properties named "default", as LimitRangeItem's and JSONSchemaProps' are, stay)
    assert _with_defaults(doc["definitions"]) == []
    assert _bare(doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]) == {
        "type": "string", "format": "int-or-string"}
    assert doc["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["description"].startswith(
        "IntOrString is a type that can hold an int32 or a string.")
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
    descriptions._data.cache_clear()  # (earlier tests in this process may have read them)
    api = ApiServer(options=ApiServerOptions(git_version="v1.37.0-lazy"))
    docs = openapi.documents(api.resources, "v1.37.0-lazy")
    async with TestClient(TestServer(build_app(api))) as tc:
        client = Client(tc)
        assert (await client.get("/version"))[0] == 200
        status, _ = await client.post("/api/v1/namespaces/default/configmaps",
                                      {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        assert status == 201
        assert docs.built() == []
        assert descriptions._data.cache_info().currsize == 0  # the descriptions are not read until asked for
        assert (await client.get("/openapi/v3/apis/apps/v1"))[0] == 200
        assert docs.built() == ["apis/apps/v1"]
        assert descriptions._data.cache_info().currsize == 1
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
