"""autoscaling kinds (``pkg/registry/autoscaling/horizontalpodautoscaler/strategy.go``): HPAs track generation
(both served versions are stored as autoscaling/v2, see :mod:`versions`)."""

from __future__ import annotations

from controller_manager.sim.apiserver import hpa
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError


class HorizontalPodAutoscalerStrategy(Strategy):
    group = "autoscaling"
    kind = "HorizontalPodAutoscaler"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return hpa.validate(obj, old)


STRATEGIES: tuple[Strategy, ...] = (HorizontalPodAutoscalerStrategy(),)
