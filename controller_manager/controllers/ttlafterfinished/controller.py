"""The TTL-after-finished controller: deletes finished Jobs ``spec.ttlSecondsAfterFinished`` seconds after
they finished (kube-controller-manager's ``ttl-after-finished-controller``,
``pkg/controller/ttlafterfinished/ttlafterfinished_controller.go``).

Guarantees:
- A Job is a candidate once it has a TTL and a ``Complete`` or ``Failed`` condition that is True; its finish
  time is that condition's ``lastTransitionTime``, and it expires ``ttl`` seconds later, on the context's
  clock. A candidate not yet expired is synced again when it expires (no polling).
- Before deleting, the Job is read live from the API server and the TTL re-checked on that copy, so a TTL
  raised (or a Job replaced) after the cache saw it is honoured. The delete is Foreground (its pods go
  first) and carries the live copy's UID as a precondition, so a namesake created meanwhile is never hit.
- Clock skew: a Job that finished "in the future" (the API server's clock ahead of ours) is logged and
  simply waits until our clock passes its expiry; nothing is deleted early.
- Jobs being deleted, without a TTL, or unfinished are ignored; a finished Job whose condition has no
  ``lastTransitionTime`` is an error, retried with backoff (as upstream).
- Prometheus: ``ttl_after_finished_controller_job_deletion_duration_seconds`` (time from expiry to delete).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from prometheus_client import Histogram

from controller_manager.api.meta import is_being_deleted, key_of, meta, parse_time, split_key
from controller_manager.api.resources import JOBS
from controller_manager.client.errors import NotFound
from controller_manager.runtime.controller import Controller, ControllerContext, Result
from controller_manager.runtime.informers import Added, Event, Updated

__all__ = ["JobNotCleanable", "TTLAfterFinishedController", "finish_and_expire_time", "needs_cleanup",
           "time_left"]

Obj = Mapping[str, Any]

JOB_DELETION_DURATION = Histogram(
    "ttl_after_finished_controller_job_deletion_duration_seconds",
    "The time it took to delete the job since it became eligible for deletion",
    buckets=tuple(0.1 * 2**i for i in range(14)),
)


class JobNotCleanable(ValueError):
    """The Job has no TTL, has not finished, or does not say when it finished."""


def _finished_condition(job: Obj) -> Mapping[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond  # type: ignore[no-any-return]
    return None


def needs_cleanup(job: Obj) -> bool:
    """The Job has a TTL and has finished."""
    return (job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None and _finished_condition(job) is not None


def finish_and_expire_time(job: Obj) -> tuple[datetime, datetime]:
    """When the Job finished and when its TTL runs out (``getFinishAndExpireTime``)."""
    ns, name = meta(job).get("namespace"), meta(job).get("name")
    if not needs_cleanup(job):
        raise JobNotCleanable(f"job {ns}/{name} should not be cleaned up")
    cond = _finished_condition(job)
    assert cond is not None
    finished = parse_time(cond.get("lastTransitionTime"))
    if finished is None:
        raise JobNotCleanable(f"unable to find the time when the Job {ns}/{name} finished")
    finish_at = datetime.fromtimestamp(finished, UTC)
    ttl = int((job.get("spec") or {})["ttlSecondsAfterFinished"])
    return finish_at, finish_at + timedelta(seconds=ttl)


def time_left(job: Obj, since: datetime, log: Any = None) -> tuple[timedelta, datetime]:
    """(time until the TTL expires as seen at ``since``, the expiry time); raises :class:`JobNotCleanable`."""
    finish_at, expire_at = finish_and_expire_time(job)
    if finish_at > since and log is not None:
        log.warning("Found Job finished in the future. This is likely due to time skew in the cluster. "
                    "Job cleanup will be deferred.", key=key_of(job))
    return expire_at - since, expire_at


class TTLAfterFinishedController(Controller):
    """Finished Jobs with a TTL -> deleted. Its queue holds Job keys."""

    name: ClassVar[str] = "ttl-after-finished-controller"
    alias: ClassVar[str] = "ttl-after-finished"
    queue_name: ClassVar[str | None] = "ttl_jobs_to_delete"
    workers_option: ClassVar[str | None] = "concurrent-ttl-after-finished-syncs"
    default_workers: ClassVar[int] = 5

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(ctx)
        self.job_informer = ctx.informers.informer(JOBS)
        self.job_informer.add_handler(self._on_job)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.ctx.clock.now(), UTC)

    def _on_job(self, event: Event) -> None:
        # Deletions need nothing from us; adds and updates make a finished Job with a TTL a candidate.
        if isinstance(event, Added | Updated):
            job = event.obj if isinstance(event, Added) else event.new
            if not is_being_deleted(job) and needs_cleanup(job):
                self.queue.add(key_of(job))

    async def sync(self, key: str) -> Result | None:
        job = self.job_informer.store.get(key)
        self.log.debug("checking if job is ready for cleanup", key=key)
        if job is None:
            return None
        verdict = self._process_ttl(job)
        if not isinstance(verdict, datetime):
            return verdict

        # The cached TTL may be stale: decide again on the Job as the API server has it now.
        namespace, name = split_key(key)
        try:
            fresh = await self.ctx.client.get(JOBS, name, namespace)
        except NotFound:
            return None
        verdict = self._process_ttl(fresh)
        if not isinstance(verdict, datetime):
            return verdict
        self.log.info("cleaning up job", key=key, uid=meta(fresh).get("uid"))
        await self.ctx.client.delete(JOBS, name, namespace, propagation_policy="Foreground",
                                     uid=str(meta(fresh).get("uid") or "") or None)
        JOB_DELETION_DURATION.observe(max(0.0, (self.now() - verdict).total_seconds()))
        return None

    def _process_ttl(self, job: Obj) -> datetime | Result | None:
        """The expiry time if the TTL has run out; a Result to come back when it will; None if not a candidate."""
        if is_being_deleted(job) or not needs_cleanup(job):
            return None
        remaining, expire_at = time_left(job, self.now(), self.log)
        self.log.debug("found job finished", key=key_of(job), remaining_ttl=remaining.total_seconds(),
                       expire_at=expire_at.isoformat())
        if remaining <= timedelta(0):
            return expire_at
        return Result(requeue_after=remaining.total_seconds())
