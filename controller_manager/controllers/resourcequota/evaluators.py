"""The quota registry and the usage of a namespace (``k8s.io/apiserver/pkg/quota/v1``'s ``CalculateUsage`` and
``generic.CalculateUsageStats`` over the evaluators of :mod:`controller_manager.api.quota`).

Guarantees:
- An :class:`Evaluator` lists its kind's objects of one namespace from a cache and sums what each object in the
  quota's scopes is charged, every resource it is asked for starting at zero.
- :func:`calculate_usage` asks each evaluator for the quota's resources it tracks; an evaluator that fails to
  list is skipped (its resources left out of the result) and its error returned beside the others' usage.
- :func:`status_for` is ``syncResourceQuota``'s status: ``hard`` is ``spec.hard``; ``used`` keeps the observed
  values of resources no evaluator tracks, takes the newly calculated ones, and holds only names in ``hard``.
  Whether it must be written (``dirty``) compares quantities by value: a changed ``spec.hard``, a status
  without ``hard`` or ``used``, or a different usage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller_manager.api.quota import matches_scopes, matching_resources, usage
from controller_manager.api.resource_lists import Amount, ResourceList, add, mask, parse_list
from controller_manager.api.resources import Resource

__all__ = ["Evaluator", "QuotaStatus", "Registry", "calculate_usage", "semantic", "status_for"]

Obj = Mapping[str, Any]
Lister = Callable[[str], Iterable[Obj]]  # namespace -> its objects of one kind; raises when it cannot list


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass
class Evaluator:
    """One kind's quota evaluator, listing from ``lister``."""

    resource: Resource
    lister: Lister

    @property
    def group_resource(self) -> tuple[str, str]:
        return (self.resource.group, self.resource.plural)

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return matching_resources(self.resource, names)

    def usage_stats(self, namespace: str, quota: Obj, names: Iterable[str], now: float) -> ResourceList:
        used: ResourceList = {name: Amount.of(0) for name in names}
        for obj in self.lister(namespace):
            if matches_scopes(self.resource, quota, obj):
                used = add(used, usage(self.resource, obj, now))
        return used


class Registry:
    """The evaluators by (group, resource): upstream's ``quota.Registry``."""

    def __init__(self, evaluators: Iterable[Evaluator] = ()) -> None:
        self._by_gr: dict[tuple[str, str], Evaluator] = {}
        for evaluator in evaluators:
            self.add(evaluator)

    def add(self, evaluator: Evaluator) -> None:
        self._by_gr[evaluator.group_resource] = evaluator

    def get(self, group: str, plural: str) -> Evaluator | None:
        return self._by_gr.get((group, plural))

    def list(self) -> list[Evaluator]:
        return list(self._by_gr.values())


def calculate_usage(namespace: str, quota: Obj, hard_names: Iterable[str], registry: Registry,
                    now: float) -> tuple[ResourceList, list[Exception]]:
    """The usage of ``quota``'s resources in ``namespace``, and the listing errors met."""
    hard = list(hard_names)
    evaluators = registry.list()
    potential: set[str] = set()
    for evaluator in evaluators:
        potential.update(evaluator.matching_resources(hard))
    matched = [name for name in hard if name in potential]
    errors: list[Exception] = []
    total: ResourceList = {}
    for evaluator in evaluators:
        names = evaluator.matching_resources(matched)
        if not names:
            continue
        try:
            stats = evaluator.usage_stats(namespace, quota, names, now)
        except Exception as err:  # a lister that cannot list: keep the other evaluators' numbers
            errors.append(err)
            matched = [name for name in matched if name not in names]
            continue
        total = add(total, stats)
    return mask(total, matched), errors


def semantic(items: Any) -> dict[str, Any]:
    """A ResourceList as apiequality.Semantic compares it: quantities by value, an empty list as none."""
    return {name: amount.value for name, amount in parse_list(items).items()}


@dataclass(frozen=True)
class QuotaStatus:
    status: dict[str, dict[str, str]]
    dirty: bool
    errors: list[Exception]


def status_for(quota: Obj, registry: Registry, now: float) -> QuotaStatus:
    """The status the controller writes for ``quota``, whether it differs from the stored one, and the errors."""
    spec = _dict(quota.get("spec"))
    status = _dict(quota.get("status"))
    namespace = str(_dict(quota.get("metadata")).get("namespace") or "")
    spec_hard = {str(n): str(q) for n, q in _dict(spec.get("hard")).items()}
    old_used = _dict(status.get("used"))
    dirty = semantic(spec_hard) != semantic(status.get("hard")) or not status.get("hard") or not old_used
    new_usage, errors = calculate_usage(namespace, quota, list(spec_hard), registry, now)
    used = {str(n): str(q) for n, q in old_used.items() if n in spec_hard}
    used.update({name: amount.text() for name, amount in new_usage.items()})
    dirty = dirty or semantic(used) != semantic(old_used)
    return QuotaStatus({"hard": spec_hard, "used": used}, dirty, errors)
