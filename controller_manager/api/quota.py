"""What quota charges each object for: the evaluators of ``pkg/quota/v1/evaluator/core`` and
``k8s.io/apiserver/pkg/quota/v1/generic``, shared by kube-sim's ResourceQuota admission (what a create adds) and
the resourcequota controller (what a namespace holds).

Guarantees:
- :func:`matching_resources` is each evaluator's ``MatchingResources``: pods (``pods``, ``count/pods``,
  ``cpu``/``memory``/``ephemeral-storage`` and their ``requests.``/``limits.`` forms, hugepages, extended
  ``requests.*``), services (``services``, ``count/services``, ``services.nodeports``, ``services.loadbalancers``),
  persistentvolumeclaims (``persistentvolumeclaims``, ``count/persistentvolumeclaims``, ``requests.storage`` and
  the per-storage-class names), the legacy counts (``configmaps``, ``secrets``, ``replicationcontrollers``,
  ``resourcequotas``) and ``count/<resource>[.<group>]`` for any other kind.
- :func:`usage` is each evaluator's ``Usage``. A pod always counts in ``count/pods``; its compute resources (and
  ``pods``) only while it is not terminal and not past its deletion grace period (``QuotaV1Pod``, given ``now``).
  Pod totals follow ``resourcehelper.PodRequests/PodLimits``: containers summed, sidecars added, init containers
  as a floor, pod-level cpu/memory/hugepages replacing the containers', overhead added (to limits only where
  set and non-zero), and the resources the kubelet reports in ``status.containerStatuses[].resources`` and
  ``allocatedResources`` taken when larger (InPlacePodVerticalScaling; the status alone once a resize is
  Infeasible).
- :func:`matches_scopes` is the pod evaluator's scope check over ``spec.scopes`` and ``spec.scopeSelector``
  (Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass with its four operators,
  CrossNamespacePodAffinity); no other kind matches any scope.
- :func:`replenish_on_update` is upstream's ``DefaultUpdateFilter``: the updates that change what an object is
  charged (a pod leaving quota or changing scope or resized, a service changing type, a claim's allocated size).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.meta import parse_time
from controller_manager.api.resource_lists import Amount, ResourceList, add, parse_list
from controller_manager.api.resources import Resource

__all__ = [
    "IGNORED_RESOURCES",
    "LEGACY_COUNTS",
    "count_name",
    "is_terminating",
    "matches_scopes",
    "matching_resources",
    "pod_matches_scope",
    "pod_qos",
    "pod_totals",
    "quota_v1_pod",
    "replenish_on_update",
    "scope_selectors",
    "usage",
]

Obj = Mapping[str, Any]

_ONE = Amount.of(1)
_ZERO = Amount.of(0)
_POD_RESOURCES = frozenset({
    "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods"})
_POD_RESOURCE_PREFIXES = ("hugepages-", "requests.hugepages-")
_DEVICE_CLASS_REQUESTS_PREFIX = "requests.deviceclass.resource.kubernetes.io/"
_SERVICE_RESOURCES = frozenset({"count/services", "services", "services.loadbalancers", "services.nodeports"})
_PVC_RESOURCES = frozenset({"count/persistentvolumeclaims", "persistentvolumeclaims", "requests.storage"})
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
# Never quota'd (quota/v1/install's ignoredResources): virtual kinds that are not stored, and events.
IGNORED_RESOURCES = frozenset({
    ("", "bindings"), ("", "componentstatuses"), ("authentication.k8s.io", "tokenreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"), ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"), ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"), ("", "events"), ("events.k8s.io", "events")})
# The core kinds whose object count also has a name of its own (upstream's legacyObjectCountAliases).
LEGACY_COUNTS = frozenset({"configmaps", "secrets", "replicationcontrollers", "resourcequotas"})


def _dict(value: Any) -> Mapping[str, Any]:
    # (a plain dict, nearly always, spares the Mapping ABC's instance check)
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _is(res: Resource, plural: str) -> bool:
    return res.group == "" and res.plural == plural


def count_name(res: Resource) -> str:
    """``count/pods``, ``count/deployments.apps``: the object-count name of a resource."""
    return f"count/{res.group_resource}"


def is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


# --- what each kind is charged for ----------------------------------------------------------------------

def matching_resources(res: Resource, names: Iterable[str]) -> list[str]:
    """Of a quota's resource names, those this kind's evaluator tracks."""
    out = []
    for name in names:
        if _is(res, "pods"):
            extended = (not is_native(name) or name.startswith(_DEVICE_CLASS_REQUESTS_PREFIX)) and \
                name.startswith("requests.")
            if name in _POD_RESOURCES or name.startswith(_POD_RESOURCE_PREFIXES) or extended:
                out.append(name)
        elif _is(res, "services"):
            if name in _SERVICE_RESOURCES:
                out.append(name)
        elif _is(res, "persistentvolumeclaims"):
            if name in _PVC_RESOURCES or STORAGE_CLASS_SUFFIX in name:
                out.append(name)
        elif name == count_name(res) or (res.group == "" and res.plural in LEGACY_COUNTS and name == res.plural):
            out.append(name)
    return out


def container_usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """podComputeUsageHelper: the quota names a container's (or pod's) requests and limits count toward."""
    out: ResourceList = {"pods": _ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = requests[name]
            out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            out[name] = amount
            out[f"requests.{name}"] = amount
        if not is_native(name) and not name.startswith("requests."):
            out[f"requests.{name}"] = amount
    return out


def _max(a: ResourceList, b: ResourceList) -> ResourceList:
    out = dict(a)
    for name, amount in b.items():
        if name not in out or amount.value > out[name].value:
            out[name] = amount
    return out


def _pod_level_supported(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _resize_infeasible(pod: Obj) -> bool:
    for cond in _dict(pod.get("status")).get("conditions") or ():
        if _dict(cond).get("type") == "PodResizePending":
            return _dict(cond).get("reason") == "Infeasible"
    return False


def _container_amounts(pod: Obj, container: Mapping[str, Any], field: str,
                       statuses: Mapping[str, Mapping[str, Any]] | None) -> ResourceList:
    """A container's requests or limits; with ``statuses``, the larger of spec and what the kubelet reports."""
    amounts = parse_list(_dict(container.get("resources")).get(field))
    if statuses is None:
        return amounts
    status = statuses.get(str(container.get("name") or ""))
    if status is None or not isinstance(status.get("resources"), Mapping):
        return amounts
    reported = parse_list(_dict(status.get("resources")).get(field))
    allocated = parse_list(status.get("allocatedResources")) if field == "requests" else {}
    if _resize_infeasible(pod):
        return _max(reported, allocated)
    return _max(_max(amounts, reported), allocated)


