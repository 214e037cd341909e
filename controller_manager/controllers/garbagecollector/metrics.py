"""The collector's Prometheus metrics (the default registry).

- ``garbagecollector_controller_resources_sync_error_total`` (counter): upstream's ``metrics/metrics.go``;
  a discovery resync that found nothing, could not start a monitor, or timed out waiting for caches.
- ``garbage_collector_graph_nodes`` (gauge, ours): nodes in the dependency graph, virtual ones included; and
  ``garbage_collector_graph_virtual_nodes`` (gauge, ours): owners referenced but not observed.
The queues export client-go's workqueue metrics under upstream's names (``garbage_collector_graph_changes``,
``garbage_collector_attempt_to_delete``, ``garbage_collector_attempt_to_orphan``) through the workqueue layer.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge

RESOURCES_SYNC_ERROR = Counter(
    "garbagecollector_controller_resources_sync_error_total",
    "Number of garbage collector resources sync errors",
)
GRAPH_NODES = Gauge("garbage_collector_graph_nodes", "Nodes in the garbage collector's dependency graph.")
GRAPH_VIRTUAL_NODES = Gauge("garbage_collector_graph_virtual_nodes",
                            "Owners referenced in the dependency graph but not observed through an informer.")


def track_graph(size: Callable[[], float], virtual: Callable[[], float]) -> None:
    """Read the graph's size at scrape time (the latest collector built wins: there is one per process)."""
    GRAPH_NODES.set_function(size)
    GRAPH_VIRTUAL_NODES.set_function(virtual)
