"""rbac.authorization.k8s.io kinds (``pkg/registry/rbac/<kind>/strategy.go``): all four may be created by PUT
and may be named anything usable as a URL path segment (``system:controller:job-controller``); roles'
rules are checked by ValidatePolicyRule (non-resource URLs only in cluster roles); every stored ClusterRole
write or removal re-runs ClusterRole aggregation. Escalation checks and the aggregation itself are the
authorizer's (:mod:`controller_manager.sim.apiserver.auth`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer

GROUP = "rbac.authorization.k8s.io"


class _RbacStrategy(Strategy):
    group = GROUP
    allow_create_on_update = True

    def name_rule(self, obj: Obj) -> NameFn:
        return validation.name_is_path_segment


class RoleStrategy(_RbacStrategy):
    kind = "Role"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.policy_rules_errors(obj, old, namespaced=True)


class ClusterRoleStrategy(_RbacStrategy):
    kind = "ClusterRole"

    def validate_kind(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validation.policy_rules_errors(obj, old, namespaced=False)

    def after_write(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        _reaggregate(api)

    def after_remove(self, api: ApiServer, res: Resource, obj: Obj) -> None:
        _reaggregate(api)


def _reaggregate(api: ApiServer) -> None:
    """Any ClusterRole change re-runs the aggregation (once the bootstrap policy is in, see Auth)."""
    if api.auth is not None:
        api.auth.aggregator.reconcile()


class RoleBindingStrategy(_RbacStrategy):
    kind = "RoleBinding"


class ClusterRoleBindingStrategy(_RbacStrategy):
    kind = "ClusterRoleBinding"


STRATEGIES: tuple[Strategy, ...] = (RoleStrategy(), ClusterRoleStrategy(), RoleBindingStrategy(),
                                    ClusterRoleBindingStrategy())
