"""The CustomResourceDefinition kind: defaulting, validation and status, as upstream's
``pkg/apis/apiextensions/v1`` defaults, ``pkg/apis/apiextensions/validation`` and the registry strategy
(``pkg/registry/customresourcedefinition``) apply them.

Guarantees:
- Defaults: ``spec.names.singular`` is the lower-cased kind, ``listKind`` is ``<Kind>List``,
  ``spec.conversion`` is ``{strategy: None}``; a version's ``served`` and ``storage`` are written even when
  false. (The body is decoded into the generated schema's CustomResourceDefinition as every built-in kind
  is: :mod:`..codec` drops and reports unknown fields and answers 400 for a value of the wrong type.)
- Create starts ``metadata.generation`` at 1 and the status empty but for ``storedVersions`` (the storage
  version); an update keeps the stored status and bumps the generation when the spec changes.
- Validation answers 422 with upstream's messages for the name (``plural.group``), group, scope, versions
  (names, exactly one storage version), names, and the v1 rule that every version has a structural schema.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.api.selectors import is_dns1035_label, is_dns1123_subdomain
from controller_manager.sim.apiserver import validation_errors as fe
from controller_manager.sim.apiserver.crd import cel
from controller_manager.sim.apiserver.crd.resource import CustomResource
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import (
    name_is_dns_subdomain,
    validate_object_meta,
    validate_object_meta_update,
)

Obj = dict[str, Any]

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
SCOPES = ("Cluster", "Namespaced")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def apply_defaults(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    if not isinstance(spec, dict):
        return out
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str) and names["kind"]:
        if not names.get("singular"):
            names["singular"] = names["kind"].lower()
        if not names.get("listKind"):
            names["listKind"] = names["kind"] + "List"
    if not isinstance(spec.get("conversion"), dict):
        spec["conversion"] = {}
    if not spec["conversion"].get("strategy"):
        spec["conversion"]["strategy"] = "None"
    for version in _list(spec.get("versions")):
        if isinstance(version, dict):
            # Go writes these bools even when false (no omitempty), so they are always there.
            version.setdefault("served", False)
            version.setdefault("storage", False)
    return out


def storage_version(obj: Obj) -> str | None:
    for v in _list(_dict(obj.get("spec")).get("versions")):
        if isinstance(v, dict) and v.get("storage") is True:
            return str(v.get("name"))
    return None


def prepare_for_create(obj: Obj) -> Obj:
    out = dict(obj)
    out["metadata"] = {**out["metadata"], "generation": 1}
    status: Obj = {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}
    stored = storage_version(out)
    if stored:
        status["storedVersions"] = [stored]
    out["status"] = status
    return out


def prepare_for_update(new: Obj, old: Obj, subresource: str | None) -> Obj:
    out = dict(new)
    meta = dict(out["metadata"])
    generation = int(_dict(old.get("metadata")).get("generation") or 1)
    if subresource is None:
        out["status"] = copy.deepcopy(old.get("status") or {})
        if out.get("spec") != old.get("spec"):
            generation += 1
        stored = storage_version(out)
        versions = out["status"].setdefault("storedVersions", [])
        if stored and stored not in versions:
            versions.append(stored)
    else:
        # The status strategy keeps the spec and these metadata as stored.
        out["spec"] = old.get("spec")
        old_meta = _dict(old.get("metadata"))
        for key in ("labels", "annotations", "finalizers", "ownerReferences"):
            if key in old_meta:
                meta[key] = old_meta[key]
            else:
                meta.pop(key, None)
    meta["generation"] = generation
    out["metadata"] = meta
    return out


def validate(obj: Obj, old: Obj | None, subresource: str | None = None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    names = _dict(spec.get("names"))
    required_name = f"{names.get('plural', '')}.{spec.get('group', '')}"

    def name_fn(name: str, prefix: bool) -> list[str]:
        found = name_is_dns_subdomain(name, prefix)
        if name != required_name:
            found.append('must be spec.names.plural+"."+spec.group')
        return found

    errs = validate_object_meta(obj.get("metadata"), False, name_fn)
    if old is not None:
        errs = validate_object_meta_update(obj.get("metadata"), old.get("metadata"))
    if subresource is None:
        errs += validate_spec(spec, "spec")
        if old is not None:
            errs += _validate_spec_update(spec, _dict(old.get("spec")), is_established(old))
    status = _dict(obj.get("status"))
    errs += validate_names(_dict(status.get("acceptedNames")), "status.acceptedNames")
    if old is not None:
        version_names = {v.get("name") for v in _list(spec.get("versions")) if isinstance(v, dict)}
        for i, v in enumerate(_list(status.get("storedVersions"))):
            if v not in version_names:
                errs.append(fe.invalid(f"status.storedVersions[{i}]", v, "must appear in spec.versions"))
    return errs


def _validate_spec_update(spec: Obj, old: Obj, established: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    immutable = "field is immutable"
    if established:
        if spec.get("scope") != old.get("scope"):
            errs.append(fe.invalid("spec.scope", spec.get("scope"), immutable))
        if _dict(spec.get("names")).get("kind") != _dict(old.get("names")).get("kind"):
            errs.append(fe.invalid("spec.names.kind", _dict(spec.get("names")).get("kind"), immutable))
    if spec.get("group") != old.get("group"):
        errs.append(fe.invalid("spec.group", spec.get("group"), immutable))
    if _dict(spec.get("names")).get("plural") != _dict(old.get("names")).get("plural"):
        errs.append(fe.invalid("spec.names.plural", _dict(spec.get("names")).get("plural"), immutable))
    return errs


def validate_spec(spec: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    group = spec.get("group") or ""
    if not group:
        errs.append(fe.required(f"{path}.group"))
    elif found := is_dns1123_subdomain(group):
        errs.append(fe.invalid(f"{path}.group", group, ",".join(found)))
    elif len(group.split(".")) < 2:
        errs.append(fe.invalid(f"{path}.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope") or ""
    if not scope:
        errs.append(fe.required(f"{path}.scope"))
    elif scope not in SCOPES:
        errs.append(fe.not_supported(f"{path}.scope", scope, SCOPES))
    versions = [_dict(v) for v in _list(spec.get("versions"))]
    # As the real server validates the internal version: per-version schemas and subresources that are the same in
    # every version are moved up to spec.validation and spec.subresources first (so a single-version CRD's errors
    # name spec.validation.openAPIV3Schema...), and only the others are checked where they are.
    schema_hoisted = bool(versions) and all(v.get("schema") == versions[0].get("schema") for v in versions)
    subresources_hoisted = bool(versions) and all(v.get("subresources") == versions[0].get("subresources")
                                                  for v in versions)
    columns_hoisted = bool(versions) and all(v.get("additionalPrinterColumns")
                                             == versions[0].get("additionalPrinterColumns") for v in versions)
    top_schema = _dict(versions[0].get("schema")) if schema_hoisted else {}
    if not isinstance(top_schema.get("openAPIV3Schema"), dict):  # v1 requires a schema for every version
        for i, v in enumerate(versions):
            if not isinstance(_dict(v.get("schema")).get("openAPIV3Schema"), dict):
                errs.append(fe.required(f"{path}.versions[{i}].schema.openAPIV3Schema"))
    storage = 0
    seen: set[str] = set()
    unique = True
    for i, v in enumerate(versions):
        vpath = f"{path}.versions[{i}]"
        storage += v.get("storage") is True
        vname = str(v.get("name") or "")
        unique = unique and vname not in seen
        seen.add(vname)
        if found := is_dns1035_label(vname):
            errs.append(fe.invalid(f"{vpath}.name", vname, ",".join(found)))
        if not schema_hoisted:
            errs += _validate_schema(_dict(v.get("schema")), f"{vpath}.schema")
        if not subresources_hoisted:
            errs += _validate_subresources(_dict(v.get("subresources")), f"{vpath}.subresources")
        if not columns_hoisted:
            errs += _validate_columns(_list(v.get("additionalPrinterColumns")), f"{vpath}.additionalPrinterColumns")
    bad_versions = fe.GoRepr("[]apiextensions.CustomResourceDefinitionVersion{...}")
    if not versions:
        errs.append(fe.invalid(f"{path}.versions", bad_versions, "must have exactly one version marked as storage "
                                                                 "version"))
    else:
        if not unique:
            errs.append(fe.invalid(f"{path}.versions", bad_versions, "must contain unique version names"))
        if storage != 1:
            errs.append(fe.invalid(f"{path}.versions", bad_versions,
                                   "must have exactly one version marked as storage version"))
    names = _dict(spec.get("names"))
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            errs.append(fe.required(f"{path}.names.{key}"))
    errs += validate_names(names, f"{path}.names")
    errs += _validate_schema(top_schema, f"{path}.validation")
    if subresources_hoisted:
        errs += _validate_subresources(_dict(versions[0].get("subresources")), f"{path}.subresources")
    if columns_hoisted:
        errs += _validate_columns(_list(versions[0].get("additionalPrinterColumns")),
                                  f"{path}.additionalPrinterColumns")
    strategy = _dict(spec.get("conversion")).get("strategy")
    if strategy not in ("None", "Webhook"):
        errs.append(fe.not_supported(f"{path}.conversion.strategy", strategy, ("None", "Webhook")))
    return errs


def validate_names(names: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("plural", "singular"):
        value = names.get(key)
        if isinstance(value, str) and value and (found := is_dns1035_label(value)):
            errs.append(fe.invalid(f"{path}.{key}", value, ",".join(found)))
    for key in ("kind", "listKind"):
        value = names.get(key)
        if isinstance(value, str) and value and (found := is_dns1035_label(value.lower())):
            errs.append(fe.invalid(f"{path}.{key}", value,
                                   "may have mixed case, but should otherwise match: " + ",".join(found)))
    for key in ("shortNames", "categories"):
        for i, value in enumerate(_list(names.get(key))):
            if found := is_dns1035_label(str(value)):
                errs.append(fe.invalid(f"{path}.{key}[{i}]", value, ",".join(found)))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        errs.append(fe.invalid(f"{path}.listKind", names["listKind"], "kind and listKind may not be the same"))
    return errs


def _validate_subresources(subresources: Obj, path: str) -> list[FieldError]:
    """The scale subresource's JSON paths: replicas under .spec and .status, the selector under either."""
    scale = subresources.get("scale")
    if not isinstance(scale, dict):
        return []
    errs: list[FieldError] = []
    spath = f"{path}.scale"
    spec_path = str(scale.get("specReplicasPath") or "")
    if not spec_path:
        errs.append(fe.required(f"{spath}.specReplicasPath"))
    elif not spec_path.startswith(".spec."):
        errs.append(fe.invalid(f"{spath}.specReplicasPath", spec_path, "should be a json path under .spec"))
    status_path = str(scale.get("statusReplicasPath") or "")
    if not status_path:
        errs.append(fe.required(f"{spath}.statusReplicasPath"))
    elif not status_path.startswith(".status."):
        errs.append(fe.invalid(f"{spath}.statusReplicasPath", status_path, "should be a json path under .status"))
    selector = scale.get("labelSelectorPath")
    if selector and not (str(selector).startswith(".spec.") or str(selector).startswith(".status.")):
        errs.append(fe.invalid(f"{spath}.labelSelectorPath", selector,
                               "should be a json path under either .spec or .status"))
    return errs


