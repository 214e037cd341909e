"""policy/v1 kinds (``pkg/registry/policy/poddisruptionbudget/strategy.go``): PodDisruptionBudgets track
generation (the disruption controller reports the one it observed)."""

from __future__ import annotations

from controller_manager.sim.apiserver import validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError


class PodDisruptionBudgetStrategy(Strategy):
    group = "policy"
    kind = "PodDisruptionBudget"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.pod_disruption_budget_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (PodDisruptionBudgetStrategy(),)
