"""flowcontrol.apiserver.k8s.io kinds (API Priority and Fairness), validated by
:mod:`controller_manager.sim.apiserver.flowcontrol` (``pkg/registry/flowcontrol/<kind>/strategy.go``): both track
generation and have a status; every write of either keeps the FlowSchemas' ``Dangling`` conditions current, as
kube-apiserver's APF config controller does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import FLOWSCHEMAS, PRIORITYLEVELCONFIGURATIONS, Resource
from controller_manager.sim.apiserver import flowcontrol
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation import name_is_path_segment
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer


class FlowSchemaStrategy(Strategy):
    group = FLOWSCHEMAS.group
    kind = FLOWSCHEMAS.kind
    tracks_generation = True

    def name_rule(self, obj: Obj) -> NameFn:
        return name_is_path_segment

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return flowcontrol.flow_schema_errors(obj, old)

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        return flowcontrol.status_errors(obj, old)

    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        flowcontrol.refresh_dangling(api, only=obj["metadata"]["name"])


class PriorityLevelConfigurationStrategy(Strategy):
    group = PRIORITYLEVELCONFIGURATIONS.group
    kind = PRIORITYLEVELCONFIGURATIONS.kind
    tracks_generation = True

    def name_rule(self, obj: Obj) -> NameFn:
        return name_is_path_segment

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return flowcontrol.priority_level_errors(obj, old)

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        return flowcontrol.status_errors(obj, old)

    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        flowcontrol.refresh_dangling(api)

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        flowcontrol.refresh_dangling(api)


STRATEGIES: tuple[Strategy, ...] = (FlowSchemaStrategy(), PriorityLevelConfigurationStrategy())