COLUMN_TYPES = ("boolean", "date", "integer", "number", "string")  # sorted, as upstream lists them in its message
COLUMN_FORMATS = ("byte", "date", "date-time", "double", "float", "int32", "int64", "password")


def _validate_columns(columns: list[Any], path: str) -> list[FieldError]:
    """additionalPrinterColumns: a name, a known type and format, and a simple JSON path (upstream names that field
    ``JSONPath``, its internal Go name, in the error)."""
    errs: list[FieldError] = []
    for i, column in enumerate(columns):
        column = _dict(column)
        cpath = f"{path}[{i}]"
        if not column.get("name"):
            errs.append(fe.required(f"{cpath}.name"))
        type_ = column.get("type") or ""
        if not type_:
            errs.append(fe.required(f"{cpath}.type", "must be one of " + ",".join(COLUMN_TYPES)))
        elif type_ not in COLUMN_TYPES:
            errs.append(fe.invalid(f"{cpath}.type", type_, "must be one of " + ",".join(COLUMN_TYPES)))
        format_ = column.get("format") or ""
        if format_ and format_ not in COLUMN_FORMATS:
            errs.append(fe.invalid(f"{cpath}.format", format_, "must be one of " + ",".join(COLUMN_FORMATS)))
        json_path = str(column.get("jsonPath") or "")
        if not json_path:
            errs.append(fe.required(f"{cpath}.JSONPath"))
        elif not json_path.startswith("."):
            errs.append(fe.invalid(f"{cpath}.JSONPath", json_path, "must be a simple json path starting with ."))
    return errs


