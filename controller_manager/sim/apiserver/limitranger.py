"""LimitRange: its defaults and validation, and the LimitRanger admission plugin on pod and claim creation
(``pkg/apis/core/v1/defaults.go``, ``pkg/apis/core/validation``, ``plugin/pkg/admission/limitranger``).

Guarantees:
- A ``Container`` item's ``default`` is filled from ``max``, its ``defaultRequest`` from ``default`` and then
  from ``min`` (SetDefaults_LimitRangeItem).
- Validation refuses a ``Pod`` item with defaults, a min over its max, a default (request) outside
  [min, max], a default request over the default limit and a ratio below 1, with upstream's messages.
- At pod creation every container (and init container) missing a request or limit the namespace's ranges
  default gets it, and the pod is annotated ``kubernetes.io/limit-ranger: LimitRanger plugin set: cpu request
  for container c; ...``. Then each Container item's min, max and maxLimitRequestRatio is checked on every
  container, each Pod item's on the pod's totals (containers summed, init containers as a floor, pod-level
  resources), each PersistentVolumeClaim item's min/max on a claim's storage request: 403 ``pods "x" is
  forbidden: maximum cpu usage per Container is 1, but limit is 2`` (several: ``[a, b]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_manager.api.quota import pod_totals
from controller_manager.api.resource_lists import Amount, ResourceList, parse_list
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.validation_errors import FieldError, duplicate, forbidden, invalid

Obj = dict[str, Any]

ANNOTATION = "kubernetes.io/limit-ranger"
_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


def _dict(value: Any) -> Mapping[str, Any]:
    # (a plain dict, nearly always, spares the Mapping ABC's instance check)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


# --- the kind ---------------------------------------------------------------------------------------------

def apply_defaults(obj: Obj) -> None:
    """SetDefaults_LimitRangeItem on each item of ``obj`` (owned: edited in place)."""
    for item in _dict(obj.get("spec")).get("limits") or ():
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        request = dict(item.get("defaultRequest") or {})
        for source, target in ((item.get("max"), default), (default, request), (item.get("min"), request)):
            for name, quantity in _dict(source).items():
                target.setdefault(name, quantity)
        if default:
            item["default"] = default
        if request:
            item["defaultRequest"] = request


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, raw in enumerate(_dict(obj.get("spec")).get("limits") or ()):
        item = _dict(raw)
        path = f"spec.limits[{i}]"
        kind = str(item.get("type") or "")
        if kind in seen:
            errs.append(duplicate(f"{path}.type", kind))
        seen.add(kind)
        lists = {f: parse_list(item.get(f)) for f in ("max", "min", "default", "defaultRequest",
                                                      "maxLimitRequestRatio")}
        if kind == "Pod":
            if item.get("default"):
                errs.append(forbidden(f"{path}.default", "may not be specified when `type` is 'Pod'"))
            if item.get("defaultRequest"):
                errs.append(forbidden(f"{path}.defaultRequest", "may not be specified when `type` is 'Pod'"))
        mx, mn, default, request = lists["max"], lists["min"], lists["default"], lists["defaultRequest"]
        for name, low in mn.items():
            if name in mx and low.value > mx[name].value:
                errs.append(invalid(f"{path}.min[{name}]", low.text(),
                                    f"min value {low.text()} is greater than max value {mx[name].text()}"))
        for name, value in request.items():
            if name in mn and mn[name].value > value.value:
                errs.append(invalid(f"{path}.defaultRequest[{name}]", value.text(),
                                    f"min value {mn[name].text()} is greater than default request value "
                                    f"{value.text()}"))
            if name in default and value.value > default[name].value:
                errs.append(invalid(f"{path}.defaultRequest[{name}]", value.text(),
                                    f"default request value {value.text()} is greater than default limit value "
                                    f"{default[name].text()}"))
            if name in mx and value.value > mx[name].value:
                errs.append(invalid(f"{path}.defaultRequest[{name}]", value.text(),
                                    f"default request value {value.text()} is greater than max value "
                                    f"{mx[name].text()}"))
        for name, value in default.items():
            if name in mn and mn[name].value > value.value:
                errs.append(invalid(f"{path}.default[{name}]", value.text(),
                                    f"min value {mn[name].text()} is greater than default value {value.text()}"))
            if name in mx and value.value > mx[name].value:
                errs.append(invalid(f"{path}.default[{name}]", value.text(),
                                    f"default value {value.text()} is greater than max value {mx[name].text()}"))
        for name, ratio in lists["maxLimitRequestRatio"].items():
            if ratio.value < 1:
                errs.append(invalid(f"{path}.maxLimitRequestRatio[{name}]", ratio.text(),
                                    f"ratio {ratio.text()} is less than 1"))
    return errs


# --- admission --------------------------------------------------------------------------------------------

def _container_defaults(ranges: Iterable[Mapping[str, Any]]) -> tuple[Obj, Obj]:
    requests: Obj = {}
    limits: Obj = {}
    for lr in ranges:
        for item in _dict(lr.get("spec")).get("limits") or ():
            item = _dict(item)
            if item.get("type") == "Container":
                requests.update(_dict(item.get("defaultRequest")))
                limits.update(_dict(item.get("default")))
    return requests, limits


def _merge(container: Obj, defaults: Obj, field: str) -> list[str]:
    resources = container.setdefault("resources", {})
    if not isinstance(resources, dict):
        resources = container["resources"] = {}
    found = resources.get(field)
    current: Obj = found if isinstance(found, dict) else {}
    added = sorted(name for name in defaults if name not in current)
    if added:
        resources[field] = {**current, **{name: defaults[name] for name in added}}
    return added


def mutate_pod(pod: Obj, ranges: Sequence[Mapping[str, Any]]) -> None:
    """The plugin's defaults, on ``pod`` (owned: edited in place)."""
    requests, limits = _container_defaults(ranges)
    if not requests and not limits:
        return
    notes: list[str] = []
    found = pod.get("spec")
    spec: Obj = found if isinstance(found, dict) else {}
    for field, label in (("containers", "container"), ("initContainers", "init container")):
        for c in spec.get(field) or ():
            if not isinstance(c, dict):
                continue
            set_limits = _merge(c, limits, "limits")
            set_requests = _merge(c, requests, "requests")
            if set_requests:
                notes.append(f"{', '.join(set_requests)} request for {label} {c.get('name', '')}")
            if set_limits:
                notes.append(f"{', '.join(set_limits)} limit for {label} {c.get('name', '')}")
    if notes:
        meta = pod.setdefault("metadata", {})
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               ANNOTATION: "LimitRanger plugin set: " + "; ".join(notes)}


