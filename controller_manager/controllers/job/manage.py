"""Creating and deleting a Job's pods towards its desired parallelism (``manageJob`` and the delete helpers).

Guarantees:
- A suspended Job loses all its active pods; otherwise the wanted number of active pods is ``parallelism``
  capped by the remaining completions (work-queue Jobs: ``parallelism`` until the first success, then whatever
  runs). One sync either deletes (which wins) or creates, never both.
- Pods to delete are, for Indexed Jobs, first those with a missing/out-of-range/duplicated index, then the
  least advanced (``ActivePods`` order); at most :data:`MAX_POD_CREATE_DELETE_PER_SYNC` per sync. Deleting a
  pod outside a terminal path first removes its tracking finalizer (the pod is then no longer counted).
- Creations are recorded as expectations before the calls, batched 1, 2, 4, ... (slow start), stop after a
  failing batch, and never-attempted ones are taken off the expectations. With ``podReplacementPolicy: Failed``
  (or a podFailurePolicy) terminating pods still hold their place. While the pod-recreation backoff runs,
  nothing is created and the Job is re-synced when it ends.
- Indexed pods get the completion index annotation and label, ``JOB_COMPLETION_INDEX`` env var, hostname
  ``<job>-<index>``, generateName ``<job>-<index>-`` and (with backoffLimitPerIndex) the failure-count
  annotations inherited from the pod they replace. Every pod carries the tracking finalizer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from controller_manager.api.meta import deep_copy, key_of, meta
from controller_manager.api.pods import filter_terminating_pods, is_pod_ready
from controller_manager.api.resources import JOBS, PODS
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, ApiError, NotFound, has_status_cause
from controller_manager.controllerutil.controller_ref import new_controller_ref
from controller_manager.controllerutil.controller_utils import SLOW_START_INITIAL_BATCH_SIZE, sort_active_pods

from . import metrics
from .backoff import remaining_time_per_index
from .context import SyncJobCtx
from .indexed import (
    COMPLETION_INDEX_ENV_NAME,
    append_duplicated_index_pods_for_removal,
    first_pending_indexes,
    new_index_failure_counts,
    pod_generate_name_with_index,
)
from .util import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_INDEX_FAILURE_COUNT_ANNOTATION,
    JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION,
    JOB_TRACKING_FINALIZER,
    completions,
    completions_or_zero,
    has_backoff_limit_per_index,
    is_indexed_job,
    job_suspended,
    only_replace_failed_pods,
    parallelism,
    remove_tracking_finalizer_patch,
)

if TYPE_CHECKING:
    from .controller import JobController

Obj = Mapping[str, Any]

MAX_POD_CREATE_DELETE_PER_SYNC = 500


def active_pods_for_removal(job: Obj, pods: Sequence[Obj], rm_at_least: int) -> list[Obj]:
    rm: list[Obj] = []
    left: list[Obj] = list(pods)
    if is_indexed_job(job):
        rm, left = append_duplicated_index_pods_for_removal(pods, completions_or_zero(job))
    if len(rm) < rm_at_least:
        rm.extend(sort_active_pods(left)[:rm_at_least - len(rm)])
    return rm


async def delete_active_pods(jm: JobController, job: Obj, pods: Sequence[Obj]) -> tuple[int, int, Exception | None]:
    """Delete pods of a finishing Job, keeping finalizers (they are removed once counted).
    Returns ``(ready deleted, deleted, first error)``."""
    namespace = str(meta(job).get("namespace") or "")

    async def delete(pod: Obj) -> Exception | None:
        try:
            await jm.pod_control.delete_pod(namespace, str(meta(pod).get("name") or ""), job)
        except NotFound:
            return None
        except Exception as err:
            return err
        return None

    errors = await asyncio.gather(*(delete(p) for p in pods))
    failures = [e for e in errors if e is not None]
    ready = sum(1 for p in pods if is_pod_ready(p))
    return ready, len(pods) - len(failures), failures[0] if failures else None


async def delete_job_pods(jm: JobController, job: Obj, job_key: str, pods: Sequence[Obj]
                          ) -> tuple[int, int, Exception | None]:
    """Delete pods the Job no longer wants: finalizer first, so they are not counted as failures."""
    namespace = str(meta(job).get("namespace") or "")

    async def delete(pod: Obj) -> tuple[bool, Exception | None]:
        m = meta(pod)
        name = str(m.get("name") or "")
        step = "removing completion finalizer"
        try:
            patch = remove_tracking_finalizer_patch(pod)
            if patch is not None:
                await jm.patch_job_pod(job, pod, patch)
            step = "deleting pod"
            await jm.pod_control.delete_pod(namespace, name, job)
        except Exception as err:
            # The informer will not show this deletion: stop waiting for it.
            jm.expectations.deletion_observed(job_key)
            # As upstream: a pod whose finalizer could not be removed is not counted as a deleted ready pod.
            counted_ready = step == "deleting pod" and is_pod_ready(pod)
            if isinstance(err, NotFound):
                return counted_ready, None
            jm.log.info("failed to delete pod", key=job_key, pod=name, step=step, error=str(err))
            return counted_ready, err
        return is_pod_ready(pod), None

    results = await asyncio.gather(*(delete(p) for p in pods))
    failures = [err for _, err in results if err is not None]
    ready = sum(1 for was_ready, _ in results if was_ready)
    return ready, len(pods) - len(failures), failures[0] if failures else None


async def manage_job(jm: JobController, job: dict[str, Any], ctx: SyncJobCtx) -> tuple[int, str, Exception | None]:
    """Create or delete pods; returns the new active count, what was done (the sync metrics' ``action``) and the
    first error."""
    active = len(ctx.active_pods)
    key = key_of(job)
    if job_suspended(job):
        jm.log.debug("deleting all active pods in suspended job", key=key, active=active)
        to_delete = active_pods_for_removal(job, ctx.active_pods, active)
        jm.expectations.expect_deletions(key, len(to_delete))
        ready, removed, err = await delete_job_pods(jm, job, key, to_delete)
        ctx.terminating += removed
        ctx.ready -= ready
        return active - removed, metrics.ACTION_PODS_DELETED, err

    want = completions(job)
    if want is None:
        want_active = active if ctx.succeeded > 0 else parallelism(job)
    else:
        want_active = max(0, min(want - ctx.succeeded, parallelism(job)))

    to_delete = active_pods_for_removal(job, ctx.active_pods, max(0, active - want_active))
    to_delete = to_delete[:MAX_POD_CREATE_DELETE_PER_SYNC]
    if to_delete:
        jm.expectations.expect_deletions(key, len(to_delete))
        jm.log.debug("too many pods running for job", key=key, deleting=len(to_delete), target=want_active)
        ready, removed, err = await delete_job_pods(jm, job, key, to_delete)
        ctx.terminating += removed
        ctx.ready -= ready
        return active - removed, metrics.ACTION_PODS_DELETED, err

    terminating = ctx.terminating if only_replace_failed_pods(job) else 0
    diff = want_active - terminating - active
    if diff <= 0:
        return active, metrics.ACTION_TRACKING, None
    now = jm.ctx.clock.now()
    remaining = 0.0
    if not has_backoff_limit_per_index(job):
        remaining = ctx.new_backoff_record.remaining_time(now, jm.pod_backoff_base, jm.pod_backoff_max)
    if remaining > 0:
        jm.enqueue_with_delay(key, remaining)
        return 0, metrics.ACTION_PODS_CREATED, None
    diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)

    indexes: list[int] = []
    if is_indexed_job(job):
        terminating_pods = filter_terminating_pods(ctx.pods) if only_replace_failed_pods(job) else None
        indexes = first_pending_indexes(ctx.active_pods, ctx.succeeded_indexes, ctx.failed_indexes,
                                        terminating_pods, diff, completions_or_zero(job))
        if has_backoff_limit_per_index(job):
            indexes, remaining = _indexes_ready_to_create(jm, indexes, ctx.pods_with_delayed_deletion_per_index)
            if remaining > 0:
                jm.enqueue_with_delay(key, remaining)
                return 0, metrics.ACTION_PODS_CREATED, None
        diff = len(indexes)
    if diff <= 0:
        # Upstream goes on to create nothing here and still reports pods_created.
        return active, metrics.ACTION_PODS_CREATED, None
    active, err = await _create_pods(jm, job, ctx, key, active, diff, indexes)
    return active, metrics.ACTION_PODS_CREATED, err


def _indexes_ready_to_create(jm: JobController, indexes: Sequence[int], delayed: Mapping[int, Obj]
                             ) -> tuple[list[int], float]:
    """The indexes whose per-index backoff is over; else none and the shortest wait."""
    now = jm.ctx.clock.now()
    ready: list[int] = []
    shortest: float | None = None
    for ix in indexes:
        wait = remaining_time_per_index(now, jm.pod_backoff_base, jm.pod_backoff_max, delayed.get(ix))
        if wait == 0:
            ready.append(ix)
        elif shortest is None or wait < shortest:
            shortest = wait
    if ready:
        return ready, 0.0
    return [], shortest or 0.0


def _base_template(job: Obj) -> dict[str, Any]:
    template = deep_copy(dict((job.get("spec") or {}).get("template") or {}))
    tmeta = template.setdefault("metadata", {})
    finalizers = list(tmeta.get("finalizers") or [])
    if JOB_TRACKING_FINALIZER not in finalizers:
        finalizers.append(JOB_TRACKING_FINALIZER)
    tmeta["finalizers"] = finalizers
    if is_indexed_job(job):
        spec = template.setdefault("spec", {})
        field_path = f"metadata.labels['{JOB_COMPLETION_INDEX_ANNOTATION}']"
        for key in ("initContainers", "containers"):
            for container in spec.get(key) or ():
                env = container.setdefault("env", [])
                if not any(isinstance(v, Mapping) and v.get("name") == COMPLETION_INDEX_ENV_NAME for v in env):
                    env.append({"name": COMPLETION_INDEX_ENV_NAME,
                                "valueFrom": {"fieldRef": {"fieldPath": field_path}}})
    return template


def _indexed_template(jm: JobController, job: Obj, base: Obj, index: int, ctx: SyncJobCtx) -> dict[str, Any]:
    template = deep_copy(dict(base))
    tmeta = template.setdefault("metadata", {})
    annotations = dict(tmeta.get("annotations") or {})
    annotations[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
    labels = dict(tmeta.get("labels") or {})
    labels[JOB_COMPLETION_INDEX_ANNOTATION] = str(index)
    template.setdefault("spec", {})["hostname"] = f"{meta(job).get('name', '')}-{index}"
    if has_backoff_limit_per_index(job):
        failures, ignored = new_index_failure_counts(job, ctx.pods_with_delayed_deletion_per_index.get(index))
        annotations[JOB_INDEX_FAILURE_COUNT_ANNOTATION] = str(failures)
        if ignored > 0:
            annotations[JOB_INDEX_IGNORED_FAILURE_COUNT_ANNOTATION] = str(ignored)
    tmeta["annotations"] = annotations
    tmeta["labels"] = labels
    return template


async def _create_pods(jm: JobController, job: dict[str, Any], ctx: SyncJobCtx, key: str, active: int, diff: int,
                       indexes: list[int]) -> tuple[int, Exception | None]:
    jm.expectations.expect_creations(key, diff)
    jm.log.debug("too few pods running", key=key, creating=diff)
    base = _base_template(job)
    ref = new_controller_ref(job, JOBS)
    namespace = str(meta(job).get("namespace") or "")
    job_name = str(meta(job).get("name") or "")
    pending = list(indexes)
    errors: list[Exception] = []
    created = 0
    attempted = 0  # calls that reached the API (a terminating namespace's refusals are not creations)

    async def create(index: int | None) -> None:
        template: Obj = base
        generate_name: str | None = None
        if index is not None:
            template = _indexed_template(jm, job, base, index, ctx)
            generate_name = pod_generate_name_with_index(job_name, index)
        nonlocal attempted
        try:
            pod = await jm.pod_control.create_pods(namespace, template, job, ref, generate_name=generate_name)
            jm.consistency.record(job, PODS.plural, pod)
        except ApiError as err:
            if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                return  # every create fails until the namespace is gone: nothing to retry
            jm.expectations.creation_observed(key)
            errors.append(err)
        except Exception as err:
            jm.expectations.creation_observed(key)
            errors.append(err)
        attempted += 1

    remaining = diff
    batch = min(remaining, SLOW_START_INITIAL_BATCH_SIZE)
    while remaining > 0:
        before = len(errors)
        batch_indexes: list[int | None] = []
        for _ in range(batch):
            batch_indexes.append(pending.pop(0) if pending else None)
        await asyncio.gather(*(create(ix) for ix in batch_indexes))
        created += batch - (len(errors) - before)
        remaining -= batch
        if len(errors) > before and remaining > 0:
            jm.log.info("slow-start failure, skipping creation of pods", key=key, skipped=remaining)
            for _ in range(remaining):
                jm.expectations.creation_observed(key)
            remaining = 0
            break
        batch = min(2 * batch, remaining)
    # Upstream also adds the failed attempts to "succeeded" (an unconditional increment after its error
    # branch); here each attempt counts once, as the metric's help describes.
    metrics.record_pods_creation(metrics.pod_creation_reason(job, ctx.failed, ctx.terminating),
                                 attempted - len(errors), len(errors))
    return active + created, errors[0] if errors else None
