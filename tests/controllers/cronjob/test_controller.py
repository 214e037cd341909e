"""The CronJob controller's handlers and whole sync with fakes (upstream's TestControllerV2UpdateCronJob,
TestControllerV2GetJobsToBeReconciled, TestControllerV2CleanupFinishedJobs,
TestControllerV2JobAlreadyExistsButNotInActiveStatus, TestControllerV2JobAlreadyExistsButDifferentOwner), with
the FakeClock standing in for ``jm.now``."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from controller_manager.api.meta import key_of
from controller_manager.client.errors import AlreadyExists, Conflict, NotFound, ServerError
from controller_manager.controllers.cronjob.util import NEXT_SCHEDULE_DELTA, job_from_template
from controller_manager.runtime.controller import Result
from controller_manager.runtime.events import object_reference
from controller_manager.runtime.informers import Added, Deleted, Updated

from .fakes import FakeJobControl, Fixture, cache, new_controller
from .objects import (
    JUST_A_SECOND_BEFORE_THE_HOUR,
    JUST_AFTER_THE_HOUR,
    JUST_AFTER_THE_PRIOR_HOUR,
    JUST_BEFORE_THE_HOUR,
    JUST_BEFORE_THE_PRIOR_HOUR,
    cron_job,
    owned_job,
    ts,
    with_status,
)

M, S = timedelta(minutes=1), timedelta(seconds=1)


def _bare(schedule: str | None = None, zone: str | None = None, labels: dict[str, str] | None = None,
          last: bool = False) -> dict[str, Any]:
    """A CronJob with only a spec (and lastScheduleTime), as upstream's update table builds them."""
    spec: dict[str, Any] = {"jobTemplate": {"metadata": {"labels": labels or {"a": "b"}, "annotations": {"x": "y"}}}}
    if schedule is not None:
        spec["schedule"] = schedule
    if zone is not None:
        spec["timeZone"] = zone
    obj: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "CronJob",
                           "metadata": {"name": "cj", "namespace": "ns", "resourceVersion": "2"}, "spec": spec}
    if last:
        obj["status"] = {"lastScheduleTime": ts(JUST_BEFORE_THE_HOUR)}
    return obj


async def _queued_after(fx: Fixture, seconds: float) -> bool:
    """Whether the key shows up in the queue after ``seconds`` on the fake clock, but not a moment before."""
    queue = fx.controller.queue
    if seconds > 0.001:
        fx.clock.advance(seconds - 0.001)
        if len(queue):
            return False
    fx.clock.advance(0.002)
    return len(queue) == 1


@pytest.mark.parametrize(("old", "new", "delay"), [
    pytest.param(_bare(), _bare(labels={"a": "foo"}), 0.0, id="spec.template changed"),
    pytest.param(_bare("30 * * * *", last=True), _bare("*/1 * * * *", labels={"a": "foo"}, last=True),
                 (S + NEXT_SCHEDULE_DELTA).total_seconds(), id="spec.schedule changed"),
    pytest.param(_bare("@every 1m", last=True), _bare("@every 3m", last=True),
                 (2 * M + S + NEXT_SCHEDULE_DELTA).total_seconds(), id="spec.schedule with @every - cadence decrease"),
    pytest.param(_bare("@every 3m", last=True), _bare("@every 1m", last=True),
                 (S + NEXT_SCHEDULE_DELTA).total_seconds(), id="spec.schedule with @every - cadence increase"),
    pytest.param(_bare(zone="America/New_York"), _bare(zone="America/New_York", labels={"a": "foo"}), 0.0,
                 id="spec.timeZone not changed"),
])
async def test_update_cron_job_requeues(old: dict[str, Any], new: dict[str, Any], delay: float) -> None:
    fx = new_controller(JUST_A_SECOND_BEFORE_THE_HOUR)
    fx.controller._on_cron_job(Updated(old, new))
    if delay == 0.0:
        assert len(fx.controller.queue) == 1
    else:
        assert len(fx.controller.queue) == 0
        assert await _queued_after(fx, delay)
    assert fx.recorder.events == []


