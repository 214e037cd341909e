"""The CronJob controller in-process against kube-sim, as a client sees it: Jobs appear at the minute
boundaries of the controller's FakeClock (advanced by the test; the cluster itself runs on real time),
concurrency policies, history limits, and bad schedules or time zones reported as Warning events."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest

from controller_manager.api.meta import format_time, parse_time
from controller_manager.api.resources import CRONJOBS, JOBS
from controller_manager.client.errors import NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.cronjob import CronJobController
from controller_manager.sim.apiserver.registry import strategy_for
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"


def _cron_job(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": name}, "annotations": {"team": "blue"}},
                "spec": {"template": {"spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "c", "image": "busybox"}]}}},
            },
            **spec,
        },
    }


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    # Start the controllers' clock a little behind real time, so every CronJob the sim creates (stamped with
    # real time) was created "after now" on the controller's clock: the first activation is the first minute
    # boundary after its creationTimestamp, however long the cluster took to start.
    clock = FakeClock(start=time.time() - 5)
    async with controller_harness(CronJobController, nodes=1, controller_clock=clock) as harness:
        yield harness


def _clock(h: Harness) -> FakeClock:
    assert isinstance(h.controller_clock, FakeClock)
    return h.controller_clock


async def _create(h: Harness, obj: dict[str, Any], *, scheduled: bool = True) -> dict[str, Any]:
    created = await h.client.create(CRONJOBS, obj, NS)
    if scheduled:
        queue = h.controller(CronJobController).queue
        # Synced once: it now waits (on the fake clock) for its first activation.
        await wait_for(lambda: _async(queue.waiting() > 0 and len(queue) == 0), what="the CronJob to be synced")
    return created


async def _async(value: Any) -> Any:
    return value


async def _advance_to_next_minute(h: Harness, after: float) -> int:
    """Move the controllers' clock just past the first minute boundary after ``after``; that minute's number."""
    clock = _clock(h)
    boundary = (math.floor(after / 60) + 1) * 60
    clock.advance(max(0.0, boundary + 0.2 - clock.now()))
    return boundary // 60


async def _job(h: Harness, name: str) -> dict[str, Any] | None:
    try:
        return await h.client.get(JOBS, name, NS)
    except NotFound:
        return None


async def _cj(h: Harness, name: str) -> dict[str, Any]:
    return await h.client.get(CRONJOBS, name, NS)


async def _reasons(h: Harness, name: str) -> list[str]:
    return [str(e.get("reason")) for e in await h.events_for(name, NS)]


async def _complete(h: Harness, job: dict[str, Any]) -> None:
    """What the Job controller would write when the Job's pods succeed."""
    now = format_time(time.time())
    await h.client.patch(JOBS, job["metadata"]["name"], {"status": {
        "startTime": job["metadata"]["creationTimestamp"], "completionTime": now, "succeeded": 1,
        "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                       {"type": "Complete", "status": "True", "lastTransitionTime": now}]}},
        NS, subresource="status")


def _created_at(obj: dict[str, Any]) -> float:
    ts = parse_time(obj["metadata"]["creationTimestamp"])
    assert ts is not None
    return ts


async def test_every_minute_creates_a_job_at_each_minute_boundary(h: Harness) -> None:
    cj = await _create(h, _cron_job("every-minute", "*/1 * * * *"))
    # Nothing before the boundary: half a minute more on the controller's clock changes nothing.
    assert await h.list_objects(JOBS, NS) == []

    minute = await _advance_to_next_minute(h, _created_at(cj))
    name = f"every-minute-{minute}"
    job = await wait_for(lambda: _job(h, name), what=f"job {name}")
    assert job["metadata"]["labels"]["app"] == "every-minute"
    assert job["metadata"]["annotations"]["team"] == "blue"
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == format_time(
        minute * 60)
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "CronJob", "every-minute", cj["metadata"]["uid"], True, True)

    async def status_shows_job() -> dict[str, Any] | None:
        status = (await _cj(h, "every-minute")).get("status") or {}
        return status if [a.get("name") for a in status.get("active") or []] == [name] else None

    status = await wait_for(status_shows_job, what="status.active")
    assert status["lastScheduleTime"] == format_time(minute * 60)
    assert status["active"][0]["uid"] == job["metadata"]["uid"]
    await wait_for(lambda: _async_in("SuccessfulCreate", _reasons(h, "every-minute")), what="SuccessfulCreate")

    # The next minute brings the next Job (Allow: the first is still running).
    minute2 = await _advance_to_next_minute(h, minute * 60)
    await wait_for(lambda: _job(h, f"every-minute-{minute2}"), what="the second job")
    await wait_for(lambda: _async_len_active(h, "every-minute", 2), what="two active jobs")

    # A finished Job leaves the active list and sets lastSuccessfulTime.
    await _complete(h, job)

    async def completed() -> dict[str, Any] | None:
        status = (await _cj(h, "every-minute")).get("status") or {}
        names = [a.get("name") for a in status.get("active") or []]
        return status if status.get("lastSuccessfulTime") and names == [f"every-minute-{minute2}"] else None

    await wait_for(completed, what="the finished job to leave the active list")
    await wait_for(lambda: _async_in("SawCompletedJob", _reasons(h, "every-minute")), what="SawCompletedJob")


async def _async_in(item: str, values: Any) -> bool:
    return item in await values


async def _reasons_after(h: Harness, name: str, skip: int) -> list[str]:
    """Reasons of events about ``name`` after the first ``skip`` JobAlreadyActive ones (counts included)."""
    seen = 0
    for e in await h.events_for(name, NS):
        if e.get("reason") == "JobAlreadyActive":
            seen += int(e.get("count") or 1)
    return ["JobAlreadyActive"] if seen > skip else []


async def _async_len_active(h: Harness, name: str, count: int) -> bool:
    return len(((await _cj(h, name)).get("status") or {}).get("active") or []) == count


async def test_forbid_skips_while_a_job_is_active(h: Harness) -> None:
    cj = await _create(h, _cron_job("forbid", "*/1 * * * *", concurrencyPolicy="Forbid"))
    minute = await _advance_to_next_minute(h, _created_at(cj))
    first = await wait_for(lambda: _job(h, f"forbid-{minute}"), what="the first job")
    await wait_for(lambda: _async_len_active(h, "forbid", 1), what="one active job")

    minute2 = await _advance_to_next_minute(h, minute * 60)
    await wait_for(lambda: _async_in("JobAlreadyActive", _reasons(h, "forbid")), what="JobAlreadyActive")
    assert await _job(h, f"forbid-{minute2}") is None
    assert [j["metadata"]["name"] for j in await h.list_objects(JOBS, NS)] == [f"forbid-{minute}"]

    # Once the first finishes, the skipped activation starts late (there is no startingDeadlineSeconds).
    await _complete(h, first)
    late = await wait_for(lambda: _job(h, f"forbid-{minute2}"), what="the skipped activation's job")

    async def only_late_active() -> bool:
        active = ((await _cj(h, "forbid")).get("status") or {}).get("active") or []
        return [a["uid"] for a in active] == [late["metadata"]["uid"]]

    await wait_for(only_late_active, what="the late job as the only active one")
    minute3 = await _advance_to_next_minute(h, minute2 * 60)
    await wait_for(lambda: _async_in("JobAlreadyActive", _reasons_after(h, "forbid", 1)), what="a second skip")
    assert await _job(h, f"forbid-{minute3}") is None


async def test_replace_deletes_the_running_job(h: Harness) -> None:
    cj = await _create(h, _cron_job("replace", "*/1 * * * *", concurrencyPolicy="Replace"))
    minute = await _advance_to_next_minute(h, _created_at(cj))
    await wait_for(lambda: _job(h, f"replace-{minute}"), what="the first job")
    await wait_for(lambda: _async_len_active(h, "replace", 1), what="one active job")

    minute2 = await _advance_to_next_minute(h, minute * 60)
    second = await wait_for(lambda: _job(h, f"replace-{minute2}"), what="the replacement job")

    async def only_second() -> bool:
        names = [j["metadata"]["name"] for j in await h.list_objects(JOBS, NS)]
        active = ((await _cj(h, "replace")).get("status") or {}).get("active") or []
        return names == [f"replace-{minute2}"] and [a["uid"] for a in active] == [second["metadata"]["uid"]]

    await wait_for(only_second, what="the first job replaced")
    reasons = await _reasons(h, "replace")
    assert "SuccessfulDelete" in reasons


async def test_history_limits_delete_the_oldest_finished_jobs(h: Harness) -> None:
    cj = await _create(h, _cron_job("history", "*/1 * * * *", successfulJobsHistoryLimit=1,
                                    failedJobsHistoryLimit=0))
    after = _created_at(cj)
    names = []
    for _ in range(3):
        minute = await _advance_to_next_minute(h, after)
        after = minute * 60
        job = await wait_for(partial(_job, h, f"history-{minute}"), what="a job")
        names.append(job["metadata"]["name"])
        await _complete(h, job)
        await wait_for(lambda: _async_len_active(h, "history", 0), what="the job to finish")

    async def only_newest() -> bool:
        return [j["metadata"]["name"] for j in await h.list_objects(JOBS, NS)] == names[-1:]

    await wait_for(only_newest, what="only the newest finished job kept")
    deletes = [e for e in await h.events_for("history", NS) if e["reason"] == "SuccessfulDelete"]
    assert sorted(e["message"] for e in deletes) == sorted(f"Deleted job {n}" for n in names[:-1])


@contextmanager
def _unvalidated(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let one create skip the API server's validation: an object persisted by a server whose tzdata (or
    rules) differed from the controller's, which is how bad values reach a controller in real clusters."""
    with monkeypatch.context() as m:
        m.setattr(type(strategy_for(CRONJOBS)), "check", lambda *args, **kwargs: None)
        yield


async def test_bad_schedules_and_zones_warn_and_others_keep_running(h: Harness,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Accepted by the API server, but it never fires (February 31st).
    await _create(h, _cron_job("never", "59 23 31 2 *"), scheduled=False)
    with _unvalidated(h, monkeypatch):
        await _create(h, _cron_job("garbage", "obvious error schedule"), scheduled=False)
        await _create(h, _cron_job("nowhere", "*/1 * * * *", timeZone="Mars/Olympus_Mons"), scheduled=False)
    good = await _create(h, _cron_job("good", "*/1 * * * *", timeZone="Europe/Rome"))

    async def warning(name: str, reason: str) -> dict[str, Any] | None:
        for e in await h.events_for(name, NS):
            if e["reason"] == reason:
                return e
        return None

    invalid = await wait_for(lambda: warning("never", "InvalidSchedule"), what="InvalidSchedule")
    assert invalid["type"] == "Warning"
    assert invalid["message"] == ("invalid schedule: 59 23 31 2 * : time difference between two schedules is less "
                                  "than 1 second")
    unparseable = await wait_for(lambda: warning("garbage", "UnparseableSchedule"), what="UnparseableSchedule")
    assert unparseable["message"] == ('unparseable schedule: "obvious error schedule" : expected exactly 5 fields, '
                                      "found 3: [obvious error schedule]")
    zone = await wait_for(lambda: warning("nowhere", "UnknownTimeZone"), what="UnknownTimeZone")
    assert zone["message"] == 'invalid timeZone: "Mars/Olympus_Mons": unknown time zone Mars/Olympus_Mons'
    assert zone["type"] == "Warning"

    # The good one still runs on time; the bad ones never start anything and never crash a worker.
    minute = await _advance_to_next_minute(h, _created_at(good))
    job = await wait_for(lambda: _job(h, f"good-{minute}"), what="the good CronJob's job")
    # Europe/Rome is UTC+1 or +2: the scheduled-time annotation is written in the CronJob's zone.
    stamp = job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    assert stamp.endswith(("+01:00", "+02:00"))
    assert parse_time(stamp) == minute * 60
    await _advance_to_next_minute(h, minute * 60)
    await wait_for(lambda: _async_len_active(h, "good", 2), what="the good CronJob's second job")
    assert sorted({j["metadata"]["name"].rsplit("-", 1)[0] for j in await h.list_objects(JOBS, NS)}) == ["good"]
    assert h.controller(CronJobController).health() is None


async def test_a_restarted_controller_does_not_start_an_activation_twice(h: Harness) -> None:
    cj = await _create(h, _cron_job("restart", "*/1 * * * *"))
    minute = await _advance_to_next_minute(h, _created_at(cj))
    await wait_for(lambda: _job(h, f"restart-{minute}"), what="the job")
    await wait_for(lambda: _async_len_active(h, "restart", 1), what="one active job")

    await h.restart()  # fresh caches; the controllers' clock stays where it was
    queue = h.controller(CronJobController).queue
    await wait_for(lambda: _async(queue.waiting() > 0 and len(queue) == 0), what="the CronJob to be re-synced")
    assert [j["metadata"]["name"] for j in await h.list_objects(JOBS, NS)] == [f"restart-{minute}"]
    assert "UnexpectedJob" not in await _reasons(h, "restart")

    minute2 = await _advance_to_next_minute(h, minute * 60)
    await wait_for(lambda: _job(h, f"restart-{minute2}"), what="the next activation's job")
    assert len(await h.list_objects(JOBS, NS)) == 2
