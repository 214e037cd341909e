"""coordination.k8s.io kinds (``pkg/registry/coordination/lease/strategy.go``): a Lease may be created by PUT,
and an update must name the resourceVersion it replaces (AllowUnconditionalUpdate is false)."""

from __future__ import annotations

from controller_manager.sim.apiserver import validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError


class LeaseStrategy(Strategy):
    group = "coordination.k8s.io"
    kind = "Lease"
    allow_create_on_update = True
    allow_unconditional_update = False

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.lease_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (LeaseStrategy(),)
