"""The Job controller's Prometheus metrics (``pkg/controller/job/metrics/metrics.go``), on the default registry.

Guarantees: names, types, label names and buckets are upstream's (subsystem ``job_controller``), so dashboards
built for kube-controller-manager read them unchanged. Each metric is registered once, at import. The helpers
here record exactly what upstream records at the same points of the controller:

- ``job_sync_duration_seconds`` (histogram) and ``job_syncs_total`` (counter) {completion_mode, result, action}:
  one observation per sync of a Job that is not deleted, externally managed, finished or of an unknown
  completion mode; ``result`` is ``success``/``error``, ``action`` what the sync did to pods
  (``reconciling`` when expectations kept it from managing pods, ``tracking``, ``pods_created``,
  ``pods_deleted``).
- ``jobs_finished_total`` {completion_mode, result, reason}: once per Job, when the ``Complete``/``Failed``
  condition was written; ``reason`` is that condition's reason (``CompletionsReached``, ``SuccessPolicy``,
  ``BackoffLimitExceeded``, ``DeadlineExceeded``, ``PodFailurePolicy``, ``FailedIndexes``,
  ``MaxFailedIndexesExceeded``).
- ``job_pods_finished_total`` {completion_mode, result}: finished pods moved into ``status.succeeded``/``failed``
  by a status write (for Indexed Jobs, newly completed indexes within ``completions``).
- ``job_finished_indexes_total`` {status, backoffLimit}: newly succeeded / failed indexes of Indexed Jobs
  (``backoffLimit`` is ``perIndex`` or ``global``).
- ``pod_failures_handled_by_failure_policy_total`` {action}: failed pods matched by a podFailurePolicy rule, by
  the rule's action (``FailJob``, ``Ignore``, ``Count``, ``FailIndex``), counted when first counted as failed.
- ``terminated_pods_tracking_finalizer_total`` {event}: pods entering (``add``) or leaving (``delete``) the
  state "terminal phase and still carrying the tracking finalizer", as the pod informer shows them.
- ``jobs_by_external_controller_total`` {controller_name}: Jobs added to the cache with a foreign
  ``spec.managedBy``.
- ``job_pods_creation_total`` {reason, status}: pod creations attempted by a sync, ``reason`` ``new``,
  ``recreate_terminating_or_failed`` or ``recreate_failed``, ``status`` ``succeeded``/``failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from .indexed import parse_indexes
from .util import (
    completion_mode,
    completions_or_zero,
    has_backoff_limit_per_index,
    has_job_tracking_finalizer,
    is_indexed_job,
    pod_phase,
)

Obj = Mapping[str, Any]

# Values of the "action" label of the sync metrics.
ACTION_RECONCILING = "reconciling"
ACTION_TRACKING = "tracking"
ACTION_PODS_CREATED = "pods_created"
ACTION_PODS_DELETED = "pods_deleted"
# Values of the "result" label of the pod/index metrics and of the "status" label of job_pods_creation_total.
SUCCEEDED = "succeeded"
FAILED = "failed"
# Values of the "event" label of terminated_pods_tracking_finalizer_total.
EVENT_ADD = "add"
EVENT_DELETE = "delete"
# Values of the "reason" label of job_pods_creation_total.
POD_CREATE_NEW = "new"
POD_RECREATE_TERMINATING_OR_FAILED = "recreate_terminating_or_failed"
POD_RECREATE_FAILED = "recreate_failed"

JOB_SYNC_DURATION_SECONDS = Histogram(
    "job_controller_job_sync_duration_seconds", "The time it took to sync a job",
    ["completion_mode", "result", "action"], buckets=tuple(0.004 * 2**i for i in range(15)))
JOB_SYNC_NUM = Counter(
    "job_controller_job_syncs_total", "The number of job syncs", ["completion_mode", "result", "action"])
JOB_FINISHED_NUM = Counter(
    "job_controller_jobs_finished_total", "The number of finished jobs", ["completion_mode", "result", "reason"])
JOB_BY_EXTERNAL_CONTROLLER_TOTAL = Counter(
    "job_controller_jobs_by_external_controller_total", "The number of Jobs managed by an external controller",
    ["controller_name"])
JOB_PODS_FINISHED = Counter(
    "job_controller_job_pods_finished_total", "The number of finished Pods that are fully tracked",
    ["completion_mode", "result"])
POD_FAILURES_HANDLED_BY_FAILURE_POLICY = Counter(
    "job_controller_pod_failures_handled_by_failure_policy_total",
    "The number of failed Pods handled by failure policy with respect to the failure policy action applied "
    "based on the matched rule. Possible values of the action label correspond to the possible values for the "
    'failure policy rule action, which are: "FailJob", "Ignore" and "Count".',
    ["action"])
TERMINATED_PODS_TRACKING_FINALIZER_TOTAL = Counter(
    "job_controller_terminated_pods_tracking_finalizer_total",
    "The number of terminated pods (phase=Failed|Succeeded) that have the finalizer "
    'batch.kubernetes.io/job-tracking. The event label can be "add" or "delete".',
    ["event"])
JOB_FINISHED_INDEXES_TOTAL = Counter(
    "job_controller_job_finished_indexes_total",
    'The number of finished indexes. Possible values for the status label are: "succeeded", "failed". '
    'Possible values for the backoffLimit label are: "perIndex" and "global"',
    ["status", "backoffLimit"])
JOB_PODS_CREATION_TOTAL = Counter(
    "job_controller_job_pods_creation_total",
    "The number of Pods created by the Job controller labelled with a reason for the Pod creation.\n"
    "This metric also distinguishes between Pods created using different PodReplacementPolicy settings.\n"
    'Possible values of the "reason" label are:\n"new", "recreate_terminating_or_failed", "recreate_failed".\n'
    'Possible values of the "status" label are:\n"succeeded", "failed".',
    ["reason", "status"])


def record_sync(mode: str, error: bool, action: str, seconds: float) -> None:
    result = "error" if error else "success"
    JOB_SYNC_DURATION_SECONDS.labels(mode, result, action).observe(seconds)
    JOB_SYNC_NUM.labels(mode, result, action).inc()


def record_job_finished(job: Obj, cond: Obj) -> None:
    """The Job got its terminal condition ``cond`` (``Complete`` or ``Failed``)."""
    result = SUCCEEDED if cond.get("type") == "Complete" else FAILED
    JOB_FINISHED_NUM.labels(completion_mode(job), result, str(cond.get("reason") or "")).inc()


def _int(status: Obj, key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _index_count(text: Any, completions: int) -> int:
    return parse_indexes(text, completions).total() if isinstance(text, str) and text else 0


def record_job_pod_finished(job: Obj, old_status: Obj) -> None:
    """Pods (indexes) newly counted in ``job``'s status since ``old_status`` (``recordJobPodFinished``)."""
    status = job.get("status")
    status = status if isinstance(status, Mapping) else {}
    mode = completion_mode(job)
    if is_indexed_job(job):
        # By index: an index completed before a scale-down of completions no longer counts.
        total = completions_or_zero(job)
        diff = 0
        if (status.get("completedIndexes") or "") != (old_status.get("completedIndexes") or ""):
            diff = (_index_count(status.get("completedIndexes"), total)
                    - _index_count(old_status.get("completedIndexes"), total))
        label = "perIndex" if has_backoff_limit_per_index(job) else "global"
        # Like upstream, every call touches the series (an unchanged count shows as 0); a count that went down
        # (upstream's Add would panic) adds nothing.
        JOB_FINISHED_INDEXES_TOTAL.labels(SUCCEEDED, label).inc(max(diff, 0))
        if has_backoff_limit_per_index(job) and status.get("failedIndexes") != old_status.get("failedIndexes"):
            failed_diff = (_index_count(status.get("failedIndexes"), total)
                           - _index_count(old_status.get("failedIndexes"), total))
            if failed_diff > 0:
                JOB_FINISHED_INDEXES_TOTAL.labels(FAILED, label).inc(failed_diff)
    else:
        diff = _int(status, "succeeded") - _int(old_status, "succeeded")
    JOB_PODS_FINISHED.labels(mode, SUCCEEDED).inc(max(diff, 0))
    JOB_PODS_FINISHED.labels(mode, FAILED).inc(max(_int(status, "failed") - _int(old_status, "failed"), 0))


