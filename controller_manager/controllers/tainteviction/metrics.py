"""The taint eviction controller's Prometheus metrics (``pkg/controller/tainteviction/metrics/metrics.go``), on the
default registry, registered once at import with upstream's names, types and buckets (subsystem
``taint_eviction_controller``):

- ``pod_deletions_total`` (counter): pods this controller deleted (a pod found already gone, or replaced by
  another of the same name, is not counted).
- ``pod_deletion_duration_seconds`` (histogram): for each of those, the time from when the deletion became due
  (the NoExecute taint's effect on the pod, after any ``tolerationSeconds``) until the delete succeeded.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

POD_DELETIONS_TOTAL = Counter("taint_eviction_controller_pod_deletions_total",
                              "Total number of Pods deleted by TaintEvictionController since its start.")
POD_DELETION_DURATION = Histogram(
    "taint_eviction_controller_pod_deletion_duration_seconds",
    "Latency, in seconds, between the time when a taint effect has been activated for the Pod and its deletion "
    "via TaintEvictionController.",
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240))  # 5 ms .. 4 min


def record_deletion(latency: float) -> None:
    POD_DELETIONS_TOTAL.inc()
    POD_DELETION_DURATION.observe(max(latency, 0.0))
