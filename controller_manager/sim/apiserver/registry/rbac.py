"""rbac.authorization.k8s.io kinds (``pkg/registry/rbac/<kind>/strategy.go``): all four may be created by PUT.
Escalation checks and aggregation are the authorizer's (:mod:`auth`)."""

from __future__ import annotations

from controller_manager.sim.apiserver.registry.base import Strategy

GROUP = "rbac.authorization.k8s.io"


class RoleStrategy(Strategy):
    group = GROUP
    kind = "Role"
    allow_create_on_update = True


class ClusterRoleStrategy(Strategy):
    group = GROUP
    kind = "ClusterRole"
    allow_create_on_update = True


class RoleBindingStrategy(Strategy):
    group = GROUP
    kind = "RoleBinding"
    allow_create_on_update = True


class ClusterRoleBindingStrategy(Strategy):
    group = GROUP
    kind = "ClusterRoleBinding"
    allow_create_on_update = True


STRATEGIES: tuple[Strategy, ...] = (RoleStrategy(), ClusterRoleStrategy(), RoleBindingStrategy(),
                                    ClusterRoleBindingStrategy())
