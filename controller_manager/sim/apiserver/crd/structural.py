"""Custom resources against their version's openAPIV3Schema, as ``pkg/apiserver/schema`` (pruning,
defaulting) and ``pkg/apiserver/validation`` (kube-openapi's validator, errors mapped to field errors)
treat them.

Guarantees:
- :func:`prune` drops every field the schema does not specify (``x-kubernetes-preserve-unknown-fields``
  keeps them; ``metadata`` keeps only ObjectMeta's fields, apiVersion and kind are always kept) and
  reports each as ``unknown field "<path>"``, for fieldValidation to warn about or refuse.
- :func:`default` fills each absent property that has a ``default``, outside in, and drops nulls of
  non-nullable fields without one.
- :func:`validate_object` answers upstream's field errors: ``Invalid value: "string": spec.x in body must
  be of type integer: "string"``, ``Required value``, ``Unsupported value: ... supported values: ...``,
  minimum/maximum, pattern, minLength/maxLength, minItems/maxItems; :func:`validate_rules` then the
  ``x-kubernetes-validations`` CEL rules (:mod:`.cel`).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import validation_errors as fe
from controller_manager.sim.apiserver.crd import cel
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.validation_errors import FieldError

Obj = dict[str, Any]

TYPE_INVALID = fe.TYPE_INVALID
TOO_MANY = fe.TOO_MANY
_META_FIELDS = frozenset({"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                          "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                          "annotations", "ownerReferences", "finalizers", "managedFields"})


def schema_of(res: Resource) -> Obj | None:
    return res.schema if isinstance(res, CustomResource) and isinstance(res.schema, dict) else None


# --- pruning ----------------------------------------------------------------------------------------


def prune(schema: Obj, obj: Obj) -> tuple[Obj, list[str]]:
    """``obj`` without the fields ``schema`` does not specify, and their paths (sorted)."""
    unknown: list[str] = []
    out = dict(obj)
    for key in list(out):
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(out[key], dict):
            meta = out[key]
            for mkey in [k for k in meta if k not in _META_FIELDS]:
                unknown.append(f"metadata.{mkey}")
            out[key] = {k: v for k, v in meta.items() if k in _META_FIELDS}
            continue
        out_value = _prune_value(_property(schema, key), out[key], key, unknown)
        if out_value is _DROP:
            del out[key]
        else:
            out[key] = out_value
    return out, sorted(unknown)


class _Drop:
    pass


_DROP = _Drop()


def _property(schema: Obj, key: str) -> Obj | None:
    """The schema of ``key`` in an object of ``schema`` (None: not specified)."""
    props = schema.get("properties")
    if isinstance(props, dict) and key in props:
        return props[key] if isinstance(props[key], dict) else {}
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return additional
    if additional is True or schema.get("x-kubernetes-preserve-unknown-fields"):
        return {"x-kubernetes-preserve-unknown-fields": True}
    return None


def _prune_value(schema: Obj | None, value: Any, path: str, unknown: list[str]) -> Any:
    if schema is None:
        unknown.append(path)
        return _DROP
    if schema.get("x-kubernetes-embedded-resource") and isinstance(value, dict):
        return prune(schema, value)[0]
    if isinstance(value, dict):
        out = {}
        for key, sub in value.items():
            pruned = _prune_value(_property(schema, key), sub, f"{path}.{key}", unknown)
            if pruned is not _DROP:
                out[key] = pruned
        return out
    if isinstance(value, list):
        items = schema.get("items")
        item_schema = items if isinstance(items, dict) else (
            {"x-kubernetes-preserve-unknown-fields": True} if schema.get("x-kubernetes-preserve-unknown-fields")
            else {})
        return [v for v in (_prune_value(item_schema, v, f"{path}[{i}]", unknown) for i, v in enumerate(value))
                if v is not _DROP]
    return value


# --- defaulting -------------------------------------------------------------------------------------


def default(schema: Obj, value: Any) -> Any:
    if isinstance(value, dict):
        out = dict(value)
        props = _properties(schema)
        for key, sub in props.items():
            if not isinstance(sub, dict):
                continue
            if key in out and out[key] is None and not sub.get("nullable"):
                if "default" in sub:
                    out[key] = copy.deepcopy(sub["default"])
                else:
                    del out[key]
            elif key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        for key, sub_value in list(out.items()):
            sub_schema = props.get(key)
            if sub_schema is None and isinstance(schema.get("additionalProperties"), dict):
                sub_schema = schema["additionalProperties"]
            if isinstance(sub_schema, dict):
                out[key] = default(sub_schema, sub_value)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [default(schema["items"], v) for v in value]
    return value


def decode(res: Resource, obj: Obj) -> tuple[Obj, list[str]]:
    """A custom resource body as the server reads it: pruned, then defaulted; and the unknown fields'
    ``unknown field "<path>"`` messages. Unchanged for a resource without a schema."""
    schema = schema_of(res)
    if schema is None:
        return obj, []
    pruned, unknown = prune(schema, obj)
    return default(schema, pruned), [f'unknown field "{p}"' for p in unknown]


# --- validation -------------------------------------------------------------------------------------


def validate_object(res: Resource, obj: Obj) -> list[FieldError]:
    schema = schema_of(res)
    if schema is None:
        return []
    errs: list[FieldError] = []
    for key, sub in sorted((schema.get("properties") or {}).items()):
        if key in ("metadata", "apiVersion", "kind") or not isinstance(sub, dict):
            continue
        if key in obj:
            _validate(sub, obj[key], key, errs)
    for key in schema.get("required") or []:
        if key not in obj:
            errs.append(fe.required(key))
    return errs


def validate_rules(res: Resource, obj: Obj, old: Obj | None, errs: list[FieldError]) -> list[FieldError]:
    """The version's ``x-kubernetes-validations`` rules on ``obj`` (``old``: the object an update replaces),
    after the schema's own errors ``errs``: a wrong type, an unsupported or missing value, or a too long one
    anywhere stops them, with upstream's one error saying so."""
    schema = schema_of(res)
    if schema is None or not cel.has_rules(schema):
        return []
    if any(e.type in (fe.NOT_SUPPORTED, fe.REQUIRED, fe.TOO_LONG, fe.TOO_MANY, fe.TYPE_INVALID) for e in errs):
        return [fe.invalid("<nil>", None, "some validation rules were not checked because the object was invalid; "
                                          "correct the existing errors to complete validation")]
    return cel.validate(schema, obj, old)


