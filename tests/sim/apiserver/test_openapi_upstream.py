"""kube-sim's OpenAPI schemas against upstream's: the kubernetes-validate package ships JSON schemas derived
from kube-apiserver 1.37's OpenAPI (``v1.37.0-local-strict``); every type kube-sim's documents publish must have
upstream's property names, types and formats, references, required lists, list/map/patch extensions,
struct map type, unions and group-version-kinds, and upstream's descriptions of the type and of each property
(the package's are without the enum values a server with OpenAPIEnums on appends). Also: the v2 protobuf form
decodes to the JSON form."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controller_manager.api.resources import BUILTIN
from controller_manager.sim.apiserver import openapi
from tests.sim.apiserver.upstream_schema import UPSTREAM, without_enum_values

_EXTENSIONS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-patch-strategy",
               "x-kubernetes-patch-merge-key", "x-kubernetes-map-type")
# Where kube-sim's k8s.io/api (a later 1.37 commit) is ahead of the package's documents.
KNOWN_AHEAD = {("io.k8s.api.core.v1.NodeSystemInfo", "runningInUserNamespace")}
# The package rewrites these two hand-written types into its own oneOf forms, dropping their descriptions.
REWRITTEN = {"io.k8s.apimachinery.pkg.api.resource.Quantity", "io.k8s.apimachinery.pkg.util.intstr.IntOrString"}
# Where the package's documents carry alpha DRA fields kube-sim's k8s.io/api commit does not have.
KNOWN_BEHIND = {("io.k8s.api.resource.v1.DeviceCounterConsumption", "compatibilityGroups"),
                ("io.k8s.api.resource.v1.DeviceSubRequest", "derivedAttributes"),
                ("io.k8s.api.resource.v1.ExactDeviceRequest", "derivedAttributes")}


@pytest.fixture(scope="module")
def upstream() -> dict[str, Any]:
    return orjson.loads((UPSTREAM / "_definitions.json").read_bytes())["$defs"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def docs() -> openapi.Documents:
    return openapi.Documents(BUILTIN, "v1.37.0")


def _shape(s: dict[str, Any]) -> dict[str, Any]:
    """What a property says, in a form both sides share: nullable type lists, allOf wrappers and the
    package's own oneOf/enum additions undone; descriptions and defaults left out."""
    if "allOf" in s:
        s = {**s, "$ref": s["allOf"][0]["$ref"]}
    if "$ref" in s:
        out: dict[str, Any] = {"$ref": s["$ref"].rsplit("/", 1)[-1]}
    else:
        t = s.get("type")
        if isinstance(t, list):
            t = [x for x in t if x != "null"]
            t = t[0] if len(t) == 1 else t
        out = {"type": t, "format": s.get("format")}
        if isinstance(s.get("items"), dict):
            out["items"] = _shape(s["items"])
        if isinstance(s.get("additionalProperties"), dict):
            out["additionalProperties"] = _shape(s["additionalProperties"])
    for key in _EXTENSIONS:
        if key in s:
            out[key] = s[key]
    return out


