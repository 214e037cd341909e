"""Which pods a ReplicaSet or ReplicationController looks at, and which it deletes first (pure; ``replica_set.go``'s
helpers).

Guarantees:
- :func:`orphan_index` indexes pods without a controller reference by namespace, so a sync reads "my pods
  plus the orphans of my namespace" from two index buckets instead of scanning the namespace
  (upstream's ``FilterPodsByOwner`` over ``PodControllerUIDIndex``).
- :func:`get_pods_to_delete` returns the first ``diff`` pods in upstream's deletion order
  (``ActivePodsWithRanks`` with the co-located related-pods rank); when every pod goes, no sort is made.
- :func:`filter_claimed_pods` keeps the pods controlled by the owner that its selector matches
  (``controller.FilterClaimedPods``), for counting terminating replicas.
- The orphan index and the sorting metric (``replicaset_controller_sorting_deletion_age_ratio``, upstream's only
  one, observed by both kinds as upstream's shared code does) are one each per process, however many kinds run.
- Objects are read, never mutated. Time is passed in (epoch seconds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import Histogram

from controller_manager.api.meta import controller_ref, meta, parse_time
from controller_manager.api.pods import is_pod_ready
from controller_manager.api.selectors import Selector
from controller_manager.controllerutil.controller_utils import ranks_by_colocated_pods, sort_active_pods_with_ranks

__all__ = [
    "ORPHAN_INDEX",
    "SORTING_DELETION_AGE_RATIO",
    "filter_claimed_pods",
    "get_pods_to_delete",
    "is_controlled_by",
    "orphan_index",
]

Obj = Mapping[str, Any]

ORPHAN_INDEX = "replicaset-orphans-by-namespace"

# replicaset_controller_sorting_deletion_age_ratio (pkg/controller/replicaset/metrics): how much older the
# ready pods chosen for deletion are than the youngest ready pod; should stay below 2 with logarithmic scale-down.
SORTING_DELETION_AGE_RATIO = Histogram(
    "replicaset_controller_sorting_deletion_age_ratio",
    "The ratio of chosen deleted pod's ages to the current youngest pod's age (at the time). Should be <2. "
    "The intent of this metric is to measure the rough efficacy of the LogarithmicScaleDown feature gate's "
    "effect on the sorting (and deletion) of pods when a replicaset scales down. This only considers Ready "
    "pods when calculating and reporting.",
    buckets=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
)


def orphan_index(pod: dict[str, Any]) -> list[str]:
    """Index function: ``[namespace]`` for a pod without a controller reference, else nothing."""
    if controller_ref(pod) is not None:
        return []
    ns = meta(pod).get("namespace")
    return [ns] if isinstance(ns, str) and ns else []


def is_controlled_by(obj: Obj, owner: Obj) -> bool:
    """``metav1.IsControlledBy``: ``obj``'s controller reference names ``owner``'s UID."""
    ref = controller_ref(obj)
    uid = meta(owner).get("uid")
    return ref is not None and bool(uid) and ref.get("uid") == uid


def filter_claimed_pods(owner: Obj, selector: Selector, pods: Iterable[Obj]) -> list[Obj]:
    """The pods ``owner`` controls that ``selector`` still matches."""
    out = []
    for pod in pods:
        labels = meta(pod).get("labels")
        if is_controlled_by(pod, owner) and selector.matches(labels if isinstance(labels, Mapping) else None):
            out.append(pod)
    return out


def get_pods_to_delete(pods: Sequence[Obj], related_pods: Iterable[Obj], diff: int, now: float) -> list[Obj]:
    """The ``diff`` pods to delete first (``getPodsToDelete``); ``now`` drives the logarithmic age buckets."""
    if diff < len(pods):
        ranks = ranks_by_colocated_pods(pods, related_pods)
        pods = sort_active_pods_with_ranks(pods, ranks, now)
        report_sorting_deletion_age_ratio(pods, diff, now)
    return list(pods[:diff])


def report_sorting_deletion_age_ratio(sorted_pods: Sequence[Obj], diff: int, now: float) -> None:
    """Observe, for each ready pod about to be deleted, its age over the youngest ready pod's age."""
    youngest: float | None = None
    for pod in sorted_pods:
        created = parse_time(meta(pod).get("creationTimestamp"))
        if created is not None and is_pod_ready(pod) and (youngest is None or created > youngest):
            youngest = created
    if youngest is None:
        return
    # Upstream divides whole milliseconds as integers; a youngest age of 0 ms would divide by zero there.
    youngest_age_ms = int((now - youngest) * 1000)
    if youngest_age_ms <= 0:
        return
    for pod in sorted_pods[:diff]:
        created = parse_time(meta(pod).get("creationTimestamp"))
        if created is None or not is_pod_ready(pod):
            continue
        SORTING_DELETION_AGE_RATIO.observe(float(int((now - created) * 1000) // youngest_age_ms))
