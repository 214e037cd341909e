"""rbac.authorization.k8s.io kinds (``pkg/registry/rbac/<kind>/strategy.go``): all four may be created by PUT
and may be named anything usable as a URL path segment (``system:controller:job-controller``); roles'
rules are checked by ValidatePolicyRule (non-resource URLs only in cluster roles). Escalation checks and
aggregation are the authorizer's (:mod:`controller_manager.sim.apiserver.auth`)."""

from __future__ import annotations

from controller_manager.sim.apiserver import validation
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy
from controller_manager.sim.apiserver.validation_errors import FieldError
from controller_manager.sim.apiserver.validation_pods import NameFn

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


class RoleBindingStrategy(_RbacStrategy):
    kind = "RoleBinding"


class ClusterRoleBindingStrategy(_RbacStrategy):
    kind = "ClusterRoleBinding"


STRATEGIES: tuple[Strategy, ...] = (RoleStrategy(), ClusterRoleStrategy(), RoleBindingStrategy(),
                                    ClusterRoleBindingStrategy())
