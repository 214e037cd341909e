"""resource.k8s.io/v1 (dynamic resource allocation): DeviceClass, ResourceClaim, ResourceClaimTemplate and
ResourceSlice defaults and validation (``pkg/apis/resource/v1/defaults.go``, ``pkg/apis/resource/validation``).

Guarantees:
- Defaults: a request's ``exactly`` (and each ``firstAvailable`` subrequest) gets ``allocationMode: ExactCount``
  and, in that mode, ``count: 1``; a device toleration's ``operator`` is ``Equal``.
- A claim's (and a template's ``spec.spec``) requests: a DNS-label name, unique; exactly one of ``exactly`` or
  ``firstAvailable``; a required DNS-subdomain ``deviceClassName``; selectors with a ``cel`` expression, compiled
  as upstream compiles it (:mod:`.dra_cel`: syntax, names, ``device``'s fields, result type, length and cost);
  ``allocationMode`` All (no count) or ExactCount (count > 0); device tolerations (label-name key; Exists without
  a value, Equal with a label value; effects NoExecute, NoSchedule, None). Constraints and config name requests of
  the claim; a config's ``opaque`` needs a driver (a CSI driver name) and parameters.
- A claim's spec is immutable (declarative validation's ``spec: Invalid value: null: field is immutable``); a
  template's too (the handwritten check, which shows the new spec as ``json.Marshal`` writes the internal type: Go
  field names, every field). A claim's status: each ``reservedFor`` entry
  names resource, name and uid and needs an allocation; an allocation, once set, may not change.
- DeviceClass: selectors and config as a claim's.
- ResourceSlice: a driver, a pool (name, ``resourceSliceCount`` > 0, ``generation`` >= 0), exactly one of
  ``nodeName``, ``nodeSelector``, ``allNodes``, ``perDeviceNodeSelection``; devices with unique DNS-label names;
  ``spec.driver`` and ``spec.nodeName`` immutable.
"""

from __future__ import annotations

from typing import Any

from controller_manager.api.selectors import is_label_key, is_label_value
from controller_manager.sim.apiserver import dra_cel, gojson, schema
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    duplicate,
    forbidden,
    go_json,
    invalid,
    not_supported,
    required,
)
from controller_manager.sim.apiserver.validation_pods import name_is_dns_label, name_is_dns_subdomain

Obj = dict[str, Any]

IMMUTABLE = "field is immutable"
_ALLOCATION_MODES = ("All", "ExactCount")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
_REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
_NODE_CHOICES = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- defaults ------------------------------------------------------------------------------------------------


def _default_request(request: Obj) -> None:
    if not request.get("allocationMode"):
        request["allocationMode"] = "ExactCount"
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in _list(request.get("tolerations")):
        if isinstance(toleration, dict) and not toleration.get("operator"):
            toleration["operator"] = "Equal"


def _default_claim_spec(spec: Any) -> None:
    for request in _list(_dict(_dict(spec).get("devices")).get("requests")):
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            _default_request(request["exactly"])
        for sub in _list(request.get("firstAvailable")):
            if isinstance(sub, dict):
                _default_request(sub)


DEFAULTS = {
    "ResourceClaim": lambda obj: _default_claim_spec(obj.get("spec")),
    "ResourceClaimTemplate": lambda obj: _default_claim_spec(_dict(obj.get("spec")).get("spec")),
}


# --- shared checks -----------------------------------------------------------------------------------------


def _label(value: Any, path: str) -> list[FieldError]:
    text = str(value or "")
    if not text:
        return [required(path)]
    return [invalid(path, text, msg) for msg in name_is_dns_label(text, False)]


def _subdomain(value: Any, path: str) -> list[FieldError]:
    text = str(value or "")
    if not text:
        return [required(path)]
    return [invalid(path, text, msg) for msg in name_is_dns_subdomain(text, False)]


def driver_name_errors(value: Any, path: str) -> list[FieldError]:
    """ValidateCSIDriverName (the drivers of DRA and CSI follow one rule)."""
    text = str(value or "")
    errs: list[FieldError] = [required(path)] if not text else []
    if len(text) > 63:
        errs.append(FieldError("FieldValueTooLong", path, "must have at most 63 bytes", text))
    errs.extend(invalid(path, text, msg) for msg in name_is_dns_subdomain(text.lower(), False))
    return errs


