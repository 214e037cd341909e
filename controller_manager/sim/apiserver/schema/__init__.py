"""The API's types: one description of every kind kube-sim serves, generated from upstream's Go types.

``types.json`` beside this module is written by ``tools/gen_schema.py`` from k8s.io/api,
k8s.io/apimachinery and k8s.io/apiextensions-apiserver (the release and commits are in its ``source``);
nothing here is written by hand except the handful of types upstream serializes with hand-written code (:data:`CUSTOM`).

Guarantees:
- :func:`kind` finds a kind's struct by ``apiVersion`` and ``kind``; :func:`struct` any struct by its
  OpenAPI-style name (``io.k8s.api.apps.v1.DeploymentSpec``). Structs are built on first use and cached.
- A :class:`Struct`'s ``fields`` are its Go fields in declaration order (inline embeddings included, as
  protobuf sees them); ``json_fields`` is the JSON view, embedded structs' fields promoted in place, as
  encoding/json walks them (that order is the order a Go server writes keys in).
- A :class:`Field` carries openapi-gen's facts too: ``+optional``/``+required``, a ``+default`` value, the
  ``+enum`` type it holds (:func:`enum_values` lists that type's values); a :class:`Struct` its ``+union``.
- A :class:`Type` says what a value is: a scalar, ``bytes``, a struct, a list or map of a type, a named
  slice that protobuf wraps in a message of its own (``wrapper``), or one of the custom types.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = ["CUSTOM", "NO_DEFAULT", "Field", "Struct", "Type", "enum_values", "kind", "kinds", "source", "struct",
           "struct_names"]

_DATA = Path(__file__).with_name("types.json")

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
APIEXTENSIONS = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
# Types with hand-written JSON (and, but for apiextensions' three "or" types, protobuf) forms upstream, by
# name -> the Type.kind the codec handles. apiextensions' ``JSON`` is a raw value as RawExtension is; the
# "or" types are a schema or a bool, a schema or a list of schemas, a schema or a list of strings (their
# protobuf messages are described in types.json as structs).
CUSTOM = {
    _META + "Time": "time",
    _META + "MicroTime": "microtime",
    _META + "Duration": "duration",
    _META + "FieldsV1": "fieldsv1",
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "raw",
    APIEXTENSIONS + "JSON": "raw",
    APIEXTENSIONS + "JSONSchemaPropsOrBool": "schemaorbool",
    APIEXTENSIONS + "JSONSchemaPropsOrArray": "schemaorarray",
    APIEXTENSIONS + "JSONSchemaPropsOrStringArray": "schemaorstringarray",
}
SCALARS = frozenset({"string", "bool", "int32", "int64", "uint32", "uint64", "float64", "bytes", "any"})


@dataclass(frozen=True, slots=True, eq=False)
class Type:
    """What a value is. ``kind``: a scalar name (``string``, ``int32``, ``int64``, ``bool``, ``bytes``,
    ``any``...), ``struct``, ``list``, ``map``, ``wrapper`` (a named slice: a list in JSON, a message with
    ``items = 1`` in protobuf), or a custom kind (``time``, ``microtime``, ``duration``, ``quantity``,
    ``intorstring``, ``raw``, ``fieldsv1``, ``schemaorbool``, ``schemaorarray``, ``schemaorstringarray``)."""

    kind: str
    name: str = ""                  # the struct's or wrapper's OpenAPI-style name
    elem: Type | None = None        # list, map and wrapper elements
    elem_pointer: bool = False      # []*T / map[string]*T

    @property
    def struct(self) -> Struct:
        return struct(self.name)


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()
"""A field's ``default`` when it has no ``+default`` marker."""


