"""kube-sim over protobuf as client-go's typed clients use it: bodies in ``application/vnd.kubernetes.protobuf``,
answers in it when the Accept header prefers it (objects, lists, errors, watch frames), JSON for what has no
protobuf form, 400 for malformed bodies, 406/415 where the real server refuses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from controller_manager.api.resources import BUILTIN, Resource
from controller_manager.clock import FakeClock
from controller_manager.sim.apiserver import ApiServer, ApiServerOptions, build_app, gojson, protobuf, schema
from tests.sim.apiserver.conftest import ADMIN, Client, configmap, deployment, pod
from tests.sim.apiserver.test_crd import CRDS, crd

PROTOBUF = "application/vnd.kubernetes.protobuf"
KUBECTL_ACCEPT = "application/vnd.kubernetes.protobuf,application/json"
CM_URL = "/api/v1/namespaces/default/configmaps"
DEPLOY_URL = "/apis/apps/v1/namespaces/default/deployments"


def _wire(obj: dict[str, Any]) -> bytes:
    """``obj`` as a Go client sends it: the struct it decodes to, enveloped."""
    name = protobuf.struct_for(obj["apiVersion"], obj["kind"])
    assert name is not None
    return protobuf.encode_object(gojson.normalize(obj, schema.struct(name)), name)


async def _call(client: Client, method: str, path: str, body: bytes | None = None,
                accept: str = KUBECTL_ACCEPT, content_type: str = PROTOBUF) -> tuple[int, str, bytes]:
    headers = {**ADMIN, "Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
    resp = await client.tc.request(method, path, data=body, headers=headers)
    return resp.status, resp.headers.get("Content-Type", ""), await resp.read()


def _object(data: bytes) -> dict[str, Any]:
    return protobuf.decode_object(data)


def _stable(obj: dict[str, Any], names: tuple[str, ...]) -> Any:
    """``obj`` with what differs between two creates of the same body (names, uid, times) blanked."""
    meta = obj["metadata"]
    raw = orjson.dumps(obj).decode()
    for value, blank in ((meta["uid"], "UID"), (meta["creationTimestamp"], "TIME"), (meta["resourceVersion"], "RV"),
                         *((name, "NAME") for name in names)):
        raw = raw.replace(f'"{value}"', f'"{blank}"')
    return orjson.loads(raw)


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque",
          "data": {"k": "AAEC"}, "stringData": {"plain": "text"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
           "spec": {"type": "NodePort", "selector": {"app": "web"},
                    "ports": [{"port": 80, "targetPort": "http", "protocol": "TCP"}]}}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}


@pytest.mark.parametrize(("path", "obj"), [
    pytest.param(DEPLOY_URL, deployment("d", 2), id="deployment"),
    pytest.param("/api/v1/namespaces/default/pods", pod("p", labels={"a": "b"}), id="pod"),
    pytest.param(CM_URL, configmap("cm"), id="configmap"),
    pytest.param("/api/v1/namespaces/default/secrets", SECRET, id="secret"),
    pytest.param("/api/v1/namespaces/default/services", SERVICE, id="service"),
    pytest.param("/apis/batch/v1/namespaces/default/jobs", JOB, id="job"),
    pytest.param("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", ROLE, id="role"),
])
async def test_protobuf_create_stores_what_json_create_stores(client: Client, path: str, obj: dict[str, Any]) -> None:
    code, via_json = await client.post(path, obj)
    assert code == 201, via_json
    second = {**obj, "metadata": {**obj["metadata"], "name": obj["metadata"]["name"] + "-pb"}}
    code, ctype, body = await _call(client, "POST", path, _wire(second))
    assert code == 201, body
    assert ctype == PROTOBUF
    via_protobuf = _object(body)
    _, stored = await client.get(f"{path}/{second['metadata']['name']}")
    assert gojson.normalize(via_protobuf, schema.struct(protobuf.struct_for(obj["apiVersion"],
                                                                                       obj["kind"]) or "")) == stored
    if obj["kind"] == "Service":  # allocated: a cluster IP and node ports of its own
        for s in (stored, via_json):
            s["spec"].pop("clusterIP"), s["spec"].pop("clusterIPs")
            for port in s["spec"]["ports"]:
                port.pop("nodePort", None)
    names = (obj["metadata"]["name"], second["metadata"]["name"])
    assert _stable(stored, names) == _stable(via_json, names)


async def test_get_list_and_update_answer_protobuf(client: Client) -> None:
    await client.post(CM_URL, configmap("a"))
    _, as_json = await client.get(f"{CM_URL}/a")
    code, ctype, body = await _call(client, "GET", f"{CM_URL}/a")
    assert (code, ctype) == (200, PROTOBUF)
    assert body[:4] == b"k8s\x00"
    got = _object(body)
    assert gojson.normalize(got, schema.struct("io.k8s.api.core.v1.ConfigMap")) == as_json
    code, ctype, body = await _call(client, "GET", CM_URL)
    listed = _object(body)
    assert (code, listed["kind"], [i["metadata"]["name"] for i in listed["items"]]) == (200, "ConfigMapList", ["a"])
    changed = {**as_json, "data": {"k": "v2"}}
    code, ctype, body = await _call(client, "PUT", f"{CM_URL}/a", _wire(changed))
    assert (code, ctype, _object(body)["data"]) == (200, PROTOBUF, {"k": "v2"})


async def test_errors_are_protobuf_status_with_their_code(client: Client) -> None:
    code, ctype, body = await _call(client, "GET", f"{CM_URL}/missing")
    assert (code, ctype) == (404, PROTOBUF)
    status = _object(body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
    assert status["message"] == 'configmaps "missing" not found'


@pytest.mark.parametrize(("body", "message"), [
    pytest.param(b"{}", "the object provided is unrecognized (must be of type ConfigMap): provided data does not "
                        "appear to be a protobuf message, expected prefix [107 56 115 0] ({})", id="json-body"),
    pytest.param(b"k8s\x00\x0a\x30", "the object provided is unrecognized (must be of type ConfigMap): unexpected "
                                     "EOF (6b3873000a30)", id="truncated-envelope"),
    pytest.param(b"k8s\x00\x0a\x06\x0a\x02v1\x12\x00\x12\x02\x0a\x30",
                 'ConfigMap in version "v1" cannot be handled as a ConfigMap: unexpected EOF', id="truncated-object"),
    pytest.param(b"k8s\x00\x0a\x0a\x0a\x02v1\x12\x04Nope\x12\x00",
                 'Nope in version "v1" cannot be handled as a ConfigMap: no kind "Nope" is registered for version '
                 '"v1" in scheme "pkg/api/legacyscheme/scheme.go:30"', id="unknown-kind"),
])
async def test_malformed_bodies_are_400_and_the_server_goes_on(client: Client, body: bytes, message: str) -> None:
    code, _, raw = await _call(client, "POST", CM_URL, body, accept="application/json")
    assert code == 400
    status = orjson.loads(raw)
    assert (status["reason"], status["message"]) == ("BadRequest", message)
    code, _ = await client.post(CM_URL, configmap("after"))
    assert code == 201


async def test_delete_options_and_scale_in_protobuf(client: Client) -> None:
    await client.post(DEPLOY_URL, deployment("d", 1))
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d", "namespace": "default"},
             "spec": {"replicas": 4}}
    code, _, body = await _call(client, "PUT", f"{DEPLOY_URL}/d/scale", _wire(scale))
    assert code == 200, body
    assert _object(body)["spec"] == {"replicas": 4}
    dry_run = {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "dryRun": ["All"]}
    name = protobuf.meta_struct("DeleteOptions")
    assert name is not None
    code, _, body = await _call(client, "DELETE", f"{DEPLOY_URL}/d", protobuf.encode_object(dry_run, name))
    assert code == 200, body
    assert (await client.get(f"{DEPLOY_URL}/d"))[0] == 200  # a dry run: still there
    background = {"apiVersion": "apps/v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    code, _, body = await _call(client, "DELETE", f"{DEPLOY_URL}/d", protobuf.encode_object(background, name))
    assert code == 200, body
    assert (await client.get(f"{DEPLOY_URL}/d"))[0] == 404


async def test_metadata_only_and_table_requests(client: Client) -> None:
    await client.post(CM_URL, configmap("a", labels={"x": "y"}))
    partial = f"{PROTOBUF};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    code, ctype, body = await _call(client, "GET", CM_URL, accept=partial)
    listed = _object(body)
    assert (code, ctype, listed["kind"]) == (200, PROTOBUF, "PartialObjectMetadataList")
    assert listed["items"][0]["metadata"]["labels"] == {"x": "y"}
    assert "data" not in listed["items"][0]
    # A Table has no protobuf form: the JSON the client also accepts.
    table = f"{PROTOBUF};as=Table;g=meta.k8s.io;v=v1,application/json;as=Table;g=meta.k8s.io;v=v1,application/json"
    code, ctype, body = await _call(client, "GET", CM_URL, accept=table)
    assert (code, orjson.loads(body)["kind"]) == (200, "Table")
    assert ctype.startswith("application/json")


def _frames(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Split a protobuf watch stream into (type, object) events (whole frames only: the rest is still coming)."""
    events = []
    while len(data) >= 4:
        size = int.from_bytes(data[:4], "big")
        if len(data) < 4 + size:
            break
        frame, data = data[4:4 + size], data[4 + size:]
        fields = _fields(frame)
        raw = _fields(fields[2])[1]
        events.append((fields[1].decode(), _object(raw)))
    return events