def pod_totals(pod: Obj, field: str, *, overhead: bool = True, status_resources: bool = False) -> ResourceList:
    """resourcehelper.PodRequests/PodLimits (``field`` is ``requests`` or ``limits``) of a pod."""
    spec = _dict(pod.get("spec"))
    statuses: dict[str, Mapping[str, Any]] | None = None
    if status_resources:
        st = _dict(pod.get("status"))
        statuses = {str(_dict(s).get("name") or ""): _dict(s)
                    for s in [*(st.get("containerStatuses") or ()), *(st.get("initContainerStatuses") or ())]}
    total: ResourceList = {}
    sidecars: ResourceList = {}
    floor: ResourceList = {}
    for c in spec.get("containers") or ():
        total = add(total, _container_amounts(pod, _dict(c), field, statuses))
    for c in spec.get("initContainers") or ():
        sidecar = _dict(c).get("restartPolicy") == "Always"
        amounts = _container_amounts(pod, _dict(c), field, statuses if sidecar else None)
        if sidecar:
            sidecars = add(sidecars, amounts)
            total = add(total, amounts)
            floor = _max(floor, sidecars)
        else:
            floor = _max(floor, add(amounts, sidecars))
    total = _max(total, floor)
    pod_level = _dict(_dict(spec.get("resources")))
    for name, amount in parse_list(pod_level.get(field)).items():
        if _pod_level_supported(name):
            total[name] = amount
    if not overhead:
        return total
    extra = parse_list(spec.get("overhead"))
    if field == "limits":  # overhead raises only the limits a pod has (and not zero ones)
        extra = {n: a for n, a in extra.items() if n in total and total[n].value != 0}
    return add(total, extra)


