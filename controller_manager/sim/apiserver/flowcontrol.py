"""API Priority and Fairness objects (flowcontrol.apiserver.k8s.io/v1): defaults, validation and the
``Dangling`` condition kube-apiserver's config controller keeps on each FlowSchema. The configuration the server
creates and keeps is :mod:`.flowcontrol_bootstrap`'s.

Facts from upstream: ``pkg/apis/flowcontrol/v1/defaults.go``, ``pkg/apis/flowcontrol/validation`` and
``k8s.io/apiserver/pkg/util/flowcontrol`` (the config controller).

Guarantees:
- Defaults: a FlowSchema's ``matchingPrecedence`` 1000; a limited level's ``nominalConcurrencyShares`` 30 and
  ``lendablePercent`` 0, queuing 64 queues, hand size 8, queue length limit 50; an exempt level's shares and
  lendable percent 0.
- Validation: precedence in 1..10000 (1 only for ``exempt``), a known distinguisher, a referenced level, rules
  with subjects and at least one resource or non-resource rule, each rule's verbs/groups/resources/namespaces/URLs;
  a level's type (Exempt if and only if named ``exempt``), limited settings and queuing shape.
- :func:`refresh_dangling` sets each FlowSchema's ``Dangling`` condition as the config controller does: False
  (``Found``) when its priority level exists, True (``NotFound``) when not, with upstream's messages; the
  transition time changes only when the status does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import format_time
from controller_manager.api.resources import FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

# The field manager of kube-apiserver's APF config controller (the condition writes after start-up).
CONSUMER = "api-priority-and-fairness-config-consumer-v1"
ALL = "*"
_DISTINGUISHERS = ("ByUser", "ByNamespace")
_LEVEL_TYPES = ("Exempt", "Limited")
_RESPONSE_TYPES = ("Queue", "Reject")
_SUBJECT_KINDS = ("Group", "ServiceAccount", "User")
MAX_PRECEDENCE = 10000


# --- defaults ------------------------------------------------------------------------------------------------


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _flow_schema_defaults(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = 1000


def _priority_level_defaults(obj: Obj) -> None:
    spec = _dict(obj.get("spec"))
    exempt = spec.get("exempt")
    if isinstance(exempt, dict):
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)
    limited = spec.get("limited")
    if isinstance(limited, dict):
        if limited.get("nominalConcurrencyShares") is None:
            limited["nominalConcurrencyShares"] = 30
        limited.setdefault("lendablePercent", 0)
        queuing = _dict(limited.get("limitResponse")).get("queuing")
        if isinstance(queuing, dict):
            for key, value in (("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)):
                if not queuing.get(key):
                    queuing[key] = value


DEFAULTS = {"FlowSchema": _flow_schema_defaults, "PriorityLevelConfiguration": _priority_level_defaults}


# --- validation ----------------------------------------------------------------------------------------------


def _list_with_all(values: Any, path: str, what: str) -> list[FieldError]:
    values = values if isinstance(values, list) else []
    if not values:
        return [required(path, f"{what} must contain at least one value")]
    if ALL in values and len(values) > 1:
        return [invalid(path, values, f"if '{ALL}' is present, must not specify other {what}")]
    return []


def _subject_errors(subject: Obj, path: str) -> list[FieldError]:
    kind = subject.get("kind")
    field = {"User": "user", "Group": "group", "ServiceAccount": "serviceAccount"}.get(str(kind))
    if field is None:
        return [not_supported(f"{path}.kind", kind or "", _SUBJECT_KINDS)]
    errs: list[FieldError] = []
    member = subject.get(field)
    if not isinstance(member, dict):
        return [required(f"{path}.{field}", f"{field} is required when subject kind is '{kind}'")]
    if not member.get("name"):
        errs.append(required(f"{path}.{field}.name", f"{field} name is required"))
    if kind == "ServiceAccount" and not member.get("namespace"):
        errs.append(required(f"{path}.serviceAccount.namespace", "must specify namespace for service account"))
    for other in {"user", "group", "serviceAccount"} - {field}:
        if subject.get(other) is not None:
            errs.append(forbidden(f"{path}.{other}", f"{other} is forbidden when subject kind is not '{other}'"))
    return errs


def _rules_errors(rule: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    subjects = rule.get("subjects") or []
    if not subjects:
        errs.append(required(f"{path}.subjects", "subjects must contain at least one value"))
    for i, subject in enumerate(subjects):
        errs.extend(_subject_errors(_dict(subject), f"{path}.subjects[{i}]"))
    resource_rules, non_resource_rules = rule.get("resourceRules") or [], rule.get("nonResourceRules") or []
    if not resource_rules and not non_resource_rules:
        errs.append(required(path, "at least one of resourceRules and nonResourceRules has to be non-empty"))
    for i, item in enumerate(resource_rules):
        r, rpath = _dict(item), f"{path}.resourceRules[{i}]"
        errs.extend(_list_with_all(r.get("verbs"), f"{rpath}.verbs", "verbs"))
        errs.extend(_list_with_all(r.get("apiGroups"), f"{rpath}.apiGroups", "apiGroups"))
        errs.extend(_list_with_all(r.get("resources"), f"{rpath}.resources", "resources"))
        namespaces = r.get("namespaces") or []
        if not namespaces and not r.get("clusterScope"):
            errs.append(required(f"{rpath}.namespaces", "resource rules that are not cluster scoped must supply "
                                                        "at least one namespace"))
        elif ALL in namespaces and len(namespaces) > 1:
            errs.append(invalid(f"{rpath}.namespaces", namespaces,
                                "if '*' is present, must not specify other namespaces"))
    for i, item in enumerate(non_resource_rules):
        r, rpath = _dict(item), f"{path}.nonResourceRules[{i}]"
        errs.extend(_list_with_all(r.get("verbs"), f"{rpath}.verbs", "verbs"))
        errs.extend(_list_with_all(r.get("nonResourceURLs"), f"{rpath}.nonResourceURLs", "nonResourceURLs"))
    return errs


def flow_schema_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    name = _dict(obj.get("metadata")).get("name")
    errs: list[FieldError] = []
    precedence = spec.get("matchingPrecedence") or 0
    if precedence <= 0:
        errs.append(invalid("spec.matchingPrecedence", precedence, "must be a positive value"))
    if precedence > MAX_PRECEDENCE:
        errs.append(invalid("spec.matchingPrecedence", precedence, f"must not be greater than {MAX_PRECEDENCE}"))
    if precedence == 1 and name != "exempt":
        errs.append(invalid("spec.matchingPrecedence", precedence,
                            "only the schema named 'exempt' may have matchingPrecedence 1"))
    method = spec.get("distinguisherMethod")
    if isinstance(method, dict) and method.get("type") not in _DISTINGUISHERS:
        errs.append(not_supported("spec.distinguisherMethod.type", method.get("type") or "", _DISTINGUISHERS))
    if not _dict(spec.get("priorityLevelConfiguration")).get("name"):
        errs.append(required("spec.priorityLevelConfiguration.name", "must reference a priority level"))
    for i, rule in enumerate(spec.get("rules") or []):
        errs.extend(_rules_errors(_dict(rule), f"spec.rules[{i}]"))
    return errs


def _positive(value: Any, path: str) -> list[FieldError]:
    return [] if isinstance(value, int) and value > 0 else [invalid(path, value or 0, "must be positive")]


def priority_level_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    name = _dict(obj.get("metadata")).get("name")
    level_type = spec.get("type")
    errs: list[FieldError] = []
    if (name == "exempt") != (level_type == "Exempt"):
        errs.append(invalid("spec.type", level_type or "", "type must be 'Exempt' if and only if name is 'exempt'"))
    if level_type == "Exempt":
        if spec.get("limited") is not None:
            errs.append(forbidden("spec.limited", "must be nil if the type is not Limited"))
        exempt = _dict(spec.get("exempt"))
        lendable = exempt.get("lendablePercent")
        if isinstance(lendable, int) and not 0 <= lendable <= 100:
            errs.append(invalid("spec.exempt.lendablePercent", lendable, "must be between 0 and 100, inclusive"))
    elif level_type == "Limited":
        if spec.get("exempt") is not None:
            errs.append(forbidden("spec.exempt", "must be nil if the type is Limited"))
        limited = spec.get("limited")
        if not isinstance(limited, dict):
            errs.append(required("spec.limited", "must not be empty when type is Limited"))
        else:
            errs.extend(_limited_errors(limited, "spec.limited"))
    else:
        errs.append(not_supported("spec.type", level_type or "", _LEVEL_TYPES))
    return errs


def _limited_errors(limited: Obj, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    shares = limited.get("nominalConcurrencyShares")
    if isinstance(shares, int) and shares < 0:
        errs.append(invalid(f"{path}.nominalConcurrencyShares", shares, "must be a non-negative integer"))
    lendable = limited.get("lendablePercent")
    if isinstance(lendable, int) and not 0 <= lendable <= 100:
        errs.append(invalid(f"{path}.lendablePercent", lendable, "must be between 0 and 100, inclusive"))
    borrowing = limited.get("borrowingLimitPercent")
    if isinstance(borrowing, int) and borrowing < 0:
        errs.append(invalid(f"{path}.borrowingLimitPercent", borrowing, "if specified, must be a non-negative "
                                                                        "integer"))
    response = _dict(limited.get("limitResponse"))
    rpath = f"{path}.limitResponse"
    queuing = response.get("queuing")
    if response.get("type") == "Queue":
        if not isinstance(queuing, dict):
            errs.append(required(f"{rpath}.queuing", "must not be empty if the type is Queue"))
        else:
            qpath = f"{rpath}.queuing"
            errs.extend(_positive(queuing.get("queueLengthLimit"), f"{qpath}.queueLengthLimit"))
            errs.extend(_positive(queuing.get("queues"), f"{qpath}.queues"))
            errs.extend(_positive(queuing.get("handSize"), f"{qpath}.handSize"))
            queues, hand = queuing.get("queues"), queuing.get("handSize")
            if isinstance(queues, int) and isinstance(hand, int) and 0 < queues < hand:
                errs.append(invalid(f"{qpath}.handSize", hand, f"should not be greater than queues ({queues})"))
    elif response.get("type") == "Reject":
        if queuing is not None:
            errs.append(forbidden(f"{rpath}.queuing", "must be nil if limited.limitResponse.type is not Limited"))
    else:
        errs.append(not_supported(f"{rpath}.type", response.get("type") or "", _RESPONSE_TYPES))
    return errs


def status_errors(obj: Obj, old: Obj) -> list[FieldError]:
    """ValidateFlowSchemaStatus / ValidatePriorityLevelConfigurationStatus: each condition has a type, once."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, condition in enumerate(_dict(obj.get("status")).get("conditions") or []):
        kind = str(_dict(condition).get("type") or "")
        if not kind:
            errs.append(required(f"status.conditions[{i}].type", "must not be empty"))
        elif kind in seen:
            errs.append(duplicate(f"status.conditions[{i}].type", kind))
        seen.add(kind)
    return errs


