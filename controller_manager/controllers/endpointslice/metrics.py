"""The EndpointSlice controller's Prometheus metrics (``staging/src/k8s.io/endpointslice/metrics``), on the
default registry.

Guarantees: names, label names and buckets are upstream's (subsystem ``endpoint_slice_controller``); counters are
exposed with the ``_total`` suffix prometheus_client always adds (upstream's ``changes_total`` replaces its
deprecated ``changes``; ``syncs`` reads ``syncs_total`` here). :class:`MetricsCache` keeps, per Service and per
address type and distinct port list, the endpoints and slices the last sync left, and sets the three cluster-wide gauges
(``endpoints_desired``, ``num_endpoint_slices``, ``desired_endpoint_slices``) from the totals, incrementally.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

_BUCKETS = tuple(2.0 * 2**i for i in range(15))

ENDPOINTS_ADDED_PER_SYNC = Histogram(
    "endpoint_slice_controller_endpoints_added_per_sync", "Number of endpoints added on each Service sync",
    buckets=_BUCKETS)
ENDPOINTS_REMOVED_PER_SYNC = Histogram(
    "endpoint_slice_controller_endpoints_removed_per_sync", "Number of endpoints removed on each Service sync",
    buckets=_BUCKETS)
ENDPOINTS_DESIRED = Gauge("endpoint_slice_controller_endpoints_desired", "Number of endpoints desired")
NUM_ENDPOINT_SLICES = Gauge("endpoint_slice_controller_num_endpoint_slices", "Number of EndpointSlices")
DESIRED_ENDPOINT_SLICES = Gauge(
    "endpoint_slice_controller_desired_endpoint_slices",
    "Number of EndpointSlices that would exist with perfect endpoint allocation")
ENDPOINT_SLICE_CHANGES = Counter(
    "endpoint_slice_controller_changes", "Number of EndpointSlice changes", ["operation"])
ENDPOINT_SLICES_CHANGED_PER_SYNC = Histogram(
    "endpoint_slice_controller_endpointslices_changed_per_sync",
    "Number of EndpointSlices changed on each Service sync", ["topology", "traffic_distribution"])
ENDPOINT_SLICE_SYNCS = Counter(
    "endpoint_slice_controller_syncs", "Number of EndpointSlice syncs", ["result"])

SYNC_SUCCESS = "success"
SYNC_STALE = "stale"
SYNC_ERROR = "error"


@dataclass(frozen=True, slots=True)
class EfficiencyInfo:
    endpoints: int
    slices: int


def num_desired_slices(num_endpoints: int, max_endpoints_per_slice: int) -> int:
    """Slices ``num_endpoints`` would need packed perfectly (the placeholder is counted per Service)."""
    if num_endpoints == 0:
        return 0
    if num_endpoints <= max_endpoints_per_slice:
        return 1
    return -(-num_endpoints // max_endpoints_per_slice)


@dataclass(frozen=True, slots=True)
class _Totals:
    endpoints: int = 0
    actual: int = 0
    desired: int = 0


def _totals(items: Mapping[Any, EfficiencyInfo], max_endpoints_per_slice: int) -> _Totals:
    endpoints = sum(i.endpoints for i in items.values())
    actual = sum(i.slices for i in items.values())
    desired = sum(num_desired_slices(i.endpoints, max_endpoints_per_slice) for i in items.values())
    # There is always a placeholder slice.
    return _Totals(endpoints, actual, max(desired, 1))


class MetricsCache:
    """Per-Service efficiency figures behind the cluster-wide gauges (``metrics.Cache``)."""

    def __init__(self, max_endpoints_per_slice: int) -> None:
        self._max = max_endpoints_per_slice
        self._by_service: dict[tuple[str, str], _Totals] = {}
        self._sum = _Totals()

    def update_service(self, service: tuple[str, str], items: Mapping[Any, EfficiencyInfo]) -> None:
        self._replace(service, _totals(items, self._max))

    def delete_service(self, service: tuple[str, str]) -> None:
        self._replace(service, None)

    def _replace(self, service: tuple[str, str], new: _Totals | None) -> None:
        old = self._by_service.pop(service, _Totals())
        if new is not None:
            self._by_service[service] = new
        else:
            new = _Totals()
        s = self._sum
        self._sum = _Totals(s.endpoints - old.endpoints + new.endpoints, s.actual - old.actual + new.actual,
                            s.desired - old.desired + new.desired)
        ENDPOINTS_DESIRED.set(self._sum.endpoints)
        NUM_ENDPOINT_SLICES.set(self._sum.actual)
        DESIRED_ENDPOINT_SLICES.set(self._sum.desired)
