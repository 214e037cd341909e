"""networking.k8s.io kinds: Ingress (an Ingress created without a class gets the default IngressClass:
DefaultIngressClass admission), IngressClass and NetworkPolicy (rules in
:mod:`controller_manager.sim.apiserver.networking`); ServiceCIDR and IPAddress (an IPAddress is named by
its address in canonical form; rules in :mod:`controller_manager.sim.apiserver.service_cidrs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import INGRESSCLASSES
from controller_manager.sim.apiserver import networking, service_cidrs
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, stored_objects
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

GROUP = "networking.k8s.io"


class IngressStrategy(Strategy):
    group = GROUP
    kind = "Ingress"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return networking.ingress_errors(obj, old)

    def mutating_admission(self, api: ApiServer, obj: Obj, namespace: str | None) -> Obj:
        networking.admit_ingress(obj, stored_objects(api, INGRESSCLASSES, None))
        return obj


class IngressClassStrategy(Strategy):
    group = GROUP
    kind = "IngressClass"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return networking.ingress_class_errors(obj, old)


class NetworkPolicyStrategy(Strategy):
    group = GROUP
    kind = "NetworkPolicy"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return networking.network_policy_errors(obj, old)


class ServiceCIDRStrategy(Strategy):
    group = GROUP
    kind = "ServiceCIDR"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return service_cidrs.service_cidr_errors(obj, old)


class IPAddressStrategy(Strategy):
    group = GROUP
    kind = "IPAddress"

    def name_rule(self, obj: Obj) -> NameFn:
        return service_cidrs.ip_address_name

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return service_cidrs.ip_address_errors(obj, old)


STRATEGIES: tuple[Strategy, ...] = (IngressStrategy(), IngressClassStrategy(), NetworkPolicyStrategy(),
                                    ServiceCIDRStrategy(), IPAddressStrategy())
