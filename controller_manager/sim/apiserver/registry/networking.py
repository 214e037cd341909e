"""networking.k8s.io kinds: an Ingress created without a class gets the default IngressClass
(DefaultIngressClass admission, see :mod:`controller_manager.sim.apiserver.networking`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import INGRESSCLASSES
from controller_manager.sim.apiserver import networking
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy, stored_objects
from controller_manager.sim.apiserver.registry.core import _owned_copy

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer


class IngressStrategy(Strategy):
    group = "networking.k8s.io"
    kind = "Ingress"

    def mutating_admission(self, api: ApiServer, obj: Obj, namespace: str | None) -> Obj:
        obj = _owned_copy(obj)
        networking.admit_ingress(obj, stored_objects(api, INGRESSCLASSES, None))
        return obj


STRATEGIES: tuple[Strategy, ...] = (IngressStrategy(),)
