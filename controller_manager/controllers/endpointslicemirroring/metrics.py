"""The mirroring controller's Prometheus metrics (``pkg/controller/endpointslicemirroring/metrics``), on the
default registry.

Guarantees: names, help texts and buckets are upstream's (subsystem ``endpoint_slice_mirroring_controller``);
the counter ``changes`` is exposed as ``changes_total``, the suffix prometheus_client always adds.
:class:`MetricsCache` keeps, per Endpoints and per (address type, port list), the endpoints and slices the last
sync left, and sets the three cluster-wide gauges from the totals: ``endpoints_desired``,
``num_endpoint_slices`` and ``desired_endpoint_slices`` (each group needing ceil(endpoints / max per subset)).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from prometheus_client import Counter, Gauge, Histogram

_SUBSYSTEM = "endpoint_slice_mirroring_controller"
_COUNT_BUCKETS = tuple(2.0 * 2**i for i in range(15))
_DURATION_BUCKETS = tuple(0.001 * 2**i for i in range(15))

ENDPOINTS_ADDED_PER_SYNC = Histogram(
    f"{_SUBSYSTEM}_endpoints_added_per_sync", "Number of endpoints added on each Endpoints sync",
    buckets=_COUNT_BUCKETS)
ENDPOINTS_UPDATED_PER_SYNC = Histogram(
    f"{_SUBSYSTEM}_endpoints_updated_per_sync", "Number of endpoints updated on each Endpoints sync",
    buckets=_COUNT_BUCKETS)
ENDPOINTS_REMOVED_PER_SYNC = Histogram(
    f"{_SUBSYSTEM}_endpoints_removed_per_sync", "Number of endpoints removed on each Endpoints sync",
    buckets=_COUNT_BUCKETS)
ADDRESSES_SKIPPED_PER_SYNC = Histogram(
    f"{_SUBSYSTEM}_addresses_skipped_per_sync",
    "Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
    buckets=_COUNT_BUCKETS)
ENDPOINTS_SYNC_DURATION = Histogram(
    f"{_SUBSYSTEM}_endpoints_sync_duration", "Duration of syncEndpoints() in seconds", buckets=_DURATION_BUCKETS)
ENDPOINTS_DESIRED = Gauge(f"{_SUBSYSTEM}_endpoints_desired", "Number of endpoints desired")
NUM_ENDPOINT_SLICES = Gauge(f"{_SUBSYSTEM}_num_endpoint_slices", "Number of EndpointSlices")
DESIRED_ENDPOINT_SLICES = Gauge(
    f"{_SUBSYSTEM}_desired_endpoint_slices",
    "Number of EndpointSlices that would exist with perfect endpoint allocation")
ENDPOINT_SLICE_CHANGES = Counter(f"{_SUBSYSTEM}_changes", "Number of EndpointSlice changes", ["operation"])


class EfficiencyInfo(NamedTuple):
    endpoints: int
    slices: int


def num_desired_slices(num_endpoints: int, max_per_slice: int) -> int:
    """Slices ``num_endpoints`` need packed perfectly: ceil(n / max)."""
    return -(-num_endpoints // max_per_slice)


class _Totals(NamedTuple):
    endpoints: int = 0
    actual: int = 0
    desired: int = 0


class MetricsCache:
    """Per-Endpoints efficiency figures behind the cluster-wide gauges (``metrics.Cache``)."""

    def __init__(self, max_endpoints_per_subset: int) -> None:
        self._max = max_endpoints_per_subset
        self._by_endpoints: dict[tuple[str, str], _Totals] = {}
        self._sum = _Totals()

    def update_endpoint_port_cache(self, endpoints: tuple[str, str], items: Mapping[Any, EfficiencyInfo]) -> None:
        """Replace one Endpoints' figures (``UpdateEndpointPortCache``) and set the gauges."""
        new = _Totals(sum(i.endpoints for i in items.values()), sum(i.slices for i in items.values()),
                      sum(num_desired_slices(i.endpoints, self._max) for i in items.values()))
        self._replace(endpoints, new)

    def delete_endpoints(self, endpoints: tuple[str, str]) -> None:
        """Forget one Endpoints (``DeleteEndpoints``); the gauges move only if it was known."""
        if endpoints in self._by_endpoints:
            self._replace(endpoints, None)

    def _replace(self, key: tuple[str, str], new: _Totals | None) -> None:
        old = self._by_endpoints.pop(key, _Totals())
        if new is not None:
            self._by_endpoints[key] = new
        else:
            new = _Totals()
        s = self._sum
        self._sum = _Totals(s.endpoints - old.endpoints + new.endpoints, s.actual - old.actual + new.actual,
                            s.desired - old.desired + new.desired)
        ENDPOINTS_DESIRED.set(self._sum.endpoints)
        NUM_ENDPOINT_SLICES.set(self._sum.actual)
        DESIRED_ENDPOINT_SLICES.set(self._sum.desired)