def _fields(message: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a small message (enough for WatchEvent and RawExtension)."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos < len(message):
        tag = message[pos]
        pos += 1
        size = shift = 0
        while True:
            b = message[pos]
            pos += 1
            size |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        out[tag >> 3] = message[pos:pos + size]
        pos += size
    return out


async def test_watch_streams_length_delimited_frames(client: Client) -> None:
    await client.post(CM_URL, configmap("a"))
    resp = await client.tc.get(CM_URL, params={"watch": "true", "resourceVersion": "0"},
                               headers={**ADMIN, "Accept": KUBECTL_ACCEPT})
    try:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "application/vnd.kubernetes.protobuf;stream=watch"
        await client.post(CM_URL, configmap("b"))
        data = b""
        while len(_frames(data)) < 2:
            data += await asyncio.wait_for(resp.content.readany(), 2)
    finally:
        resp.close()
    events = _frames(data)
    assert [(t, o["kind"], o["metadata"]["name"]) for t, o in events] == [("ADDED", "ConfigMap", "a"),
                                                                          ("ADDED", "ConfigMap", "b")]


async def test_watch_error_event_is_a_protobuf_status() -> None:
    api = ApiServer(clock=FakeClock(), options=ApiServerOptions(watch_history_size=2))
    async with TestClient(TestServer(build_app(api))) as tc:
        client = Client(tc)
        for i in range(4):
            await client.post(CM_URL, configmap(f"c{i}"))
        resp = await tc.get(CM_URL, params={"watch": "true", "resourceVersion": "1"},
                            headers={**ADMIN, "Accept": KUBECTL_ACCEPT})
        assert resp.headers["Content-Type"] == "application/vnd.kubernetes.protobuf;stream=watch"
        data = await asyncio.wait_for(resp.read(), 2)
    [(kind, status)] = _frames(data)
    assert (kind, status["kind"], status["code"]) == ("ERROR", "Status", 410)


WIDGETS = Resource("example.com", "v1", "widgets", "Widget", namespaced=True)


@pytest.fixture
async def crd_client() -> AsyncIterator[Client]:
    api = ApiServer(clock=FakeClock(), options=ApiServerOptions(resources=(*BUILTIN, WIDGETS)))
    async with TestClient(TestServer(build_app(api))) as tc:
        yield Client(tc)


async def test_custom_resources_have_no_protobuf_form(crd_client: Client) -> None:
    url = "/apis/example.com/v1/namespaces/default/widgets"
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    code, _, raw = await _call(crd_client, "POST", url, orjson.dumps(widget), content_type="application/json")
    assert code == 201
    assert orjson.loads(raw)["spec"] == {"size": 1}  # JSON: the kind has no protobuf form
    code, _, raw = await _call(crd_client, "GET", f"{url}/w", accept=PROTOBUF)
    status = _object(raw)
    assert (code, status["reason"], status["message"]) == (
        406, "NotAcceptable", "only the following media types are accepted: application/json, application/yaml")
    code, _, raw = await _call(crd_client, "POST", url, b"k8s\x00", accept="application/json")
    assert (code, orjson.loads(raw)["message"]) == (
        415, "the body of the request was in an unknown format - accepted media types include: application/json, "
             "application/yaml")


async def test_binding_and_eviction_in_protobuf(client: Client) -> None:
    pods = "/api/v1/namespaces/default/pods"
    await client.post(pods, pod("p"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "default"},
               "target": {"kind": "Node", "name": "node-1"}}
    code, ctype, body = await _call(client, "POST", f"{pods}/p/binding", _wire(binding))
    assert (code, ctype, _object(body)["status"]) == (201, PROTOBUF, "Success")
    assert (await client.get(f"{pods}/p"))[1]["spec"]["nodeName"] == "node-1"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "default"}}
    code, ctype, body = await _call(client, "POST", f"{pods}/p/eviction", _wire(eviction))
    assert (code, _object(body)["status"]) == (201, "Success")
    assert (await client.get(f"{pods}/p"))[1]["metadata"]["deletionTimestamp"]  # graceful: the kubelet ends it


