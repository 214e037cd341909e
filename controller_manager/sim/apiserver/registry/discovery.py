"""discovery.k8s.io kinds (``pkg/registry/discovery/endpointslice/strategy.go``): EndpointSlices track
generation, which label changes bump too (the strategy compares labels beside the content)."""

from __future__ import annotations

from controller_manager.sim.apiserver import validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError


class EndpointSliceStrategy(Strategy):
    group = "discovery.k8s.io"
    kind = "EndpointSlice"
    tracks_generation = True

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.endpoint_slice_errors(obj, old)

    def generation_changed(self, new: Obj, old: Obj, *, main: bool) -> bool:
        labels = (new.get("metadata") or {}).get("labels")
        return super().generation_changed(new, old, main=main) or labels != (old.get("metadata") or {}).get(
            "labels")


STRATEGIES: tuple[Strategy, ...] = (EndpointSliceStrategy(),)
