"""The pod garbage collector's Prometheus metrics (``pkg/controller/podgc/metrics/metrics.go``), on the default
registry, registered once at import with upstream's names, types and labels (subsystem ``pod_gc_collector``):

- ``force_delete_pods_total`` {namespace, reason}: every forced deletion attempted;
- ``force_delete_pod_errors_total`` {namespace, reason}: those that failed. As upstream, any error of the status
  patch or the delete counts, a pod found already gone (NotFound) included.

``reason`` is upstream's: ``terminated`` (over ``--terminated-pod-gc-threshold``), ``out-of-service`` (terminating
on a not-ready node tainted out-of-service), ``orphaned`` (its node is gone), ``unscheduled`` (terminating and
never scheduled).
"""

from __future__ import annotations

from prometheus_client import Counter

REASON_TERMINATED = "terminated"
REASON_TERMINATING_OUT_OF_SERVICE = "out-of-service"
REASON_ORPHANED = "orphaned"
REASON_TERMINATING_UNSCHEDULED = "unscheduled"

DELETING_PODS_TOTAL = Counter(
    "pod_gc_collector_force_delete_pods_total",
    "Number of pods that are being forcefully deleted since the Pod GC Controller started.",
    ["namespace", "reason"])
DELETING_PODS_ERROR_TOTAL = Counter(
    "pod_gc_collector_force_delete_pod_errors_total",
    "Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
    ["namespace", "reason"])
