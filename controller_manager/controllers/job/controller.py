"""The Job controller: runs pods until enough succeed (kube-controller-manager's ``job-controller``,
``pkg/controller/job/job_controller.go``).

Guarantees:
- Pods are created with the ``batch.kubernetes.io/job-tracking`` finalizer and counted in two phases through
  ``status.uncountedTerminatedPods`` (see :mod:`.status`), so a finished pod is counted exactly once across
  pod deletions, stale caches and controller restarts. Finalizer removals are tracked by pod UID until the
  informer shows them; creations and deletions through :class:`ControllerExpectations`.
- Status, conditions, events and their timing are upstream's with today's default feature gates: the interim
  ``FailureTarget``/``SuccessCriteriaMet`` condition first, ``Failed``/``Complete`` once every pod is counted
  and none is terminating; ``Suspended`` True/False with ``Suspended``/``Resumed`` events (resuming resets
  ``startTime``); ``active``, ``ready`` and ``terminating`` always written.
- Time-based work is re-queued, never slept on: ``activeDeadlineSeconds`` (requeue at the deadline) and the
  pod-recreation backoff (``pod_backoff_base`` doubling up to ``pod_backoff_max``, upstream 10 s / 10 min).
  Pod events are batched per Job (``sync_batch_period``, upstream 1 s); Job spec changes sync at once.
- Orphaned pods that still carry the tracking finalizer (their Job is gone, finished, or released them) have
  it removed through a queue of their own, upstream's ``job_orphan_pod`` with one worker beside the
  ``--concurrent-job-syncs`` Job workers: a deleted Job's pods fanning out into hundreds of finalizer patches
  neither wait in nor hold the workers of the ``job`` queue, whose metrics count Job keys only. Its keys are
  ``pod:<namespace>/<name>`` (the prefix tells a shard member's admission their kind).
- Job events are enqueued as upstream's ``enqueueSyncJobImmediately``/``Batched`` do, through ``AddAfter``
  (with no delay for additions, spec changes and deletions), so ``workqueue_retries_total{name="job"}`` counts
  them as upstream's does.
- Prometheus metrics under upstream's names (:mod:`.metrics`): syncs, finished Jobs, pods and indexes, pod
  failure policy actions, pod creations, terminated pods holding the tracking finalizer, external Jobs.
- Read-your-own-writes, as upstream's StaleControllerConsistencyJob (beta, on by default since 1.36): the
  resourceVersions of the Job's status writes and of the pods created or patched (tracking finalizer removed) for
  it are recorded; its next sync is skipped and requeued through the Job queue's rate limiter until the Job and
  pod informers have applied events at least that new (:mod:`controllerutil.consistency`). The record goes with
  the Job (deleted, or found gone by a sync).
- A Job managed by another controller (``spec.managedBy``) is left alone; an unknown ``completionMode`` gets a
  ``Warning UnknownCompletionMode`` event and is skipped; an invalid selector is logged and skipped. Nothing a
  single Job holds can stop the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from controller_manager.api.meta import controller_ref, key_of, meta, parse_time, split_key
from controller_manager.api.resources import JOBS, PODS
from controller_manager.api.selectors import Selector
from controller_manager.client.errors import NotFound
from controller_manager.controllerutil.consistency import ConsistencyStore
from controller_manager.controllerutil.controller_ref import (
    ControllerRefManager,
    live_owner_check,
)
from controller_manager.controllerutil.expectations import ControllerExpectations
from controller_manager.controllerutil.owned import ORPHANS_BY_NAMESPACE, orphans_by_namespace, owned_or_orphaned
from controller_manager.controllerutil.owner_handler import OwnerHandler
from controller_manager.controllerutil.pod_control import PodControl
from controller_manager.controllerutil.selector_cache import SelectorCache
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import CONTROLLER_UID_INDEX, Added, Deleted, Event, Updated
from controller_manager.runtime.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue

from . import metrics
from .backoff import DEFAULT_POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF, BackoffStore
from .sync import sync_job
from .tracking import UIDTrackingExpectations
from .util import (
    JOB_TRACKING_FINALIZER,
    has_job_tracking_finalizer,
    is_job_finished,
    managed_by_external_controller,
    pod_uid,
    remove_tracking_finalizer_patch,
)

__all__ = ["ORPHAN_POD_PREFIX", "SYNC_JOB_BATCH_PERIOD", "JobController"]

Obj = Mapping[str, Any]

SYNC_JOB_BATCH_PERIOD = 1.0  # pod events for one Job are folded into one sync per second
DEFAULT_JOB_API_BACKOFF = 1.0
MAX_JOB_API_BACKOFF = 60.0
ORPHAN_POD_PREFIX = "pod:"


def _nothing_for_jobs(old: Obj, new: Obj) -> bool:
    """An update updatePod would do nothing with (and no metric counts): neither version carries a finalizer or is
    being deleted, the owner references and labels did not change, and the controller (if any) is not a Job.
    Most pod updates in a cluster are other controllers' pods changing status; this decides them in a few
    lookups."""
    om, nm = meta(old), meta(new)
    if om.get("finalizers") or nm.get("finalizers") or nm.get("deletionTimestamp") is not None:
        return False
    if om.get("ownerReferences") != nm.get("ownerReferences") or om.get("labels") != nm.get("labels"):
        return False
    ref = controller_ref(new)
    return ref is None or ref.get("kind") != "Job"


class JobController(Controller):
    """Jobs -> pods. Its queue holds Job keys; ``orphan_queue`` the ``pod:<ns>/<name>`` keys of orphans to clean up."""

    name: ClassVar[str] = "job-controller"
    alias: ClassVar[str] = "job"
    workers_option: ClassVar[str | None] = "concurrent-job-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext, *, pod_backoff_base: float = DEFAULT_POD_FAILURE_BACKOFF,
                 pod_backoff_max: float = MAX_POD_FAILURE_BACKOFF,
                 sync_batch_period: float = SYNC_JOB_BATCH_PERIOD) -> None:
        super().__init__(ctx)
        # Upstream's Job queue backs off from 1 s to 1 min on sync errors (not the generic 5 ms..1000 s).
        self.queue = RateLimitingQueue(
            "job", rate_limiter=ItemExponentialFailureRateLimiter(DEFAULT_JOB_API_BACKOFF, MAX_JOB_API_BACKOFF),
            clock=ctx.clock)
        # Upstream's orphanQueue: its own name, limiter and single worker (run_background).
        self.orphan_queue: RateLimitingQueue[str] = RateLimitingQueue(
            "job_orphan_pod",
            rate_limiter=ItemExponentialFailureRateLimiter(DEFAULT_JOB_API_BACKOFF, MAX_JOB_API_BACKOFF),
            clock=ctx.clock)
        self.pod_backoff_base = pod_backoff_base
        self.pod_backoff_max = pod_backoff_max
        self.sync_batch_period = sync_batch_period
        self.expectations = ControllerExpectations(ctx.clock)
        self.finalizer_expectations = UIDTrackingExpectations()
        self.pod_backoff_store = BackoffStore()
        self.recorder = ctx.events.recorder(self.name)
        self.pod_control = PodControl(ctx.client, self.recorder, JOBS)
        self.job_informer = ctx.informers.informer(JOBS)
        # A Job's sync looks at its own pods and its namespace's orphans only (upstream's FilterPodsByOwner).
        self.pod_informer = ctx.informers.informer(PODS, indexers={ORPHANS_BY_NAMESPACE: orphans_by_namespace})
        # Read-your-own-writes (upstream's StaleControllerConsistencyJob, on by default): a sync waits until the
        # informers show this controller's last status write and pod writes for that Job.
        job_informer, pod_informer = self.job_informer, self.pod_informer
        self.consistency = ConsistencyStore({JOBS.plural: lambda: job_informer.last_sync_resource_version,
                                             PODS.plural: lambda: pod_informer.last_sync_resource_version})
        self._selectors = SelectorCache()
        # Pods wake their Job (batched), count off its expectations, and hand orphans still carrying our
        # tracking finalizer to the orphan cleanup: upstream's addPod/updatePod/deletePod.
        self.pods = OwnerHandler(self.job_informer.store, JOBS, self.queue, log=self.log, enqueue=self.enqueue_batched,
                                 selectors=self._selectors,
                                 created=lambda job, pod: self.expectations.creation_observed(key_of(job)),
                                 updated=self._pod_updated, deleted=self._pod_deleted, orphan=self._orphan_seen)
        self.job_informer.add_handler(self._on_job)
        self.pod_informer.add_handler(self._on_pod)

    # --- small services the sync modules use ----------------------------------------------------------

    def recorder_event(self, job: Obj, event_type: str, reason: str, message: str) -> None:
        self.recorder.event(job, event_type, reason, message, resource=JOBS)

    async def update_status_handler(self, job: dict[str, Any]) -> dict[str, Any]:
        """Write the Job's status through ``/status``; returns the Job the API server stored (its version
        recorded: the next sync waits until the cache shows it)."""
        written = await self.ctx.client.update_status(JOBS, {**job, "status": wire_status(job.get("status") or {})})
        self.consistency.record(job, JOBS.plural, written)
        return written

    async def patch_job_pod(self, job: Obj, pod: Obj, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Patch one of the Job's pods; its version is recorded under the Job, as a status write's is."""
        m = meta(pod)
        patched = await self.pod_control.patch_pod(str(m.get("namespace") or meta(job).get("namespace") or ""),
                                                   str(m.get("name") or ""), patch)
        self.consistency.record(job, PODS.plural, patched)
        return patched

    def enqueue_immediately(self, key: str) -> None:
        # AddAfter with no delay, as upstream: an add that counts in workqueue_retries_total.
        self.queue.add_after(key, 0.0)

    def enqueue_batched(self, key: str) -> None:
        self.queue.add_after(key, self.sync_batch_period)

    def enqueue_with_delay(self, key: str, delay: float) -> None:
        self.queue.add_after(key, max(delay, self.sync_batch_period))

    def selector(self, job: Obj) -> Selector | None:
        """The Job's selector, parsed once per resourceVersion; None if invalid."""
        return self._selectors.get(job)

    # --- event handlers (synchronous: enqueue keys, count expectations) -------------------------------

    def _on_job(self, event: Event) -> None:
        if isinstance(event, Added):
            self.enqueue_immediately(key_of(event.obj))
            controller_name = managed_by_external_controller(event.obj)
            if controller_name is not None:
                metrics.record_job_by_external_controller(controller_name)
        elif isinstance(event, Updated):
            self._update_job(event.old, event.new)
        else:
            self.consistency.clear(key_of(event.obj), str(meta(event.obj).get("uid") or ""))
            self.enqueue_immediately(key_of(event.obj))
            self._cleanup_pod_finalizers(event.obj)

    def _update_job(self, old: Obj, cur: Obj) -> None:
        key = key_of(cur)
        if meta(cur).get("generation") == meta(old).get("generation"):
            self.enqueue_batched(key)  # status updates, typically caused by pod events
        else:
            self.enqueue_immediately(key)  # spec changed: act at once
        if is_job_finished(cur):
            self._cleanup_pod_finalizers(cur)  # a backup: finished Jobs should have no finalizers left
        start = parse_time((cur.get("status") or {}).get("startTime"))
        cur_ads = (cur.get("spec") or {}).get("activeDeadlineSeconds")
        if start is not None and isinstance(cur_ads, int):
            old_ads = (old.get("spec") or {}).get("activeDeadlineSeconds")
            if old_ads != cur_ads:
                self.queue.add_after(key, max(0.0, cur_ads - (self.ctx.clock.now() - start)))

    def _cleanup_pod_finalizers(self, job: Obj) -> None:
        uid = meta(job).get("uid")
        for pod in self.pod_informer.store.by_index(CONTROLLER_UID_INDEX, str(uid)):
            if has_job_tracking_finalizer(pod) and meta(pod).get("namespace") == meta(job).get("namespace"):
                self._enqueue_orphan(pod)

    def _enqueue_orphan(self, pod: Obj) -> None:
        self.orphan_queue.add(ORPHAN_POD_PREFIX + key_of(pod))

    def _on_pod(self, event: Event) -> None:
        if isinstance(event, Updated) and _nothing_for_jobs(event.old, event.new):
            return
        if isinstance(event, Added):
            metrics.record_finished_pod_with_tracking_finalizer(None, event.obj)
            self.pods.added(event.obj)
        elif isinstance(event, Updated):
            metrics.record_finished_pod_with_tracking_finalizer(event.old, event.new)
            self.pods.updated(event.old, event.new)
        elif isinstance(event, Deleted):
            if not event.final_state_unknown:  # upstream reads no pod out of a tombstone here
                metrics.record_finished_pod_with_tracking_finalizer(event.obj, None)
            self.pods.deleted(event.obj, final=True)

    def _orphan_seen(self, pod: Obj) -> None:
        if has_job_tracking_finalizer(pod):
            self._enqueue_orphan(pod)

    def _pod_updated(self, job: Obj, old: Obj, cur: Obj) -> None:
        # The old and the new controlling Job alike: a removed finalizer is one they may be waiting for.
        if not has_job_tracking_finalizer(cur):
            self.finalizer_expectations.finalizer_removal_observed(key_of(job), pod_uid(cur))

    def _pod_deleted(self, job: Obj | None, pod: Obj, final: bool) -> bool:
        has_finalizer = has_job_tracking_finalizer(pod)
        if job is None or is_job_finished(job):
            if has_finalizer:
                # No reference (the GC may have removed it), or no sync will remove this finalizer.
                self._enqueue_orphan(pod)
            return False
        key = key_of(job)
        self.expectations.deletion_observed(key)
        if final or not has_finalizer:
            self.finalizer_expectations.finalizer_removal_observed(key, pod_uid(pod))
        return True

    # --- sync ---------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        return await sync_job(self, key)

    async def run_background(self) -> None:
        # Upstream's single orphanWorker; its keys pass the shard admission as the Job keys do.
        await self.run_queue(self.orphan_queue, self._sync_orphan_key, admitted=True)

    async def _sync_orphan_key(self, key: str) -> Result | None:
        await self.sync_orphan_pod(key.removeprefix(ORPHAN_POD_PREFIX))
        return None

    async def sync_orphan_pod(self, pod_key: str) -> None:
        """Remove the tracking finalizer from a pod no unfinished Job of ours controls."""
        pod = self.pod_informer.store.get(pod_key)
        if pod is None:
            return
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("kind") != JOBS.kind or ref.get("apiVersion") != JOBS.api_version:
                return  # someone else's pod: not our finalizer to touch
            job = self.pods.resolve(pod, ref)
            if job is not None and managed_by_external_controller(job) is not None:
                return
            if job is not None and not is_job_finished(job):
                return  # adopted meanwhile
        patch = remove_tracking_finalizer_patch(pod)
        if patch is None:
            return
        namespace, name = split_key(pod_key)
        try:
            await self.pod_control.patch_pod(namespace, name, patch)
        except NotFound:
            pass

    async def pods_for_job(self, job: Obj, selector: Selector) -> list[Obj]:
        """The Job's pods, adopting matching orphans (adding the tracking finalizer) and releasing strays."""
        m = meta(job)
        pods = owned_or_orphaned(self.pod_informer.store, job)
        manager = ControllerRefManager(self.ctx.client, job, JOBS, selector, PODS,
                                       live_owner_check(self.ctx.client, JOBS, job),
                                       finalizers=(JOB_TRACKING_FINALIZER,))
        claimed = await manager.claim(pods)
        uid = m.get("uid")
        result: list[Obj] = []
        for pod in claimed:
            adopted = not any(isinstance(r, Mapping) and r.get("uid") == uid
                              for r in meta(pod).get("ownerReferences") or ())
            if adopted and not has_job_tracking_finalizer(pod):
                finalizers = [*(meta(pod).get("finalizers") or ()), JOB_TRACKING_FINALIZER]
                pod = {**pod, "metadata": {**meta(pod), "finalizers": finalizers}}
            result.append(pod)
        return result

    def forget(self, key: str) -> None:
        """Drop what is remembered about a deleted Job."""
        self.expectations.delete_expectations(key)
        self.finalizer_expectations.delete_expectations(key)
        self.pod_backoff_store.remove(key)
        self._selectors.forget(key)
        self.consistency.clear(key)


def wire_status(status: Mapping[str, Any]) -> dict[str, Any]:
    """The status as the API serialises it: zero counters, empty strings and empty lists omitted."""
    out = dict(status)
    for key in ("active", "succeeded", "failed"):
        if not out.get(key):
            out.pop(key, None)
    if not out.get("completedIndexes"):
        out.pop("completedIndexes", None)
    if not out.get("conditions"):
        out.pop("conditions", None)
    uncounted = out.get("uncountedTerminatedPods")
    if isinstance(uncounted, Mapping):
        out["uncountedTerminatedPods"] = {k: list(v) for k, v in uncounted.items() if v}
    return out

