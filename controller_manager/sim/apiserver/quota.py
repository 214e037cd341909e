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
- Updates are charged what they add (never less than nothing), for services and claims only (the other
  evaluators handle creates); a zero charge is no charge.
- :func:`check` is pure: it returns the quotas whose ``status.used`` the admitted object raises; the caller
  writes them once the object is stored (upstream writes them before; the difference shows only when the
  create then fails).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_manager.api.quota import IGNORED_RESOURCES, container_usage, matches_scopes, matching_resources, usage
from controller_manager.api.resource_lists import (
    ResourceList,
    add,
    less_than_or_equal,
    mask,
    parse_list,
    subtract,
)
from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import errors

Obj = dict[str, Any]

# A quota on these makes every container state them (an old coupling upstream keeps for compatibility).
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _matches(res: Resource, quota: Obj, obj: Obj) -> bool:
    """generic.Matches: the quota tracks one of the kind's resources and ``obj`` is in its scopes."""
    hard = _dict(_dict(quota.get("status")).get("hard"))
    return bool(matching_resources(res, hard)) and matches_scopes(res, quota, obj)


def _missing_requirements(required: set[str], pod: Obj) -> str | None:
    """The pod evaluator's Constraints: ``None``, or what the containers fail to state."""
    required &= _MUST_SPECIFY
    if not required:
        return None
    missing: dict[str, set[str]] = {}
    spec = _dict(pod.get("spec"))
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = _dict(_dict(c).get("resources"))
        stated = set(container_usage(parse_list(resources.get("requests")), parse_list(resources.get("limits"))))
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
    if (old is not None and not handles_update(res)) or (res.group, res.plural) in IGNORED_RESOURCES:
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
    negative = sorted(n for n, a in delta.items() if a.value < 0)
    if negative:
        raise errors.forbidden(res.group, res.plural, name,
                               f"quota usage is negative for resource(s): {','.join(negative)}")
    if old is not None:  # an update is charged what it adds (SubtractWithNonNegativeResult)
        delta = {n: a for n, a in subtract(delta, usage(res, old)).items() if a.value > 0}
    delta = {n: a for n, a in delta.items() if a.value != 0}
    if not delta:
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
