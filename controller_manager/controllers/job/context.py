"""What one sync of one Job works with (upstream's ``syncJobCtx``) and the pure reads over it.

Guarantees:
- :class:`SyncJobCtx` holds a private, mutable copy of the Job (``job``) that the sync edits and writes back;
  the pods are cached objects and are only read.
- :func:`get_new_finished_pods` returns the finished pods not yet counted in any way: they still carry the
  tracking finalizer, are not in ``status.uncountedTerminatedPods`` and no finalizer removal is pending for
  them; for Indexed Jobs only pods with a valid index count (``getNewFinishedPods``).
- :func:`pods_with_delayed_deletion_per_index` picks, per index not yet succeeded, failed or active, the last
  failed pod (highest failure count, then latest finish): its finalizer stays until its replacement exists,
  so the replacement can inherit the index's failure count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.pods import is_pod_ready

from .backoff import BackoffRecord, finished_time
from .indexed import Intervals, get_indexes, index_absolute_failure_count, valid_index
from .pod_failure_policy import match_pod_failure_policy
from .util import (
    completions_or_zero,
    has_job_tracking_finalizer,
    is_indexed_job,
    is_pod_failed,
    pod_failure_policy,
    pod_phase,
    pod_uid,
)

Obj = Mapping[str, Any]


@dataclass
class Uncounted:
    """``status.uncountedTerminatedPods`` as sets, for lookups."""

    succeeded: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, uncounted: Mapping[str, Any] | None) -> Uncounted:
        uncounted = uncounted or {}
        return cls(set(map(str, uncounted.get("succeeded") or ())), set(map(str, uncounted.get("failed") or ())))


@dataclass
class SyncJobCtx:
    job: dict[str, Any]
    pods: Sequence[Obj] = field(default_factory=list)
    active_pods: Sequence[Obj] = field(default_factory=list)
    finished_condition: dict[str, Any] | None = None
    succeeded: int = 0
    failed: int = 0
    prev_succeeded_indexes: Intervals = field(default_factory=Intervals)
    succeeded_indexes: Intervals = field(default_factory=Intervals)
    failed_indexes: Intervals | None = None
    new_backoff_record: BackoffRecord = field(default_factory=lambda: BackoffRecord(""))
    expected_rm_finalizers: set[str] = field(default_factory=set)
    uncounted: Uncounted = field(default_factory=Uncounted)
    pods_with_delayed_deletion_per_index: dict[int, Obj] = field(default_factory=dict)
    terminating: int = 0
    ready: int = 0

    @property
    def status(self) -> dict[str, Any]:
        status = self.job.get("status")
        if not isinstance(status, dict):
            status = self.job["status"] = {}
        return status

    def uncounted_status(self) -> dict[str, list[str]]:
        """``status.uncountedTerminatedPods`` of the working copy, created if missing."""
        uncounted = self.status.get("uncountedTerminatedPods")
        if not isinstance(uncounted, dict):
            uncounted = self.status["uncountedTerminatedPods"] = {}
        return uncounted


def valid_pods_with_filter(ctx: SyncJobCtx, uncounted: set[str] | None, keep: Callable[[Obj], bool]) -> list[Obj]:
    """Pods still to account for (finalizer, not uncounted, no removal pending; valid index) passing ``keep``."""
    result: list[Obj] = []
    indexed = is_indexed_job(ctx.job)
    total = completions_or_zero(ctx.job)
    for pod in ctx.pods:
        uid = pod_uid(pod)
        if not has_job_tracking_finalizer(pod) or (uncounted and uid in uncounted) or uid in ctx.expected_rm_finalizers:
            continue
        if indexed and valid_index(pod, total) is None:
            continue
        if keep(pod):
            result.append(pod)
    return result


def get_new_finished_pods(ctx: SyncJobCtx) -> tuple[list[Obj], list[Obj]]:
    succeeded = valid_pods_with_filter(ctx, ctx.uncounted.succeeded, lambda p: pod_phase(p) == "Succeeded")
    failed = valid_pods_with_filter(ctx, ctx.uncounted.failed, lambda p: is_pod_failed(p, ctx.job))
    return succeeded, failed


def non_ignored_failed_count(job: Obj, failed_pods: Sequence[Obj]) -> int:
    policy = pod_failure_policy(job)
    if policy is None:
        return len(failed_pods)
    return sum(1 for p in failed_pods if match_pod_failure_policy(policy, p)[1])


def pods_with_delayed_deletion_per_index(ctx: SyncJobCtx) -> dict[int, Obj]:
    active = get_indexes(ctx.active_pods)
    total = completions_or_zero(ctx.job)
    failed_indexes = ctx.failed_indexes or Intervals()
    chosen: dict[int, Obj] = {}
    for pod in valid_pods_with_filter(ctx, None, lambda p: is_pod_failed(p, ctx.job)):
        ix = valid_index(pod, total)
        if ix is None or ctx.succeeded_indexes.has(ix) or failed_indexes.has(ix) or ix in active:
            continue
        current = chosen.get(ix)
        if current is None or (index_absolute_failure_count(current) <= index_absolute_failure_count(pod)
                               and not finished_time(pod) < finished_time(current)):
            chosen[ix] = pod
    return chosen


def count_ready(pods: Iterable[Obj]) -> int:
    return sum(1 for p in pods if is_pod_ready(p))
