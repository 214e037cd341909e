"""Prometheus metrics of the REST client, under client-go's names and labels.

Guarantees:
- Defined once, at import, on the default registry (what ``/metrics`` serves):
  ``rest_client_requests_total{code,method,host}`` (code ``<error>`` when no response came back),
  ``rest_client_request_duration_seconds{verb,host}`` (time to response headers),
  ``rest_client_rate_limiter_duration_seconds{verb,host}`` (time spent waiting for the client-side limiter).
- Buckets are client-go's, so dashboards built for kube-controller-manager read the same.
- :class:`RequestMetrics` caches labelled children per client, so recording costs a dict lookup.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

# k8s.io/component-base/metrics/prometheus/restclient: latency buckets shared by both histograms.
_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

REQUESTS_TOTAL = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)
REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=_BUCKETS,
)
RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=_BUCKETS,
)


class RequestMetrics:
    """Per-host recorder with the labelled children cached (``labels()`` takes a lock each call)."""

    __slots__ = ("_counts", "_durations", "_host", "_waits")

    def __init__(self, host: str) -> None:
        self._host = host
        self._counts: dict[tuple[str, str], Counter] = {}
        self._durations: dict[str, Histogram] = {}
        self._waits: dict[str, Histogram] = {}

    def request(self, method: str, code: int | None, seconds: float) -> None:
        code_label = "<error>" if code is None else str(code)
        counter = self._counts.get((code_label, method))
        if counter is None:
            counter = self._counts[(code_label, method)] = REQUESTS_TOTAL.labels(code_label, method, self._host)
        counter.inc()
        hist = self._durations.get(method)
        if hist is None:
            hist = self._durations[method] = REQUEST_DURATION.labels(method, self._host)
        hist.observe(seconds)

    def rate_limited(self, method: str, seconds: float) -> None:
        hist = self._waits.get(method)
        if hist is None:
            hist = self._waits[method] = RATE_LIMITER_DURATION.labels(method, self._host)
        hist.observe(seconds)
