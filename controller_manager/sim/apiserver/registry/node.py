"""node.k8s.io kinds: RuntimeClass (``pkg/registry/node/runtimeclass``), validated by
:mod:`controller_manager.sim.apiserver.node_kinds`; no status, no generation."""

from __future__ import annotations

from controller_manager.api.resources import RUNTIMECLASSES
from controller_manager.sim.apiserver import node_kinds
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError


class RuntimeClassStrategy(Strategy):
    group = RUNTIMECLASSES.group
    kind = RUNTIMECLASSES.kind

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return node_kinds.runtime_class_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (RuntimeClassStrategy(),)
