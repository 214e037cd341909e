"""Job vocabulary shared by the Job controller's modules: names, spec accessors, conditions, pod predicates.

Guarantees:
- Every accessor reads a Job or Pod as the API's JSON (a plain dict) and never mutates it; a missing or
  mistyped field reads as the API default (``parallelism`` 1, ``backoffLimit`` 6, ``suspend`` false, ...), so
  a hand-written object the API server would have defaulted does not crash the controller.
- Condition helpers follow upstream's ``ensureJobConditionStatus``/``newCondition``: a condition is appended
  only when its status is not ``False``, an existing one is replaced (new transition time) only when its
  status, reason or message changed. Empty reason/message are omitted, as Go's ``omitempty`` does.
- The feature gates kube-controller-manager has on by default today are assumed on (JobPodReplacementPolicy,
  JobManagedBy, JobSuccessPolicy, JobBackoffLimitPerIndex, PodIndexLabel): terminating pods are always counted
  and terminal conditions are always preceded by FailureTarget / SuccessCriteriaMet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from controller_manager.api.meta import format_time, is_being_deleted, meta

Obj = Mapping[str, Any]

# Finalizer, annotations and labels (k8s.io/api/batch/v1).
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_INDEX_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-failure-count"
JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION = "batch.kubernetes.io/job-index-ignored-failure-count"
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"  # spec.managedBy value meaning "this controller"

# Condition types.
JOB_COMPLETE = "Complete"
JOB_FAILED = "Failed"
JOB_SUSPENDED = "Suspended"
JOB_FAILURE_TARGET = "FailureTarget"
JOB_SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"

# Condition reasons.
REASON_BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
REASON_DEADLINE_EXCEEDED = "DeadlineExceeded"
REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
REASON_MAX_FAILED_INDEXES_EXCEEDED = "MaxFailedIndexesExceeded"
REASON_FAILED_INDEXES = "FailedIndexes"
REASON_SUCCESS_POLICY = "SuccessPolicy"
REASON_COMPLETIONS_REACHED = "CompletionsReached"

MSG_BACKOFF_LIMIT_EXCEEDED = "Job has reached the specified backoff limit"
MSG_DEADLINE_EXCEEDED = "Job was active longer than specified deadline"
MSG_MAX_FAILED_INDEXES_EXCEEDED = "Job has exceeded the specified maximal number of failed indexes"
MSG_FAILED_INDEXES = "Job has failed indexes"
MSG_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"

INDEXED = "Indexed"
NON_INDEXED = "NonIndexed"

DEFAULT_BACKOFF_LIMIT = 6

# --- spec accessors -------------------------------------------------------------------------------------


def _spec(job: Obj) -> Mapping[str, Any]:
    spec = job.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _status(obj: Obj) -> Mapping[str, Any]:
    status = obj.get("status")
    return status if isinstance(status, Mapping) else {}


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def completions(job: Obj) -> int | None:
    """``spec.completions``; None means the work-queue pattern (any success completes the Job)."""
    return _opt_int(_spec(job).get("completions"))


def completions_or_zero(job: Obj) -> int:
    return completions(job) or 0


def parallelism(job: Obj) -> int:
    value = _opt_int(_spec(job).get("parallelism"))
    return 1 if value is None else value


def backoff_limit(job: Obj) -> int:
    value = _opt_int(_spec(job).get("backoffLimit"))
    return DEFAULT_BACKOFF_LIMIT if value is None else value


def backoff_limit_per_index(job: Obj) -> int | None:
    return _opt_int(_spec(job).get("backoffLimitPerIndex"))


def has_backoff_limit_per_index(job: Obj) -> bool:
    return backoff_limit_per_index(job) is not None


def max_failed_indexes(job: Obj) -> int | None:
    return _opt_int(_spec(job).get("maxFailedIndexes"))


def active_deadline_seconds(job: Obj) -> int | None:
    return _opt_int(_spec(job).get("activeDeadlineSeconds"))


def completion_mode(job: Obj) -> str:
    mode = _spec(job).get("completionMode")
    return mode if isinstance(mode, str) else NON_INDEXED


def is_indexed_job(job: Obj) -> bool:
    return _spec(job).get("completionMode") == INDEXED


def job_suspended(job: Obj) -> bool:
    return _spec(job).get("suspend") is True


def pod_failure_policy(job: Obj) -> Mapping[str, Any] | None:
    policy = _spec(job).get("podFailurePolicy")
    return policy if isinstance(policy, Mapping) else None


def success_policy(job: Obj) -> Mapping[str, Any] | None:
    policy = _spec(job).get("successPolicy")
    return policy if isinstance(policy, Mapping) else None


def restart_policy(job: Obj) -> str:
    template = _spec(job).get("template")
    spec = template.get("spec") if isinstance(template, Mapping) else None
    return str(spec.get("restartPolicy") or "") if isinstance(spec, Mapping) else ""


def managed_by_external_controller(job: Obj) -> str | None:
    """The external controller named by ``spec.managedBy``, or None when this controller manages the Job."""
    name = _spec(job).get("managedBy")
    if isinstance(name, str) and name != JOB_CONTROLLER_NAME:
        return name
    return None


def only_replace_failed_pods(job: Obj) -> bool:
    """Replacements wait for pods to be fully terminal (podReplacementPolicy Failed, or any podFailurePolicy)."""
    return _spec(job).get("podReplacementPolicy") == "Failed" or pod_failure_policy(job) is not None


# --- conditions -----------------------------------------------------------------------------------------


def conditions(job: Obj) -> list[Mapping[str, Any]]:
    return [c for c in _status(job).get("conditions") or () if isinstance(c, Mapping)]


def find_condition(conds: Sequence[Obj], ctype: str) -> Obj | None:
    for cond in conds:
        if cond.get("type") == ctype:
            return cond
    return None


def new_condition(ctype: str, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    ts = format_time(now)
    cond: dict[str, Any] = {"type": ctype, "status": status, "lastProbeTime": ts, "lastTransitionTime": ts}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def ensure_condition_status(conds: list[dict[str, Any]], ctype: str, status: str, reason: str, message: str,
                            now: float) -> bool:
    """Set condition ``ctype`` in ``conds`` (in place); True if the list changed."""
    for i, cond in enumerate(conds):
        if cond.get("type") == ctype:
            if (cond.get("status") != status or (cond.get("reason") or "") != reason
                    or (cond.get("message") or "") != message):
                conds[i] = new_condition(ctype, status, reason, message, now)
                return True
            return False
    if status != "False":
        conds.append(new_condition(ctype, status, reason, message, now))
        return True
    return False


def finished_condition(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` when the Job has that condition True (``util.FinishedCondition``)."""
    for cond in conditions(job):
        if cond.get("type") in (JOB_COMPLETE, JOB_FAILED) and cond.get("status") == "True":
            return str(cond["type"])
    return None


