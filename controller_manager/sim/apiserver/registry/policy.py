"""policy/v1 kinds (``pkg/registry/policy/poddisruptionbudget/strategy.go``): PodDisruptionBudgets track
generation (the disruption controller reports the one it observed)."""

from __future__ import annotations

from controller_manager.sim.apiserver.registry.base import Strategy


class PodDisruptionBudgetStrategy(Strategy):
    group = "policy"
    kind = "PodDisruptionBudget"
    tracks_generation = True


STRATEGIES: tuple[Strategy, ...] = (PodDisruptionBudgetStrategy(),)
