"""Validation of writes, as the apiserver's registries run it before storing an object.

``validate(resource, obj, old)`` returns the :class:`FieldError` list (empty when valid) for a
create (``old`` None) or an update; ``invalid_status(resource, name, errors)`` turns it into the 422
Status the real server answers with. Each kind's strategy (:mod:`registry`) names its name rule and
its rules: those of pods, pod templates and metadata live in :mod:`validation_pods`, apps and batch in
:mod:`validation_workloads`, the smaller kinds (Node, Namespace, Service, Lease, PDB, RBAC roles' rules,
EndpointSlice addresses) here, others beside their kind's defaults. Kinds without rules get the metadata
checks only.

A ``/status`` update (``subresource="status"``) checks metadata only here; a status strategy may check the
status itself (Pods: :mod:`validation_pod_status`, named by their strategy): status strategies keep the stored
spec, so spec rules and spec immutability do not apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller_manager.api.resource_lists import parse_list
from controller_manager.api.resources import Resource
from controller_manager.api.selectors import is_label_key
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    invalid_status,
    not_supported,
    required,
)
from controller_manager.sim.apiserver.validation_pods import (
    NameFn,
    validate_labels,
    validate_object_meta,
    validate_object_meta_update,
    validate_pod_spec,
    validate_pod_template,
    validate_pod_update,
)
from controller_manager.sim.apiserver.validation_workloads import (
    nonneg,
    validate_apps_update,
    validate_job,
    validate_job_update,
    validate_replication_controller,
)

__all__ = ["FieldError", "invalid_status", "validate"]

Obj = Mapping[str, Any]


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """path.ValidatePathSegmentName: RBAC objects may be named anything usable in a URL path segment
    (``system:controller:job-controller``)."""
    errs = [] if prefix or name not in (".", "..") else [f"may not be '{name}'"]
    errs.extend(f"may not contain '{c}'" for c in ("/", "%") if c in name)
    return errs


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
_PROTOCOLS = ("TCP", "UDP", "SCTP")


def _dict(value: Any) -> Obj:
    # (a plain dict, nearly always, spares the Mapping ABC's instance check)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def pod_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    errs = validate_pod_spec(obj.get("spec"), "spec")
    if old is not None:
        errs.extend(validate_pod_update(obj.get("spec"), old.get("spec")))
    return errs


def node_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(_dict(obj.get("spec")).get("taints") or []):
        t = _dict(taint)
        path = f"spec.taints[{i}]"
        key = str(t.get("key") or "")
        errs.extend(invalid(f"{path}.key", key, msg) for msg in is_label_key(key))
        effect = str(t.get("effect") or "")
        if not effect:
            errs.append(required(f"{path}.effect"))
        elif effect not in _EFFECTS:
            errs.append(not_supported(f"{path}.effect", effect, _EFFECTS))
        if (key, effect) in seen:
            errs.append(duplicate(f"{path}", f"{key}:{effect}"))
        seen.add((key, effect))
    return errs


def namespace_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    errs: list[FieldError] = []
    for f in _dict(obj.get("spec")).get("finalizers") or []:
        msgs = is_label_key(str(f))
        errs.extend(invalid("spec.finalizers", f, m) for m in msgs)
        if not msgs and f != "kubernetes" and "/" not in str(f):
            errs.append(invalid("spec.finalizers", f,
                                "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


def service_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    svc_type = spec.get("type")
    if svc_type not in _SERVICE_TYPES:
        errs.append(not_supported("spec.type", svc_type, _SERVICE_TYPES))
    ports = spec.get("ports") or []
    if not ports and svc_type != "ExternalName" and spec.get("clusterIP") != "None":
        errs.append(required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = _dict(port)
        path = f"spec.ports[{i}]"
        name = str(p.get("name") or "")
        if len(ports) > 1 and not name:
            errs.append(required(f"{path}.name"))
        elif name in names:
            errs.append(duplicate(f"{path}.name", name))
        names.add(name)
        number = p.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            errs.append(invalid(f"{path}.port", number, "must be between 1 and 65535, inclusive"))
        if p.get("protocol") not in _PROTOCOLS:
            errs.append(not_supported(f"{path}.protocol", p.get("protocol"), _PROTOCOLS))
        if p.get("nodePort") and svc_type in ("ClusterIP", "ExternalName"):
            errs.append(forbidden(f"{path}.nodePort", f"may not be used when `type` is '{svc_type}'"))
    errs.extend(validate_labels(spec.get("selector"), "spec.selector"))
    return errs


def lease_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    duration = spec.get("leaseDurationSeconds")
    if isinstance(duration, int) and duration <= 0:
        errs.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    errs.extend(nonneg(spec.get("leaseTransitions"), "spec.leaseTransitions"))
    return errs


def pod_disruption_budget_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidatePodDisruptionBudgetSpec's checks on the two budgets."""
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.append(invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for field in ("minAvailable", "maxUnavailable"):
        value = spec.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            errs.append(invalid(f"spec.{field}", value, "must be greater than or equal to 0"))
        elif isinstance(value, str):
            pct = value[:-1] if value.endswith("%") else None
            if pct is None or not pct.isdigit():
                errs.append(invalid(f"spec.{field}", value, "a valid percent string must be a numeric string "
                                    "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation "
                                    "is '[0-9]+%')"))
            elif int(pct) > 100:
                errs.append(invalid(f"spec.{field}", value, "must not be greater than 100%"))
    return errs


def policy_rules_errors(obj: Obj, old: Obj | None, *, namespaced: bool) -> list[FieldError]:
    """ValidatePolicyRule for each of a Role's or ClusterRole's rules."""
    errs: list[FieldError] = []
    rules = obj.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        rule = _dict(rule)
        path = f"rules[{i}]"
        if not rule.get("verbs"):
            errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs")
        if urls:
            if namespaced:
                errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                    "namespaced rules cannot apply to non-resource URLs"))
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errs.append(invalid(f"{path}.nonResourceURLs", urls,
                                    "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not rule.get("apiGroups"):
            errs.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not rule.get("resources"):
            errs.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
    return errs


_QUOTA_SCOPES = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                 "CrossNamespacePodAffinity")


def resource_quota_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateResourceQuota's checks on the hard amounts and the scopes."""
    errs: list[FieldError] = []
    spec = _dict(obj.get("spec"))
    for field, amounts in (("spec.hard", spec.get("hard")), ("status.hard", _dict(obj.get("status")).get("hard")),
                           ("status.used", _dict(obj.get("status")).get("used"))):
        for name, amount in parse_list(amounts).items():
            if amount.value < 0:
                errs.append(invalid(f"{field}[{name}]", amount.text(), "must be greater than or equal to 0"))
    for i, scope in enumerate(spec.get("scopes") or ()):
        if scope not in _QUOTA_SCOPES:
            errs.append(not_supported(f"spec.scopes[{i}]", scope, _QUOTA_SCOPES))
    for i, expression in enumerate(_dict(spec.get("scopeSelector")).get("matchExpressions") or ()):
        scope = _dict(expression).get("scopeName")
        if scope not in _QUOTA_SCOPES:
            errs.append(not_supported(f"spec.scopeSelector.matchExpressions[{i}].scopeName", scope, _QUOTA_SCOPES))
    return errs


_ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")


def endpoint_slice_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateEndpointSlice's checks on the address type and each endpoint's addresses."""
    errs: list[FieldError] = []
    address_type = obj.get("addressType")
    if old is None and address_type not in _ADDRESS_TYPES:
        errs.append(not_supported("addressType", address_type or "", _ADDRESS_TYPES))
    endpoints = obj.get("endpoints")
    for i, endpoint in enumerate(endpoints if isinstance(endpoints, list) else []):
        if not _dict(endpoint).get("addresses"):
            errs.append(required(f"endpoints[{i}].addresses", "must contain at least 1 address"))
    return errs


def apps_errors(check: Callable[[Obj], list[FieldError]], kind: str, obj: Obj, old: Obj | None) -> list[FieldError]:
    """An apps workload's ``check``, and on an update the apps kinds' immutable fields."""
    errs = check(obj)
    if old is not None:
        errs.extend(validate_apps_update(kind, obj, old))
    return errs


def job_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    errs = validate_job(obj)
    if old is not None:
        errs.extend(validate_job_update(obj, old))
    return errs


def replication_controller_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    return validate_replication_controller(obj)  # its selector may change, unlike the apps kinds'


def pod_template_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    return validate_pod_template(obj.get("template"), "template")


def validate(resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None, *,
             subresource: str | None = None) -> list[FieldError]:
    """``obj``'s field errors by its kind's rules, as its strategy (:mod:`registry`) names them."""
    from controller_manager.sim.apiserver.registry import strategy_for

    return strategy_for(resource).field_errors(resource, obj, old, subresource=subresource)


def object_meta_errors(resource: Resource, obj: Obj, old: Obj | None, name_fn: NameFn) -> list[FieldError]:
    """ObjectMeta's checks (``name_fn``: the kind's name rule), and on an update its immutable fields."""
    errs = validate_object_meta(obj.get("metadata"), resource.namespaced, name_fn)
    if old is not None:
        errs.extend(validate_object_meta_update(obj.get("metadata"), old.get("metadata")))
    return errs