def is_job_finished(job: Obj) -> bool:
    return finished_condition(job) is not None


def has_true_condition(job: Obj, ctype: str) -> Obj | None:
    cond = find_condition(conditions(job), ctype)
    return cond if cond is not None and cond.get("status") == "True" else None


def is_success_criteria_met_condition(cond: Obj | None) -> bool:
    return cond is not None and cond.get("type") == JOB_SUCCESS_CRITERIA_MET and cond.get("status") == "True"


# --- pods -----------------------------------------------------------------------------------------------


def pod_uid(pod: Obj) -> str:
    return str(meta(pod).get("uid") or "")


def pod_annotations(pod: Obj) -> Mapping[str, Any]:
    annotations = meta(pod).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def pod_phase(pod: Obj) -> str:
    return str(_status(pod).get("phase") or "")


def has_job_tracking_finalizer(pod: Obj) -> bool:
    return JOB_TRACKING_FINALIZER in (meta(pod).get("finalizers") or ())


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    """Failed phase; or, unless only failed pods are replaced, deleted before succeeding (orphans never reach
    a terminal phase, so deletion has to count)."""
    phase = pod_phase(pod)
    if phase == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    return is_being_deleted(pod) and phase != "Succeeded"


def remove_tracking_finalizer_patch(pod: Obj) -> dict[str, Any] | None:
    """Strategic-merge patch dropping the tracking finalizer; None if the pod does not carry it."""
    if not has_job_tracking_finalizer(pod):
        return None
    return {"metadata": {"$deleteFromPrimitiveList/finalizers": [JOB_TRACKING_FINALIZER]}}


def past_backoff_limit_on_failure(job: Obj, pods: Sequence[Obj]) -> bool:
    """With restartPolicy OnFailure, container restarts of running/pending pods count against backoffLimit."""
    if restart_policy(job) != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        if pod_phase(pod) in ("Running", "Pending"):
            status = _status(pod)
            for key in ("initContainerStatuses", "containerStatuses"):
                for cs in status.get(key) or ():
                    if isinstance(cs, Mapping):
                        restarts += _opt_int(cs.get("restartCount")) or 0
    limit = backoff_limit(job)
    if limit == 0:
        return restarts > 0
    return restarts >= limit
