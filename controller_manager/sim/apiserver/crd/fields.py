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


def _struct(**fields: Any) -> Shape:
    return fields


OBJECT_META: Shape = _struct(**dict.fromkeys((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields"), ANY))
NAMES: Shape = _struct(**dict.fromkeys(("plural", "singular", "shortNames", "kind", "listKind", "categories"), ANY))
SCHEMA_PROPS: Shape = {}  # JSONSchemaProps, recursive: filled below
SCHEMA_PROPS.update(dict.fromkeys((
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "multipleOf", "enum", "maxProperties", "minProperties", "required", "dependencies", "externalDocs", "example",
    "nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations", "additionalItems"), ANY))
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
    """``body`` without the fields the CRD types lack, and ``unknown field "<path>"`` for each."""
    unknown: list[str] = []
    out = _value(CRD, body, "", unknown)
    return out, [f'unknown field "{p}"' for p in unknown]


def _value(shape: Any, value: Any, path: str, unknown: list[str]) -> Any:
    if shape == ANY or value is None:
        return value
    if isinstance(shape, tuple):
        how, inner = shape
        if how == "list" and isinstance(value, list):
            return [_value(inner, v, f"{path}[{i}]", unknown) for i, v in enumerate(value)]
        if how == "map" and isinstance(value, dict):
            return {k: _value(inner, v, f"{path}.{k}", unknown) for k, v in value.items()}
        if how == "schema-or-list" and isinstance(value, list):
            return [_value(inner, v, f"{path}[{i}]", unknown) for i, v in enumerate(value)]
        if how in ("schema-or-list", "schema-or-bool") and isinstance(value, dict):
            return _value(inner, value, path, unknown)
        return value
    if not isinstance(value, dict):
        return value
    out: Obj = {}
    for key, sub in value.items():
        sub_path = f"{path}.{key}" if path else key
        if key not in shape:
            unknown.append(sub_path)
            continue
        out[key] = _value(shape[key], sub, sub_path, unknown)
    return out