def _compare(name: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    ours_props, their_props = ours.get("properties", {}), theirs.get("properties", {})
    for prop in sorted(set(ours_props) | set(their_props)):
        if (name, prop) in KNOWN_AHEAD | KNOWN_BEHIND:
            continue
        if prop not in ours_props or prop not in their_props:
            problems.append(f"{name}.{prop}: only in {'ours' if prop in ours_props else 'upstream'}")
        elif _shape(ours_props[prop]) != _shape(their_props[prop]):
            problems.append(f"{name}.{prop}: {_shape(ours_props[prop])} != {_shape(their_props[prop])}")
        elif without_enum_values(ours_props[prop].get("description", "")) != their_props[prop].get("description", ""):
            problems.append(f"{name}.{prop} description: {ours_props[prop].get('description')!r}")
    if name not in REWRITTEN and ours.get("description") != theirs.get("description"):
        problems.append(f"{name} description: {ours.get('description')!r} != {theirs.get('description')!r}")
    if ours.get("required", []) != theirs.get("required", []):
        problems.append(f"{name} required: {ours.get('required')} != {theirs.get('required')}")
    for key in ("x-kubernetes-map-type", "x-kubernetes-unions"):
        if ours.get(key) != theirs.get(key):
            problems.append(f"{name} {key}: {ours.get(key)} != {theirs.get(key)}")
    return problems


def test_every_published_v2_definition_matches_upstream(docs: openapi.Documents, upstream: dict[str, Any]) -> None:
    definitions = orjson.loads(docs.v2().body)["definitions"]
    kinds = {f"{r.api_version}/{r.kind}" for r in BUILTIN}
    assert len(definitions) > 300
    problems: list[str] = []
    for name, ours in definitions.items():
        theirs = upstream.get(name)
        if theirs is None:
            problems.append(f"{name}: not upstream")
            continue
        problems += _compare(name, ours, theirs)
        gvks = ours.get("x-kubernetes-group-version-kind")
        # (for the cross-registered meta types kube-sim lists the group-versions it serves)
        cross_registered = gvks is not None and gvks[0]["kind"] in ("DeleteOptions", "WatchEvent")
        if gvks is not None and not cross_registered and gvks != theirs.get("x-kubernetes-group-version-kind"):
            problems.append(f"{name} gvk: {gvks} != {theirs.get('x-kubernetes-group-version-kind')}")
        for gvk in gvks or ():
            kinds.discard(f"{gvk['group']}/{gvk['version']}/{gvk['kind']}".lstrip("/"))
    assert problems == []
    assert kinds == set()  # every served kind was compared


def test_every_v3_schema_matches_upstream(docs: openapi.Documents, upstream: dict[str, Any]) -> None:
    problems: list[str] = []
    for name in docs.names():
        built = docs.v3(name)
        assert built is not None
        for type_name, ours in orjson.loads(built.body)["components"]["schemas"].items():
            if "oneOf" in ours:
                continue  # Quantity, IntOrString: v3's own forms (the package rewrites them too)
            problems += _compare(type_name, ours, upstream[type_name])
    assert problems == []


def test_per_kind_files_match_for_the_served_kinds(docs: openapi.Documents) -> None:
    """The per-kind files (``deployment-apps-v1.json``): properties, required, and their types."""
    definitions = orjson.loads(docs.v2().body)["definitions"]
    for r in BUILTIN:
        group = r.group.split(".")[0]
        stem = f"{r.kind.lower()}-{group}-{r.version}" if group else f"{r.kind.lower()}-{r.version}"
        theirs = orjson.loads((UPSTREAM / f"{stem}.json").read_bytes())
        gvk = {"group": r.group, "kind": r.kind, "version": r.version}
        ours = next(s for s in definitions.values() if gvk in s.get("x-kubernetes-group-version-kind", []))
        assert sorted(ours["properties"]) == sorted(theirs["properties"]), r.kind
        assert ours.get("required", []) == theirs.get("required", []), r.kind
        for prop, s in ours["properties"].items():
            their_ref = theirs["properties"][prop].get("$ref", "").rsplit("/", 1)[-1]
            assert s.get("$ref", "").rsplit("/", 1)[-1] == their_ref, (r.kind, prop)


# --- the v2 protobuf form -------------------------------------------------------------------------


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """One protobuf message's fields in order: (number, int for varints, bytes for length-delimited)."""
    out: list[tuple[int, Any]] = []
    i = 0

    def varint() -> int:
        nonlocal i
        shift = value = 0
        while True:
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while i < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 2:
            length = varint()
            out.append((number, data[i:i + length]))
            i += length
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    return out


def _decode_schema(data: bytes) -> dict[str, Any]:
    """openapi.v2.Schema back to JSON form (the fields kube-sim writes)."""
    s: dict[str, Any] = {}
    for number, value in _fields(data):
        if number == 1:
            s["$ref"] = value.decode()
        elif number == 2:
            s["format"] = value.decode()
        elif number == 4:
            s["description"] = value.decode()
        elif number == 19:
            s.setdefault("required", []).append(value.decode())
        elif number == 20:
            s.setdefault("enum", []).append(orjson.loads(dict(_fields(value))[2]))
        elif number == 21:
            s["additionalProperties"] = _decode_schema(dict(_fields(value))[1])
        elif number == 22:
            s["type"] = dict(_fields(value))[1].decode()
        elif number == 23:
            s["items"] = _decode_schema(dict(_fields(value))[1])
        elif number == 25:
            s["properties"] = {}
            for _, named in _fields(value):
                entry = dict(_fields(named))
                s["properties"][entry[1].decode()] = _decode_schema(entry[2])
        elif number == 31:
            entry = dict(_fields(value))
            s[entry[1].decode()] = orjson.loads(dict(_fields(entry[2]))[2])
        else:
            raise AssertionError(f"unexpected Schema field {number}")
    return s


def test_v2_protobuf_decodes_to_the_json_document(docs: openapi.Documents) -> None:
    doc = orjson.loads(docs.v2().body)
    top = _fields(docs.v2_proto().body)
    assert top[0] == (1, b"2.0")
    assert dict(_fields(dict(top)[2])) == {1: b"Kubernetes", 2: b"v1.37.0"}
    definitions = {}
    for _, named in _fields(dict(top)[9]):
        entry = dict(_fields(named))
        definitions[entry[1].decode()] = _decode_schema(entry[2])
    assert definitions == doc["definitions"]
    path_names = [dict(_fields(named))[1].decode() for _, named in _fields(dict(top)[8])]
    assert path_names == list(doc["paths"])
