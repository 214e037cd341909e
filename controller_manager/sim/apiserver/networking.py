"""networking.k8s.io/v1 kinds: Ingress, IngressClass and NetworkPolicy defaults and validation
(``pkg/apis/networking/v1/defaults.go``, ``pkg/apis/networking/validation``), and the DefaultIngressClass
admission plugin.

Guarantees:
- NetworkPolicy: ports default to TCP; ``policyTypes`` defaults to ``[Ingress]`` plus ``Egress`` when egress
  rules are given. Validation: policyTypes from Ingress/Egress, at most 2; port protocols; endPort >= port.
- Ingress: ``defaultBackend`` or ``rules`` required; every path has a supported ``pathType`` (Exact, Prefix,
  ImplementationSpecific) and an absolute path for Exact/Prefix; each backend names a service (with a port
  name or number, not both) or a resource, not both; with upstream's messages.
- IngressClass: ``spec.controller`` required and immutable.
- An Ingress created without ``spec.ingressClassName`` (and without the legacy ``kubernetes.io/ingress.class``
  annotation) gets the default class (``ingressclass.kubernetes.io/is-default-class: "true"``; the newest one
  when there are several).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    GoRepr,
    invalid,
    not_supported,
    required,
)

Obj = dict[str, Any]

DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
LEGACY_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_POLICY_TYPES = ("Egress", "Ingress")
_PROTOCOLS = ("SCTP", "TCP", "UDP")


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- defaults -------------------------------------------------------------------------------------------

def _network_policy_defaults(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or ():
            for port in (rule.get("ports") or ()) if isinstance(rule, dict) else ():
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"
    if not spec.get("policyTypes"):
        types = ["Ingress"]
        if spec.get("egress"):
            types.append("Egress")
        spec["policyTypes"] = types


DEFAULTS: dict[str, Callable[[Obj], None]] = {"NetworkPolicy": _network_policy_defaults}


# --- validation -----------------------------------------------------------------------------------------

def _backend(backend: Mapping[str, Any], path: str) -> list[FieldError]:
    service = backend.get("service")
    resource = backend.get("resource")
    if service is not None and resource is not None:
        return [invalid(path, "", "cannot set both resource and service backends")]
    if service is None and resource is None:
        return [invalid(path, "", "resource or service backend is required")]
    errs: list[FieldError] = []
    if service is not None:
        svc = _dict(service)
        if not svc.get("name"):
            errs.append(required(f"{path}.service.name"))
        port = _dict(svc.get("port"))
        if port.get("name") and port.get("number"):
            errs.append(invalid(path, "", "cannot set both port name & port number"))
        elif not port.get("name") and not port.get("number"):
            errs.append(required(f"{path}.service.port", "port name or number is required"))
    else:
        ref = _dict(resource)
        if not ref.get("kind"):
            errs.append(required(f"{path}.resource.kind"))
        if not ref.get("name"):
            errs.append(required(f"{path}.resource.name"))
    return errs


def ingress_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    rules = spec.get("rules") or []
    if spec.get("defaultBackend") is None and not rules:
        errs.append(invalid("spec", GoRepr("null"),
                            "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        errs.extend(_backend(_dict(spec["defaultBackend"]), "spec.defaultBackend"))
    for i, rule in enumerate(rules):
        http = _dict(rule).get("http")
        if http is None:
            continue
        paths = _dict(http).get("paths") or []
        if not paths:
            errs.append(required(f"spec.rules[{i}].http.paths"))
        for j, entry in enumerate(paths):
            entry = _dict(entry)
            where = f"spec.rules[{i}].http.paths[{j}]"
            path_type = entry.get("pathType")
            text = str(entry.get("path") or "")
            if not path_type:
                errs.append(required(f"{where}.pathType", "pathType must be specified"))
            elif path_type not in _PATH_TYPES:
                errs.append(not_supported(f"{where}.pathType", path_type, _PATH_TYPES))
            elif not text.startswith("/") and (path_type in ("Exact", "Prefix") or text):
                errs.append(invalid(f"{where}.path", text, "must be an absolute path"))
            errs.extend(_backend(_dict(entry.get("backend")), f"{where}.backend"))
    for i, tls in enumerate(spec.get("tls") or ()):
        for j, host in enumerate(_dict(tls).get("hosts") or ()):
            if "*" in str(host)[1:]:
                errs.append(invalid(f"spec.tls[{i}].hosts[{j}]", host,
                                    "a wildcard DNS-1123 subdomain must start with '*.'"))
    return errs


def ingress_class_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    controller = _dict(obj.get("spec")).get("controller")
    errs: list[FieldError] = []
    if not controller:
        errs.append(required("spec.controller"))
    elif old is not None and controller != _dict(old.get("spec")).get("controller"):
        errs.append(invalid("spec.controller", controller, "field is immutable"))
    return errs


def network_policy_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    errs: list[FieldError] = []
    types = list(spec.get("policyTypes") or ())
    for i, kind in enumerate(types):
        if kind not in _POLICY_TYPES:
            errs.append(not_supported(f"spec.policyTypes[{i}]", kind, _POLICY_TYPES))
    if len(types) > 2:
        errs.append(invalid("spec.policyTypes", [str(t) for t in types], "may not specify more than two policyTypes"))
    for direction in ("ingress", "egress"):
        for i, rule in enumerate(spec.get(direction) or ()):
            for j, port in enumerate(_dict(rule).get("ports") or ()):
                port = _dict(port)
                path = f"spec.{direction}[{i}].ports[{j}]"
                if port.get("protocol") not in _PROTOCOLS:
                    errs.append(not_supported(f"{path}.protocol", port.get("protocol"), _PROTOCOLS))
                end = port.get("endPort")
                if end is not None:
                    if not isinstance(port.get("port"), int):
                        errs.append(required(f"{path}.port", "may not be omitted when endPort is set")
                                    if port.get("port") is None else
                                    invalid(f"{path}.endPort", end, "may not be specified when port is non-numeric"))
                    elif isinstance(end, int) and end < port["port"]:
                        errs.append(invalid(f"{path}.endPort", end, "must be greater than or equal to `port`"))
    return errs


# --- admission ------------------------------------------------------------------------------------------

def default_class_name(classes: Iterable[Mapping[str, Any]], annotation: str) -> str | None:
    """The default among ``classes`` (marked by ``annotation: "true"``), the newest when several are."""
    marked = [c for c in classes if _dict(_dict(c.get("metadata")).get("annotations")).get(annotation) == "true"]
    if not marked:
        return None
    newest = max(marked, key=lambda c: (str(_dict(c.get("metadata")).get("creationTimestamp") or ""),
                                        str(_dict(c.get("metadata")).get("name") or "")))
    return str(_dict(newest.get("metadata")).get("name") or "") or None


def admit_ingress(ingress: Obj, classes: Iterable[Mapping[str, Any]]) -> None:
    """DefaultIngressClass on a create (``ingress`` owned: edited in place)."""
    spec = ingress.setdefault("spec", {})
    annotations = _dict(_dict(ingress.get("metadata")).get("annotations"))
    if spec.get("ingressClassName") or LEGACY_CLASS_ANNOTATION in annotations:
        return
    name = default_class_name(classes, DEFAULT_CLASS_ANNOTATION)
    if name:
        spec["ingressClassName"] = name