@pytest.mark.parametrize("path", ["/api", "/apis", "/api/v1", "/apis/apps", "/apis/apps/v1"])
async def test_discovery_in_protobuf(client: Client, path: str) -> None:
    _, as_json = await client.get(path)
    code, ctype, body = await _call(client, "GET", path)
    assert (code, ctype) == (200, PROTOBUF)
    got = _object(body)
    name = protobuf.struct_for(got["apiVersion"], got["kind"])
    assert name is not None
    assert gojson.normalize(got, schema.struct(name)) == gojson.normalize(as_json, schema.struct(name))


async def test_version_stays_json(client: Client) -> None:
    code, ctype, body = await _call(client, "GET", "/version")
    assert (code, orjson.loads(body)["major"]) == (200, "1")
    assert ctype.startswith("application/json")


async def test_a_list_page_in_protobuf_is_the_json_page(client: Client) -> None:
    for name in ("a", "b", "c"):
        await client.post(CM_URL, configmap(name))
    _, as_json = await client.get(CM_URL, params={"limit": "2"})
    code, ctype, body = await _call(client, "GET", f"{CM_URL}?limit=2")
    assert (code, ctype) == (200, PROTOBUF)
    got = _object(body)
    list_struct = schema.struct("io.k8s.api.core.v1.ConfigMapList")
    # Items carry no apiVersion/kind in protobuf (TypeMeta is not on the wire).
    as_json["items"] = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in as_json["items"]]
    assert gojson.normalize(got, list_struct) == gojson.normalize(as_json, list_struct)
    assert got["metadata"]["remainingItemCount"] == 1
    # The same versions listed again come from the cache of encoded messages, byte for byte.
    assert (await _call(client, "GET", f"{CM_URL}?limit=2"))[2] == body


