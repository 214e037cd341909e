"""PriorityClasses: the built-in classes, their validation, and the Priority admission plugin
(``pkg/apis/scheduling``, ``pkg/registry/scheduling/priorityclass``, ``plugin/pkg/admission/priority``).

Guarantees:
- :data:`SYSTEM_CLASSES` are the two classes a real apiserver creates at start-up (``system-node-critical``
  2000001000, ``system-cluster-critical`` 2000000000).
- A created pod gets ``spec.priority`` and ``spec.preemptionPolicy`` from its ``priorityClassName``, else from
  the one ``globalDefault`` class (whose name it then carries), else 0 and ``PreemptLowerPriority``. An unknown
  class is 403 ``no PriorityClass with name foo was found``; a pod stating a priority or policy that differs
  from its class's is 403, worded as upstream.
- A PriorityClass named ``system-...`` must be one of the built-in ones; a user class's value is at most
  1000000000; value and preemptionPolicy are immutable; a second ``globalDefault`` class is 403.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.resources import PODS, PRIORITYCLASSES
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.validation_errors import FieldError, forbidden, invalid, not_supported

Obj = dict[str, Any]

HIGHEST_USER_DEFINABLE = 1_000_000_000
SYSTEM_PREFIX = "system-"
_POLICIES = ("Never", "PreemptLowerPriority")
SYSTEM_CLASSES: tuple[Obj, ...] = (
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-node-critical"},
     "value": 2_000_001_000, "description": "Used for system critical pods that must not be moved from their "
                                            "current node."},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-cluster-critical"},
     "value": 2_000_000_000, "description": "Used for system critical pods that must run in the cluster, but can "
                                            "be moved to another node if necessary."},
)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def apply_defaults(obj: Obj) -> None:
    if not obj.get("preemptionPolicy"):
        obj["preemptionPolicy"] = "PreemptLowerPriority"


def _known_system_class(name: str, value: Any, global_default: Any) -> str | None:
    for system in SYSTEM_CLASSES:
        if system["metadata"]["name"] == name:
            if value != system["value"]:
                return f"value of {name} PriorityClass must be {system['value']}"
            if bool(global_default):
                return f"globalDefault of {name} PriorityClass must be false"
            return None
    return f"{name} is not a known system priority class"


def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    name = str(_dict(obj.get("metadata")).get("name") or "")
    value = obj.get("value")
    if name.startswith(SYSTEM_PREFIX):
        why = _known_system_class(name, value, obj.get("globalDefault"))
        if why is not None:
            errs.append(forbidden("metadata.name", "priority class names with 'system-' prefix are reserved for "
                                                   f"system use only. error: {why}"))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE:
        errs.append(forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"))
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in _POLICIES:
        errs.append(not_supported("preemptionPolicy", policy, _POLICIES))
    if old is not None:
        if value != old.get("value"):
            errs.append(forbidden("value", "may not be changed in an update."))
        if policy != old.get("preemptionPolicy"):
            errs.append(invalid("preemptionPolicy", policy, "field is immutable"))
    return errs


def admit_class(obj: Mapping[str, Any], classes: Iterable[Mapping[str, Any]]) -> None:
    """The plugin on a PriorityClass write: only one class may be the global default."""
    if not obj.get("globalDefault"):
        return
    name = _dict(obj.get("metadata")).get("name")
    for pc in classes:
        other = _dict(pc.get("metadata")).get("name")
        if pc.get("globalDefault") and other != name:
            raise errors.forbidden(PRIORITYCLASSES.group, PRIORITYCLASSES.plural, str(name or ""),
                                   f"PriorityClass {other} is already marked as default. Only one default can exist")


def admit_pod(pod: Obj, classes: Iterable[Mapping[str, Any]]) -> None:
    """The plugin on a pod create: priority and preemption policy from the class (``pod`` owned: edited)."""
    spec = pod.setdefault("spec", {})
    name = str(_dict(pod.get("metadata")).get("name") or _dict(pod.get("metadata")).get("generateName") or "")
    class_name = spec.get("priorityClassName") or ""
    by_name = {_dict(pc.get("metadata")).get("name"): pc for pc in classes}
    policy: str | None
    if not class_name:
        default = next((pc for pc in by_name.values() if pc.get("globalDefault")), None)
        if default is None:
            priority, policy = 0, "PreemptLowerPriority"
        else:
            spec["priorityClassName"] = _dict(default.get("metadata")).get("name")
            priority, policy = int(default.get("value") or 0), default.get("preemptionPolicy")
    else:
        pc = by_name.get(class_name)
        if pc is None:
            raise errors.forbidden(PODS.group, PODS.plural, name, f"no PriorityClass with name {class_name} was found")
        priority, policy = int(pc.get("value") or 0), pc.get("preemptionPolicy")
    stated = spec.get("priority")
    if stated is not None and stated != priority:
        raise errors.forbidden(PODS.group, PODS.plural, name,
                               f"the integer value of priority ({stated}) must not be provided in pod spec; priority "
                               f"admission controller computed {priority} from the given PriorityClass name")
    spec["priority"] = priority
    if policy:
        stated_policy = spec.get("preemptionPolicy")
        if stated_policy is not None and stated_policy != policy:
            raise errors.forbidden(PODS.group, PODS.plural, name,
                                   f"the string value of PreemptionPolicy ({stated_policy}) must not be provided in "
                                   f"pod spec; priority admission controller computed {policy} from the given "
                                   "PriorityClass name")
        spec["preemptionPolicy"] = policy
