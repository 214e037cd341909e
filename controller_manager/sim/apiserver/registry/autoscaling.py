"""autoscaling kinds (``pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go``): HPAs track generation
(both served versions are stored as autoscaling/v2, see :mod:`versions`)."""

from __future__ import annotations

from controller_manager.sim.apiserver.registry.base import Strategy


class HorizontalPodAutoscalerStrategy(Strategy):
    group = "autoscaling"
    kind = "HorizontalPodAutoscaler"
    tracks_generation = True


STRATEGIES: tuple[Strategy, ...] = (HorizontalPodAutoscalerStrategy(),)
