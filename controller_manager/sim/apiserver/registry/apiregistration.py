"""apiregistration.k8s.io kinds: APIService (kube-aggregator's ``pkg/registry/apiservice/strategy.go``), validated by
:mod:`controller_manager.sim.apiserver.apiservices`: created with an empty status, its status kept by main-resource
writes; a /status write is checked by ValidateAPIServiceStatusUpdate."""

from __future__ import annotations

from controller_manager.api.resources import APISERVICES
from controller_manager.sim.apiserver import apiservices
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn


class APIServiceStrategy(Strategy):
    group = APISERVICES.group
    kind = APISERVICES.kind

    def name_rule(self, obj: Obj) -> NameFn:
        rule: NameFn = apiservices.name_rule(obj)
        return rule

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return apiservices.api_service_errors(obj, old)

    def status_errors(self, obj: Obj, old: Obj) -> list[FieldError]:
        return apiservices.api_service_status_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (APIServiceStrategy(),)
