"""TestControllerV2SyncCronJob: upstream's big table of schedule / concurrency / deadline / suspend cases, run
through ``sync_cron_job`` with recording fakes and a FakeClock standing at each case's "now"."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from controller_manager.client.errors import AlreadyExists, ApiError, BadRequest, Forbidden
from controller_manager.controllers.cronjob.util import NEXT_SCHEDULE_DELTA, job_from_template
from controller_manager.runtime.events import object_reference

from .fakes import FakeCronJobControl, FakeJobControl, new_controller
from .objects import (
    JUST_AFTER_THE_HOUR,
    JUST_AFTER_THE_PRIOR_HOUR,
    JUST_BEFORE_THE_HOUR,
    JUST_BEFORE_THE_NEXT_HOUR,
    JUST_BEFORE_THE_PRIOR_HOUR,
    TOP_OF_THE_HOUR,
    WEEK_AFTER_THE_HOUR,
    cron_job,
    ts,
)

SHORT_DEAD, MEDIUM_DEAD, LONG_DEAD = 10, 2 * 60 * 60, 1_000_000
ON_THE_HOUR, EVERY_HOUR, ERROR_SCHEDULE = "0 * * * ?", "@every 1h", "obvious error schedule"
NEW_YORK, ERROR_TIME_ZONE = "America/New_York", "bad timezone"
H, M, S, MS = timedelta(hours=1), timedelta(minutes=1), timedelta(seconds=1), timedelta(milliseconds=1)
DELTA = NEXT_SCHEDULE_DELTA


def _already_exists() -> AlreadyExists:
    return AlreadyExists(409, "AlreadyExists", 'jobs.batch "" already exists')


def _namespace_terminating() -> Forbidden:
    return Forbidden(403, "Forbidden", "unable to create new content in namespace default because it is being "
                     "terminated", details={"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                                        "message": "namespace default is being terminated"}]})


@dataclass(frozen=True)
class Case:
    policy: str = "Allow"
    suspend: bool = False
    schedule: str = ON_THE_HOUR
    time_zone: str | None = None
    deadline: int | None = None
    ran_previously: bool = False
    still_active: bool = False
    cronjob_creation: datetime | None = None
    job_creation: datetime = JUST_AFTER_THE_PRIOR_HOUR
    last_schedule: datetime | None = None
    now: datetime = JUST_BEFORE_THE_HOUR
    job_create_error: ApiError | None = None
    job_get_error: ApiError | None = None
    expect_create: bool = False
    expect_delete: bool = False
    expect_active: int = 0
    expected_warnings: int = 0
    expect_err: bool = False
    expected_requeue: timedelta | None = None
    expect_update_status: bool = False
    expect_already_active: bool = False  # a JobAlreadyActive event (upstream singles this case out by name)
    job_not_in_lister: bool = False
    job_in_active_status: bool = True


def _cases() -> list[Any]:
    after, week = JUST_AFTER_THE_HOUR, WEEK_AFTER_THE_HOUR
    top100 = TOP_OF_THE_HOUR + 100 * MS
    c: dict[str, Case] = {
        "never ran, not valid schedule, A": Case(schedule=ERROR_SCHEDULE, expected_warnings=1),
        "never ran, not valid schedule, F": Case("Forbid", schedule=ERROR_SCHEDULE, expected_warnings=1),
        "never ran, not valid schedule, R": Case("Forbid", schedule=ERROR_SCHEDULE, expected_warnings=1),
        "never ran, not valid time zone": Case(time_zone=ERROR_TIME_ZONE, expected_warnings=1),
        "never ran, not time, A": Case(expected_requeue=M + DELTA),
        "never ran, not time, F": Case("Forbid", expected_requeue=M + DELTA),
        "never ran, not time, R": Case("Replace", expected_requeue=M + DELTA),
        "never ran, not time in zone": Case(time_zone=NEW_YORK, expected_requeue=M + DELTA),
        "never ran, is time, A": Case(now=after, expect_create=True, expect_active=1, expected_requeue=H - M + DELTA,
                                      expect_update_status=True),
        "never ran, is time, F": Case("Forbid", now=after, expect_create=True, expect_active=1,
                                      expected_requeue=H - M + DELTA, expect_update_status=True),
        "never ran, is time, R": Case("Replace", now=after, expect_create=True, expect_active=1,
                                      expected_requeue=H - M + DELTA, expect_update_status=True),
        "never ran, is time in zone": Case(time_zone=NEW_YORK, now=after, expect_create=True, expect_active=1,
                                           expected_requeue=H - M + DELTA, expect_update_status=True),
        "never ran, is time in zone, but TZ is also set in schedule": Case(
            schedule="TZ=UTC " + ON_THE_HOUR, time_zone=NEW_YORK, now=after, expect_create=True, expect_active=1,
            expected_warnings=1, expected_requeue=H - M + DELTA, expect_update_status=True),
        "never ran, is time, suspended": Case(suspend=True, now=after),
        "never ran, is time, past deadline": Case(deadline=SHORT_DEAD, now=after + (SHORT_DEAD + 1) * M,
                                                  expected_requeue=H - M - (SHORT_DEAD + 1) * M + DELTA),
        "never ran, is time, not past deadline": Case(deadline=LONG_DEAD, now=after, expect_create=True,
                                                      expect_active=1, expected_requeue=H - M + DELTA,
                                                      expect_update_status=True),
    }
    for p, name in (("Allow", "A"), ("Forbid", "F"), ("Replace", "R")):
        c[f"prev ran but done, not time, {name}"] = Case(p, ran_previously=True, expected_requeue=M + DELTA,
                                                         expect_update_status=True)
        c[f"prev ran but done, is time, {name}"] = Case(p, ran_previously=True, now=after, expect_create=True,
                                                        expect_active=1, expected_requeue=H - M + DELTA,
                                                        expect_update_status=True)
        c[f"still active, not time, {name}"] = Case(p, ran_previously=True, still_active=True, expect_active=1,
                                                    expected_requeue=M + DELTA)
    c.update({
        # AlreadyExists: the Job we "find" is the finished one of the previous run, which we control, so it
        # goes (back) into the active list (upstream's table never checks the active count here).
        "prev ran but done, is time, create job failed, A": Case(
            ran_previously=True, now=after, job_create_error=_already_exists(), expect_active=1,
            expected_requeue=H - M + DELTA, expect_update_status=True),
        "prev ran but done, is time, job not present in CJ active status, create job failed, A": Case(
            ran_previously=True, now=after, job_create_error=_already_exists(), expect_active=1,
            expected_requeue=H - M + DELTA, expect_update_status=True, job_in_active_status=False),
        "prev ran but done, is time, suspended": Case(suspend=True, ran_previously=True, now=after,
                                                      expect_update_status=True),
        "prev ran but done, is time, past deadline": Case(deadline=SHORT_DEAD, ran_previously=True, now=after,
                                                          expected_requeue=H - M + DELTA, expect_update_status=True),
        "prev ran but done, is time, not past deadline": Case(deadline=LONG_DEAD, ran_previously=True, now=after,
                                                              expect_create=True, expect_active=1,
                                                              expected_requeue=H - M + DELTA,
                                                              expect_update_status=True),
        "still active, is time, A": Case(ran_previously=True, still_active=True, now=after, expect_create=True,
                                         expect_active=2, expected_requeue=H - M + DELTA, expect_update_status=True),
        "still active, is time, F": Case("Forbid", ran_previously=True, still_active=True, now=after,
                                         expect_active=1, expected_requeue=H - M + DELTA, expect_already_active=True),
        "still active, is time, R": Case("Replace", ran_previously=True, still_active=True, now=after,
                                         expect_create=True, expect_delete=True, expect_active=1,
                                         expected_requeue=H - M + DELTA, expect_update_status=True),
        "still active, is time, get job failed, R": Case(
            "Replace", ran_previously=True, still_active=True, now=after,
            job_get_error=BadRequest(400, "BadRequest", "request is invalid"), expect_active=1, expected_warnings=1,
            expect_err=True),
        "still active, is time, suspended": Case(suspend=True, ran_previously=True, still_active=True, now=after,
                                                 expect_active=1),
        "still active, is time, past deadline": Case(deadline=SHORT_DEAD, ran_previously=True, still_active=True,
                                                     now=after, expect_active=1, expected_requeue=H - M + DELTA),
        "still active, is time, not past deadline": Case(deadline=LONG_DEAD, ran_previously=True, still_active=True,
                                                         now=after, expect_create=True, expect_active=2,
                                                         expected_requeue=H - M + DELTA, expect_update_status=True),
    })
    # Long overdue: too many missed times (a warning) with no or a too long deadline; the latest still runs.
    for p, name in (("Allow", "A"), ("Replace", "R"), ("Forbid", "F")):
        for dead, dname, warnings in ((LONG_DEAD, "not past deadline", 1), (None, "no deadline", 1),
                                      (MEDIUM_DEAD, "past medium deadline", 0), (SHORT_DEAD, "past short deadline", 0)):
            c[f"prev ran but done, long overdue, {dname}, {name}"] = Case(
                p, deadline=dead, ran_previously=True, now=week, expect_create=True, expect_active=1,
                expected_warnings=warnings, expected_requeue=H + DELTA, expect_update_status=True)
    c.update({
        # Time skew: the controller sees the job created, takes no action.
        "this ran but done, time drifted back, F": Case(
            "Forbid", ran_previously=True, job_creation=JUST_AFTER_THE_HOUR, now=JUST_BEFORE_THE_HOUR,
            job_create_error=_already_exists(), expected_requeue=M + DELTA, expect_update_status=True,
            job_in_active_status=False),
    })
    for p, name in (("Allow", "A"), ("Forbid", "f"), ("Replace", "R")):
        # A slow Job cache: the Job is active but not cached yet; a live GET finds it.
        c[f"this started but went missing, not past deadline, {name}"] = Case(
            p, deadline=LONG_DEAD, ran_previously=True, still_active=True, job_creation=top100,
            now=after + 100 * MS, expect_active=1, expected_requeue=H - M - 100 * MS + DELTA,
            job_not_in_lister=True)
        # A slow CronJob cache: our own status write is not cached yet; a live GET shows the Job active.
        c[f"this started but is not present in cronjob active list, not past deadline, {name}"] = Case(
            p, deadline=LONG_DEAD, ran_previously=True, still_active=True, job_creation=top100,
            now=after + 100 * MS, expect_active=1, expected_requeue=H - M - 100 * MS + DELTA,
            job_in_active_status=False)
    bp, bh = JUST_BEFORE_THE_PRIOR_HOUR, JUST_BEFORE_THE_HOUR
    c.update({
        "with @every schedule, never ran, not time": Case(
            schedule=EVERY_HOUR, cronjob_creation=bh, job_creation=bh, now=TOP_OF_THE_HOUR,
            expected_requeue=H - M + DELTA),
        "with @every schedule, never ran, is time": Case(
            schedule=EVERY_HOUR, cronjob_creation=bp, job_creation=bp, now=bh, expected_requeue=H + DELTA,
            expect_create=True, expect_active=1, expect_update_status=True),
        "with @every schedule, never ran, is time, past deadline": Case(
            schedule=EVERY_HOUR, deadline=SHORT_DEAD, cronjob_creation=bp, job_creation=bp,
            now=bh + (SHORT_DEAD + 1) * S, expected_requeue=H - (SHORT_DEAD + 1) * S + DELTA),
        "with @every schedule, never ran, is time, not past deadline": Case(
            schedule=EVERY_HOUR, deadline=LONG_DEAD, cronjob_creation=bp, job_creation=bp,
            now=bh + (SHORT_DEAD - 1) * S, expect_create=True, expect_active=1,
            expected_requeue=H - (SHORT_DEAD - 1) * S + DELTA, expect_update_status=True),
        "with @every schedule, prev ran but done, not time": Case(
            schedule=EVERY_HOUR, ran_previously=True, cronjob_creation=bp, job_creation=bp, last_schedule=bh,
            now=TOP_OF_THE_HOUR, expected_requeue=H - M + DELTA, expect_update_status=True),
        "with @every schedule, prev ran but done, is time": Case(
            schedule=EVERY_HOUR, ran_previously=True, cronjob_creation=bp, job_creation=bp, last_schedule=bh,
            now=TOP_OF_THE_HOUR + H, expect_create=True, expect_active=1, expected_requeue=H - M + DELTA,
            expect_update_status=True),
        "with @every schedule, prev ran but done, is time, past deadline": Case(
            schedule=EVERY_HOUR, deadline=SHORT_DEAD, ran_previously=True, cronjob_creation=bp, job_creation=bp,
            last_schedule=bh, now=JUST_BEFORE_THE_NEXT_HOUR + (SHORT_DEAD + 1) * S,
            expected_requeue=H - (SHORT_DEAD + 1) * S + DELTA, expect_update_status=True),
        "with @every schedule, still active, not time": Case(
            schedule=EVERY_HOUR, ran_previously=True, still_active=True, cronjob_creation=bp, job_creation=bh,
            last_schedule=bh, now=TOP_OF_THE_HOUR, expect_active=1, expected_requeue=H - M + DELTA),
        "with @every schedule, still active, is time": Case(
            schedule=EVERY_HOUR, ran_previously=True, still_active=True, cronjob_creation=bp, job_creation=bp,
            last_schedule=bp, now=JUST_AFTER_THE_HOUR, expect_create=True, expect_active=2,
            expected_requeue=H - 2 * M + DELTA, expect_update_status=True),
        "with @every schedule, still active, is time, past deadline": Case(
            schedule=EVERY_HOUR, deadline=SHORT_DEAD, ran_previously=True, still_active=True, cronjob_creation=bp,
            job_creation=bh, last_schedule=bh, now=JUST_BEFORE_THE_NEXT_HOUR + (SHORT_DEAD + 1) * S,
            expect_active=1, expected_requeue=H - (SHORT_DEAD + 1) * S + DELTA),
        "with @every schedule, still active, is time, not past deadline": Case(
            schedule=EVERY_HOUR, deadline=LONG_DEAD, ran_previously=True, still_active=True, cronjob_creation=bp,
            job_creation=bh, last_schedule=bh, now=JUST_BEFORE_THE_NEXT_HOUR + (SHORT_DEAD - 1) * S,
            expect_create=True, expect_active=2, expected_requeue=H - (SHORT_DEAD - 1) * S + DELTA,
            expect_update_status=True),
        "with @every schedule, prev ran but done, long overdue, no deadline": Case(
            schedule=EVERY_HOUR, ran_previously=True, cronjob_creation=JUST_AFTER_THE_PRIOR_HOUR,
            last_schedule=JUST_AFTER_THE_HOUR, now=WEEK_AFTER_THE_HOUR, expect_create=True, expect_active=1,
            expected_warnings=1, expected_requeue=M + DELTA, expect_update_status=True),
        # Upstream's table says one active Job here, but never checks it: the previous Job is done, nothing
        # is created, so none is active.
        "with @every schedule, prev ran but done, long overdue, past deadline": Case(
            schedule=EVERY_HOUR, deadline=SHORT_DEAD, ran_previously=True,
            cronjob_creation=JUST_AFTER_THE_PRIOR_HOUR, last_schedule=JUST_AFTER_THE_HOUR,
            now=WEEK_AFTER_THE_HOUR + M + (SHORT_DEAD + 1) * S, expect_active=0,
            expected_requeue=H - (SHORT_DEAD + 1) * S + DELTA, expect_update_status=True),
        # The live CronJob shows the Job active (our cached copy lags), and the sync carries on with the live
        # copy, so one Job stays active (upstream's table says 0, which it never checks).
        "do nothing if the namespace is terminating": Case(
            job_create_error=_namespace_terminating(), ran_previously=True, still_active=True, now=after,
            expect_active=1, expect_err=True, job_in_active_status=False),
    })
    return [pytest.param(case, id=name) for name, case in c.items()]


@pytest.mark.parametrize("tc", _cases())
async def test_sync_cron_job(tc: Case) -> None:
    cj = cron_job(tc.schedule, policy=tc.policy, suspend=tc.suspend)
    if tc.time_zone is not None:
        cj["spec"]["timeZone"] = tc.time_zone
    if tc.deadline is not None:
        cj["spec"]["startingDeadlineSeconds"] = tc.deadline
    real_cj: dict[str, Any] = {**cj, "status": {}}
    jobs: list[dict[str, Any]] = []
    job: dict[str, Any] | None = None
    if tc.ran_previously:
        cj["metadata"]["creationTimestamp"] = ts(tc.cronjob_creation or JUST_BEFORE_THE_PRIOR_HOUR)
        cj["status"] = {"lastScheduleTime": ts(tc.last_schedule or JUST_AFTER_THE_PRIOR_HOUR)}
        job = job_from_template(cj, tc.job_creation)
        job["metadata"].update(uid="1234", namespace="snazzycats")
        if tc.still_active:
            ref = object_reference(job)
            assert ref is not None
            if tc.job_in_active_status:
                cj["status"]["active"] = [ref]
            real_cj["status"] = {"active": [ref]}
        else:
            job["status"] = {"completionTime": ts(tc.job_creation + 10 * S),
                             "conditions": [{"type": "Complete", "status": "True"}]}
        if not tc.job_not_in_lister:
            jobs.append(job)
    else:
        cj["metadata"]["creationTimestamp"] = ts(tc.cronjob_creation or JUST_BEFORE_THE_HOUR)
        assert not tc.still_active, "test setup error: this case makes no sense"

    fx = new_controller(tc.now, FakeJobControl(job=job, create_error=tc.job_create_error, error=tc.job_get_error),
                        FakeCronJobControl(cron_job=real_cj))
    work = {**cj, "status": dict(cj.get("status") or {})}
    outcome = await fx.controller.sync_cron_job(work, jobs)

    assert (outcome.error is not None) is tc.expect_err, outcome.error
    if tc.expected_requeue is not None:
        assert outcome.requeue_after == tc.expected_requeue
    else:
        assert outcome.requeue_after is None
    assert outcome.update_status is tc.expect_update_status
    if tc.ran_previously and not tc.still_active:
        assert work["status"].get("lastSuccessfulTime") == ts(tc.job_creation + 10 * S)

    assert len(fx.jobs.jobs) == (1 if tc.expect_create else 0)
    for created in fx.jobs.jobs:
        ref = created["metadata"]["ownerReferences"][0]
        assert (ref["apiVersion"], ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "batch/v1", "CronJob", "mycronjob", "1a2b3c", True)
        assert work["status"]["lastScheduleTime"] == created["metadata"]["creationTimestamp"]
        assert created["metadata"]["name"] in [r["name"] for r in work["status"]["active"]]
    assert len(fx.jobs.deleted) == (1 if tc.expect_delete else 0)
    assert len(work["status"].get("active") or []) == tc.expect_active

    expected_events = int(tc.expect_create) + int(tc.expect_delete) + int(tc.expect_already_active) + \
        tc.expected_warnings
    assert ("JobAlreadyActive" in fx.recorder.reasons()) is tc.expect_already_active
    assert len(fx.recorder.events) == expected_events, fx.recorder.events
    assert fx.recorder.warnings() == tc.expected_warnings, fx.recorder.events
    assert work is not cj
