"""The CronJob controller's pure helpers, after upstream's utils_test.go (TestGetJobFromTemplate2,
TestNextScheduleTime, TestByJobStartTime, TestMostRecentScheduleTime, TestNextScheduleTimeDuration) plus
TestGetJobName and the active-list helpers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from controller_manager.api.cron import parse_standard
from controller_manager.controllers.cronjob.util import (
    CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION,
    NEXT_SCHEDULE_DELTA,
    InvalidSchedule,
    MissedSchedules,
    delete_from_active_list,
    in_active_list,
    in_active_list_by_name,
    job_from_template,
    job_name,
    job_start_sort_key,
    most_recent_schedule_time,
    next_schedule_time,
    next_schedule_time_duration,
)

from .objects import TOP_OF_THE_HOUR, after_top, at, cron_job, owned_job, ts, with_status

H, M, S = timedelta(hours=1), timedelta(minutes=1), timedelta(seconds=1)


def _cj(schedule: str, creation: datetime, last: datetime | None = None, **spec: Any) -> dict[str, Any]:
    cj = cron_job(schedule, creation=creation, **spec)
    return with_status(cj, lastScheduleTime=ts(last)) if last is not None else cj


@pytest.mark.parametrize(("zone", "annotations", "expected_stamp", "count"), [
    pytest.param("UTC", {"x": "y"}, "2016-05-19T10:00:00Z", 2, id="utc-one-annotation"),
    pytest.param(None, {"x": "y"}, "2016-05-19T10:00:00Z", 2, id="no-zone-one-annotation"),
    pytest.param("Europe/Rome", {"x": "y", "z": "x"}, "2016-05-19T12:00:00+02:00", 3,
                 id="zone-several-annotations"),
])
def test_job_from_template(zone: str | None, annotations: dict[str, str], expected_stamp: str, count: int) -> None:
    cj = cron_job(timeZone=zone) if zone else cron_job()
    cj["spec"]["jobTemplate"]["metadata"]["annotations"] = annotations
    cj["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] = 1
    job = job_from_template(cj, TOP_OF_THE_HOUR)
    assert job["metadata"]["name"].startswith("mycronjob-")
    assert job["metadata"]["labels"] == {"a": "b"}
    assert len(job["metadata"]["annotations"]) == count
    assert job["metadata"]["annotations"][CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION] == expected_stamp
    assert job["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "mycronjob",
                                                   "uid": "1a2b3c", "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"] == cj["spec"]["jobTemplate"]["spec"]
    assert job["spec"] is not cj["spec"]["jobTemplate"]["spec"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")


@pytest.mark.parametrize(("scheduled", "expected"), [
    pytest.param(TOP_OF_THE_HOUR, "mycronjob-24394200", id="top-of-the-hour"),
    pytest.param(TOP_OF_THE_HOUR + 59 * S, "mycronjob-24394200", id="same-minute"),
    pytest.param(TOP_OF_THE_HOUR + M, "mycronjob-24394201", id="next-minute"),
    pytest.param(at("1970-01-01T00:00:00Z"), "mycronjob-0", id="epoch"),
])
def test_job_name(scheduled: datetime, expected: str) -> None:
    assert job_name(cron_job(), scheduled) == expected


def test_next_schedule_time_cases() -> None:
    """TestNextScheduleTime, case by case, on an hourly schedule."""
    sched = parse_standard("0 * * * ?")
    t1, t2 = TOP_OF_THE_HOUR, TOP_OF_THE_HOUR + H
    # 1: no known start times, none needed yet.
    assert next_schedule_time(_cj("0 * * * ?", t1 - 10 * M), t1 - 7 * M, sched) == (None, False)
    # 2: no known start times, one needed.
    assert next_schedule_time(_cj("0 * * * ?", t1 - 10 * M), t1 + 2 * S, sched) == (t1, False)
    # 3: known last schedule time, no start needed.
    assert next_schedule_time(_cj("0 * * * ?", t1 - 10 * M, t1), t1 + 2 * M, sched) == (None, False)
    # 4: known last schedule time, a start needed.
    assert next_schedule_time(_cj("0 * * * ?", t1 - 10 * M, t1), t2 + 5 * M, sched) == (t2, False)
    # 5: two starts needed: only the latest runs.
    assert next_schedule_time(_cj("0 * * * ?", t1 - 2 * H, t1 - H), t2 + 5 * M, sched) == (t2, False)
    # 6: far behind, no deadline: still the latest, and too many missed.
    latest, too_many = next_schedule_time(_cj("0 * * * ?", t1 - 2 * H, t1 - H), t2 + timedelta(days=10), sched)
    assert latest == t2 + timedelta(days=10)
    assert too_many
    # 7: far behind, short deadline: a start within the deadline, not too many.
    cj = _cj("0 * * * ?", t1 - 2 * H, t1 - H, startingDeadlineSeconds=2 * 60 * 60)
    latest, too_many = next_schedule_time(cj, t2 + timedelta(days=10), sched)
    assert latest is not None
    assert not too_many
    # 8: a schedule that never fires is an error.
    with pytest.raises(InvalidSchedule, match="time difference between two schedules is less than 1 second"):
        next_schedule_time(_cj("59 23 31 2 *", t1 + 10 * S), t1 + H, parse_standard("59 23 31 2 *"))


def test_job_start_order() -> None:
    """TestByJobStartTime: by start time, unstarted last, names breaking ties."""
    a_nil, b_nil = owned_job("a", "ns", None), owned_job("b", "ns", None)
    now, later = at("2018-01-01T02:03:04Z"), at("2019-01-01T02:03:04Z")
    a_set, b_set = owned_job("a", "ns", None, start=now), owned_job("b", "ns", None, start=now)
    a_later = owned_job("a", "ns", None, start=later)
    cases = [([b_nil, a_nil], [a_nil, b_nil]), ([a_nil, b_set], [b_set, a_nil]), ([a_set, b_nil], [a_set, b_nil]),
             ([b_set, a_set], [a_set, b_set]), ([a_later, b_set], [b_set, a_later])]
    for given, expected in cases:
        assert sorted(given, key=job_start_sort_key) == expected


_HALF_PAST, _MINUTE_AFTER = after_top(30 * M), after_top(M)


@pytest.mark.parametrize(("schedule", "creation", "last", "deadline", "include", "now", "earliest", "recent",
                          "missed"), [
    pytest.param("0 * * * *", TOP_OF_THE_HOUR, None, None, False, after_top(30 * S), TOP_OF_THE_HOUR, None,
                 MissedSchedules.NONE, id="now before next schedule"),
    pytest.param("0 * * * *", TOP_OF_THE_HOUR, None, None, False, after_top(61 * M), TOP_OF_THE_HOUR,
                 after_top(60 * M), MissedSchedules.NONE, id="now just after next schedule"),
    pytest.param("0 * * * *", after_top(10 * S), None, None, False, after_top(301 * M), after_top(10 * S),
                 after_top(300 * M), MissedSchedules.FEW, id="missed 5 schedules"),
    pytest.param("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR, _HALF_PAST, None, False, after_top(24 * H + 31 * M),
                 _HALF_PAST, after_top(24 * H + 30 * M), MissedSchedules.FEW, id="complex schedule"),
    pytest.param("30 10,11,12 * * 1-5", TOP_OF_THE_HOUR, _HALF_PAST, None, False, after_top(30 * H + 30 * M),
                 _HALF_PAST, None, MissedSchedules.FEW, id="another complex schedule"),
    pytest.param("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR, _HALF_PAST, None, False, after_top(96 * H + 31 * M),
                 _HALF_PAST, after_top(96 * H + 30 * M), MissedSchedules.FEW,
                 id="complex schedule with longer diff between executions"),
    pytest.param("30 6-16/4 * * 1-5", TOP_OF_THE_HOUR, None, None, False, after_top(24 * H + 31 * M),
                 TOP_OF_THE_HOUR, after_top(24 * H + 30 * M), MissedSchedules.FEW,
                 id="complex schedule with shorter diff between executions"),
    pytest.param("@every 1h", after_top(-59 * M), _MINUTE_AFTER, 10, False, after_top(7 * 24 * H), _MINUTE_AFTER,
                 after_top(6 * 24 * H + 23 * H + M), MissedSchedules.MANY, id="@every schedule"),
    pytest.param("0 * * * *", TOP_OF_THE_HOUR, TOP_OF_THE_HOUR, None, False, after_top(30 * S), TOP_OF_THE_HOUR,
                 None, MissedSchedules.NONE, id="earliestTime being CreationTimestamp and LastScheduleTime"),
    pytest.param("*/5 * * * *", TOP_OF_THE_HOUR, _HALF_PAST, None, False, after_top(31 * M), _HALF_PAST, None,
                 MissedSchedules.NONE, id="earliestTime being LastScheduleTime"),
    pytest.param("*/5 * * * *", TOP_OF_THE_HOUR, _HALF_PAST, 60, False, after_top(31 * M), _HALF_PAST, None,
                 MissedSchedules.NONE, id="earliestTime being LastScheduleTime (within StartingDeadlineSeconds)"),
    pytest.param("*/5 * * * *", TOP_OF_THE_HOUR, _HALF_PAST, 60, True, after_top(32 * M), after_top(31 * M), None,
                 MissedSchedules.NONE, id="earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)"),
])
def test_most_recent_schedule_time(schedule: str, creation: datetime, last: datetime | None, deadline: int | None,
                                   include: bool, now: datetime, earliest: datetime, recent: datetime | None,
                                   missed: MissedSchedules) -> None:
    spec = {"startingDeadlineSeconds": deadline} if deadline is not None else {}
    cj = _cj(schedule, creation, last, **spec)
    assert most_recent_schedule_time(cj, now, parse_standard(schedule), include) == (earliest, recent, missed)


def test_most_recent_schedule_time_rogue_cronjob() -> None:
    cj = _cj("59 23 31 2 *", after_top(10 * S))
    with pytest.raises(InvalidSchedule):
        most_recent_schedule_time(cj, after_top(H), parse_standard("59 23 31 2 *"), False)


@pytest.mark.parametrize(("schedule", "last", "now", "expected"), [
    pytest.param("30 6-16/4 * * 1-5", _HALF_PAST, after_top(24 * H + 31 * M), 3 * H + 59 * M,
                 id="complex schedule skipping weekend"),
    pytest.param("30 10,11,12 * * 1-5", _HALF_PAST, after_top(30 * H + 30 * M), 66 * H,
                 id="another complex schedule skipping weekend"),
    pytest.param("0 12 * * 4", after_top(2 * H), after_top(19 * 24 * H + H + 30 * M), 48 * H + 30 * M,
                 id="once a week cronjob, missed two runs"),
    pytest.param("0 12 * * 5", None, after_top(6 * H), 20 * H, id="no previous run of a cronjob"),
    pytest.param("59 23 31 2 *", None, after_top(6 * H), None, id="invalid schedule aims from now"),
])
def test_next_schedule_time_duration(schedule: str, last: datetime | None, now: datetime,
                                     expected: timedelta | None) -> None:
    cj = _cj(schedule, TOP_OF_THE_HOUR, last)
    got = next_schedule_time_duration(cj, now, parse_standard(schedule))
    if expected is None:
        # Nothing ever fires: the zero time minus now, as upstream computes it (a huge negative wait,
        # which the queue treats as "at once"); the CronJob is then parked by its InvalidSchedule event.
        assert got < timedelta(0)
    else:
        assert got >= timedelta(0)
        assert got == expected + NEXT_SCHEDULE_DELTA


def test_active_list_helpers() -> None:
    ref1 = {"kind": "Job", "namespace": "snazzycats", "name": "j1", "uid": "u1"}
    ref2 = {"kind": "Job", "namespace": "snazzycats", "name": "j2", "uid": "u2"}
    cj = with_status(cron_job(), active=[ref1, ref2])
    assert in_active_list(cj, "u1")
    assert not in_active_list(cj, "u3")
    assert in_active_list_by_name(cj, "snazzycats", "j2")
    assert not in_active_list_by_name(cj, "other", "j2")
    delete_from_active_list(cj, "u1")
    assert cj["status"]["active"] == [ref2]
    delete_from_active_list(cj, "u2")
    assert "active" not in cj["status"]  # empty lists are omitted, as the API server would