async def test_update_cron_job_with_unparseable_new_schedule_only_warns() -> None:
    """spec.timeZone changed with an empty schedule: the schedule cannot parse, so an event and no requeue."""
    fx = new_controller(JUST_A_SECOND_BEFORE_THE_HOUR)
    fx.controller._on_cron_job(Updated(_bare(zone="America/New_York"), _bare()))
    fx.clock.advance(3600)
    assert len(fx.controller.queue) == 0
    assert fx.recorder.events == ["Warning UnParseableCronJobSchedule unparseable schedule for cronjob: "]


def _ref_job(name: str, ns: str, owner: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return owned_job(name, ns, owner, labels=labels)


@pytest.mark.parametrize(("jobs", "expected"), [
    pytest.param([_ref_job("foo", "foo-ns", None), _ref_job("foo1", "foo-ns", None), _ref_job("foo2", "foo-ns", None)],
                 [], id="test getting jobs in namespace without controller reference"),
    pytest.param([_ref_job("foo", "foo-ns", None), _ref_job("foo1", "foo-ns", "fooer"),
                  _ref_job("foo2", "foo-ns", None)], ["foo1"], id="test getting jobs in namespace with a controller "
                                                                  "reference"),
    pytest.param([_ref_job("foo", "bar-ns", None), _ref_job("foo1", "bar-ns", "fooer"),
                  _ref_job("foo2", "bar-ns", None)], [], id="test getting jobs in other namespaces"),
    pytest.param([_ref_job("foo-fooer-owner-ref", "foo-ns", "fooer", {"key": "different-value"}),
                  _ref_job("foo-other-owner-ref", "foo-ns", "another-cronjob", {"key": "different-value"})],
                 ["foo-fooer-owner-ref"], id="test getting jobs whose labels do not match job template"),
])
def test_jobs_to_be_reconciled(jobs: list[dict[str, Any]], expected: list[str]) -> None:
    fx = new_controller(JUST_BEFORE_THE_HOUR)
    cache(fx.controller.job_informer, *jobs)
    cj = {"metadata": {"namespace": "foo-ns", "name": "fooer"},
          "spec": {"jobTemplate": {"metadata": {"labels": {"key": "value"}}}}}
    assert sorted(j["metadata"]["name"] for j in fx.controller.jobs_to_be_reconciled(cj)) == expected


def _fooer(limit: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"namespace": "foo-ns", "name": "fooer", "uid": "fooer-uid", "resourceVersion": "7"},
            "spec": {"schedule": "0 * * * ?", "concurrencyPolicy": "Allow", "successfulJobsHistoryLimit": limit,
                     "jobTemplate": {"metadata": {"labels": {"key": "value"}}}},
            "status": {"lastScheduleTime": ts(JUST_AFTER_THE_PRIOR_HOUR)}}


@pytest.mark.parametrize(("now", "limit", "jobs", "create_error", "deleted"), [
    pytest.param(JUST_AFTER_THE_HOUR, 1,
                 [("finished-job-started-hour-ago", JUST_BEFORE_THE_PRIOR_HOUR),
                  ("finished-job-started-minute-ago", JUST_BEFORE_THE_HOUR)],
                 ServerError(500, "InternalError", "quota for # of jobs reached"), ["finished-job-started-hour-ago"],
                 id="jobs are still deleted when a cronjob can't create jobs due to jobs quota being reached"),
    pytest.param(JUST_BEFORE_THE_HOUR, 2, [("finished-job-started-hour-ago", JUST_BEFORE_THE_PRIOR_HOUR)], None, [],
                 id="jobs are not deleted if history limit not reached"),
])
async def test_cleanup_finished_jobs(now: Any, limit: int, jobs: list[tuple[str, Any]], create_error: Any,
                                     deleted: list[str]) -> None:
    fx = new_controller(now, FakeJobControl(create_error=create_error))
    cj = _fooer(limit)
    cache(fx.controller.cron_job_informer, cj)
    cache(fx.controller.job_informer, *(owned_job(n, "foo-ns", "fooer", uid=n, start=t, finished="Complete")
                                        for n, t in jobs))
    if create_error is not None:
        with pytest.raises(ServerError):
            await fx.controller.sync(key_of(cj))
        assert "Warning FailedCreate Error creating job: quota for # of jobs reached" in fx.recorder.events
    else:
        assert isinstance(await fx.controller.sync(key_of(cj)), Result)
    assert sorted(fx.jobs.deleted) == deleted
    assert [e for e in fx.recorder.events if "SuccessfulDelete" in e] == [f"Normal SuccessfulDelete Deleted job {n}"
                                                                          for n in deleted]