# --- the config controller's status ----------------------------------------------------------------------------


def dangling_condition(level: str, exists: bool) -> Obj:
    if exists:
        return {"type": "Dangling", "status": "False", "reason": "Found",
                "message": f'This FlowSchema references the PriorityLevelConfiguration object named "{level}" and '
                           "it exists"}
    return {"type": "Dangling", "status": "True", "reason": "NotFound",
            "message": f'This FlowSchema references the PriorityLevelConfiguration object named "{level}" but there '
                       "is no such object"}


def refresh_dangling(api: ApiServer, only: str | None = None) -> None:
    """Bring the ``Dangling`` condition of every FlowSchema (or of the one named ``only``) up to date."""
    levels = {str(s.obj["metadata"]["name"]) for s in api.store(PRIORITYLEVELCONFIGURATIONS).iter_from(None)}
    schemas = [s.obj for s in api.store(FLOWSCHEMAS).iter_from(None)
               if only is None or s.obj["metadata"]["name"] == only]
    for schema in schemas:
        if schema["metadata"].get("deletionTimestamp"):
            continue
        level = str(_dict(_dict(schema.get("spec")).get("priorityLevelConfiguration")).get("name") or "")
        want = dangling_condition(level, level in levels)
        conditions = list(_dict(schema.get("status")).get("conditions") or [])
        current = next((c for c in conditions if _dict(c).get("type") == "Dangling"), None)
        if current is not None and all(current.get(k) == v for k, v in want.items()):
            continue
        if current is not None and current.get("status") == want["status"] and current.get("lastTransitionTime"):
            want["lastTransitionTime"] = current["lastTransitionTime"]
        else:
            want["lastTransitionTime"] = format_time(api.clock.now())
        others = [c for c in conditions if _dict(c).get("type") != "Dangling"]
        api.update(FLOWSCHEMAS, {**schema, "status": {**_dict(schema.get("status")), "conditions": [*others, want]}},
                   subresource="status", field_manager=CONSUMER)
