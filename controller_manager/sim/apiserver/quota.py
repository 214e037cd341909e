"""The ResourceQuota admission plugin at create (``plugin/pkg/admission/resourcequota``, with the evaluators of
``pkg/quota/v1/evaluator/core`` and ``k8s.io/apiserver/pkg/quota/v1/generic``).

Guarantees:
- A quota takes part only once its ``status.hard`` is set (the resourcequota controller copies it from the
  spec), and only when it tracks one of the resources the created kind is charged for: pods (``pods``,
  ``count/pods``, ``cpu``/``memory``/``ephemeral-storage`` and their ``requests.``/``limits.`` forms, hugepages,
  extended ``requests.*``), services (``services``, ``services.nodeports``, ``services.loadbalancers``),
  persistentvolumeclaims (``persistentvolumeclaims``, ``requests.storage`` and the per-storage-class names),
  the legacy object counts (``configmaps``, ``secrets``, ``replicationcontrollers``, ``resourcequotas``) and
  ``count/<resource>[.<group>]`` for every kind. Scopes (``spec.scopes``, ``spec.scopeSelector``) select pods
  only (Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass, CrossNamespacePodAffinity);
  a scoped quota matches no other kind.
- A quota tracking cpu or memory requires every container to state them: 403 ``failed quota: <q>: must specify
  limits.cpu for: c; requests.memory for: c``. A matching quota whose ``status.used`` lacks one of its hard
  names: 403 ``status unknown for quota: <q>``. A request over the limit: 403 ``exceeded quota: <q>, requested:
  ..., used: ..., limited: ...`` (names sorted, quantities as ``Quantity.String()``).
- Updates are charged the difference they make, for services and claims only (the other evaluators handle
  creates).
- :func:`check` is pure: it returns the quotas whose ``status.used`` the admitted object raises; the caller
  writes them once the object is stored (upstream writes them before; the difference shows only when the
  create then fails).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors
from controller_manager.sim.apiserver.resource_lists import (
    Amount,
    ResourceList,
    add,
    less_than_or_equal,
    mask,
    parse_list,
    subtract,
)

Obj = dict[str, Any]

_ONE = Amount.of(1)
_ZERO = Amount.of(0)
_POD_RESOURCES = frozenset({
    "count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods"})
_POD_RESOURCE_PREFIXES = ("hugepages-", "requests.hugepages-")
# A quota on these makes every container state them (an old coupling upstream keeps for compatibility).
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_SERVICE_RESOURCES = frozenset({"count/services", "services", "services.loadbalancers", "services.nodeports"})
_PVC_RESOURCES = frozenset({"count/persistentvolumeclaims", "persistentvolumeclaims", "requests.storage"})
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
_LEGACY_COUNTS = frozenset({"configmaps", "secrets", "replicationcontrollers", "resourcequotas"})


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def count_name(res: Resource) -> str:
    """``count/pods``, ``count/deployments.apps``: the object-count name of a resource."""
    return f"count/{res.group_resource}"


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


# --- what each kind is charged for ----------------------------------------------------------------------

def matching_resources(res: Resource, names: Iterable[str]) -> list[str]:
    """Of a quota's hard names, those this kind's evaluator tracks."""
    out = []
    for name in names:
        if res.group == "" and res.plural == "pods":
            if name in _POD_RESOURCES or name.startswith(_POD_RESOURCE_PREFIXES) or (
                    not _is_native(name) and name.startswith("requests.")):
                out.append(name)
        elif res.group == "" and res.plural == "services":
            if name in _SERVICE_RESOURCES:
                out.append(name)
        elif res.group == "" and res.plural == "persistentvolumeclaims":
            if name in _PVC_RESOURCES or _STORAGE_CLASS_SUFFIX in name:
                out.append(name)
        elif name == count_name(res) or (res.group == "" and res.plural in _LEGACY_COUNTS and name == res.plural):
            out.append(name)
    return out


def _container_usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
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
        if not _is_native(name):
            out[f"requests.{name}"] = amount
    return out


def _max(a: ResourceList, b: ResourceList) -> ResourceList:
    out = dict(a)
    for name, amount in b.items():
        if name not in out or amount.value > out[name].value:
            out[name] = amount
    return out


def pod_totals(spec: Mapping[str, Any], field: str, *, overhead: bool = True) -> ResourceList:
    """resourcehelper.PodRequests/PodLimits: containers summed, each init container as a floor, plus overhead
    (restartable init containers, sidecars, run beside the app containers and are summed with them; overhead adds
    to every request but only to the limits already set)."""
    total: ResourceList = {}
    sidecars: ResourceList = {}
    floor: ResourceList = {}
    for c in spec.get("containers") or ():
        total = add(total, parse_list(_dict(_dict(c).get("resources")).get(field)))
    for c in spec.get("initContainers") or ():
        amounts = parse_list(_dict(_dict(c).get("resources")).get(field))
        if _dict(c).get("restartPolicy") == "Always":
            sidecars = add(sidecars, amounts)
            total = add(total, amounts)
        else:
            floor = _max(floor, add(amounts, sidecars))
    total = _max(total, floor)
    # Pod-level resources (PodLevelResources, on by default) replace the containers' cpu and memory totals.
    for name, amount in parse_list(_dict(spec.get("resources")).get(field)).items():
        if name in ("cpu", "memory"):
            total[name] = amount
    if not overhead:
        return total
    extra = parse_list(spec.get("overhead"))
    if field == "limits":  # overhead raises only the limits a pod has
        extra = mask(extra, total)
    return add(total, extra)


def _pod_usage(pod: Obj) -> ResourceList:
    usage: ResourceList = {"count/pods": _ONE}
    phase = _dict(pod.get("status")).get("phase")
    if phase in ("Succeeded", "Failed"):
        return usage
    spec = _dict(pod.get("spec"))
    return add(usage, _container_usage(pod_totals(spec, "requests"), pod_totals(spec, "limits")))


def _service_usage(svc: Obj) -> ResourceList:
    spec = _dict(svc.get("spec"))
    ports = list(spec.get("ports") or ())
    usage: ResourceList = {"count/services": _ONE, "services": _ONE, "services.loadbalancers": _ZERO,
                           "services.nodeports": _ZERO}
    if spec.get("type") == "NodePort":
        usage["services.nodeports"] = Amount.of(len(ports))
    elif spec.get("type") == "LoadBalancer":
        if spec.get("allocateLoadBalancerNodePorts") is False:
            usage["services.nodeports"] = Amount.of(sum(1 for p in ports if _dict(p).get("nodePort")))
        else:
            usage["services.nodeports"] = Amount.of(len(ports))
        usage["services.loadbalancers"] = _ONE
    return usage


def _pvc_usage(pvc: Obj) -> ResourceList:
    spec = _dict(pvc.get("spec"))
    usage: ResourceList = {"count/persistentvolumeclaims": _ONE, "persistentvolumeclaims": _ONE}
    storage_class = spec.get("storageClassName")
    if storage_class:
        usage[f"{storage_class}{_STORAGE_CLASS_SUFFIX}persistentvolumeclaims"] = _ONE
    request = parse_list(_dict(spec.get("resources")).get("requests")).get("storage")
    allocated = parse_list(_dict(pvc.get("status")).get("allocatedResources")).get("storage")
    if allocated is not None and (request is None or allocated.value > request.value):
        request = allocated
    if request is not None:
        usage["requests.storage"] = request
        if storage_class:
            usage[f"{storage_class}{_STORAGE_CLASS_SUFFIX}requests.storage"] = request
    return usage


def usage(res: Resource, obj: Obj) -> ResourceList:
    """What creating ``obj`` charges to a quota."""
    if res.group == "":
        if res.plural == "pods":
            return _pod_usage(obj)
        if res.plural == "services":
            return _service_usage(obj)
        if res.plural == "persistentvolumeclaims":
            return _pvc_usage(obj)
    out: ResourceList = {count_name(res): _ONE}
    if res.group == "" and res.plural in _LEGACY_COUNTS:
        out[res.plural] = _ONE
    return out


# --- scopes and constraints ------------------------------------------------------------------------------

def _scope_selectors(quota: Obj) -> list[Mapping[str, Any]]:
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


def _pod_matches_scope(selector: Mapping[str, Any], pod: Obj) -> bool:
    spec = _dict(pod.get("spec"))
    scope = selector.get("scopeName")
    if scope in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and deadline >= 0
        return terminating if scope == "Terminating" else not terminating
    if scope in ("BestEffort", "NotBestEffort"):
        best_effort = pod_qos(pod) == "BestEffort"
        return best_effort if scope == "BestEffort" else not best_effort
    if scope == "PriorityClass":
        class_name = spec.get("priorityClassName") or ""
        operator = selector.get("operator")
        values = list(selector.get("values") or ())
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
        return _cross_namespace_affinity(spec)
    return False


def _matches(res: Resource, quota: Obj, obj: Obj) -> bool:
    hard = _dict(_dict(quota.get("status")).get("hard"))
    if not matching_resources(res, hard):
        return False
    is_pod = res.group == "" and res.plural == "pods"
    return all(is_pod and _pod_matches_scope(s, obj) for s in _scope_selectors(quota))


def _missing_requirements(required: set[str], pod: Obj) -> str | None:
    """The pod evaluator's Constraints: ``None``, or what the containers fail to state."""
    required &= _MUST_SPECIFY
    if not required:
        return None
    missing: dict[str, set[str]] = {}
    spec = _dict(pod.get("spec"))
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = _dict(_dict(c).get("resources"))
        stated = set(_container_usage(parse_list(resources.get("requests")), parse_list(resources.get("limits"))))
        for name in required - stated:
            missing.setdefault(name, set()).add(str(_dict(c).get("name") or ""))
    if not missing:
        return None
    return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}" for name in sorted(missing))


