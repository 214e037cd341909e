"""Times and objects shared by the CronJob tests (the fixtures of upstream's cronjob_controllerv2_test.go and
utils_test.go: a CronJob "mycronjob" in "snazzycats", the hour 2016-05-19T10:00Z and the times around it)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from controller_manager.api.meta import format_time


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


TOP_OF_THE_HOUR = at("2016-05-19T10:00:00Z")
JUST_A_SECOND_BEFORE_THE_HOUR = at("2016-05-19T09:59:59Z")
JUST_AFTER_THE_PRIOR_HOUR = at("2016-05-19T09:01:00Z")
JUST_BEFORE_THE_PRIOR_HOUR = at("2016-05-19T08:59:00Z")
JUST_AFTER_THE_HOUR = at("2016-05-19T10:01:00Z")
JUST_BEFORE_THE_HOUR = at("2016-05-19T09:59:00Z")
JUST_BEFORE_THE_NEXT_HOUR = at("2016-05-19T10:59:00Z")
WEEK_AFTER_THE_HOUR = at("2016-05-26T10:00:00Z")


def after_top(delta: timedelta) -> datetime:
    return TOP_OF_THE_HOUR + delta


def ts(t: datetime) -> str:
    return format_time(t.timestamp())


def job_spec() -> dict[str, Any]:
    return {
        "parallelism": 1,
        "completions": 1,
        "template": {
            "metadata": {"labels": {"foo": "bar"}},
            "spec": {"containers": [{"name": "c", "image": "foo/bar"}]},
        },
    }


def cron_job(schedule: str = "* * * * ?", *, policy: str = "Allow", creation: datetime = JUST_BEFORE_THE_HOUR,
             **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "mycronjob", "namespace": "snazzycats", "uid": "1a2b3c", "resourceVersion": "1",
                     "creationTimestamp": ts(creation)},
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": policy,
            "jobTemplate": {"metadata": {"labels": {"a": "b"}, "annotations": {"x": "y"}}, "spec": job_spec()},
            **spec,
        },
    }


def with_status(obj: dict[str, Any], **status: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["status"] = {**(out.get("status") or {}), **status}
    return out


def owned_job(name: str, namespace: str, owner: str | None, *, uid: str | None = None, start: datetime | None = None,
              finished: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job whose controller reference names ``owner`` (upstream's tables give only the name)."""
    job_meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        job_meta["uid"] = uid
    if labels:
        job_meta["labels"] = labels
    if owner:
        job_meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": owner, "uid": "",
                                        "controller": True}]
    status: dict[str, Any] = {}
    if start is not None:
        status["startTime"] = ts(start)
    if finished:
        status["conditions"] = [{"type": finished, "status": "True"}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": job_spec(), "status": status}