def _selectors(selectors: Any, path: str, old_selectors: Any = None) -> list[FieldError]:
    """validateSelector for each selector: a ``cel`` one, its expression compiled (:mod:`.dra_cel`); on an
    update, an expression the old object already had is compiled as a stored one."""
    errs: list[FieldError] = []
    for i, selector in enumerate(_list(selectors)):
        cel = _dict(selector).get("cel")
        if not isinstance(cel, dict):
            errs.append(required(f"{path}[{i}].cel"))
            continue
        expression = str(cel.get("expression") or "")
        if not expression.strip():
            errs.append(required(f"{path}[{i}].cel.expression", "compilation failed: expression must not be empty"))
            continue
        errs.extend(dra_cel.selector_errors(expression, f"{path}[{i}].cel",
                                            stored=dra_cel.is_stored(expression, old_selectors)))
    return errs


def _tolerations(tolerations: Any, path: str) -> list[FieldError]:
    """validateDeviceToleration: a label-name key, Exists without a value or Equal with a label value, and a
    known effect (None included)."""
    errs: list[FieldError] = []
    for i, t in enumerate(_list(tolerations)):
        tol, tpath = _dict(t), f"{path}[{i}]"
        key, value = str(tol.get("key") or ""), str(tol.get("value") or "")
        if key:
            errs.extend(invalid(f"{tpath}.key", key, msg) for msg in is_label_key(key))
        operator = tol.get("operator") or ""
        if operator == "Exists":
            if value:
                errs.append(invalid(f"{tpath}.value", value, "must be empty for operator `Exists`"))
        elif operator == "Equal":
            errs.extend(invalid(f"{tpath}.value", value, msg) for msg in is_label_value(value))
        elif not operator:
            errs.append(required(f"{tpath}.operator"))
        else:
            errs.append(not_supported(f"{tpath}.operator", operator, _TOLERATION_OPERATORS))
        effect = tol.get("effect")
        if effect and effect not in _TAINT_EFFECTS:
            errs.append(not_supported(f"{tpath}.effect", effect, _TAINT_EFFECTS))
    return errs