@dataclass(slots=True, eq=False)
class Field:
    json: str                       # JSON name; "" for an inline embedding
    go: str                         # Go field name ("Replicas")
    type: Type
    go_type: str                    # how Go's reflect names the type in errors ("v1.Protocol", "[]v1.Container")
    pointer: bool = False
    omitempty: bool = False
    inline: bool = False
    proto: int = 0                  # protobuf field number (0: not in protobuf)
    wire: str = ""                  # "varint" or "bytes"
    repeated: bool = False
    patch_strategy: str = ""
    merge_key: str = ""
    list_type: str = ""             # +listType: atomic, set, map
    list_map_keys: tuple[str, ...] = ()
    map_type: str = ""              # +mapType: atomic, granular
    optional: bool = False          # +optional (openapi-gen's reading; not the +k8s: validation tags)
    required: bool = False          # +required
    default: Any = NO_DEFAULT       # +default=, as JSON (a ref(Constant) resolved to its value)
    enum: str = ""                  # the +enum type the value (or a list's or map's elements) holds
    json_string: bool = False       # encoding/json's ",string" option
    union_discriminator: bool = False


@dataclass(slots=True, eq=False)
class Struct:
    name: str
    go: str                         # Go type name ("DeploymentSpec")
    fields: list[Field]
    atomic: bool = False            # +structType=atomic
    union: bool = False             # +union: its optional members are one-of, picked by the discriminator
    json_fields: dict[str, Field] = field(default_factory=dict)
    # For a promoted field, the inline embedding fields it sits in, outermost first (protobuf nests them).
    inline_path: dict[str, tuple[Field, ...]] = field(default_factory=dict)


@functools.cache
def _data() -> dict[str, Any]:
    result: dict[str, Any] = orjson.loads(_DATA.read_bytes())
    return result


def source() -> dict[str, Any]:
    """Where the schema came from: the Kubernetes release and the upstream commits."""
    return dict(_data()["source"])


def kinds() -> dict[str, str]:
    """``apiVersion/Kind`` -> struct name, for every top-level kind (lists included)."""
    return dict(_data()["kinds"])


def enum_values(name: str) -> tuple[str, ...]:
    """The values of a ``+enum`` string type (its constants), sorted as openapi-gen lists them."""
    return tuple(_data()["enums"].get(name, ()))


def struct_names(prefix: str) -> list[str]:
    """The names of the structs whose name starts with ``prefix`` (``io.k8s.api.core.v1.``)."""
    return [name for name, raw in _data()["types"].items() if name.startswith(prefix) and "fields" in raw]


def kind(api_version: str, kind_name: str) -> Struct | None:
    name = _data()["kinds"].get(f"{api_version}/{kind_name}")
    return struct(name) if name else None


@functools.cache
def parse_type(spec: str) -> tuple[Type, bool]:
    """A type string of types.json (``*int32``, ``[]io.k8s...Container``, ``map[]string``) -> (Type, pointer)."""
    pointer = spec.startswith("*")
    spec = spec.removeprefix("*")
    if spec.startswith("[]") or spec.startswith("map[]"):
        container = "list" if spec.startswith("[]") else "map"
        elem, elem_pointer = parse_type(spec.removeprefix("[]").removeprefix("map[]"))
        return Type(container, elem=elem, elem_pointer=elem_pointer), pointer
    if spec.startswith("named:"):
        name = spec.removeprefix("named:")
        items, _ = parse_type(_data()["types"][name]["items"])  # the named type's []T
        return Type("wrapper", name=name, elem=items.elem), pointer
    if spec in SCALARS:
        return Type(spec), pointer
    if spec in CUSTOM:
        return Type(CUSTOM[spec], name=spec), pointer
    return Type("struct", name=spec), pointer


