"""Which field selectors each kind supports, and the values they read (the registries' ``GetAttrs``).

Guarantees:
- Every kind supports ``metadata.name`` and ``metadata.namespace``; the extra fields are the ones the
  upstream registry exposes (pods: ``spec.nodeName``, ``status.phase``, ...; events:
  ``involvedObject.*``, ``reason``, ``type``, ...).
- A selector naming any other field is refused as upstream refuses it: 400 ``field label not supported: X``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller_manager.api.fields import FieldSelector
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors

Obj = dict[str, Any]
Getter = Callable[[Obj], str]


def _path(*keys: str) -> Getter:
    def get(obj: Obj) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(k)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)
    return get


_INVOLVED = {f"involvedObject.{f}": _path("involvedObject", f)
             for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")}
_EVENT_FIELDS: dict[str, Getter] = {
    **_INVOLVED,
    "reason": _path("reason"),
    "reportingComponent": _path("reportingComponent"),
    "source": _path("source", "component"),
    "type": _path("type"),
}
# events.k8s.io/v1 names map onto the same stored (core) fields.
_EVENT_V1_FIELDS: dict[str, Getter] = {
    **_EVENT_FIELDS,
    **{f"regarding.{f}": _path("involvedObject", f)
       for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")},
    "reportingController": _path("reportingComponent"),
    "deprecatedSource": _path("source", "component"),
}

_EXTRA: dict[tuple[str, str], dict[str, Getter]] = {
    ("", "pods"): {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    ("", "nodes"): {"spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable")
                    else "false"},
    ("", "namespaces"): {"status.phase": _path("status", "phase")},
    ("", "events"): _EVENT_FIELDS,
    ("events.k8s.io", "events"): _EVENT_V1_FIELDS,
    ("", "secrets"): {"type": _path("type")},
    ("", "services"): {"spec.clusterIP": _path("spec", "clusterIP"), "spec.type": _path("spec", "type")},
    ("", "replicationcontrollers"): {"status.replicas": _path("status", "replicas")},
    ("apps", "replicasets"): {"status.replicas": _path("status", "replicas")},
    ("batch", "jobs"): {"status.successful": _path("status", "succeeded")},
    ("resource.k8s.io", "resourceslices"): {"spec.nodeName": _path("spec", "nodeName"),
                                            "spec.driver": _path("spec", "driver")},
}
_META: dict[str, Getter] = {"metadata.name": _path("metadata", "name"),
                            "metadata.namespace": _path("metadata", "namespace")}


def selectable_fields(res: Resource) -> dict[str, Getter]:
    return {**_META, **_EXTRA.get((res.group, res.plural), {})}


def compile_selector(res: Resource, selector: FieldSelector) -> Callable[[Obj], bool] | None:
    """A predicate over stored objects; None for an empty selector. Raises 400 for unsupported fields."""
    if selector.is_empty():
        return None
    fields = selectable_fields(res)
    getters: list[tuple[Getter, str, str]] = []
    for field, op, value in selector.requirements:
        getter = fields.get(field)
        if getter is None:
            raise errors.bad_request(f"field label not supported: {field}")
        getters.append((getter, op, value))

    def matches(obj: Obj) -> bool:
        return all((getter(obj) == value) != (op == "!=") for getter, op, value in getters)
    return matches