def _pretty(items: ResourceList) -> str:
    return ",".join(f"{name}={items[name].text()}" for name in sorted(items))


def handles_update(res: Resource) -> bool:
    """The evaluators that charge updates too: services (type and port changes) and claims (expansion)."""
    return res.group == "" and res.plural in ("services", "persistentvolumeclaims")


def check(res: Resource, obj: Obj, name: str, quotas: Iterable[Obj], old: Obj | None = None
          ) -> list[tuple[Obj, ResourceList]]:
    """Admit the creation of ``obj`` (named ``name``), or its update over ``old``, against its namespace's quotas:
    the quotas whose usage it raises, each with its new ``status.used``. Raises the 403 the real plugin answers."""
    if old is not None and not handles_update(res):
        return []
    interesting: list[Obj] = []
    for quota in quotas:
        if not _matches(res, quota, obj):
            continue
        quota_name = str(_dict(quota.get("metadata")).get("name") or "")
        status = _dict(quota.get("status"))
        hard = _dict(status.get("hard"))
        if res.group == "" and res.plural == "pods":
            why = _missing_requirements(set(matching_resources(res, hard)), obj)
            if why is not None:
                raise errors.forbidden(res.group, res.plural, name, f"failed quota: {quota_name}: {why}")
        used = _dict(status.get("used"))
        if any(h not in used for h in hard):
            raise errors.forbidden(res.group, res.plural, name, f"status unknown for quota: {quota_name}")
        interesting.append(quota)
    if not interesting:
        return []
    delta = usage(res, obj)
    if old is not None:
        delta = subtract(delta, usage(res, old))
    negative = sorted(n for n, a in delta.items() if a.value < 0)
    if negative:
        raise errors.forbidden(res.group, res.plural, name,
                               f"quota usage is negative for resource(s): {','.join(negative)}")
    if all(a.value == 0 for a in delta.values()):
        return []
    changes: list[tuple[Obj, ResourceList]] = []
    for quota in interesting:
        status = _dict(quota.get("status"))
        hard = parse_list(status.get("hard"))
        used = parse_list(status.get("used"))
        requested = mask(delta, hard)
        new_used = add(used, requested)
        exceeded = less_than_or_equal(mask(new_used, requested), hard)
        if exceeded:
            quota_name = str(_dict(quota.get("metadata")).get("name") or "")
            raise errors.forbidden(res.group, res.plural, name,
                                   f"exceeded quota: {quota_name}, requested: {_pretty(mask(requested, exceeded))}, "
                                   f"used: {_pretty(mask(used, exceeded))}, limited: {_pretty(mask(hard, exceeded))}")
        changes.append((quota, new_used))
    return changes


def pod_qos(pod: Mapping[str, Any]) -> str:
    """v1.PodQOSClass as ``qos.GetPodQOS`` computes it from cpu/memory requests and limits."""
    containers = list((pod.get("spec") or {}).get("containers") or [])
    containers += list((pod.get("spec") or {}).get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests = {k: v for k, v in (resources.get("requests") or {}).items() if k in ("cpu", "memory")}
        limits = {k: v for k, v in (resources.get("limits") or {}).items() if k in ("cpu", "memory")}
        if requests or limits:
            any_set = True
        if set(limits) != {"cpu", "memory"}:
            guaranteed = False
        for name, value in requests.items():
            if str(limits.get(name)) != str(value):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