@functools.cache
def struct(name: str) -> Struct:
    raw = _data()["types"].get(name)
    if raw is None or "fields" not in raw:
        raise KeyError(f"no struct {name} in the schema")
    fields = []
    for f in raw["fields"]:
        type_, pointer = parse_type(f["type"])
        proto = f.get("proto") or (0, "", False)
        fields.append(Field(
            json=f.get("json", ""), go=f["go"], type=type_, go_type=f["goType"], pointer=pointer,
            omitempty=bool(f.get("omitempty")), inline=bool(f.get("inline")), proto=proto[0], wire=proto[1],
            repeated=proto[2], patch_strategy=f.get("patchStrategy", ""), merge_key=f.get("patchMergeKey", ""),
            list_type=f.get("listType", ""), list_map_keys=tuple(f.get("listMapKeys", ())),
            # (a field's +structType, as on PersistentVolumeSpec.claimRef, is published as its map type)
            map_type=f.get("mapType") or f.get("structType", ""), optional=bool(f.get("optional")),
            required=bool(f.get("required")),
            default=f.get("default", NO_DEFAULT), enum=f.get("enum", ""), json_string=bool(f.get("jsonString")),
            union_discriminator=bool(f.get("unionDiscriminator"))))
    result = Struct(name, raw["go"], fields, atomic=raw.get("structType") == "atomic", union=bool(raw.get("union")))
    for f in fields:
        if f.inline and f.type.kind == "struct":
            inner = struct(f.type.name)
            for json_name, promoted in inner.json_fields.items():
                # Go: a field declared by the outer struct wins over a promoted one of the same name.
                if json_name not in result.json_fields:
                    result.json_fields[json_name] = promoted
                    result.inline_path[json_name] = (f, *inner.inline_path.get(json_name, ()))
        elif not f.inline:
            result.json_fields[f.json] = f
            result.inline_path.pop(f.json, None)
    return result


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()
"""What :func:`zero_json` returns for a field encoding/json leaves out."""

_ZERO_SCALARS: dict[str, Any] = {"string": "", "bool": False, "int32": 0, "int64": 0, "uint32": 0, "uint64": 0,
                                 "float64": 0}


def zero_json(f: Field) -> Any:
    """What a Go server writes for ``f`` holding its zero value: ``OMIT`` when the key is left out.

    encoding/json never omits a struct (``omitempty`` does not apply to them), writes nil pointers, slices
    and maps as ``null`` unless ``omitempty``, and a zero ``metav1.Time`` as ``null``. A new object has
    to be written once before its zero-valued struct fields can be shared: callers copy what they mutate.
    """
    kind = f.type.kind
    if f.pointer or kind in ("list", "map", "wrapper", "bytes", "any", "fieldsv1"):
        return OMIT if f.omitempty else None
    if kind == "struct":
        return zero_struct(f.type.name)
    if kind in ("time", "microtime", "raw", "schemaorarray", "schemaorstringarray"):
        return None
    if kind == "schemaorbool":
        return False
    if kind == "duration":
        return "0s"
    if kind == "quantity":
        return "0"
    if kind == "intorstring":
        return 0
    return OMIT if f.omitempty else _ZERO_SCALARS[kind]


def zero_struct(name: str) -> dict[str, Any]:
    """The JSON a Go server writes for a zero value of struct ``name`` (a new dict each call)."""
    return orjson.loads(_zero_struct_bytes(name))  # type: ignore[no-any-return]


@functools.cache
def _zero_struct_bytes(name: str) -> bytes:
    out: dict[str, Any] = {}
    for json_name, f in struct(name).json_fields.items():
        value = zero_json(f)
        if value is not OMIT:
            out[json_name] = value
    return orjson.dumps(out)


def is_empty(f: Field, value: Any) -> bool:
    """encoding/json's ``omitempty`` test: false, 0, "", a nil pointer, an empty slice or map (never a struct,
    and never a non-nil pointer, even to a zero value)."""
    kind = f.type.kind
    if f.pointer:
        return value is None
    if kind in ("struct", "time", "microtime", "duration", "quantity", "intorstring", "raw", "schemaorbool",
                "schemaorarray", "schemaorstringarray"):
        return False  # a struct, even one whose JSON is null (a zero metav1.Time)
    if value is None:
        return True
    if kind in ("list", "map", "wrapper", "bytes", "string"):
        return len(value) == 0
    return value is False or (value == 0 and value is not True)
