"""managedFields and server-side apply of custom resources, typed by their version's structural schema (as the
apiextensions-apiserver's field manager types them): associative lists by ``x-kubernetes-list-type: map``,
atomic maps, untyped preserved fields, undeclared fields refused."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.sim.apiserver.conftest import Client
from tests.sim.apiserver.test_crd import CRDS, CRONTABS, SCHEMA, crd, crontab

APPLY = "application/apply-patch+yaml"


def _typed_crd() -> dict[str, Any]:
    body = crd()
    schema = copy.deepcopy(SCHEMA)
    spec = schema["properties"]["spec"]["properties"]
    spec["ports"] = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                     "items": {"type": "object", "required": ["name"], "properties": {
                         "name": {"type": "string"}, "port": {"type": "integer"}}}}
    spec["args"] = {"type": "array", "items": {"type": "string"}}
    spec["selector"] = {"type": "object", "x-kubernetes-map-type": "atomic",
                        "additionalProperties": {"type": "string"}}
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    return body


async def _apply(client: Client, name: str, spec: dict[str, Any], manager: str, force: bool = False) -> tuple[int, Any]:
    doc = crontab(name, **spec)
    params = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return await client.call("PATCH", f"{CRONTABS}/{name}", raw=yaml.safe_dump(doc).encode(), content_type=APPLY,
                             params=params)


def _fields(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    entry = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == manager)
    fields: dict[str, Any] = entry["fieldsV1"]
    return fields


async def test_list_map_items_are_owned_by_key(client: Client) -> None:
    code, _ = await client.post(CRDS, _typed_crd())
    assert code == 201
    code, first = await _apply(client, "a", {"ports": [{"name": "http", "port": 80}], "args": ["x"]}, "one")
    assert code == 201, first
    assert _fields(first, "one") == {"f:spec": {"f:args": {}, "f:cronSpec": {}, "f:ports": {
        'k:{"name":"http"}': {".": {}, "f:name": {}, "f:port": {}}}}}
    # Another manager adds its own port: the list merges by key instead of being replaced.
    code, second = await _apply(client, "a", {"ports": [{"name": "https", "port": 443}]}, "two")
    assert code == 200, second
    assert [p["name"] for p in second["spec"]["ports"]] == ["http", "https"]
    # An atomic list (no list-type) conflicts as a whole.
    code, body = await _apply(client, "a", {"args": ["y"]}, "two")
    assert code == 409, body
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "one": .spec.args'


async def test_atomic_map_is_owned_whole_and_undeclared_fields_are_refused(client: Client) -> None:
    code, _ = await client.post(CRDS, _typed_crd())
    assert code == 201
    code, applied = await _apply(client, "a", {"selector": {"app": "web", "tier": "db"}}, "one")
    assert code == 201, applied["message"]
    assert _fields(applied, "one")["f:spec"]["f:selector"] == {}
    code, body = await _apply(client, "a", {"bogus": 1}, "one")
    assert code == 500, body
    assert body["message"] == ("failed to create typed patch object (/a; stable.example.com/v1, Kind=CronTab): "
                               ".spec.bogus: field not declared in schema")


async def test_preserved_fields_are_tracked_untyped(client: Client) -> None:
    code, _ = await client.post(CRDS, _typed_crd())
    assert code == 201
    code, applied = await _apply(client, "a", {"extra": {"free": {"form": [1, 2]}}}, "one")
    assert code == 201, applied
    # (an element of a map, not a declared field, is owned itself too: the "." of "free")
    assert _fields(applied, "one")["f:spec"]["f:extra"] == {"f:free": {".": {}, "f:form": {}}}
