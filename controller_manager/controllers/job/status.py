"""Counting finished pods in two phases and finishing Jobs (``trackJobStatusAndRemoveFinalizers`` and friends).

Guarantees (the heart of "no pod counted twice, none lost"):
1. Finished pods that still carry the tracking finalizer are first written into
   ``status.uncountedTerminatedPods`` (Indexed Jobs: into ``completedIndexes`` directly, the index being
   enough to never count twice) together with any interim ``FailureTarget``/``SuccessCriteriaMet`` condition.
2. Only after that status write succeeded are their finalizers removed (expectations record the UIDs first).
3. UIDs whose pods no longer carry the finalizer (or are gone) move from the uncounted lists into
   ``succeeded``/``failed``; a partial failure is flushed too, so progress is never lost.
4. ``Complete``/``Failed`` is added only when nothing is left uncounted and no pod is terminating, with
   ``completionTime`` for Complete, and the Job's terminal event is recorded after that write succeeded.
At most :data:`MAX_UNCOUNTED_PODS` pods are handled per sync (keeps the status small and big Jobs from
starving others); the Job is synced again through its own status/pod events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import format_time, is_being_deleted, key_of
from controller_manager.client.errors import NotFound

from . import metrics
from .context import SyncJobCtx
from .indexed import pod_index, valid_index
from .pod_failure_policy import match_pod_failure_policy
from .util import (
    JOB_COMPLETE,
    JOB_FAILED,
    JOB_FAILURE_TARGET,
    completions,
    completions_or_zero,
    ensure_condition_status,
    has_backoff_limit_per_index,
    has_job_tracking_finalizer,
    has_true_condition,
    is_indexed_job,
    is_pod_failed,
    is_success_criteria_met_condition,
    new_condition,
    pod_failure_policy,
    pod_phase,
    pod_uid,
    remove_tracking_finalizer_patch,
)

if TYPE_CHECKING:
    from .controller import JobController

Obj = Mapping[str, Any]

# Upper bound of the uncounted lists (keeps them under ~20 KB) and of finalizer removals per sync.
MAX_UNCOUNTED_PODS = 500


def can_remove_finalizer(ctx: SyncJobCtx, pod: Obj, considered_failed: bool) -> bool:
    if is_being_deleted(ctx.job) or ctx.finished_condition is not None or pod_phase(pod) == "Succeeded":
        return True
    if not considered_failed:
        return False
    if has_backoff_limit_per_index(ctx.job):
        ix = pod_index(pod)
        delayed = ctx.pods_with_delayed_deletion_per_index.get(ix)
        if delayed is not None and pod_uid(delayed) == pod_uid(pod):
            return False  # kept until its replacement carries the index's failure count
    return True


def clean_uncounted_pods_without_finalizers(status: dict[str, Any], uids_with_finalizer: set[str]) -> bool:
    """Move UIDs whose finalizer is gone from the uncounted lists into the counters; True if anything moved."""
    uncounted = status.setdefault("uncountedTerminatedPods", {})
    updated = False
    for key, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        current = [str(u) for u in uncounted.get(key) or ()]
        kept = [u for u in current if u in uids_with_finalizer]
        if len(kept) != len(current):
            updated = True
            status[counter] = int(status.get(counter) or 0) + len(current) - len(kept)
            if kept:
                uncounted[key] = kept
            else:
                uncounted.pop(key, None)
    return updated


def _new_failed_condition_for_failure_target(cond: Obj, now: float) -> dict[str, Any]:
    return new_condition(JOB_FAILED, "True", str(cond.get("reason") or ""), str(cond.get("message") or ""), now)


async def track_job_status_and_remove_finalizers(jm: JobController, ctx: SyncJobCtx, needs_flush: bool) -> None:
    now = jm.ctx.clock.now()
    job = ctx.job
    indexed = is_indexed_job(job)
    total = completions_or_zero(job)
    uncounted_status = ctx.uncounted_status()
    if indexed:
        ctx.pods = sorted(ctx.pods, key=pod_index)  # completed indexes are introduced in order
    uids_with_finalizer = {pod_uid(p) for p in ctx.pods
                           if has_job_tracking_finalizer(p) and pod_uid(p) not in ctx.expected_rm_finalizers}
    old_counters = dict(ctx.status)
    if clean_uncounted_pods_without_finalizers(ctx.status, uids_with_finalizer):
        needs_flush = True

    pods_to_remove_finalizer: list[Obj] = []
    new_succeeded_indexes: list[int] = []
    reached_max = False
    failures_by_policy_action: dict[str, int] = {}
    policy = pod_failure_policy(job)
    for pod in ctx.pods:
        uid = pod_uid(pod)
        if not has_job_tracking_finalizer(pod) or uid in ctx.expected_rm_finalizers:
            continue  # handled by an earlier sync
        considered_failed = is_pod_failed(pod, job)
        if not can_remove_finalizer(ctx, pod, considered_failed):
            continue
        pods_to_remove_finalizer.append(pod)
        if pod_phase(pod) == "Succeeded" and uid not in ctx.uncounted.failed:
            if indexed:
                ix = valid_index(pod, total)
                if ix is not None and not ctx.prev_succeeded_indexes.has(ix):
                    new_succeeded_indexes.append(ix)
                    needs_flush = True
            elif uid not in ctx.uncounted.succeeded:
                needs_flush = True
                uncounted_status.setdefault("succeeded", []).append(uid)
        else:
            # Once the Job is finishing, every pod not terminated counts as failed.
            finishing = (ctx.finished_condition is not None
                         and not is_success_criteria_met_condition(ctx.finished_condition))
            countable = uid not in ctx.uncounted.failed and (not indexed or valid_index(pod, total) is not None)
            if (considered_failed or finishing) and countable:
                count_failed = True
                if policy is not None:
                    _, count_failed, action = match_pod_failure_policy(policy, pod)
                    if action is not None:
                        failures_by_policy_action[action] = failures_by_policy_action.get(action, 0) + 1
                if count_failed:
                    needs_flush = True
                    uncounted_status.setdefault("failed", []).append(uid)
        in_flight = (len(new_succeeded_indexes) + len(uncounted_status.get("succeeded") or ())
                     + len(uncounted_status.get("failed") or ()))
        if in_flight >= MAX_UNCOUNTED_PODS:
            reached_max = True
            break

    if indexed:
        ctx.succeeded_indexes = ctx.succeeded_indexes.with_ordered_indexes(new_succeeded_indexes)
        text = str(ctx.succeeded_indexes)
        if text != (ctx.status.get("completedIndexes") or ""):
            needs_flush = True
        ctx.status["succeeded"] = ctx.succeeded_indexes.total()
        ctx.status["completedIndexes"] = text
        failed_text = str(ctx.failed_indexes) if ctx.failed_indexes is not None else None
        if ctx.status.get("failedIndexes") != failed_text:
            if failed_text is None:
                ctx.status.pop("failedIndexes", None)
            else:
                ctx.status["failedIndexes"] = failed_text
            needs_flush = True

    if ctx.finished_condition is not None and ctx.finished_condition.get("type") == JOB_FAILURE_TARGET:
        # The reason is recorded before finalizers go, so a restart cannot forget why the Job fails.
        ctx.status.setdefault("conditions", []).append(ctx.finished_condition)
        needs_flush = True
        ctx.finished_condition = _new_failed_condition_for_failure_target(ctx.finished_condition, now)
    if is_success_criteria_met_condition(ctx.finished_condition):
        assert ctx.finished_condition is not None
        if has_true_condition(job, "SuccessCriteriaMet") is None:
            ctx.status.setdefault("conditions", []).append(ctx.finished_condition)
            needs_flush = True
        ctx.finished_condition = new_condition(JOB_COMPLETE, "True", str(ctx.finished_condition.get("reason") or ""),
                                               str(ctx.finished_condition.get("message") or ""), now)

    needs_flush = await flush_uncounted_and_remove_finalizers(jm, ctx, pods_to_remove_finalizer,
                                                              uids_with_finalizer, old_counters, needs_flush,
                                                              failures_by_policy_action)
    job_finished = not reached_max and enact_job_finished(jm, ctx)
    if job_finished:
        needs_flush = True
    if needs_flush:
        ctx.job = await jm.update_status_handler(ctx.job)
        if job_finished:
            assert ctx.finished_condition is not None
            record_job_finished(jm, ctx.job, ctx.finished_condition)
        metrics.record_job_pod_finished(ctx.job, old_counters)


async def flush_uncounted_and_remove_finalizers(jm: JobController, ctx: SyncJobCtx, pods: Sequence[Obj],
                                                uids_with_finalizer: set[str], old_counters: dict[str, Any],
                                                needs_flush: bool,
                                                failures_by_policy_action: Mapping[str, int] | None = None) -> bool:
    """Write the uncounted UIDs, then remove finalizers, then count what was removed. Returns whether a status
    change is still unwritten; raises the first finalizer-removal error after writing partial progress.
    ``old_counters`` (the status the metrics last saw) is brought up to date when the status is written."""
    if needs_flush:
        ctx.job = await jm.update_status_handler(ctx.job)
        # Only now is it safe to remember these failures for the recreation backoff.
        jm.pod_backoff_store.update(ctx.new_backoff_record)
        metrics.record_job_pod_finished(ctx.job, old_counters)
        old_counters.clear()
        old_counters.update(_counters_of(ctx.job))
        needs_flush = False
    metrics.record_pod_failure_policy_actions(failures_by_policy_action or {})
    rm_error: BaseException | None = None
    if pods:
        removed, rm_error = await remove_tracking_finalizer_from_pods(jm, ctx.job, pods)
        for pod, ok in zip(pods, removed, strict=True):
            if ok:
                uids_with_finalizer.discard(pod_uid(pod))
    if clean_uncounted_pods_without_finalizers(ctx.status, uids_with_finalizer):
        needs_flush = True
    if rm_error is not None:
        if needs_flush:
            await jm.update_status_handler(ctx.job)
        raise rm_error
    return needs_flush


async def remove_tracking_finalizer_from_pods(jm: JobController, job: Obj, pods: Sequence[Obj]
                                              ) -> tuple[list[bool], BaseException | None]:
    """Patch the finalizer off each pod (concurrently); which succeeded (gone counts as removed) and the
    first error."""
    job_key = key_of(job)
    jm.finalizer_expectations.expect_finalizers_removed(job_key, [pod_uid(p) for p in pods])

    async def remove(pod: Obj) -> bool:
        patch = remove_tracking_finalizer_patch(pod)
        if patch is None:
            return False
        try:
            await jm.patch_job_pod(job, pod, patch)
        except NotFound:
            jm.finalizer_expectations.finalizer_removal_observed(job_key, pod_uid(pod))
            return True
        except Exception:
            # No update will show this removal: stop waiting for it.
            jm.finalizer_expectations.finalizer_removal_observed(job_key, pod_uid(pod))
            raise
        return True

    results = await asyncio.gather(*(remove(p) for p in pods), return_exceptions=True)
    succeeded: list[bool] = []
    first_error: BaseException | None = None
    for result in results:
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):
                raise result  # cancellation is never swallowed
            jm.log.warning("removing tracking finalizer failed", key=job_key, error=str(result))
            first_error = first_error or result
            succeeded.append(False)
        else:
            succeeded.append(result)
    return succeeded, first_error


def enact_job_finished(jm: JobController, ctx: SyncJobCtx) -> bool:
    """Add Complete/Failed once nothing is left uncounted or terminating; True if the Job is now finished."""
    cond = ctx.finished_condition
    if cond is None:
        return False
    uncounted = ctx.status.get("uncountedTerminatedPods") or {}
    left = len(uncounted.get("succeeded") or ()) + len(uncounted.get("failed") or ())
    if left > 0:
        jm.log.debug("delaying marking the job as finished: uncounted pods", key=key_of(ctx.job),
                     condition=cond.get("type"), count=left)
        return False
    if ctx.terminating > 0:
        jm.log.debug("delaying marking the job as finished: terminating pods", key=key_of(ctx.job),
                     condition=cond.get("type"), count=ctx.terminating)
        return False
    now = jm.ctx.clock.now()
    conds = ctx.status.setdefault("conditions", [])
    ensure_condition_status(conds, str(cond["type"]), str(cond["status"]), str(cond.get("reason") or ""),
                            str(cond.get("message") or ""), now)
    if cond["type"] == JOB_COMPLETE:
        ctx.status["completionTime"] = cond.get("lastTransitionTime") or format_time(now)
    return True


def _counters_of(job: Obj) -> dict[str, Any]:
    status = job.get("status")
    return dict(status) if isinstance(status, Mapping) else {}


def record_job_finished(jm: JobController, job: Obj, cond: Obj) -> None:
    if cond.get("type") == JOB_COMPLETE:
        want = completions(job)
        if want is not None and int((job.get("status") or {}).get("succeeded") or 0) > want:
            jm.recorder_event(job, "Warning", "TooManySucceededPods",
                              "Too many succeeded pods running after completion count reached")
        jm.recorder_event(job, "Normal", "Completed", "Job completed")
    else:
        jm.recorder_event(job, "Warning", str(cond.get("reason") or ""), str(cond.get("message") or ""))
    metrics.record_job_finished(job, cond)
