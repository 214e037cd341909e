"""The fields of the CustomResourceDefinition kind, for decoding a CRD body as upstream's typed decoder does:
fields the Go types (``k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1``) do not have are dropped and
reported as ``unknown field "<path>"`` (for fieldValidation: ``kubectl apply`` asks for Strict). kube-sim's
generated schema has no apiextensions types, so their JSON field names are listed here."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# A struct: its JSON fields, each mapped to how its value is read.
Shape = dict[str, Any]
ANY = "any"  # raw JSON, or a type whose fields are not checked
STRING, FLOAT, INT, BOOL = "string", "float64", "int64", "bool"  # scalars, by their Go type


class FieldTypeError(ValueError):
    """A value of the wrong JSON type, worded as encoding/json's UnmarshalTypeError."""


def _struct(**fields: Any) -> Shape:
    return fields


OBJECT_META: Shape = _struct(**dict.fromkeys((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields"), ANY))
NAMES: Shape = _struct(**dict.fromkeys(("plural", "singular", "shortNames", "kind", "listKind", "categories"), ANY))
SCHEMA_PROPS: Shape = {}  # JSONSchemaProps, recursive: filled below
SCHEMA_PROPS.update(dict.fromkeys((
    "id", "$schema", "$ref", "default", "enum", "dependencies", "externalDocs", "example",
    "x-kubernetes-list-map-keys", "x-kubernetes-validations", "additionalItems"), ANY))
# The constraint values the validators read: type-checked as Go decodes them into JSONSchemaProps.
SCHEMA_PROPS.update(dict.fromkeys(("description", "type", "format", "title", "pattern", "x-kubernetes-list-type",
                                   "x-kubernetes-map-type"), STRING))
SCHEMA_PROPS.update(dict.fromkeys(("maximum", "minimum", "multipleOf"), FLOAT))
SCHEMA_PROPS.update(dict.fromkeys(("maxLength", "minLength", "maxItems", "minItems", "maxProperties",
                                   "minProperties"), INT))
SCHEMA_PROPS.update(dict.fromkeys(("exclusiveMaximum", "exclusiveMinimum", "uniqueItems", "nullable",
                                   "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
                                   "x-kubernetes-int-or-string"), BOOL))
SCHEMA_PROPS["required"] = ("list", STRING)
SCHEMA_PROPS.update({"items": ("schema-or-list", SCHEMA_PROPS), "allOf": ("list", SCHEMA_PROPS),
                     "oneOf": ("list", SCHEMA_PROPS), "anyOf": ("list", SCHEMA_PROPS), "not": SCHEMA_PROPS,
                     "properties": ("map", SCHEMA_PROPS), "patternProperties": ("map", SCHEMA_PROPS),
                     "definitions": ("map", SCHEMA_PROPS), "additionalProperties": ("schema-or-bool", SCHEMA_PROPS)})
SUBRESOURCES: Shape = _struct(status=ANY, scale=_struct(specReplicasPath=ANY, statusReplicasPath=ANY,
                                                        labelSelectorPath=ANY))
COLUMN: Shape = _struct(**dict.fromkeys(("name", "type", "format", "description", "priority", "jsonPath"), ANY))
VERSION: Shape = _struct(name=ANY, served=ANY, storage=ANY, deprecated=ANY, deprecationWarning=ANY,
                         schema=_struct(openAPIV3Schema=SCHEMA_PROPS), subresources=SUBRESOURCES,
                         additionalPrinterColumns=("list", COLUMN), selectableFields=("list", _struct(jsonPath=ANY)))
SERVICE_REF: Shape = _struct(namespace=ANY, name=ANY, path=ANY, port=ANY)
CONVERSION: Shape = _struct(strategy=ANY, webhook=_struct(
    clientConfig=_struct(url=ANY, service=SERVICE_REF, caBundle=ANY), conversionReviewVersions=ANY))
CONDITION: Shape = _struct(**dict.fromkeys(("type", "status", "lastTransitionTime", "reason", "message",
                                            "observedGeneration"), ANY))
CRD: Shape = _struct(
    kind=ANY, apiVersion=ANY, metadata=OBJECT_META,
    spec=_struct(group=ANY, names=NAMES, scope=ANY, versions=("list", VERSION), conversion=CONVERSION,
                 preserveUnknownFields=ANY),
    status=_struct(conditions=("list", CONDITION), acceptedNames=NAMES, storedVersions=ANY))


def decode(body: Obj) -> tuple[Obj, list[str]]:
    """``body`` without the fields the CRD types lack, and ``unknown field "<path>"`` for each. Raises
    :class:`FieldTypeError` for a schema constraint of the wrong type (``minimum: "1"``)."""
    unknown: list[str] = []
    out = _value(CRD, body, "", unknown)
    return out, [f'unknown field "{p}"' for p in unknown]


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _check_scalar(go_type: str, value: Any, path: str) -> Any:
    ok = {STRING: isinstance(value, str), BOOL: isinstance(value, bool),
          FLOAT: isinstance(value, int | float) and not isinstance(value, bool),
          INT: isinstance(value, int) and not isinstance(value, bool)}[go_type]
    if not ok:
        raise _type_error(value, path, go_type)
    return value


def _type_error(value: Any, path: str, go_type: str) -> FieldTypeError:
    fields = ".".join(p for p in path.replace("]", "").replace("[", ".").split(".") if p and not p.isdigit())
    return FieldTypeError(f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                          f"CustomResourceDefinition.{fields} of type {go_type}")


def _value(shape: Any, value: Any, path: str, unknown: list[str]) -> Any:
    if shape == ANY or value is None:
        return value
    if shape in (STRING, FLOAT, INT, BOOL):
        return _check_scalar(shape, value, path)
    if isinstance(shape, tuple):
        how, inner = shape
        if how in ("list", "schema-or-list") and isinstance(value, list):
            return [_value(inner, v, f"{path}[{i}]", unknown) for i, v in enumerate(value)]
        if how == "map" and isinstance(value, dict):
            return {k: _value(inner, v, f"{path}.{k}", unknown) for k, v in value.items()}
        if how in ("schema-or-list", "schema-or-bool") and isinstance(value, dict):
            return _value(inner, value, path, unknown)
        if how == "schema-or-bool" and isinstance(value, bool):
            return value
        raise _type_error(value, path, {"list": "[]", "map": "map[string]", "schema-or-list": "",
                                        "schema-or-bool": ""}[how] + "object")
    if not isinstance(value, dict):
        raise _type_error(value, path, "object")
    out: Obj = {}
    for key, sub in value.items():
        sub_path = f"{path}.{key}" if path else key
        if key not in shape:
            unknown.append(sub_path)
            continue
        out[key] = _value(shape[key], sub, sub_path, unknown)
    return out
