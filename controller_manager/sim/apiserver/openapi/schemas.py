"""The schemas of the API's types, as kube-apiserver publishes them in OpenAPI, built from kube-sim's schema.

Each struct of :mod:`..schema` becomes the schema openapi-gen writes for it: its description and
``type: object`` with its JSON fields as ``properties`` (inline embeddings promoted), ``required`` (a field
without ``omitempty``, or marked ``+required``, unless marked ``+optional``), scalar ``type``/``format`` (int32
and int64, ``byte`` for []byte, ``double``), ``enum`` for ``+enum`` string types, ``default`` (a ``+default``
marker, else the zero value of a non-pointer field that is a struct, or a scalar without ``omitempty``;
never for types with their own JSON decoding: Time, Quantity, IntOrString...), and the
``x-kubernetes-*`` extensions of its markers (list type and map keys, patch strategy and merge key, map and
struct type, unions). Descriptions (the type's and each property's) are upstream's, from
:mod:`.descriptions`. The hand-written types (Time, Quantity, IntOrString, RawExtension...) get upstream's
fixed schemas, which differ between v2 and v3, with their descriptions.

:func:`definitions` builds the closure of the named types; v2 references are ``#/definitions/<name>`` and
carry no defaults (the v2 endpoint prunes them) and keep their description beside the ``$ref``, v3
references are ``#/components/schemas/<name>``, wrapped in ``allOf`` where the property says more than the
reference (a description, a default).

Enums are published as a server with the OpenAPIEnums feature gate (on by default since 1.24) publishes
them: a field of a ``+enum`` type lists its values and its description ends with them ("Possible enum
values: ..."). The documents checked in upstream (api/openapi-spec) are generated with the gate off.
"""

from __future__ import annotations

from typing import Any

from controller_manager.sim.apiserver import schema
from controller_manager.sim.apiserver.openapi import descriptions
from controller_manager.sim.apiserver.schema import NO_DEFAULT, Field, Type

Obj = dict[str, Any]

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# The hand-written types: their schemas come from methods upstream, not from fields.
_CUSTOM_V2: dict[str, Obj] = {
    _META + "Time": {"type": "string", "format": "date-time"},
    _META + "MicroTime": {"type": "string", "format": "date-time"},
    _META + "Duration": {"type": "string"},
    _META + "FieldsV1": {"type": "object"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
    "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object"},
    # apiextensions' raw JSON and JSON-schema "or" types declare no OpenAPI type (any value): only their
    # description, added as every type's is.
    schema.APIEXTENSIONS + "JSON": {},
    schema.APIEXTENSIONS + "JSONSchemaPropsOrArray": {},
    schema.APIEXTENSIONS + "JSONSchemaPropsOrBool": {},
    schema.APIEXTENSIONS + "JSONSchemaPropsOrStringArray": {},
}
_CUSTOM_V3: dict[str, Obj] = {
    **_CUSTOM_V2,
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"format": "int-or-string",
                                                        "oneOf": [{"type": "integer"}, {"type": "string"}]},
}
# Go scalar -> OpenAPI (type, format, zero value), as kube-openapi maps them.
_SCALARS: dict[str, tuple[str, str, Any]] = {
    "string": ("string", "", ""), "bool": ("boolean", "", False), "int": ("integer", "int32", 0),
    "int32": ("integer", "int32", 0), "int64": ("integer", "int64", 0), "uint32": ("integer", "int64", 0),
    "uint64": ("integer", "int64", 0), "float64": ("number", "double", 0), "float32": ("number", "float", 0),
    "bytes": ("string", "byte", ""), "any": ("object", "", None),
}
# The meta types every group registers, and those the core group alone does.
CROSS_REGISTERED = ("DeleteOptions", "WatchEvent")
CORE_META_KINDS = ("APIGroup", "APIGroupList", "APIResourceList", "APIVersions", "Status")


def ref_prefix(version: int) -> str:
    return "#/definitions/" if version == 2 else "#/components/schemas/"


def _go_scalar(f: Field, kind: str) -> str:
    """The Go scalar behind a field: types.json widens int to int64 and float32 to float64 for the codec."""
    base = f.go_type.removeprefix("[]").removeprefix("map[string]")
    if kind == "int64" and base == "int":
        return "int"
    if kind == "float64" and base == "float32":
        return "float32"
    return kind


def _type_schema(t: Type, f: Field, version: int, top: bool) -> Obj:
    """The schema of a value of ``t`` (the field's own type when ``top``, else an element)."""
    if t.kind in ("struct",) or t.name in _CUSTOM_V2:
        return {"$ref": ref_prefix(version) + t.name}
    if t.kind in ("list", "wrapper"):
        assert t.elem is not None
        return {"type": "array", "items": _elem_schema(t.elem, f, version)}
    if t.kind == "map":
        assert t.elem is not None
        return {"type": "object", "additionalProperties": _elem_schema(t.elem, f, version)}
    type_, format_, _zero = _SCALARS[_go_scalar(f, t.kind) if top else t.kind]
    out: Obj = {"type": type_}
    if format_:
        out["format"] = format_
    if top and f.enum:
        out["enum"] = list(schema.enum_values(f.enum))
    return out


