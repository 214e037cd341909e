"""apiregistration.k8s.io/v1 APIServices: validation and the APIServices kube-apiserver's aggregator registers
(``k8s.io/kube-aggregator``: ``pkg/apis/apiregistration/validation``, ``pkg/controllers/autoregister``;
kube-apiserver's ``apiServicesToRegister`` and its group/version priorities; the CRD registration controller).

Guarantees:
- :func:`install` registers one local APIService per built-in group/version kube-sim serves (``v1.``, ``v1.apps``,
  ...), named ``<version>.<group>``, with upstream's ``groupPriorityMinimum``/``versionPriority``, labelled
  ``kube-aggregator.kubernetes.io/automanaged: onstart`` and ``Available=True`` (reason ``Local``). A group/version
  without a priority is not registered, as upstream skips it. metrics.k8s.io, which kube-sim answers in place of
  metrics-server, is registered as metrics-server's manifest registers it (the ``kube-system/metrics-server``
  service, priorities 100/100, TLS unverified) and shown available (``Passed``, ``all checks passed``).
- :func:`sync_custom` keeps one APIService per custom resource group/version (priorities 1000/100, label
  ``automanaged: "true"``), created when a CRD version is served and deleted when none of that group/version is.
- Validation: the name must be ``spec.version+"."+spec.group``; a group is a DNS subdomain (empty only for v1); a
  version a DNS-1035 label; priorities in range; local APIServices take no caBundle or insecureSkipTLSVerify;
  service references need namespace, name and a valid port (443 by default). Condition statuses are True, False or
  Unknown.
"""

from __future__ import annotations

import functools
import uuid
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import format_time
from controller_manager.api.resources import APISERVICES, Resource
from controller_manager.sim.apiserver.validation_errors import (
    FieldError,
    invalid,
    not_supported,
    required,
)
from controller_manager.sim.apiserver.validation_pods import name_is_dns1035_label, name_is_dns_subdomain

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
# (group, version) -> (groupPriorityMinimum, versionPriority): kube-apiserver's table for what kube-sim serves.
PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apiregistration.k8s.io", "v1"): (18000, 15),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("batch", "v1"): (17400, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("resource.k8s.io", "v1"): (16200, 21),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
}
METRICS_GROUP = "metrics.k8s.io"
_CUSTOM_PRIORITIES = (1000, 100)  # the CRD registration controller's: low, and the version preferred
_CONDITIONS = ("True", "False", "Unknown")
_PLACEHOLDER_TIME = "1970-01-01T00:00:00Z"
_PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def priority(group: str, version: str) -> tuple[int, int]:
    """(groupPriorityMinimum, versionPriority) of a served group/version's APIService: kube-apiserver's table,
    metrics-server's 100/100, the CRD registration controller's 1000/100 for anything else (custom resources)."""
    if group == METRICS_GROUP:
        return (100, 100)
    return PRIORITIES.get((group, version), _CUSTOM_PRIORITIES)


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _name(group: str, version: str) -> str:
    return f"{version}.{group}"


def _available(reason: str, message: str, now: str) -> Obj:
    return {"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": now, "reason": reason,
                            "message": message}]}


def _local(group: str, version: str, priorities: tuple[int, int], managed: str, now: str) -> Obj:
    return {"apiVersion": APISERVICES.api_version, "kind": APISERVICES.kind,
            "metadata": {"name": _name(group, version), "labels": {AUTOMANAGED: managed}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": priorities[0],
                     "versionPriority": priorities[1]},
            "status": _available("Local", "Local APIServices are always available", now)}


def _metrics_server(version: str, now: str) -> Obj:
    return {"apiVersion": APISERVICES.api_version, "kind": APISERVICES.kind,
            "metadata": {"name": _name(METRICS_GROUP, version), "labels": {"k8s-app": "metrics-server"}},
            "spec": {"service": {"namespace": "kube-system", "name": "metrics-server", "port": 443},
                     "group": METRICS_GROUP, "version": version, "insecureSkipTLSVerify": True,
                     "groupPriorityMinimum": 100, "versionPriority": 100},
            "status": _available("Passed", "all checks passed", now)}


def registered(resources: tuple[Resource, ...]) -> list[Obj]:
    """The APIServices a server serving ``resources`` registers on start, in the order its paths are listed."""
    out: list[Obj] = []
    seen: set[tuple[str, str]] = set()
    for res in resources:
        gv = (res.group, res.version)
        if gv in seen:
            continue
        seen.add(gv)
        if res.group == METRICS_GROUP:
            out.append(_metrics_server(res.version, _PLACEHOLDER_TIME))
        elif gv in PRIORITIES:
            out.append(_local(res.group, res.version, PRIORITIES[gv], "onstart", _PLACEHOLDER_TIME))
    return out


@functools.cache
def _stored_forms(resources: tuple[Resource, ...]) -> tuple[Obj, ...]:
    """The start-up APIServices in their stored form (built once per resource table, placeholder uid and times)."""
    from controller_manager.sim.apiserver import codec, defaults

    def stored(obj: Obj) -> Obj:
        meta = {"name": obj["metadata"]["name"], "uid": _PLACEHOLDER_UID, "creationTimestamp": _PLACEHOLDER_TIME,
                "labels": obj["metadata"]["labels"]}
        return codec.normalize(APISERVICES, defaults.apply_defaults(APISERVICES, {**obj, "metadata": meta}))

    return tuple(stored(obj) for obj in registered(resources))