def record_pod_failure_policy_actions(counts: Mapping[str, int]) -> None:
    for action, count in counts.items():
        POD_FAILURES_HANDLED_BY_FAILURE_POLICY.labels(action).inc(count)


def _is_finished_with_tracking_finalizer(pod: Obj | None) -> bool:
    return pod is not None and pod_phase(pod) in ("Failed", "Succeeded") and has_job_tracking_finalizer(pod)


def record_finished_pod_with_tracking_finalizer(old: Obj | None, new: Obj | None) -> None:
    """A pod event (``old``/``new`` None for an add/delete) as seen by the pod informer."""
    was, now = _is_finished_with_tracking_finalizer(old), _is_finished_with_tracking_finalizer(new)
    if was != now:
        TERMINATED_PODS_TRACKING_FINALIZER_TOTAL.labels(EVENT_ADD if now else EVENT_DELETE).inc()


def record_job_by_external_controller(controller_name: str) -> None:
    JOB_BY_EXTERNAL_CONTROLLER_TOTAL.labels(controller_name).inc()


def pod_creation_reason(job: Obj, failed: int, terminating: int) -> str:
    """Why a sync creates pods (``recordJobPodsCreationTotal``; JobPodReplacementPolicy is on by default)."""
    spec = job.get("spec")
    policy = spec.get("podReplacementPolicy") if isinstance(spec, Mapping) else None
    if (policy or "TerminatingOrFailed") == "Failed" and failed > 0:
        return POD_RECREATE_FAILED
    if failed > 0 or terminating > 0:
        return POD_RECREATE_TERMINATING_OR_FAILED
    return POD_CREATE_NEW


def record_pods_creation(reason: str, succeeded: int, failed: int) -> None:
    if succeeded > 0:
        JOB_PODS_CREATION_TOTAL.labels(reason, SUCCEEDED).inc(succeeded)
    if failed > 0:
        JOB_PODS_CREATION_TOTAL.labels(reason, FAILED).inc(failed)