def _min(kind: str, name: str, enforced: Amount, requests: ResourceList, limits: ResourceList) -> str | None:
    if name not in requests:
        return f"minimum {name} usage per {kind} is {enforced.text()}.  No request is specified"
    if requests[name].value < enforced.value:
        return f"minimum {name} usage per {kind} is {enforced.text()}, but request is {requests[name].text()}"
    if name in limits and limits[name].value < enforced.value:
        return f"minimum {name} usage per {kind} is {enforced.text()}, but limit is {limits[name].text()}"
    return None


def _max(kind: str, name: str, enforced: Amount, requests: ResourceList, limits: ResourceList) -> str | None:
    if name not in limits:
        return f"maximum {name} usage per {kind} is {enforced.text()}.  No limit is specified"
    if limits[name].value > enforced.value:
        return f"maximum {name} usage per {kind} is {enforced.text()}, but limit is {limits[name].text()}"
    if name in requests and requests[name].value > enforced.value:
        return f"maximum {name} usage per {kind} is {enforced.text()}, but request is {requests[name].text()}"
    return None


def _max_request(kind: str, name: str, enforced: Amount, requests: ResourceList) -> str | None:
    if name not in requests:
        return f"maximum {name} usage per {kind} is {enforced.text()}.  No request is specified"
    if requests[name].value > enforced.value:
        return f"maximum {name} usage per {kind} is {enforced.text()}, but request is {requests[name].text()}"
    return None


def _ratio(kind: str, name: str, enforced: Amount, requests: ResourceList, limits: ResourceList) -> str | None:
    prefix = f"{name} max limit to request ratio per {kind} is {enforced.text()}"
    if name not in requests or requests[name].value == 0:
        return f"{prefix}, but no request is specified or request is 0"
    if name not in limits or limits[name].value == 0:
        return f"{prefix}, but no limit is specified or limit is 0"
    ratio = limits[name].value / requests[name].value
    if ratio > enforced.value:
        return f"{prefix}, but provided ratio is {ratio:.6f}"
    return None


def _check(kind: str, item: Mapping[str, Any], requests: ResourceList, limits: ResourceList) -> list[str]:
    out = []
    for field, rule in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, enforced in parse_list(item.get(field)).items():
            message = rule(kind, name, enforced, requests, limits)
            if message is not None:
                out.append(message)
    return out


def _pod_messages(pod: Mapping[str, Any], lr: Mapping[str, Any]) -> list[str]:
    spec = _dict(pod.get("spec"))
    containers = [_dict(c) for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]]
    out: list[str] = []
    for item in _dict(lr.get("spec")).get("limits") or ():
        item = _dict(item)
        if item.get("type") == "Container":
            for c in containers:
                resources = _dict(c.get("resources"))
                out += _check("Container", item, parse_list(resources.get("requests")),
                              parse_list(resources.get("limits")))
        elif item.get("type") == "Pod":
            out += _check("Pod", item, pod_totals(pod, "requests", overhead=False),
                          pod_totals(pod, "limits", overhead=False))
    return out


def _claim_messages(pvc: Mapping[str, Any], lr: Mapping[str, Any]) -> list[str]:
    requests = parse_list(_dict(_dict(_dict(pvc.get("spec")).get("resources"))).get("requests"))
    out: list[str] = []
    for item in _dict(lr.get("spec")).get("limits") or ():
        item = _dict(item)
        if item.get("type") != "PersistentVolumeClaim":
            continue
        for name, enforced in parse_list(item.get("min")).items():
            message = _min("PersistentVolumeClaim", name, enforced, requests, {})
            if message is not None:
                out.append(message)
        for name, enforced in parse_list(item.get("max")).items():
            message = _max_request("PersistentVolumeClaim", name, enforced, requests)
            if message is not None:
                out.append(message)
    return out


def admit(res: Resource, obj: Mapping[str, Any], name: str, ranges: Sequence[Mapping[str, Any]]) -> None:
    """The plugin's checks on a created pod or claim (after its defaults); raises its 403."""
    if res.group != "" or res.plural not in ("pods", "persistentvolumeclaims"):
        return
    messages: list[str] = []
    for lr in ranges:
        messages += _pod_messages(obj, lr) if res.plural == "pods" else _claim_messages(obj, lr)
    messages = list(dict.fromkeys(messages))  # the aggregate error drops repeats
    if messages:
        why = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
        raise errors.forbidden(res.group, res.plural, name, why)