def _validate_schema(validation: Obj, path: str) -> list[FieldError]:
    """A CustomResourceValidation (a version's ``schema``, or the one moved up to ``spec.validation``) at ``path``:
    the structural-schema rules, then its x-kubernetes-validations. Absent, nothing (the required check is the
    spec's)."""
    schema = validation.get("openAPIV3Schema")
    if not isinstance(schema, dict):
        return []
    spath = f"{path}.openAPIV3Schema"
    errs: list[FieldError] = []
    if not schema.get("type"):
        errs.append(fe.required(f"{spath}.type", "must not be empty at the root"))
    elif schema["type"] != "object":
        errs.append(fe.invalid(f"{spath}.type", schema["type"], "must be object at the root"))
    errs += _structural(schema, spath, root=True)
    if not errs:
        errs += cel.check_schema(schema, spath)  # x-kubernetes-validations: well-formed, and they compile
    return errs


def _structural(schema: Obj, path: str, *, root: bool = False) -> list[FieldError]:
    """The structural-schema rule that every specified field has a type (unless it preserves anything or is
    int-or-string)."""
    errs: list[FieldError] = []
    if schema.get("uniqueItems") is True:
        errs.append(fe.forbidden(f"{path}.uniqueItems", "uniqueItems cannot be set to true since the runtime "
                                                        "complexity becomes quadratic"))
    if schema.get("x-kubernetes-int-or-string") and schema.get("type"):
        errs.append(fe.invalid(f"{path}.type", schema["type"], "must be empty if x-kubernetes-int-or-string is true"))
    for key, sub in sorted(_dict(schema.get("properties")).items()):
        sub = _dict(sub)
        spath = f"{path}.properties[{key}]"
        if not sub.get("type") and not sub.get("x-kubernetes-int-or-string") \
                and not sub.get("x-kubernetes-preserve-unknown-fields"):
            errs.append(fe.required(f"{spath}.type", "must not be empty for specified object fields"))
        errs += _structural(sub, spath)
    items = schema.get("items")
    if isinstance(items, dict):
        ipath = f"{path}.items"
        if not items.get("type") and not items.get("x-kubernetes-int-or-string") \
                and not items.get("x-kubernetes-preserve-unknown-fields"):
            errs.append(fe.required(f"{ipath}.type", "must not be empty for specified array items"))
        errs += _structural(items, ipath)
    elif schema.get("type") == "array":
        errs.append(fe.required(f"{path}.items", "must be specified"))
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        if schema.get("properties"):
            errs.append(fe.forbidden(f"{path}.additionalProperties",
                                     "additionalProperties and properties are mutual exclusive"))
        errs += _structural(additional, f"{path}.additionalProperties")
    return errs


