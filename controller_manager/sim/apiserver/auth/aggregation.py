"""ClusterRole aggregation, as kube-controller-manager's clusterrole-aggregation controller does it.

Why here: kube-sim is often run without a controller-manager, and the bootstrap ``admin``/``edit``/``view``
roles are empty until something aggregates them, so kube-sim does it itself, at once, after every ClusterRole
write. A real kube-apiserver does not: with ``ApiServerOptions.aggregate_cluster_roles`` off
(``kube-sim --no-aggregate-cluster-roles``) nothing here runs, and aggregated roles stay as written until a
controller-manager's clusterrole-aggregation-controller fills them.

Guarantees:
- A ClusterRole with an ``aggregationRule`` gets as its rules, selector by selector, those of every other
  ClusterRole the selector matches, in the order of those roles' names, each rule once (as the controller
  orders them); it is written only when that changes its rules (so its watchers see one MODIFIED event, as
  the controller's write makes).
- Chains settle: ``view`` feeds ``edit`` which feeds ``admin``; writing one role re-aggregates until no
  aggregated role changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api import selectors
from controller_manager.api.resources import CLUSTERROLES

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

Obj = dict[str, Any]
_MAX_ROUNDS = 10


def _selectors(role: Obj) -> list[selectors.Selector]:
    out: list[selectors.Selector] = []
    for sel in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or ():
        try:
            out.append(selectors.from_label_selector(sel))
        except (selectors.InvalidSelector, ValueError, TypeError):
            continue
    return out


def aggregated_rules(role: Obj, roles: list[Obj]) -> list[Obj]:
    name = role["metadata"]["name"]
    by_name = sorted(roles, key=lambda r: str(r["metadata"]["name"]))
    rules: list[Obj] = []
    for sel in _selectors(role):
        for other in by_name:
            if other["metadata"]["name"] == name or not sel.matches(other["metadata"].get("labels") or {}):
                continue
            for rule in other.get("rules") or ():
                if rule not in rules:
                    rules.append(rule)
    return rules


class Aggregator:
    """Re-aggregates after ClusterRole writes; its own writes do not start another pass."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._running = False

    def reconcile(self) -> None:
        if self._running or not self.api.options.aggregate_cluster_roles:
            return
        self._running = True
        try:
            for _ in range(_MAX_ROUNDS):
                if not self._one_round():
                    return
        finally:
            self._running = False

    def _one_round(self) -> bool:
        roles = [s.obj for s in self.api.store(CLUSTERROLES).iter_from(None)]
        changed = False
        for role in roles:
            if not role.get("aggregationRule") or role["metadata"].get("deletionTimestamp"):
                continue
            rules = aggregated_rules(role, roles)
            if rules == (role.get("rules") or []):
                continue
            self.api.patch(CLUSTERROLES, None, role["metadata"]["name"], {"rules": rules}, "merge")
            changed = True
        return changed