def quota_v1_pod(pod: Obj, now: float | None = None) -> bool:
    """QuotaV1Pod: a pod is charged compute resources unless terminal or stuck past its deletion grace period."""
    if _dict(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
        return False
    meta = _dict(pod.get("metadata"))
    deleted = meta.get("deletionTimestamp")
    grace = meta.get("deletionGracePeriodSeconds")
    if now is not None and isinstance(deleted, str) and isinstance(grace, int) and not isinstance(grace, bool):
        at = parse_time(deleted)
        if at is not None and now > at + grace:
            return False
    return True


def _pod_usage(pod: Obj, now: float | None) -> ResourceList:
    out: ResourceList = {"count/pods": _ONE}
    if not quota_v1_pod(pod, now):
        return out
    requests = pod_totals(pod, "requests", status_resources=True)
    limits = pod_totals(pod, "limits", status_resources=True)
    return add(out, container_usage(requests, limits))


def service_quota_type(svc: Obj) -> str:
    """GetQuotaServiceType: the type a Service is charged as (NodePort, LoadBalancer or nothing)."""
    kind = _dict(svc.get("spec")).get("type")
    return str(kind) if kind in ("NodePort", "LoadBalancer") else ""


def _service_usage(svc: Obj) -> ResourceList:
    spec = _dict(svc.get("spec"))
    ports = list(spec.get("ports") or ())
    out: ResourceList = {"count/services": _ONE, "services": _ONE, "services.loadbalancers": _ZERO,
                         "services.nodeports": _ZERO}
    if spec.get("type") == "NodePort":
        out["services.nodeports"] = Amount.of(len(ports))
    elif spec.get("type") == "LoadBalancer":
        if spec.get("allocateLoadBalancerNodePorts") is False:
            out["services.nodeports"] = Amount.of(sum(1 for p in ports if _dict(p).get("nodePort")))
        else:
            out["services.nodeports"] = Amount.of(len(ports))
        out["services.loadbalancers"] = _ONE
    return out


def _pvc_usage(pvc: Obj) -> ResourceList:
    spec = _dict(pvc.get("spec"))
    out: ResourceList = {"count/persistentvolumeclaims": _ONE, "persistentvolumeclaims": _ONE}
    storage_class = spec.get("storageClassName")
    if storage_class:
        out[f"{storage_class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = _ONE
    request = parse_list(_dict(spec.get("resources")).get("requests")).get("storage")
    allocated = parse_list(_dict(pvc.get("status")).get("allocatedResources")).get("storage")
    if allocated is not None and (request is None or allocated.value > request.value):
        request = allocated
    if request is not None:
        out["requests.storage"] = request
        if storage_class:
            out[f"{storage_class}{STORAGE_CLASS_SUFFIX}requests.storage"] = request
    return out


def usage(res: Resource, obj: Obj, now: float | None = None) -> ResourceList:
    """What ``obj`` is charged (``now``: the time a pod's deletion grace period is measured against; None at
    admission, where a pod is new)."""
    if _is(res, "pods"):
        return _pod_usage(obj, now)
    if _is(res, "services"):
        return _service_usage(obj)
    if _is(res, "persistentvolumeclaims"):
        return _pvc_usage(obj)
    out: ResourceList = {count_name(res): _ONE}
    if res.group == "" and res.plural in LEGACY_COUNTS:
        out[res.plural] = _ONE
    return out


# --- scopes -------------------------------------------------------------------------------------------

def scope_selectors(quota: Obj) -> list[Mapping[str, Any]]:
    """getScopeSelectorsFromQuota: ``spec.scopes`` as Exists requirements, then ``spec.scopeSelector``'s."""
    spec = _dict(quota.get("spec"))
    selectors: list[Mapping[str, Any]] = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or ()]
    selectors += [_dict(e) for e in _dict(spec.get("scopeSelector")).get("matchExpressions") or ()]
    return selectors


def _cross_namespace_affinity(spec: Mapping[str, Any]) -> bool:
    affinity = _dict(spec.get("affinity"))
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = _dict(affinity.get(kind))
        required = [_dict(t) for t in terms.get("requiredDuringSchedulingIgnoredDuringExecution") or ()]
        preferred = [_dict(_dict(t).get("podAffinityTerm"))
                     for t in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in required + preferred):
            return True
    return False


def pod_qos(pod: Obj) -> str:
    """qos.GetPodQOS: ``status.qosClass`` once set, else ComputePodQOS over the positive cpu/memory requests and
    limits (the pod-level ones when set, else every container's summed)."""
    stated = _dict(pod.get("status")).get("qosClass")
    if isinstance(stated, str) and stated:
        return stated
    spec = _dict(pod.get("spec"))
    pod_level = _dict(spec.get("resources"))
    if any(_pod_level_supported(n) for n in [*_dict(pod_level.get("requests")), *_dict(pod_level.get("limits"))]):
        sources: list[Mapping[str, Any]] = [pod_level]
    else:
        sources = [_dict(_dict(c).get("resources"))
                   for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]]
    requests: ResourceList = {}
    limits: ResourceList = {}
    guaranteed = True
    for resources in sources:
        for field, total in (("requests", requests), ("limits", limits)):
            for name, amount in parse_list(resources.get(field)).items():
                if name in ("cpu", "memory") and amount.value > 0:
                    total[name] = total[name].plus(amount) if name in total else amount
        found = {n for n, a in parse_list(resources.get("limits")).items() if n in ("cpu", "memory") and a.value > 0}
        if found != {"cpu", "memory"}:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(n in limits and limits[n].value == a.value for n, a in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def is_terminating(pod: Obj) -> bool:
    deadline = _dict(pod.get("spec")).get("activeDeadlineSeconds")
    return isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0


def pod_matches_scope(selector: Mapping[str, Any], pod: Obj) -> bool:
    """podMatchesScopeFunc: whether ``pod`` falls under one scope requirement."""
    scope = str(selector.get("scopeName") or "")
    if scope in ("Terminating", "NotTerminating"):
        return is_terminating(pod) is (scope == "Terminating")
    if scope in ("BestEffort", "NotBestEffort"):
        return (pod_qos(pod) == "BestEffort") is (scope == "BestEffort")
    if scope == "PriorityClass":
        class_name = str(_dict(pod.get("spec")).get("priorityClassName") or "")
        operator = selector.get("operator")
        values = [str(v) for v in selector.get("values") or ()]
        if operator == "Exists":
            return bool(class_name)
        if operator == "DoesNotExist":
            return not class_name
        if operator == "In":
            return bool(class_name) and class_name in values
        if operator == "NotIn":
            return not class_name or class_name not in values
        return False
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(_dict(pod.get("spec")))
    return False


def matches_scopes(res: Resource, quota: Obj, obj: Obj) -> bool:
    """Whether ``obj`` falls under every scope of ``quota`` (no scopes: everything does; only pods have any)."""
    selectors = scope_selectors(quota)
    if not selectors:
        return True
    return _is(res, "pods") and all(pod_matches_scope(s, obj) for s in selectors)


# --- which updates change the charge ---------------------------------------------------------------------

def _status_resources_changed(old: Obj, new: Obj) -> bool:
    for field in ("containerStatuses", "initContainerStatuses"):
        before = {str(_dict(s).get("name") or ""): _dict(s) for s in _dict(old.get("status")).get(field) or ()}
        for status in _dict(new.get("status")).get(field) or ():
            status = _dict(status)
            previous = before.get(str(status.get("name") or ""))
            if previous is None:
                if status.get("resources") is not None:
                    return True
                continue
            if _semantic_resources(previous.get("resources")) != _semantic_resources(status.get("resources")):
                return True
    return False


def _semantic_resources(value: Any) -> Any:
    """ResourceRequirements compared as apiequality.Semantic does (quantities by value, empty as absent)."""
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in ("requests", "limits"):
            amounts = {n: a.value for n, a in parse_list(item).items()}
            if amounts:
                out[key] = amounts
        elif item:
            out[key] = item
    return out


def replenish_on_update(res: Resource, old: Obj, new: Obj, now: float | None) -> bool:
    """DefaultUpdateFilter: whether an update may lower what the object is charged."""
    if _is(res, "pods"):
        if _status_resources_changed(old, new):
            return True
        if is_terminating(old) != is_terminating(new):
            return True
        return quota_v1_pod(old, now) and not quota_v1_pod(new, now)
    if _is(res, "services"):
        return service_quota_type(old) != service_quota_type(new)
    if _is(res, "persistentvolumeclaims"):
        allocated = [{n: a.value for n, a in parse_list(_dict(o.get("status")).get("allocatedResources")).items()}
                     for o in (old, new)]
        return allocated[0] != allocated[1]
    return False