# --- status ----------------------------------------------------------------------------------------


def condition(obj: Obj, type_: str) -> Obj | None:
    for c in _list(_dict(obj.get("status")).get("conditions")):
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def is_established(obj: Obj) -> bool:
    c = condition(obj, "Established")
    return c is not None and c.get("status") == "True"


def is_terminating(obj: Obj) -> bool:
    c = condition(obj, "Terminating")
    return c is not None and c.get("status") == "True"


def with_condition(obj: Obj, type_: str, status: str, reason: str, message: str, now: str) -> Obj:
    """``obj`` with its condition of ``type_`` set (the transition time kept when the status is unchanged)."""
    out = copy.deepcopy(obj)
    st = out.setdefault("status", {})
    conditions = st.setdefault("conditions", [])
    new = {"type": type_, "status": status, "lastTransitionTime": now, "reason": reason, "message": message}
    for i, c in enumerate(conditions):
        if c.get("type") == type_:
            if c.get("status") == status:
                new["lastTransitionTime"] = c.get("lastTransitionTime", now)
            conditions[i] = new
            return out
    conditions.append(new)
    return out


def served_resources(obj: Obj) -> list[CustomResource]:
    """One :class:`CustomResource` per served version, named by the accepted names."""
    spec = _dict(obj.get("spec"))
    names = _dict(_dict(obj.get("status")).get("acceptedNames"))
    subresources_top = _dict(spec.get("subresources"))
    out: list[CustomResource] = []
    versions = [_dict(v) for v in _list(spec.get("versions"))]
    storage_schema = next((_dict(v.get("schema")).get("openAPIV3Schema") for v in versions if v.get("storage") is True),
                          None)
    for v in sorted(versions, key=lambda v: version_priority(v.get("name"))):
        if v.get("served") is not True:
            continue
        subs = _dict(v.get("subresources")) or subresources_top
        sub_names = tuple(s for s in ("status", "scale") if s in subs)
        columns = _list(v.get("additionalPrinterColumns")) or _list(spec.get("additionalPrinterColumns"))
        out.append(CustomResource(
            str(spec.get("group")), str(v.get("name")), str(names.get("plural")), str(names.get("kind")),
            spec.get("scope") == "Namespaced", tuple(_list(names.get("shortNames"))), sub_names,
            categories=tuple(_list(names.get("categories"))), singular=str(names.get("singular") or ""),
            crd_name=str(_dict(obj.get("metadata")).get("name")), list_kind=str(names.get("listKind") or ""),
            storage_version=f"{spec.get('group')}/{storage_version(obj)}", storage_schema=storage_schema,
            schema=_dict(v.get("schema")).get("openAPIV3Schema"), scale=_dict(subs.get("scale")) or None,
            columns=tuple(c for c in columns if isinstance(c, dict))))
    return out


