"""The CronJob controller: creates a Job for each activation of a CronJob's schedule
(kube-controller-manager's ``cronjob-controller``, ``pkg/controller/cronjob/cronjob_controllerv2.go``).

Guarantees:
- Time is the context's clock: every "now" is ``ctx.clock.now()`` and every wait is a queue ``add_after`` on
  that clock, so a FakeClock drives the schedule in tests. A synced CronJob always comes back at its next
  activation (plus 100 ms), unless it is suspended, being deleted, or its schedule or time zone is bad.
- At most one Job per activation: its name is ``<cronjob>-<scheduled minute>``, so a create repeated after
  a crash or a lost status write meets AlreadyExists; an existing Job we control that is missing from
  ``status.active`` is put back there, one controlled by someone else is left alone.
- Only the most recent missed activation runs; one older than ``startingDeadlineSeconds`` is skipped with a
  MissSchedule warning; more than 100 missed ones warn TooManyMissedTimes (and the latest still runs).
- ``concurrencyPolicy``: Allow starts regardless; Forbid skips (JobAlreadyActive) while a Job is active;
  Replace deletes the active Jobs (background propagation) before creating the new one.
- ``status.active`` tracks our unfinished Jobs (finished ones leave with SawCompletedJob, vanished ones with
  MissingJob after a live GET confirms it), ``lastScheduleTime`` the activation last started and
  ``lastSuccessfulTime`` the latest completion. Status is written once per sync through ``/status``, only
  when something changed; a failed write is retried with backoff.
- Finished Jobs beyond ``successfulJobsHistoryLimit``/``failedJobsHistoryLimit`` are deleted oldest first
  (by start time), even when new Jobs cannot be created.
- Bad input never crashes a worker: an unparsable schedule (UnparseableSchedule), a schedule that never
  fires (InvalidSchedule), an unknown time zone (UnknownTimeZone) are Warning events and the CronJob waits
  for its next update.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from prometheus_client import Histogram

from controller_manager.api.cron import Schedule, ScheduleError, UnknownTimeZone, load_location, parse_standard
from controller_manager.api.meta import (
    controller_ref,
    deep_copy,
    format_time,
    is_being_deleted,
    key_of,
    meta,
    split_key,
)
from controller_manager.api.resources import CRONJOBS, JOBS
from controller_manager.client.errors import NAMESPACE_TERMINATING_CAUSE, AlreadyExists, NotFound, has_status_cause
from controller_manager.controllerutil.controller_ref import resolve_controller_ref
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.events import object_reference
from controller_manager.runtime.informers import NAMESPACE_INDEX, Added, Deleted, Event, Updated

from .control import ApiCronJobControl, ApiJobControl, CronJobControl, JobControl
from .util import (
    InvalidSchedule,
    delete_from_active_list,
    finished_condition,
    in_active_list,
    in_active_list_by_name,
    is_controlled_by,
    is_job_finished,
    is_job_succeeded,
    job_from_template,
    job_name,
    job_start_sort_key,
    next_schedule_time,
    next_schedule_time_duration,
    to_datetime,
)

__all__ = ["CronJobController", "SyncOutcome", "format_schedule"]

Obj = Mapping[str, Any]
Work = dict[str, Any]  # the controller's own mutable copy of a CronJob

CREATION_SKEW = Histogram(
    "cronjob_controller_job_creation_skew_duration_seconds",
    "Time between when a cronjob is scheduled to be run, and when the corresponding job is created",
    buckets=tuple(float(2**i) for i in range(10)),
)

WARNING, NORMAL = "Warning", "Normal"


@dataclass(slots=True)
class SyncOutcome:
    """What ``sync_cron_job`` decided: when to look again, whether status changed, what went wrong."""

    requeue_after: timedelta | None
    update_status: bool
    error: Exception | None = None


def format_schedule(cj: Obj, recorder: Any | None) -> str:
    """The schedule to parse: ``spec.timeZone`` becomes a ``TZ=`` prefix; a ``TZ`` already in the schedule wins
    (with an UnsupportedSchedule warning when a recorder is given)."""
    spec = cj.get("spec") or {}
    schedule = str(spec.get("schedule") or "")
    if "TZ" in schedule:
        if recorder is not None:
            recorder.event(cj, WARNING, "UnsupportedSchedule",
                           f"CRON_TZ or TZ used in schedule {_quote(schedule)} is not officially supported, see "
                           "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
                           resource=CRONJOBS)
        return schedule
    zone = spec.get("timeZone")
    if zone is not None:
        try:
            load_location(str(zone))
        except UnknownTimeZone:
            return schedule
        return f"TZ={zone} {schedule}"
    return schedule


def _quote(text: str) -> str:
    """Go's ``%q`` for the strings we quote (JSON escaping agrees with it on printable text)."""
    return json.dumps(text, ensure_ascii=False)