def _device_request(request: Obj, path: str) -> list[FieldError]:
    """An ExactDeviceRequest's or a DeviceSubRequest's device class, selectors, mode and tolerations."""
    errs = _subdomain(request.get("deviceClassName"), f"{path}.deviceClassName")
    errs.extend(_selectors(request.get("selectors"), f"{path}.selectors"))
    mode, count = request.get("allocationMode"), request.get("count") or 0
    if mode == "All":
        if count != 0:
            errs.append(invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if not isinstance(count, int) or count <= 0:
            errs.append(invalid(f"{path}.count", count, "must be greater than zero"))
    else:
        errs.append(not_supported(f"{path}.allocationMode", mode or "", _ALLOCATION_MODES))
    errs.extend(_tolerations(request.get("tolerations"), f"{path}.tolerations"))
    return errs


def _request_names(devices: Obj) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for request in _list(devices.get("requests")):
        r = _dict(request)
        names[str(r.get("name") or "")] = {str(_dict(s).get("name") or "") for s in _list(r.get("firstAvailable"))}
    return names


def _request_refs(refs: Any, path: str, names: dict[str, set[str]]) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, ref in enumerate(_list(refs)):
        rpath, text = f"{path}[{i}]", str(ref)
        if text in seen:
            errs.append(duplicate(rpath, text))
            continue
        seen.add(text)
        parts = text.split("/")
        if len(parts) > 2:
            errs.append(invalid(rpath, text, _REQUEST_REF))
            continue
        for part in parts:
            errs.extend(invalid(rpath, part, msg) for msg in name_is_dns_label(part, False))
        known = parts[0] in names and (len(parts) == 1 or parts[1] in names[parts[0]])
        if not known:
            errs.append(invalid(rpath, text, _REQUEST_REF))
    return errs


def _opaque_config(config: Obj, path: str) -> list[FieldError]:
    opaque = config.get("opaque")
    if not isinstance(opaque, dict):
        return [required(f"{path}.opaque")]
    errs = driver_name_errors(opaque.get("driver"), f"{path}.opaque.driver")
    if opaque.get("parameters") is None:
        errs.append(required(f"{path}.opaque.parameters"))
    return errs


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def node_selector_errors(selector: Any, path: str) -> list[FieldError]:
    """ValidateNodeSelector: at least one term; each term's expressions name a known operator."""
    terms = _list(_dict(selector).get("nodeSelectorTerms"))
    if not terms:
        return [required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    errs: list[FieldError] = []
    for i, term in enumerate(terms):
        for field in ("matchExpressions", "matchFields"):
            for j, expression in enumerate(_list(_dict(term).get(field))):
                operator = _dict(expression).get("operator")
                if operator not in _SELECTOR_OPERATORS:
                    errs.append(not_supported(f"{path}.nodeSelectorTerms[{i}].{field}[{j}].operator",
                                              operator or "", _SELECTOR_OPERATORS))
    return errs


def claim_spec_errors(spec: Any, path: str) -> list[FieldError]:
    """validateResourceClaimSpec: the device requests, constraints and config of a claim."""
    devices = _dict(_dict(spec).get("devices"))
    dpath = f"{path}.devices"
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, item in enumerate(_list(devices.get("requests"))):
        request, rpath = _dict(item), f"{dpath}.requests[{i}]"
        name = str(request.get("name") or "")
        errs.extend(_label(name, f"{rpath}.name"))
        if name and name in seen:
            errs.append(duplicate(f"{rpath}.name", name))
        seen.add(name)
        exactly, first = request.get("exactly"), _list(request.get("firstAvailable"))
        if exactly is None and not first:
            errs.append(required(rpath, "exactly one of `exactly` or `firstAvailable` is required"))
        elif exactly is not None and first:
            errs.append(invalid(rpath, None, "exactly one of `exactly` or `firstAvailable` is required, but "
                                             "multiple fields are set"))
        elif first:
            sub_seen: set[str] = set()
            for j, sub in enumerate(first):
                spath = f"{rpath}.firstAvailable[{j}]"
                sub_name = str(_dict(sub).get("name") or "")
                errs.extend(_label(sub_name, f"{spath}.name"))
                if sub_name and sub_name in sub_seen:
                    errs.append(duplicate(f"{spath}.name", sub_name))
                sub_seen.add(sub_name)
                errs.extend(_device_request(_dict(sub), spath))
        else:
            errs.extend(_device_request(_dict(exactly), f"{rpath}.exactly"))
    names = _request_names(devices)
    for i, item in enumerate(_list(devices.get("constraints"))):
        constraint, cpath = _dict(item), f"{dpath}.constraints[{i}]"
        errs.extend(_request_refs(constraint.get("requests"), f"{cpath}.requests", names))
        if not constraint.get("matchAttribute") and not constraint.get("distinctAttribute"):
            errs.append(required(f"{cpath}.matchAttribute"))
    for i, item in enumerate(_list(devices.get("config"))):
        config, cpath = _dict(item), f"{dpath}.config[{i}]"
        errs.extend(_request_refs(config.get("requests"), f"{cpath}.requests", names))
        errs.extend(_opaque_config(config, cpath))
    return errs


# --- bad values as Go prints them -----------------------------------------------------------------------------


def _internal_json(value: Any, t: schema.Type, pointer: bool) -> Any:
    """``value`` (JSON form) as ``json.Marshal`` writes the internal Go type: API structs have no JSON tags there
    (Go field names, every field, nil pointers/slices/maps as null); apimachinery's types keep their own form."""
    if value is None:
        if pointer or t.kind in ("list", "map", "wrapper", "raw", "bytes"):
            return None
        if t.kind == "struct":
            return _internal_struct({}, t.name)
        return {"string": "", "bool": False}.get(t.kind, 0 if t.kind.startswith(("int", "uint", "float")) else None)
    if t.kind == "struct":
        return _internal_struct(value, t.name)
    if t.kind in ("list", "wrapper") and t.elem is not None and isinstance(value, list):
        return [_internal_json(v, t.elem, t.elem_pointer) for v in value]
    if t.kind == "map" and t.elem is not None and isinstance(value, dict):
        return {k: _internal_json(v, t.elem, t.elem_pointer) for k, v in value.items()}
    return value


def _internal_struct(value: Any, name: str) -> Any:
    st = schema.struct(name)
    value = _dict(value)
    if not name.startswith("io.k8s.api."):  # ObjectMeta and friends: tagged, as the wire writes them
        return gojson.normalize(value, st)
    out: Obj = {}
    for f in st.fields:
        if f.inline:
            inner = _internal_struct(value, f.type.name)
            out.update(inner if isinstance(inner, dict) else {})
            continue
        out[f.go] = _internal_json(value.get(f.json), f.type, f.pointer)
    return out


def internal_repr(value: Any, struct_name: str) -> GoRepr:
    """A struct bad value of the internal API types (``field.Invalid(path, spec, ...)``), as the error shows it."""
    return GoRepr(go_json(_internal_struct(value, struct_name), sort_keys=False))


# --- kinds ---------------------------------------------------------------------------------------------------


def device_class_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    old_selectors = _dict(_dict(old).get("spec")).get("selectors") if old is not None else None
    errs = _selectors(spec.get("selectors"), "spec.selectors", old_selectors)
    for i, config in enumerate(_list(spec.get("config"))):
        errs.extend(_opaque_config(_dict(config), f"spec.config[{i}]"))
    return errs


def resource_claim_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateResourceClaim; an update only checks that the spec stayed as it was."""
    if old is None:
        return claim_spec_errors(obj.get("spec"), "spec")
    if obj.get("spec") != old.get("spec"):
        return [invalid("spec", None, IMMUTABLE)]
    return []


def resource_claim_status_errors(obj: Obj, old: Obj) -> list[FieldError]:
    """ValidateResourceClaimStatusUpdate: consumer references, and an allocation set once."""
    status, old_status = _dict(obj.get("status")), _dict(old.get("status"))
    errs: list[FieldError] = []
    uids: set[str] = set()
    for i, ref in enumerate(_list(status.get("reservedFor"))):
        r, rpath = _dict(ref), f"status.reservedFor[{i}]"
        for key in ("resource", "name", "uid"):
            if not r.get(key):
                errs.append(required(f"{rpath}.{key}"))
        uid = str(r.get("uid") or "")
        if uid and uid in uids:
            errs.append(duplicate(rpath, GoRepr(go_json(r, sort_keys=False))))
        uids.add(uid)
    if status.get("reservedFor") and status.get("allocation") is None:
        errs.append(forbidden("status.reservedFor", "may not be specified when `allocated` is not set"))
    allocation = status.get("allocation")
    if old_status.get("allocation") is not None and allocation is not None:
        if allocation != old_status["allocation"]:
            errs.append(invalid("status.allocation", None, IMMUTABLE))
    elif isinstance(allocation, dict) and allocation.get("nodeSelector") is not None:
        errs.extend(node_selector_errors(allocation["nodeSelector"], "status.allocation.nodeSelector"))
    return errs


def resource_claim_template_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateResourceClaimTemplate (the claim spec at ``spec.spec``); the template's spec is immutable."""
    spec = _dict(obj.get("spec"))
    errs = claim_spec_errors(spec.get("spec"), "spec.spec")
    if old is not None and obj.get("spec") != old.get("spec"):
        errs.append(invalid("spec", internal_repr(spec, "io.k8s.api.resource.v1.ResourceClaimTemplateSpec"),
                            IMMUTABLE))
    return errs


def resource_slice_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs = driver_name_errors(spec.get("driver"), "spec.driver")
    pool = _dict(spec.get("pool"))
    pool_name = str(pool.get("name") or "")
    if not pool_name:
        errs.append(required("spec.pool.name"))
    else:
        if len(pool_name) > 253:
            errs.append(FieldError("FieldValueTooLong", "spec.pool.name", "must have at most 253 bytes", pool_name))
        for part in pool_name.split("/"):
            errs.extend(invalid("spec.pool.name", part, msg) for msg in name_is_dns_subdomain(part, False))
    count = pool.get("resourceSliceCount") or 0
    if count <= 0:
        errs.append(invalid("spec.pool.resourceSliceCount", count, "must be greater than zero"))
    generation = pool.get("generation") or 0
    if generation < 0:
        errs.append(invalid("spec.pool.generation", generation, "must be greater than or equal to zero"))
    chosen: list[str] = []
    if spec.get("nodeName"):
        chosen.append("`nodeName`")
        errs.extend(invalid("spec.nodeName", spec["nodeName"], msg)
                    for msg in name_is_dns_subdomain(str(spec["nodeName"]), False))
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        terms = _list(_dict(spec["nodeSelector"]).get("nodeSelectorTerms"))
        errs.extend(node_selector_errors(spec["nodeSelector"], "spec.nodeSelector"))
        if len(terms) > 1:
            errs.append(invalid("spec.nodeSelector.nodeSelectorTerms", GoRepr(go_json(terms)),
                                "must have exactly one node selector term"))
    for flag in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(flag) is True:
            chosen.append(f"`{flag}`")
        elif spec.get(flag) is False:
            errs.append(invalid(f"spec.{flag}", False, "must be either unset or set to true"))
    if not chosen:
        errs.append(required("spec", _NODE_CHOICES))
    elif len(chosen) > 1:
        errs.append(invalid("spec", "{" + ", ".join(chosen) + "}", f"{_NODE_CHOICES}, but multiple fields are set"))
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errs.append(invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    seen: set[str] = set()
    for i, device in enumerate(_list(spec.get("devices"))):
        name = str(_dict(device).get("name") or "")
        errs.extend(_label(name, f"spec.devices[{i}].name"))
        if name and name in seen:
            errs.append(duplicate(f"spec.devices[{i}].name", name))
        seen.add(name)
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if spec.get("nodeName") != old_spec.get("nodeName"):
            errs.append(invalid("spec.nodeName", spec.get("nodeName"), IMMUTABLE))
        if spec.get("driver") != old_spec.get("driver"):
            errs.append(invalid("spec.driver", spec.get("driver"), IMMUTABLE))
    return errs