_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(name: Any) -> tuple[int, int, int, str]:
    """Sort key of kube-aware version order (discovery's preference): GA before beta before alpha, higher
    numbers first (v2, v1, v1beta2, v1beta1, v1alpha1), then any other name alphabetically."""
    text = str(name or "")
    m = _KUBE_VERSION.match(text)
    if m is None:
        return (3, 0, 0, text)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stage, -int(m.group(1)), -int(m.group(3) or 0), "")


def conflicts(obj: Obj, others: list[Obj], builtin: tuple[Resource, ...]) -> tuple[str, str] | None:
    """(reason, message) of the first of ``obj``'s names that another CRD of its group has accepted, as the
    naming controller finds it; None when all are free."""
    spec = _dict(obj.get("spec"))
    group = spec.get("group")
    names = _dict(spec.get("names"))
    taken_plural: set[str] = {r.plural for r in builtin if r.group == group}
    taken_singular: set[str] = set()
    taken_short: set[str] = set()
    taken_kind: set[str] = {r.kind for r in builtin if r.group == group}
    for other in others:
        ospec = _dict(other.get("spec"))
        if ospec.get("group") != group:
            continue
        accepted = _dict(_dict(other.get("status")).get("acceptedNames"))
        taken_plural.add(str(accepted.get("plural") or ""))
        taken_singular.add(str(accepted.get("singular") or ""))
        taken_short.update(str(s) for s in _list(accepted.get("shortNames")))
        taken_kind.update({str(accepted.get("kind") or ""), str(accepted.get("listKind") or "")})
    if names.get("plural") in taken_plural or names.get("plural") in taken_singular:
        return "PluralConflict", f'"{names.get("plural")}" is already in use'
    if names.get("singular") in taken_plural or names.get("singular") in taken_singular:
        return "SingularConflict", f'"{names.get("singular")}" is already in use'
    for short in _list(names.get("shortNames")):
        if short in taken_short or short in taken_plural or short in taken_singular:
            return "ShortNamesConflict", f'"{short}" is already in use'
    if names.get("kind") in taken_kind:
        return "KindConflict", f'"{names.get("kind")}" is already in use'
    if names.get("listKind") in taken_kind:
        return "ListKindConflict", f'"{names.get("listKind")}" is already in use'
    return None
