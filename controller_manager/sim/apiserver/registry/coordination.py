"""coordination.k8s.io kinds (``pkg/registry/coordination/lease/strategy.go``): a Lease may be created by PUT,
and an update must name the resourceVersion it replaces (AllowUnconditionalUpdate is false)."""

from __future__ import annotations

from controller_manager.sim.apiserver.registry.base import Strategy


class LeaseStrategy(Strategy):
    group = "coordination.k8s.io"
    kind = "Lease"
    allow_create_on_update = True
    allow_unconditional_update = False


STRATEGIES: tuple[Strategy, ...] = (LeaseStrategy(),)
