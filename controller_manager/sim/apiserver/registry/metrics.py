"""metrics.k8s.io kinds (metrics-server's API): NodeMetrics and PodMetrics are computed from the simulated
usage on each read, never stored (see :mod:`controller_manager.sim.apiserver.metrics_api`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver import metrics_api
from controller_manager.sim.apiserver.objects import Obj
from controller_manager.sim.apiserver.registry.base import Strategy

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.server import ApiServer


class MetricsStrategy(Strategy):
    group = metrics_api.GROUP
    computed = True

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def read(self, api: ApiServer, res: Resource, verb: str, namespace: str | None, name: str,
             query: Any) -> Obj:
        if verb == "get":
            return metrics_api.get(api, res, namespace, name)
        return metrics_api.list_metrics(api, res, namespace, query.get("labelSelector"), query.get("fieldSelector"))


STRATEGIES: tuple[Strategy, ...] = tuple(MetricsStrategy(r.kind) for r in metrics_api.RESOURCES)