def install(api: ApiServer) -> None:
    """What the aggregator's autoregistration writes as it starts (stored in the form a create gives them, built
    once per resource table: tests hold the two equal)."""
    now = format_time(api.clock.now())
    for template in _stored_forms(api.builtin_resources):
        meta = {**template["metadata"], "uid": str(uuid.uuid4()), "creationTimestamp": now}
        status = {"conditions": [{**c, "lastTransitionTime": now} for c in template["status"]["conditions"]]}
        api.store_prepared(APISERVICES, {**template, "metadata": meta, "status": status})


def sync_custom(api: ApiServer) -> None:
    """The CRD registration controller: an APIService per served custom resource group/version, no more."""
    from controller_manager.sim.apiserver.crd.resource import CustomResource

    if api.lookup(APISERVICES.group, APISERVICES.version, APISERVICES.plural) is None:
        return
    wanted = {(r.group, r.version) for r in api.resources if isinstance(r, CustomResource)}
    store = api.store(APISERVICES)
    have = {}
    for stored in list(store.iter_from(None)):
        obj = stored.obj
        if (obj["metadata"].get("labels") or {}).get(AUTOMANAGED) == "true":
            have[(obj["spec"].get("group", ""), obj["spec"].get("version", ""))] = obj["metadata"]["name"]
    now = format_time(api.clock.now())
    for group, version in sorted(wanted - set(have)):
        if store.get(_name(group, version)) is not None:
            continue  # registered by someone else (an aggregated server): the controller leaves it alone
        created = api.create(APISERVICES, _local(group, version, _CUSTOM_PRIORITIES, "true", now))
        api.update(APISERVICES, {**created, "status": _available("Local", "Local APIServices are always available",
                                                                 now)}, subresource="status")
    for gv in sorted(set(have) - wanted):
        api.delete(APISERVICES, None, have[gv])


# --- validation ----------------------------------------------------------------------------------------------


def name_rule(obj: Obj) -> Any:
    """ValidateAPIService's name function: a path segment, and exactly ``spec.version+"."+spec.group``."""
    from controller_manager.sim.apiserver.validation import name_is_path_segment

    spec = _dict(obj.get("spec"))
    want = f"{spec.get('version') or ''}.{spec.get('group') or ''}"

    def check(name: str, prefix: bool) -> list[str]:
        failures = name_is_path_segment(name, prefix)
        if failures:
            return failures
        return [] if name == want else [f'must be `spec.version+"."+spec.group`: "{want}"']

    return check


def api_service_errors(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec = _dict(obj.get("spec"))
    group, version = str(spec.get("group") or ""), str(spec.get("version") or "")
    errs: list[FieldError] = []
    if not group and version != "v1":
        errs.append(required("spec.group", "only v1 may have an empty group and it better be legacy kube"))
    if group:
        errs.extend(invalid("spec.group", group, msg) for msg in name_is_dns_subdomain(group, False))
    errs.extend(invalid("spec.version", version, msg) for msg in name_is_dns1035_label(version, False))
    group_priority = spec.get("groupPriorityMinimum") or 0
    if not 0 < group_priority <= 20000:
        errs.append(invalid("spec.groupPriorityMinimum", group_priority, "must be positive and less than 20000"))
    version_priority = spec.get("versionPriority") or 0
    if not 0 < version_priority <= 1000:
        errs.append(invalid("spec.versionPriority", version_priority, "must be positive and less than 1000"))
    service = spec.get("service")
    ca_bundle = str(spec.get("caBundle") or "")
    if not isinstance(service, dict):
        if ca_bundle:
            size = len(ca_bundle) * 3 // 4 - ca_bundle.count("=")  # the decoded length of the base64 text
            errs.append(invalid("spec.caBundle", f"{size} bytes", "local APIServices may not have a caBundle"))
        if spec.get("insecureSkipTLSVerify"):
            errs.append(invalid("spec.insecureSkipTLSVerify", True,
                                "local APIServices may not have insecureSkipTLSVerify"))
        return errs
    if not service.get("namespace"):
        errs.append(required("spec.service.namespace"))
    if not service.get("name"):
        errs.append(required("spec.service.name"))
    port = service.get("port")
    if not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(invalid("spec.service.port", port, "port is not valid: must be between 1 and 65535, inclusive"))
    if spec.get("insecureSkipTLSVerify") and ca_bundle:
        errs.append(invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
    return errs


def api_service_status_errors(obj: Obj, old: Obj) -> list[FieldError]:
    status = _dict(obj.get("status"))
    errs: list[FieldError] = []
    for i, condition in enumerate(status.get("conditions") or []):
        value = condition.get("status") if isinstance(condition, dict) else None
        if value not in _CONDITIONS:
            errs.append(not_supported(f"status.conditions[{i}].status", value or "", _CONDITIONS))
    return errs


def apply_defaults(obj: Obj) -> None:
    """SetDefaults_ServiceReference: port 443."""
    spec = obj.get("spec")
    service = spec.get("service") if isinstance(spec, dict) else None
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = 443


DEFAULTS = {"APIService": apply_defaults}
