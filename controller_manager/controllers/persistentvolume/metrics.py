"""The PersistentVolume binder's Prometheus metrics (``pkg/controller/volume/persistentvolume/metrics`` and the
operation latency of ``pkg/volume/util/metrics.go``), upstream's names, types and labels, on the default registry:

- ``pv_collector_total_pv_count`` {plugin_name, volume_mode}: volumes by the in-tree plugin that supports them
  (``N/A`` for every other, CSI volumes included: the PV controller has no CSI plugin);
- ``pv_collector_bound_pv_count`` / ``pv_collector_unbound_pv_count`` {storage_class}: volumes in phase Bound
  / any other phase;
- ``pv_collector_bound_pvc_count`` / ``pv_collector_unbound_pvc_count`` {namespace, storage_class,
  volume_attributes_class}: claims likewise (the labels from ``spec``);
- ``volume_operation_total_errors`` {plugin_name, operation_name}: failed provision/delete operations (exposed as
  ``volume_operation_total_errors_total``: prometheus_client gives every counter the ``_total`` suffix);
- ``volume_operation_total_seconds`` {plugin_name, operation_name}: from a provisioning request to the claim
  bound, from a delete decision to the volume gone;
- ``retroactive_storageclass_total`` / ``retroactive_storageclass_errors_total``: default StorageClass
  assignments to claims without one, and those that failed.

The gauges are read from the controller's own caches when scraped (the controller that started last).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

Obj = Mapping[str, Any]
NOT_AVAILABLE = "N/A"

VOLUME_OPERATION_ERRORS = Counter("volume_operation_total_errors", "Total volume operation errors",
                                  ["plugin_name", "operation_name"])
VOLUME_OPERATION_SECONDS = Histogram(
    "volume_operation_total_seconds", "Storage operation end to end duration in seconds",
    ["plugin_name", "operation_name"], buckets=(.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600))
RETROACTIVE_STORAGECLASS = Counter(
    "retroactive_storageclass", "Total number of retroactive StorageClass assignments to persistent volume claim")
RETROACTIVE_STORAGECLASS_ERRORS = Counter(
    "retroactive_storageclass_errors",
    "Total number of failed retroactive StorageClass assignments to persistent volume claim")

_HELP = {
    "total": "Gauge measuring total number of persistent volumes",
    "bound_pv": "Gauge measuring number of persistent volume currently bound",
    "unbound_pv": "Gauge measuring number of persistent volume currently unbound",
    "bound_pvc": "Gauge measuring number of persistent volume claim currently bound",
    "unbound_pvc": "Gauge measuring number of persistent volume claim currently unbound",
}


def record_retroactive_storage_class(success: bool) -> None:
    RETROACTIVE_STORAGECLASS.inc()
    if not success:
        RETROACTIVE_STORAGECLASS_ERRORS.inc()


@dataclass
class _Started:
    plugin: str
    operation: str
    at: float


class OperationTimestamps:
    """``OperationStartTimeCache``: when a provision or delete operation started, by claim key / volume name."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._started: dict[str, _Started] = {}

    def add_if_not_exist(self, key: str, plugin: str, operation: str) -> None:
        self._started.setdefault(key, _Started(plugin, operation, self._now()))

    def delete(self, key: str) -> None:
        self._started.pop(key, None)

    def has(self, key: str) -> bool:
        return key in self._started

    def record(self, key: str, failed: bool) -> None:
        """``RecordMetric``: an error counted, or the latency observed and the entry dropped."""
        started = self._started.get(key)
        if started is None:
            return
        plugin = started.plugin or NOT_AVAILABLE
        if failed:
            VOLUME_OPERATION_ERRORS.labels(plugin, started.operation).inc()
            return
        VOLUME_OPERATION_SECONDS.labels(plugin, started.operation).observe(max(0.0, self._now() - started.at))
        del self._started[key]


Source = Callable[[], tuple[Iterable[Obj], Iterable[Obj], Callable[[Obj], str]]]


class _CountCollector(Collector):
    def __init__(self) -> None:
        self.source: Source | None = None

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def _families(self) -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily("pv_collector_total_pv_count", _HELP["total"], labels=["plugin_name", "volume_mode"]),
            GaugeMetricFamily("pv_collector_bound_pv_count", _HELP["bound_pv"], labels=["storage_class"]),
            GaugeMetricFamily("pv_collector_unbound_pv_count", _HELP["unbound_pv"], labels=["storage_class"]),
            GaugeMetricFamily("pv_collector_bound_pvc_count", _HELP["bound_pvc"],
                              labels=["namespace", "storage_class", "volume_attributes_class"]),
            GaugeMetricFamily("pv_collector_unbound_pvc_count", _HELP["unbound_pvc"],
                              labels=["namespace", "storage_class", "volume_attributes_class"]),
        ]

    def collect(self) -> Iterator[Metric]:
        if self.source is None:
            return iter(())
        volumes, claims, plugin_of = self.source()
        total_family, bound_pv, unbound_pv, bound_pvc, unbound_pvc = self._families()
        totals: dict[tuple[str, str], int] = {}
        by_class: dict[tuple[bool, str], int] = {}
        for volume in volumes:
            spec = volume.get("spec") or {}
            key = (plugin_of(volume), str(spec.get("volumeMode") or "Filesystem"))
            totals[key] = totals.get(key, 0) + 1
            bound = (volume.get("status") or {}).get("phase") == "Bound"
            cls = (bound, str(spec.get("storageClassName") or ""))
            by_class[cls] = by_class.get(cls, 0) + 1
        claim_counts: dict[tuple[bool, str, str, str], int] = {}
        for claim in claims:
            spec = claim.get("spec") or {}
            bound = (claim.get("status") or {}).get("phase") == "Bound"
            dims = (bound, str((claim.get("metadata") or {}).get("namespace") or ""),
                    str(spec.get("storageClassName") or ""), str(spec.get("volumeAttributesClassName") or ""))
            claim_counts[dims] = claim_counts.get(dims, 0) + 1
        for (plugin, mode), count in sorted(totals.items()):
            total_family.add_metric([plugin, mode], count)
        for (bound, klass), count in sorted(by_class.items()):
            (bound_pv if bound else unbound_pv).add_metric([klass], count)
        for (bound, namespace, klass, vac), count in sorted(claim_counts.items()):
            (bound_pvc if bound else unbound_pvc).add_metric([namespace, klass, vac], count)
        return iter((total_family, bound_pv, unbound_pv, bound_pvc, unbound_pvc))


COLLECTOR = _CountCollector()
REGISTRY.register(COLLECTOR)