_GO_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return "integer"
    return _GO_TYPES.get(type(value), "object")


def _type_ok(expected: str, value: Any) -> bool:
    actual = _type_name(value)
    return actual == expected or (expected == "number" and actual == "integer")


def _validate(schema: Obj, value: Any, path: str, errs: list[FieldError]) -> None:
    if value is None and schema.get("nullable"):
        return
    if schema.get("x-kubernetes-int-or-string"):
        if _type_name(value) not in ("integer", "string"):
            errs.append(FieldError(TYPE_INVALID, path, f'{path} in body must be of type integer,string: '
                                                        f'"{_type_name(value)}"', _type_name(value)))
            return
    elif isinstance(schema.get("type"), str) and not _type_ok(schema["type"], value):
        errs.append(FieldError(TYPE_INVALID, path, f'{path} in body must be of type {schema["type"]}: '
                                                    f'"{_type_name(value)}"', _type_name(value)))
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        errs.append(fe.not_supported(path, value, [_enum_text(v) for v in enum]))
    if isinstance(value, int | float) and not isinstance(value, bool):
        _numeric(schema, value, path, errs)
    if isinstance(value, str):
        _string(schema, value, path, errs)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errs.append(fe.invalid(path, len(value), f"{path} in body should have at least {schema['minItems']} "
                                                     "items"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(FieldError(TOO_MANY, path, f"must have at most {schema['maxItems']} items", len(value)))
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                _validate(schema["items"], item, f"{path}[{i}]", errs)
    if isinstance(value, dict):
        props = _properties(schema)
        for key in sorted(value):
            sub = props.get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if isinstance(sub, dict):
                _validate(sub, value[key], f"{path}.{key}", errs)
        for key in schema.get("required") or []:
            if key not in value:
                errs.append(fe.required(f"{path}.{key}"))


def _properties(schema: Obj) -> Obj:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else fe.go_value(value)


def _numeric(schema: Obj, value: float, path: str, errs: list[FieldError]) -> None:
    shown: Any = int(value) if isinstance(value, float) and value.is_integer() else value
    if "minimum" in schema:
        low = schema["minimum"]
        if schema.get("exclusiveMinimum") and value <= low:
            errs.append(fe.invalid(path, shown, f"{path} in body should be greater than {_num(low)}"))
        elif value < low:
            errs.append(fe.invalid(path, shown, f"{path} in body should be greater than or equal to {_num(low)}"))
    if "maximum" in schema:
        high = schema["maximum"]
        if schema.get("exclusiveMaximum") and value >= high:
            errs.append(fe.invalid(path, shown, f"{path} in body should be less than {_num(high)}"))
        elif value > high:
            errs.append(fe.invalid(path, shown, f"{path} in body should be less than or equal to {_num(high)}"))
    if "multipleOf" in schema and schema["multipleOf"] and value % schema["multipleOf"] != 0:
        errs.append(fe.invalid(path, shown, f"{path} in body should be a multiple of {_num(schema['multipleOf'])}"))


def _num(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _string(schema: Obj, value: str, path: str, errs: list[FieldError]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        errs.append(fe.invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errs.append(FieldError(fe.TOO_LONG, path, f"may not be more than {schema['maxLength']} bytes", value))
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            matched = True
        if not matched:
            errs.append(fe.invalid(path, value, f"{path} in body should match '{pattern}'"))