class CronJobController(Controller):
    """CronJobs -> Jobs. Its queue holds CronJob keys; Job events wake the owning CronJob."""

    name: ClassVar[str] = "cronjob-controller"
    alias: ClassVar[str] = "cronjob"
    queue_name: ClassVar[str | None] = "cronjob"
    workers_option: ClassVar[str | None] = "concurrent-cron-job-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.recorder = ctx.events.recorder(self.name)
        self.job_control: JobControl = ApiJobControl(ctx.client)
        self.cron_job_control: CronJobControl = ApiCronJobControl(ctx.client)
        self.job_informer = ctx.informers.informer(JOBS)
        self.cron_job_informer = ctx.informers.informer(CRONJOBS)
        self.job_informer.add_handler(self._on_job)
        self.cron_job_informer.add_handler(self._on_cron_job)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.ctx.clock.now(), UTC)

    # --- event handlers ---------------------------------------------------------------------------

    def _on_cron_job(self, event: Event) -> None:
        if isinstance(event, Updated):
            self._update_cron_job(event.old, event.new)
        else:
            self.queue.add(key_of(event.obj))

    def _update_cron_job(self, old: Obj, cur: Obj) -> None:
        old_spec, cur_spec = old.get("spec") or {}, cur.get("spec") or {}
        same_zone = old_spec.get("timeZone") == cur_spec.get("timeZone")
        if old_spec.get("schedule") == cur_spec.get("schedule") and same_zone:
            # Anything else changed: look now; within the deadline the sync acts, otherwise at the next slot.
            self.queue.add(key_of(cur))
            return
        # A new schedule moves the next wake-up; an earlier one wins over the one already waiting.
        try:
            schedule = parse_standard(format_schedule(cur, None))
        except ScheduleError as err:
            self.log.info("unparseable schedule", key=key_of(cur), schedule=cur_spec.get("schedule"), error=str(err))
            self.recorder.event(cur, WARNING, "UnParseableCronJobSchedule",
                                f"unparseable schedule for cronjob: {cur_spec.get('schedule') or ''}",
                                resource=CRONJOBS)
            return
        delay = next_schedule_time_duration(cur, self.now(), schedule)
        self.queue.add_after(key_of(cur), delay.total_seconds())

    def _on_job(self, event: Event) -> None:
        if isinstance(event, Added):
            # Also when it is seen first already being deleted (after a restart): the owner looks either way.
            self._wake_owner(event.obj)
        elif isinstance(event, Updated):
            if meta(event.new).get("resourceVersion") == meta(event.old).get("resourceVersion"):
                return  # a resync, not a change
            old_ref, cur_ref = controller_ref(event.old), controller_ref(event.new)
            if old_ref != cur_ref and old_ref is not None:
                self._wake(meta(event.old).get("namespace"), old_ref)
            self._wake_owner(event.new)
        elif isinstance(event, Deleted):
            self._wake_owner(event.obj)

    def _wake_owner(self, job: Obj) -> None:
        ref = controller_ref(job)
        if ref is not None:
            self._wake(meta(job).get("namespace"), ref)

    def _wake(self, namespace: str | None, ref: Mapping[str, Any]) -> None:
        cj = self._resolve_controller_ref(namespace, ref)
        if cj is not None:
            self.queue.add(key_of(cj))

    def _resolve_controller_ref(self, namespace: str | None, ref: Mapping[str, Any]) -> Obj | None:
        return resolve_controller_ref(self.cron_job_informer.store.get, CRONJOBS, namespace, ref)

    # --- sync -------------------------------------------------------------------------------------

    async def sync(self, key: str) -> Result | None:
        cached = self.cron_job_informer.store.get(key)
        if cached is None:
            self.log.debug("cronjob not found, may be deleted", key=key)
            return None
        jobs = self.jobs_to_be_reconciled(cached)
        # One working copy collects every status change, so status is written at most once.
        work: Work = deep_copy(dict(cached))
        update_after_cleanup = await self.cleanup_finished_jobs(work, jobs)
        outcome = await self.sync_cron_job(work, jobs)
        if outcome.error is not None:
            self.log.info("error reconciling cronjob", key=key, error=str(outcome.error))
        if update_after_cleanup or outcome.update_status:
            try:
                await self.cron_job_control.update_status(work)
            except Exception as err:
                self.log.info("unable to update status for cronjob", key=key,
                              resource_version=meta(cached).get("resourceVersion"), error=str(err))
                raise
        if outcome.requeue_after is not None:
            self.log.debug("re-queuing cronjob", key=key, requeue_after=outcome.requeue_after.total_seconds())
            return Result(requeue_after=max(0.0, outcome.requeue_after.total_seconds()))
        if outcome.error is not None:
            raise outcome.error
        return None

    def jobs_to_be_reconciled(self, cj: Obj) -> list[Obj]:
        """Jobs in the CronJob's namespace whose controller reference names it (labels may have drifted)."""
        name = meta(cj).get("name")
        namespace = str(meta(cj).get("namespace") or "")
        jobs = self.job_informer.store.by_index(NAMESPACE_INDEX, namespace)
        return [j for j in jobs if (ref := controller_ref(j)) is not None and ref.get("name") == name]

    async def sync_cron_job(self, cj: Work, jobs: Sequence[Obj]) -> SyncOutcome:
        """Reconcile ``cj`` (a working copy, edited in place) with its Jobs; see the module's guarantees."""
        now = self.now()
        update = False
        namespace, name = str(meta(cj).get("namespace") or ""), str(meta(cj).get("name") or "")
        log = self.log.bind(key=f"{namespace}/{name}")

        children: set[Any] = set()
        for job in jobs:
            uid = meta(job).get("uid")
            children.add(uid)
            found = in_active_list(cj, uid)
            if not found and not is_job_finished(job):
                # Our cached status may lag our own last write: ask the API server before complaining.
                try:
                    fresh = await self.cron_job_control.get_cron_job(namespace, name)
                except Exception as err:
                    return SyncOutcome(None, update, err)
                if in_active_list(fresh, uid):
                    # Our copy lags our own last status write: carry on with (and later write) the live one.
                    # Upstream carries on with it too but writes its stale copy; that only costs a Conflict.
                    cj.clear()
                    cj.update(deep_copy(fresh))
                    continue
                self.recorder.event(cj, WARNING, "UnexpectedJob",
                                    f"Saw a job that the controller did not create or forgot: {meta(job).get('name')}",
                                    resource=CRONJOBS)
            elif is_job_finished(job):
                if found:
                    delete_from_active_list(cj, uid)
                    self.recorder.event(cj, NORMAL, "SawCompletedJob",
                                        f"Saw completed job: {meta(job).get('name')}, "
                                        f"condition: {finished_condition(job)}", resource=CRONJOBS)
                    update = True
                if is_job_succeeded(job):
                    update = _record_success(cj, job) or update

        # An active Job gone from the cache may only be late in the cache: drop it only if the API agrees.
        for ref in list((cj.get("status") or {}).get("active") or []):
            if ref.get("uid") in children:
                continue
            try:
                await self.job_control.get_job(str(ref.get("namespace") or ""), str(ref.get("name") or ""))
            except NotFound:
                self.recorder.event(cj, NORMAL, "MissingJob", f"Active job went missing: {ref.get('name')}",
                                    resource=CRONJOBS)
                delete_from_active_list(cj, ref.get("uid"))
                update = True
            except Exception as err:
                return SyncOutcome(None, update, err)

        if is_being_deleted(cj):
            return SyncOutcome(None, update)

        spec = cj.get("spec") or {}
        zone = spec.get("timeZone")
        if zone is not None:
            try:
                load_location(str(zone))
            except UnknownTimeZone as err:
                log.info("not starting job because timeZone is invalid", time_zone=zone, error=str(err))
                self.recorder.event(cj, WARNING, "UnknownTimeZone", f"invalid timeZone: {_quote(str(zone))}: {err}",
                                    resource=CRONJOBS)
                return SyncOutcome(None, update)

        if spec.get("suspend") is True:
            log.debug("not starting job because the cron is suspended")
            return SyncOutcome(None, update)

        try:
            schedule = parse_standard(format_schedule(cj, self.recorder))
        except ScheduleError as err:
            log.info("unparseable schedule", schedule=spec.get("schedule"), error=str(err))
            self.recorder.event(cj, WARNING, "UnparseableSchedule",
                                f"unparseable schedule: {_quote(str(spec.get('schedule') or ''))} : {err}",
                                resource=CRONJOBS)
            return SyncOutcome(None, update)

        try:
            scheduled, too_many_missed = next_schedule_time(cj, now, schedule)
        except InvalidSchedule as err:
            log.info("invalid schedule", schedule=spec.get("schedule"), error=str(err))
            self.recorder.event(cj, WARNING, "InvalidSchedule", f"invalid schedule: {spec.get('schedule')} : {err}",
                                resource=CRONJOBS)
            return SyncOutcome(None, update)
        if too_many_missed:
            log.info("too many missed times")
            self.recorder.event(cj, WARNING, "TooManyMissedTimes", "too many missed start times. Set or decrease "
                                ".spec.startingDeadlineSeconds or check clock skew", resource=CRONJOBS)
        if scheduled is None:
            # Only after a restart or an early wake-up: the queue normally brings us here on time.
            log.debug("no unmet start times")
            return SyncOutcome(next_schedule_time_duration(cj, now, schedule), update)

        deadline = spec.get("startingDeadlineSeconds")
        if isinstance(deadline, int) and scheduled + timedelta(seconds=deadline) < now:
            log.debug("missed starting window", scheduled=scheduled.isoformat())
            self.recorder.event(cj, WARNING, "MissSchedule", "Missed scheduled time to start a job: "
                                + scheduled.strftime("%a, %d %b %Y %H:%M:%S +0000"), resource=CRONJOBS)
            return SyncOutcome(next_schedule_time_duration(cj, now, schedule), update)

        last = to_datetime((cj.get("status") or {}).get("lastScheduleTime"))
        if in_active_list_by_name(cj, namespace, job_name(cj, scheduled)) or last == scheduled:
            log.debug("not starting job because the scheduled time is already processed",
                      scheduled=scheduled.isoformat())
            return SyncOutcome(next_schedule_time_duration(cj, now, schedule), update)

        policy = spec.get("concurrencyPolicy")
        active = list((cj.get("status") or {}).get("active") or [])
        if policy == "Forbid" and active:
            # The cache may still miss an active Job, so Forbid is best effort, as upstream documents.
            log.debug("not starting job because prior execution is still running and concurrency policy is Forbid")
            self.recorder.event(cj, NORMAL, "JobAlreadyActive",
                                "Not starting job because prior execution is running and concurrency policy is Forbid",
                                resource=CRONJOBS)
            return SyncOutcome(next_schedule_time_duration(cj, now, schedule), update)
        if policy == "Replace":
            for ref in active:
                ref_ns, ref_name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
                log.debug("deleting job that was still running at next scheduled start time", job=ref_name)
                try:
                    job = await self.job_control.get_job(ref_ns, ref_name)
                except Exception as err:
                    self.recorder.event(cj, WARNING, "FailedGet", f"Get job: {err}", resource=CRONJOBS)
                    return SyncOutcome(None, update, err)
                if not await self._delete_job(cj, job):
                    return SyncOutcome(None, update, RuntimeError(f"could not replace job {ref_ns}/{ref_name}"))
                update = True

        return await self._start_job(cj, scheduled, now, schedule, update)

    async def _start_job(self, cj: Work, scheduled: datetime, now: datetime, schedule: Schedule,
                         update: bool) -> SyncOutcome:
        namespace = str(meta(cj).get("namespace") or "")
        log = self.log.bind(key=f"{namespace}/{meta(cj).get('name')}")
        try:
            request = job_from_template(cj, scheduled)
        except UnknownTimeZone as err:
            log.error("unable to make Job from template", error=str(err))
            return SyncOutcome(None, update, err)
        already_exists = False
        try:
            created = await self.job_control.create_job(namespace, request)
        except AlreadyExists:
            # Made by us before a lost status write (put it back in the active list), or by someone else
            # (whose business it is).
            already_exists = True
            try:
                created = await self.job_control.get_job(namespace, request["metadata"]["name"])
            except Exception as err:
                return SyncOutcome(None, update, err)
            if not is_controlled_by(created, cj) or in_active_list(cj, meta(created).get("uid")):
                return SyncOutcome(None, update)
        except Exception as err:
            if has_status_cause(err, NAMESPACE_TERMINATING_CAUSE):
                return SyncOutcome(None, update, err)  # every create will fail: nothing to tell
            self.recorder.event(cj, WARNING, "FailedCreate", f"Error creating job: {err}", resource=CRONJOBS)
            return SyncOutcome(None, update, err)

        if already_exists:
            log.info("job already exists", job=request["metadata"]["name"])
        else:
            created_at = to_datetime(meta(created).get("creationTimestamp"))
            if created_at is not None:
                CREATION_SKEW.observe((created_at - scheduled).total_seconds())
            log.debug("created job", job=meta(created).get("name"))
            self.recorder.event(cj, NORMAL, "SuccessfulCreate", f"Created job {meta(created).get('name')}",
                                resource=CRONJOBS)

        ref = object_reference(created, JOBS)
        if ref is None:
            return SyncOutcome(None, update, RuntimeError(f"unable to make object reference for job for {namespace}/"
                                                          f"{meta(cj).get('name')}"))
        status = cj.setdefault("status", {})
        status["active"] = [*(status.get("active") or []), ref]
        status["lastScheduleTime"] = format_time(scheduled.timestamp())
        return SyncOutcome(next_schedule_time_duration(cj, now, schedule), True)

    # --- history cleanup --------------------------------------------------------------------------

    async def cleanup_finished_jobs(self, cj: Work, jobs: Sequence[Obj]) -> bool:
        """Delete finished Jobs beyond the history limits, oldest first; True if status changed."""
        spec = cj.get("spec") or {}
        succeeded_limit, failed_limit = spec.get("successfulJobsHistoryLimit"), spec.get("failedJobsHistoryLimit")
        if succeeded_limit is None and failed_limit is None:
            return False
        succeeded = [j for j in jobs if finished_condition(j) == "Complete"]
        failed = [j for j in jobs if finished_condition(j) == "Failed"]
        update = False
        if succeeded_limit is not None and await self._remove_oldest_jobs(cj, succeeded, int(succeeded_limit)):
            update = True
        if failed_limit is not None and await self._remove_oldest_jobs(cj, failed, int(failed_limit)):
            update = True
        return update

    async def _remove_oldest_jobs(self, cj: Work, jobs: Sequence[Obj], limit: int) -> bool:
        excess = len(jobs) - limit
        if excess <= 0:
            return False
        self.log.debug("cleaning up jobs from cronjob list", key=key_of(cj), delete=excess, jobs=len(jobs))
        update = False
        for job in sorted(jobs, key=job_start_sort_key)[:excess]:
            if await self._delete_job(cj, job):
                update = True
        return update

    async def _delete_job(self, cj: Work, job: Obj) -> bool:
        """Delete ``job`` and drop it from the active list; a failure is a FailedDelete warning and False."""
        ns, name = split_key(key_of(job))
        try:
            await self.job_control.delete_job(ns or str(meta(cj).get("namespace") or ""), name)
        except Exception as err:
            self.recorder.event(cj, WARNING, "FailedDelete", f"Deleted job: {err}", resource=CRONJOBS)
            self.log.error("error deleting job from cronjob", key=key_of(cj), job=name, error=str(err))
            return False
        delete_from_active_list(cj, meta(job).get("uid"))
        self.recorder.event(cj, NORMAL, "SuccessfulDelete", f"Deleted job {name}", resource=CRONJOBS)
        return True


def _record_success(cj: Work, job: Obj) -> bool:
    """Move ``lastSuccessfulTime`` forward to the Job's completion; True if the status changed."""
    status = cj.setdefault("status", {})
    completion = (job.get("status") or {}).get("completionTime")
    changed = False
    if status.get("lastSuccessfulTime") is None:
        # Upstream marks the status changed here even when the Job has no completionTime yet.
        if completion is not None:
            status["lastSuccessfulTime"] = completion
        changed = True
    current, completed = to_datetime(status.get("lastSuccessfulTime")), to_datetime(completion)
    if completed is not None and current is not None and completed > current:
        status["lastSuccessfulTime"] = completion
        changed = True
    return changed
