"""The ClusterRole aggregation controller: each ClusterRole with an ``aggregationRule`` gets the rules of the
ClusterRoles its selectors match (kube-controller-manager's ``clusterrole-aggregation-controller``,
``pkg/controller/clusterroleaggregation/clusterroleaggregation_controller.go``). This is what fills the
bootstrap ``admin``, ``edit`` and ``view`` roles: kube-apiserver creates them empty.

Guarantees:
- Keys are ClusterRole names. Any ClusterRole added, updated or deleted queues every cached ClusterRole that has
  an ``aggregationRule`` (as upstream: the dependency graph is unknown and the set is small).
- A sync of a role gone from the cache, or without an ``aggregationRule``, does nothing. Otherwise the rules are
  collected selector by selector (in the rule's order); for each, the matching cached ClusterRoles other than
  this one, by name; each rule taken once (rules compare as the API's semantic equality does: an absent list
  equals an empty one). An invalid selector fails the sync (retried with backoff).
- When the collected rules differ from the role's own, they are written by server-side apply as field manager
  ``clusterrole-aggregation-controller`` with ``force`` (an apply configuration of just the name and the rules,
  each with only its non-empty lists); a server answering 415 Unsupported Media Type gets an update of the
  cached role with its rules replaced instead. A failed write is retried with backoff.
- No events, no metrics of its own (upstream has none). Work queue ``ClusterRoleAggregator``, 5 workers
  (upstream's fixed count; there is no flag).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from controller_manager.api.meta import meta
from controller_manager.api.resources import CLUSTERROLES
from controller_manager.api.selectors import from_label_selector
from controller_manager.client.errors import UnsupportedMediaType
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Event

__all__ = ["FIELD_MANAGER", "ClusterRoleAggregationController", "aggregated_rules", "apply_configuration",
           "rules_equal"]

Obj = Mapping[str, Any]

FIELD_MANAGER = "clusterrole-aggregation-controller"

# rbacv1.PolicyRule's fields, in its order; the apply configuration carries exactly these.
_RULE_FIELDS = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")

RuleKey = tuple[tuple[str, ...], ...]


def _rule_key(rule: Obj) -> RuleKey:
    """What ``equality.Semantic.DeepEqual`` compares of a PolicyRule (nil and empty lists alike)."""
    return tuple(tuple(str(v) for v in rule.get(f) or ()) for f in _RULE_FIELDS)


def _rules(role: Obj) -> list[Obj]:
    rules = role.get("rules")
    return [r for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


def rules_equal(a: Sequence[Obj], b: Sequence[Obj]) -> bool:
    """Semantic equality of two rule lists: same length, pairwise equal rules."""
    return len(a) == len(b) and all(_rule_key(x) == _rule_key(y) for x, y in zip(a, b, strict=True))


def aggregated_rules(role: Obj, cluster_roles: Iterable[Obj]) -> list[Obj]:
    """The rules ``role``'s aggregationRule collects from ``cluster_roles``; ValueError for an invalid selector."""
    name = meta(role).get("name")
    by_name = sorted(cluster_roles, key=lambda r: str(meta(r).get("name") or ""))
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or ()
    collected: list[Obj] = []
    seen: set[RuleKey] = set()
    for raw in selectors:
        selector = from_label_selector(raw if isinstance(raw, Mapping) else {})
        for other in by_name:
            if meta(other).get("name") == name or not selector.matches(meta(other).get("labels") or {}):
                continue
            for rule in _rules(other):
                key = _rule_key(rule)
                if key not in seen:
                    seen.add(key)
                    collected.append(rule)
    return collected


def _apply_rule(rule: Obj) -> dict[str, Any]:
    """``toApplyPolicyRule``: the five lists, each only when non-empty (``omitempty``)."""
    return {f: list(rule[f]) for f in _RULE_FIELDS if rule.get(f)}


def apply_configuration(name: str, rules: Sequence[Obj]) -> dict[str, Any]:
    """``rbacv1ac.ClusterRole(name).WithRules(...)``: no ``rules`` key at all when there are none."""
    config: dict[str, Any] = {"apiVersion": CLUSTERROLES.api_version, "kind": CLUSTERROLES.kind,
                              "metadata": {"name": name}}
    if rules:
        config["rules"] = [_apply_rule(r) for r in rules]
    return config


class ClusterRoleAggregationController(Controller):
    """ClusterRoles -> the rules of aggregated ClusterRoles. Its queue holds ClusterRole names."""

    name: ClassVar[str] = "clusterrole-aggregation-controller"
    alias: ClassVar[str] = "clusterrole-aggregation"
    queue_name: ClassVar[str | None] = "ClusterRoleAggregator"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.informer = ctx.informers.informer(CLUSTERROLES)
        self.informer.add_handler(self._on_cluster_role)

    def _on_cluster_role(self, event: Event) -> None:
        for role in self.informer.store.list():
            if role.get("aggregationRule") is not None:
                self.queue.add(str(meta(role).get("name") or ""))

    async def sync(self, key: str) -> Result | None:
        role = self.informer.store.get(key)
        if role is None or role.get("aggregationRule") is None:
            return None
        rules = aggregated_rules(role, self.informer.store.list())
        if rules_equal(rules, _rules(role)):
            return None
        try:
            await self.ctx.client.apply(CLUSTERROLES, apply_configuration(key, rules), field_manager=FIELD_MANAGER,
                                        force=True)
        except UnsupportedMediaType:
            # A server without server-side apply: update the cached role with the new rules.
            updated = {"apiVersion": CLUSTERROLES.api_version, "kind": CLUSTERROLES.kind, **role}
            if rules:
                updated["rules"] = [dict(r) for r in rules]
            else:
                updated.pop("rules", None)
            await self.ctx.client.update(CLUSTERROLES, updated)
        return None