async def test_metadata_only_watch_in_protobuf(client: Client) -> None:
    await client.post(CM_URL, configmap("a", labels={"x": "y"}))
    accept = f"{PROTOBUF};as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    resp = await client.tc.get(CM_URL, params={"watch": "true", "resourceVersion": "0"},
                               headers={**ADMIN, "Accept": accept})
    try:
        assert resp.headers["Content-Type"] == "application/vnd.kubernetes.protobuf;stream=watch"
        data = b""
        while not _frames(data):
            data += await asyncio.wait_for(resp.content.readany(), 2)
    finally:
        resp.close()
    [(kind, obj)] = _frames(data)
    assert (kind, obj["kind"], obj["metadata"]["labels"]) == ("ADDED", "PartialObjectMetadata", {"x": "y"})
    assert "data" not in obj


async def test_patch_and_delete_answer_protobuf(client: Client) -> None:
    await client.post(DEPLOY_URL, deployment("d", 1))
    code, ctype, body = await _call(client, "PATCH", f"{DEPLOY_URL}/d", orjson.dumps({"spec": {"replicas": 2}}),
                                    content_type="application/merge-patch+json")
    assert (code, ctype, _object(body)["spec"]["replicas"]) == (200, PROTOBUF, 2)
    code, ctype, body = await _call(client, "DELETE", f"{DEPLOY_URL}/d")
    assert (code, ctype, _object(body)["status"]) == (200, PROTOBUF, "Success")  # gone at once: a Status


async def test_custom_resource_definitions_in_protobuf(client: Client) -> None:
    """A CRD is a kind of the schema: a protobuf body creates it as a JSON body does, and it is served back in
    protobuf (its JSON schema's raw values, "or" types and doubles included)."""
    body = crd()
    props = body["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props["properties"]["replicas"].update(minimum=1, maximum=10.5, default=2)
    props["properties"]["tags"] = {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
    props["additionalProperties"] = False
    code, ctype, raw = await _call(client, "POST", CRDS, _wire(body))
    assert (code, ctype) == (201, PROTOBUF), raw
    created = _object(raw)
    _, stored = await client.get(f"{CRDS}/{body['metadata']['name']}")
    st_ = schema.kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert st_ is not None
    assert gojson.normalize(created, st_)["spec"] == stored["spec"]
    spec_schema = stored["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec_schema["properties"]["replicas"]["maximum"] == 10.5
    assert spec_schema["properties"]["tags"]["items"] == {"type": "string", "enum": ["a", "b"]}
    assert spec_schema["additionalProperties"] is False
    code, ctype, raw = await _call(client, "GET", f"{CRDS}/{body['metadata']['name']}")
    assert (code, ctype) == (200, PROTOBUF)
    assert gojson.normalize(_object(raw), st_) == stored
