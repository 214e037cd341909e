"""One sync of one Job (upstream's ``syncJob``): decide whether it finishes, manage pods, write status.

Guarantees:
- Finished Jobs (``Complete``/``Failed`` True) are never touched again; deleted ones only lose their
  expectations and backoff record. Expectations are checked *before* the pods are read, so a pod that
  appears in between defers action to the next sync instead of being counted as missing.
- The terminal decision, in upstream's order: an existing ``SuccessCriteriaMet`` wins; then an existing
  ``FailureTarget`` or a pod matching a ``FailJob`` rule (reason PodFailurePolicy); then the backoff limit
  (including OnFailure container restarts), then ``activeDeadlineSeconds`` (else a requeue at the deadline);
  then, for Indexed Jobs, ``maxFailedIndexes``, failed indexes covering the rest, and the success policy.
  A finishing Job has its active pods deleted and is declared finished only once those deletions all
  succeeded and expectations were met.
- Otherwise pods are managed (when expectations are satisfied and the Job is not being deleted); the Job
  completes when enough pods succeeded (work-queue Jobs: any success) and none is active, with reason
  ``CompletionsReached`` (JobSuccessPolicy is GA); the Suspended condition and events follow ``spec.suspend``.
- Every sync of a Job that is present, managed here, unfinished and of a known completion mode is counted and
  timed (see :mod:`.metrics`), with the action it took on pods and whether it raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import deep_copy, format_time, is_being_deleted, parse_time, split_key
from controller_manager.api.pods import count_terminating_pods, filter_active_pods
from controller_manager.controllerutil.consistency import StaleCache
from controller_manager.runtime.controller import Result

from . import metrics
from .context import (
    SyncJobCtx,
    Uncounted,
    count_ready,
    get_new_finished_pods,
    non_ignored_failed_count,
    pods_with_delayed_deletion_per_index,
)
from .indexed import calculate_failed_indexes, calculate_succeeded_indexes
from .manage import delete_active_pods, manage_job
from .pod_failure_policy import match_pod_failure_policy
from .status import track_job_status_and_remove_finalizers
from .success_policy import match_success_policy
from .util import (
    INDEXED,
    JOB_FAILED,
    JOB_FAILURE_TARGET,
    JOB_SUCCESS_CRITERIA_MET,
    JOB_SUSPENDED,
    MSG_BACKOFF_LIMIT_EXCEEDED,
    MSG_COMPLETIONS_REACHED,
    MSG_DEADLINE_EXCEEDED,
    MSG_FAILED_INDEXES,
    MSG_MAX_FAILED_INDEXES_EXCEEDED,
    NON_INDEXED,
    REASON_BACKOFF_LIMIT_EXCEEDED,
    REASON_COMPLETIONS_REACHED,
    REASON_DEADLINE_EXCEEDED,
    REASON_FAILED_INDEXES,
    REASON_MAX_FAILED_INDEXES_EXCEEDED,
    REASON_POD_FAILURE_POLICY,
    REASON_SUCCESS_POLICY,
    active_deadline_seconds,
    backoff_limit,
    completion_mode,
    completions,
    completions_or_zero,
    ensure_condition_status,
    has_backoff_limit_per_index,
    has_true_condition,
    is_indexed_job,
    is_job_finished,
    is_pod_failed,
    job_suspended,
    managed_by_external_controller,
    max_failed_indexes,
    new_condition,
    past_backoff_limit_on_failure,
    pod_failure_policy,
    success_policy,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .controller import JobController


def _fail_job_message(job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> str | None:
    policy = pod_failure_policy(job)
    if policy is None:
        return None
    for pod in pods:
        if is_pod_failed(pod, job):
            message, _, _ = match_pod_failure_policy(policy, pod)
            if message is not None:
                return message
    return None


async def sync_job(jm: JobController, key: str) -> Result | None:
    started = jm.ctx.clock.monotonic()
    namespace, name = split_key(key)
    if not namespace or not name:
        raise ValueError(f"invalid job key {key!r}: either namespace or name is missing")
    try:
        jm.consistency.ensure_ready(key)
    except StaleCache as stale:
        # The caches do not show our own last writes for this Job yet: acting now could create pods again or
        # count a pod twice (and the status write would conflict). Retry through the rate limiter, as upstream.
        jm.log.debug("skipping sync of a stale job", key=key, reason=str(stale))
        return Result(rate_limited=True)
    shared = jm.job_informer.store.get(key)
    if shared is None:
        jm.log.debug("job has been deleted", key=key)
        jm.forget(key)
        return None
    controller_name = managed_by_external_controller(shared)
    if controller_name is not None:
        jm.log.debug("skip syncing the job as it is managed by an external controller", key=key,
                     controller_name=controller_name)
        return None
    if is_job_finished(shared):
        jm.pod_backoff_store.remove(key)
        return None
    mode = (shared.get("spec") or {}).get("completionMode")
    if mode is not None and mode not in (NON_INDEXED, INDEXED):
        jm.recorder_event(shared, "Warning", "UnknownCompletionMode",
                          "Skipped Job sync because completion mode is unknown")
        return None
    # From here on every sync is measured (job_sync_duration_seconds, job_syncs_total), as upstream does.
    outcome = _Outcome()
    try:
        result = await _sync_job(jm, key, shared, outcome)
    except Exception:
        metrics.record_sync(completion_mode(shared), True, outcome.action, jm.ctx.clock.monotonic() - started)
        raise
    metrics.record_sync(completion_mode(shared), outcome.invalid, outcome.action,
                        jm.ctx.clock.monotonic() - started)
    return result


@dataclass
class _Outcome:
    """What a sync did, for its metrics: ``action`` stays "reconciling" unless pods were managed."""

    action: str = metrics.ACTION_RECONCILING
    invalid: bool = False  # an unusable selector: upstream's sync returns an error here


async def _sync_job(jm: JobController, key: str, shared: Mapping[str, Any], outcome: _Outcome) -> Result | None:
    selector = jm.selector(shared)
    if selector is None:
        jm.log.error("couldn't convert Job selector", key=key, selector=(shared.get("spec") or {}).get("selector"))
        outcome.invalid = True
        return None

    job: dict[str, Any] = deep_copy(dict(shared))  # the cache's object is never mutated
    status = job.setdefault("status", {})
    if not isinstance(status.get("uncountedTerminatedPods"), dict):
        status["uncountedTerminatedPods"] = {}

    # Before reading pods: a pod appearing after this check only delays action to the next sync.
    satisfied = jm.expectations.satisfied(key)
    pods = await jm.pods_for_job(job, selector)
    active_pods = filter_active_pods(pods)
    ctx = SyncJobCtx(job=job, pods=list(pods), active_pods=list(active_pods), ready=count_ready(active_pods),
                     uncounted=Uncounted.of(status["uncountedTerminatedPods"]),
                     expected_rm_finalizers=jm.finalizer_expectations.expected_uids(key),
                     terminating=count_terminating_pods(pods))
    active = len(active_pods)
    new_succeeded, new_failed = get_new_finished_pods(ctx)
    ctx.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(ctx.uncounted.succeeded)
    ctx.failed = (int(status.get("failed") or 0) + non_ignored_failed_count(job, new_failed)
                  + len(ctx.uncounted.failed))

    now = jm.ctx.clock.now()
    if status.get("startTime") is None and not job_suspended(job):
        status["startTime"] = format_time(now)
    ctx.new_backoff_record = jm.pod_backoff_store.new_backoff_record(key, new_succeeded, new_failed)

    requeue_after: float | None = None
    ctx.finished_condition = _copy_or_none(has_true_condition(job, JOB_SUCCESS_CRITERIA_MET))
    if ctx.finished_condition is None:
        target = has_true_condition(job, JOB_FAILURE_TARGET)
        if target is not None:
            ctx.finished_condition = new_condition(JOB_FAILED, "True", str(target.get("reason") or ""),
                                                   str(target.get("message") or ""), now)
        elif (message := _fail_job_message(job, ctx.pods)) is not None:
            # Recorded as FailureTarget before finalizers go, so the reason survives the pods.
            ctx.finished_condition = new_condition(JOB_FAILURE_TARGET, "True", REASON_POD_FAILURE_POLICY, message,
                                                   now)
    if ctx.finished_condition is None:
        deadline = active_deadline_seconds(job)
        if ctx.failed > backoff_limit(job) or past_backoff_limit_on_failure(job, ctx.pods):
            ctx.finished_condition = _failure(REASON_BACKOFF_LIMIT_EXCEEDED, MSG_BACKOFF_LIMIT_EXCEEDED, now)
        elif _past_active_deadline(job, now):
            ctx.finished_condition = _failure(REASON_DEADLINE_EXCEEDED, MSG_DEADLINE_EXCEEDED, now)
        elif deadline is not None and not job_suspended(job):
            start = parse_time(status.get("startTime")) or now
            requeue_after = max(0.0, deadline - (now - start))
            jm.log.debug("job has activeDeadlineSeconds: will sync again", key=key, next_sync_in=requeue_after)

    if is_indexed_job(job):
        ctx.prev_succeeded_indexes, ctx.succeeded_indexes = calculate_succeeded_indexes(job, ctx.pods)
        ctx.succeeded = ctx.succeeded_indexes.total()
        if has_backoff_limit_per_index(job):
            ctx.failed_indexes = calculate_failed_indexes(job, ctx.pods)
            if ctx.finished_condition is None:
                limit = max_failed_indexes(job)
                failed_total = ctx.failed_indexes.total()
                if limit is not None and failed_total > limit:
                    ctx.finished_condition = _failure(REASON_MAX_FAILED_INDEXES_EXCEEDED,
                                                      MSG_MAX_FAILED_INDEXES_EXCEEDED, now)
                elif failed_total > 0 and failed_total + ctx.succeeded_indexes.total() >= completions_or_zero(job):
                    ctx.finished_condition = _failure(REASON_FAILED_INDEXES, MSG_FAILED_INDEXES, now)
            ctx.pods_with_delayed_deletion_per_index = pods_with_delayed_deletion_per_index(ctx)
        if ctx.finished_condition is None:
            message, met = match_success_policy(success_policy(job), completions_or_zero(job),
                                                ctx.succeeded_indexes)
            if met:
                ctx.finished_condition = new_condition(JOB_SUCCESS_CRITERIA_MET, "True", REASON_SUCCESS_POLICY,
                                                       message, now)

    suspend_changed = False
    manage_error: Exception | None = None
    if ctx.finished_condition is not None:
        ready_deleted, deleted, manage_error = await delete_active_pods(jm, job, ctx.active_pods)
        if deleted != active or not satisfied:
            # Pods may remain (or be missing from the cache): not finished yet.
            ctx.finished_condition = None
        active -= deleted
        ctx.terminating += deleted
        ctx.ready -= ready_deleted
    else:
        managed = False
        if satisfied and not is_being_deleted(job):
            active, outcome.action, manage_error = await manage_job(jm, job, ctx)
            managed = True
        want = completions(job)
        complete = (ctx.succeeded > 0 if want is None else ctx.succeeded >= want) and active == 0
        if complete:
            ctx.finished_condition = new_condition(JOB_SUCCESS_CRITERIA_MET, "True", REASON_COMPLETIONS_REACHED,
                                                   MSG_COMPLETIONS_REACHED, now)
        elif managed:
            # Only a sync that managed pods speaks for the suspension state.
            conds = status.setdefault("conditions", [])
            if job_suspended(job):
                if ensure_condition_status(conds, JOB_SUSPENDED, "True", "JobSuspended", "Job suspended", now):
                    suspend_changed = True
                    jm.recorder_event(job, "Normal", "Suspended", "Job suspended")
            elif ensure_condition_status(conds, JOB_SUSPENDED, "False", "JobResumed", "Job resumed", now):
                suspend_changed = True
                jm.recorder_event(job, "Normal", "Resumed", "Job resumed")
                # activeDeadlineSeconds counts continuous activity: a resumed Job starts its clock again.
                status["startTime"] = format_time(now)

    needs_update = (suspend_changed or active != int(status.get("active") or 0)
                    or ctx.ready != status.get("ready") or ctx.terminating != status.get("terminating"))
    status["active"] = active
    status["ready"] = ctx.ready
    status["terminating"] = ctx.terminating
    await track_job_status_and_remove_finalizers(jm, ctx, needs_update)
    if manage_error is not None:
        if requeue_after is not None:
            jm.queue.add_after(key, requeue_after)  # the deadline must not wait for the error backoff
        raise manage_error
    return Result(requeue_after=requeue_after) if requeue_after is not None else None


def _copy_or_none(cond: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(cond) if cond is not None else None


def _failure(reason: str, message: str, now: float) -> dict[str, Any]:
    # With today's gates a failure is first recorded as FailureTarget; Failed follows once pods are gone.
    return new_condition(JOB_FAILURE_TARGET, "True", reason, message, now)


def _past_active_deadline(job: Mapping[str, Any], now: float) -> bool:
    deadline = active_deadline_seconds(job)
    start = parse_time((job.get("status") or {}).get("startTime"))
    if deadline is None or start is None or job_suspended(job):
        return False
    return now - start >= deadline

