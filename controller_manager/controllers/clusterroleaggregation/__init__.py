"""The ClusterRole aggregation controller (``clusterrole-aggregation-controller``): fills ClusterRoles that have
an ``aggregationRule`` with the rules of the ClusterRoles their selectors match."""

from controller_manager.controllers.clusterroleaggregation.controller import ClusterRoleAggregationController

__all__ = ["ClusterRoleAggregationController"]