async def test_failed_jobs_history_limit_deletes_oldest_failed_only() -> None:
    fx = new_controller(JUST_BEFORE_THE_HOUR)
    cj = _fooer(5)
    cj["spec"]["failedJobsHistoryLimit"] = 1
    cache(fx.controller.cron_job_informer, cj)
    cache(fx.controller.job_informer,
          owned_job("failed-old", "foo-ns", "fooer", uid="1", start=JUST_BEFORE_THE_PRIOR_HOUR, finished="Failed"),
          owned_job("failed-new", "foo-ns", "fooer", uid="2", start=JUST_AFTER_THE_PRIOR_HOUR, finished="Failed"),
          owned_job("never-started", "foo-ns", "fooer", uid="3", finished="Failed"),
          owned_job("ok", "foo-ns", "fooer", uid="4", start=JUST_BEFORE_THE_PRIOR_HOUR, finished="Complete"))
    await fx.controller.sync(key_of(cj))
    assert fx.jobs.deleted == ["failed-old", "failed-new"]


def _hourly_forbid_with_job(owned: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    cj = with_status(cron_job("@every 1h", policy="Forbid"), lastScheduleTime=ts(JUST_BEFORE_THE_PRIOR_HOUR))
    job = job_from_template(cj, JUST_AFTER_THE_PRIOR_HOUR)
    job["metadata"].update(uid="1234", namespace="snazzycats")
    if not owned:
        job["metadata"]["ownerReferences"] = []
    return cj, job


async def test_job_already_exists_but_not_in_active_status() -> None:
    """A Job we made but whose status write was lost goes back into the active list on the next sync."""
    cj, job = _hourly_forbid_with_job(owned=True)
    fx = new_controller(JUST_BEFORE_THE_HOUR, FakeJobControl(job=job, create_error=AlreadyExists(
        409, "AlreadyExists", "exists")))
    cache(fx.controller.cron_job_informer, cj)
    await fx.controller.sync(key_of(cj))
    assert len(fx.cron_jobs.updates) == 1
    assert fx.cron_jobs.updates[0]["status"]["active"] == [object_reference(job)]
    assert not any("SuccessfulCreate" in e for e in fx.recorder.events)


async def test_job_already_exists_but_different_owner() -> None:
    cj, job = _hourly_forbid_with_job(owned=False)
    fx = new_controller(JUST_BEFORE_THE_HOUR, FakeJobControl(job=job, create_error=AlreadyExists(
        409, "AlreadyExists", "exists")))
    cache(fx.controller.cron_job_informer, cj)
    assert await fx.controller.sync(key_of(cj)) is None
    assert fx.cron_jobs.updates == []


async def test_sync_writes_status_once_and_requeues_for_the_next_activation() -> None:
    cj = cron_job("0 * * * ?", creation=JUST_BEFORE_THE_HOUR)
    fx = new_controller(JUST_AFTER_THE_HOUR)
    cache(fx.controller.cron_job_informer, cj)
    result = await fx.controller.sync(key_of(cj))
    assert result == Result(requeue_after=(timedelta(minutes=59) + NEXT_SCHEDULE_DELTA).total_seconds())
    (update,) = fx.cron_jobs.updates
    (created,) = fx.jobs.jobs
    assert update["metadata"]["resourceVersion"] == "1"  # written at the version it was read at
    assert update["status"]["lastScheduleTime"] == "2016-05-19T10:00:00Z"
    assert update["status"]["active"] == [object_reference(created)]
    assert created["metadata"]["name"] == "mycronjob-24394200"
    assert fx.recorder.events == ["Normal SuccessfulCreate Created job mycronjob-24394200"]
    assert "status" not in cj  # the cached object is never touched


async def test_sync_status_conflict_is_raised_for_a_retry() -> None:
    cj = cron_job("0 * * * ?", creation=JUST_BEFORE_THE_HOUR)
    fx = new_controller(JUST_AFTER_THE_HOUR)

    async def conflict(_: Any) -> dict[str, Any]:
        raise Conflict(409, "Conflict", "the object has been modified")

    fx.cron_jobs.update_status = conflict  # type: ignore[method-assign,assignment]
    cache(fx.controller.cron_job_informer, cj)
    with pytest.raises(Conflict):
        await fx.controller.sync(key_of(cj))


async def test_sync_of_a_deleted_cron_job_does_nothing() -> None:
    fx = new_controller(JUST_AFTER_THE_HOUR)
    assert await fx.controller.sync("snazzycats/gone") is None
    assert fx.jobs.jobs == []
    assert fx.cron_jobs.updates == []


async def test_missing_active_job_is_dropped_after_a_live_get() -> None:
    cj = with_status(cron_job("0 * * * ?", creation=JUST_BEFORE_THE_HOUR), lastScheduleTime=ts(JUST_BEFORE_THE_HOUR),
                     active=[{"kind": "Job", "namespace": "snazzycats", "name": "gone", "uid": "u-gone",
                              "apiVersion": "batch/v1"}])
    fx = new_controller(JUST_BEFORE_THE_HOUR + 30 * S, FakeJobControl(error=NotFound(404, "NotFound", "not found")))
    cache(fx.controller.cron_job_informer, cj)
    await fx.controller.sync(key_of(cj))
    assert fx.recorder.events == ["Normal MissingJob Active job went missing: gone"]
    assert "active" not in fx.cron_jobs.updates[-1]["status"]


async def test_being_deleted_cron_job_only_updates_status() -> None:
    cj = cron_job("0 * * * ?", creation=JUST_BEFORE_THE_HOUR)
    cj["metadata"]["deletionTimestamp"] = ts(JUST_AFTER_THE_HOUR)
    fx = new_controller(JUST_AFTER_THE_HOUR)
    cache(fx.controller.cron_job_informer, cj)
    assert await fx.controller.sync(key_of(cj)) is None
    assert fx.jobs.jobs == []


async def test_job_events_wake_the_owning_cron_job() -> None:
    fx = new_controller(JUST_AFTER_THE_HOUR)
    cj = cron_job()
    other = copy.deepcopy(cj)
    other["metadata"].update(name="other", uid="other-uid")
    cache(fx.controller.cron_job_informer, cj, other)
    job = job_from_template(cj, JUST_AFTER_THE_HOUR)
    job["metadata"].update(namespace="snazzycats", uid="j1", resourceVersion="1")
    queue = fx.controller.queue

    async def drained() -> list[str]:
        keys = []
        while len(queue):
            key = await queue.get()
            assert key is not None
            queue.done(key)
            keys.append(key)
        return sorted(keys)

    fx.controller._on_job(Added(job))
    assert await drained() == ["snazzycats/mycronjob"]
    fx.controller._on_job(Updated(job, job))  # a resync: same resourceVersion
    assert await drained() == []
    moved = copy.deepcopy(job)
    moved["metadata"].update(resourceVersion="2", ownerReferences=[{**job["metadata"]["ownerReferences"][0],
                                                                    "name": "other", "uid": "other-uid"}])
    fx.controller._on_job(Updated(job, moved))
    assert await drained() == ["snazzycats/mycronjob", "snazzycats/other"]
    stranger = copy.deepcopy(job)
    stranger["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    fx.controller._on_job(Deleted(stranger))
    assert await drained() == []  # a namesake's Job, not ours
    fx.controller._on_job(Deleted(job, final_state_unknown=True))
    assert await drained() == ["snazzycats/mycronjob"]
