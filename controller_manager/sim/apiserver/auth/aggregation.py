"""ClusterRole aggregation, as kube-controller-manager's clusterrole-aggregation controller does it.

Why here: our daemon does not run that controller, and the bootstrap ``admin``/``edit``/``view`` roles are
empty until something aggregates them, so kube-sim does it itself, at once, after every ClusterRole write.

Guarantees:
- A ClusterRole with an ``aggregationRule`` gets as its rules those of every other ClusterRole matching any
  of its ``clusterRoleSelectors``, in the order of those roles' names, each rule once; it is written only
  when that changes its rules (so its watchers see one MODIFIED event, as the controller's update makes).
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
    sels = _selectors(role)
    name = role["metadata"]["name"]
    rules: list[Obj] = []
    for other in sorted(roles, key=lambda r: str(r["metadata"]["name"])):
        if other["metadata"]["name"] == name:
            continue
        labels = other["metadata"].get("labels") or {}
        if not any(sel.matches(labels) for sel in sels):
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
        if self._running:
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