def _elem_schema(t: Type, f: Field, version: int) -> Obj:
    if t.kind in ("list", "wrapper", "map", "struct") or t.name in _CUSTOM_V2:
        return _type_schema(t, f, version, top=False)
    return _type_schema(t, f, version, top=True)  # a scalar element: the field's Go type and enum apply


def _enforced_default(f: Field) -> Any:
    """openapi-gen's default for a field without a marker: a struct's zero value ``{}`` (unless it decodes
    itself), a scalar's zero value when not ``omitempty``; nothing for pointers, lists and maps."""
    t = f.type
    if f.pointer or t.kind in ("list", "map", "wrapper", "bytes", "any") or t.name in _CUSTOM_V2:
        return NO_DEFAULT
    if t.kind == "struct":
        fields = schema.struct(t.name).fields
        if len(fields) == 1 and fields[0].inline:  # a struct that only embeds another is treated as it
            return _enforced_default(fields[0])
        return {}
    if f.omitempty:
        return NO_DEFAULT
    return _SCALARS[_go_scalar(f, t.kind)][2]


def _property(f: Field, version: int, description: str) -> Obj:
    if f.json_string:
        return {"description": description, "type": "string"} if description else {"type": "string"}
    out = _type_schema(f.type, f, version, top=True)
    if description:
        out["description"] = description
    default = f.default if f.default is not NO_DEFAULT else _enforced_default(f)
    if default is not NO_DEFAULT and version == 3:
        out["default"] = default
    if f.list_map_keys:
        out["x-kubernetes-list-map-keys"] = list(f.list_map_keys)
    if f.list_type:
        out["x-kubernetes-list-type"] = f.list_type
    if f.map_type:
        out["x-kubernetes-map-type"] = f.map_type
    if f.merge_key:
        out["x-kubernetes-patch-merge-key"] = f.merge_key
    if f.patch_strategy:
        out["x-kubernetes-patch-strategy"] = f.patch_strategy
    return _wrap_ref(out) if version == 3 else out


def _wrap_ref(s: Obj) -> Obj:
    """v3: a reference with siblings (a description, a default) becomes ``allOf: [{$ref}]``, as
    kube-openapi's builder3 rewrites them; a bare reference stays as it is."""
    for key in ("items", "additionalProperties"):
        if isinstance(s.get(key), dict):
            s[key] = _wrap_ref(s[key])
    if "$ref" in s and len(s) > 1:
        ref = s.pop("$ref")
        return {"allOf": [{"$ref": ref}], **s}
    return s


def _is_required(f: Field) -> bool:
    if f.required:
        return True
    return not f.optional and not f.omitempty


def struct_schema(name: str, version: int) -> Obj:
    """The schema of one named type, without its ``x-kubernetes-group-version-kind``."""
    custom = (_CUSTOM_V3 if version == 3 else _CUSTOM_V2).get(name)
    described = descriptions.of_type(name)
    if custom is not None:
        fixed = {k: (list(v) if isinstance(v, list) else v) for k, v in custom.items()}
        return {"description": described, **fixed} if described else fixed
    st = schema.struct(name)
    properties: Obj = {}
    required: list[str] = []
    for json_name, f in st.json_fields.items():
        properties[json_name] = _property(f, version, descriptions.of_field(name, json_name))
        if _is_required(f):
            required.append(json_name)
    out: Obj = {"description": described} if described else {}
    out["type"] = "object"
    if properties:
        out["properties"] = properties
    if required:
        out["required"] = required
    if st.atomic:
        out["x-kubernetes-map-type"] = "atomic"
    if st.union:
        discriminator = next((f.json for f in st.fields if f.union_discriminator), "")
        members = {f.json: f.go for f in st.fields if not f.inline and f.json and f.json != discriminator}
        union: Obj = {"discriminator": discriminator} if discriminator else {}
        union["fields-to-discriminateBy"] = dict(sorted(members.items()))
        out["x-kubernetes-unions"] = [union]
    return out


def references(s: Any) -> set[str]:
    """The type names a schema (or an operation) refers to."""
    found: set[str] = set()
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            ref = x.get("$ref")
            if isinstance(ref, str):
                found.add(ref.rsplit("/", 1)[-1])
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return found


def definitions(roots: set[str], version: int, gvks: dict[str, list[Obj]],
                extra: dict[str, Obj] | None = None) -> Obj:
    """Every type reachable from ``roots``, sorted by name, each with its group-version-kinds. ``extra``:
    definitions that are not kube-sim's schema's (custom resources), taken as they are."""
    out: Obj = {}
    pending = sorted(roots)
    while pending:
        name = pending.pop()
        if name in out:
            continue
        if extra is not None and name in extra:
            out[name] = extra[name]
            pending.extend(sorted(references(extra[name]) - out.keys()))
            continue
        s = struct_schema(name, version)
        if name in gvks:
            s["x-kubernetes-group-version-kind"] = gvks[name]
        out[name] = s
        pending.extend(sorted(references(s) - out.keys()))
    return dict(sorted(out.items()))
