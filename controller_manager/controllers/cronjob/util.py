"""Pure helpers of the CronJob controller (upstream ``pkg/controller/cronjob/utils.go`` and the Job helpers
of ``pkg/controller/job/util``): schedule arithmetic, the active list, building a Job from the template.

Guarantees:
- :func:`most_recent_schedule_time` is upstream's ``mostRecentScheduleTime``: the earliest time considered
  (last schedule time, else creation time, raised to ``now - startingDeadlineSeconds`` when asked), the most
  recent activation at or before ``now`` (None if there is none), and whether none, a few or many (> 100)
  activations were missed; it counts missed activations arithmetically, so a CronJob idle for years costs
  a handful of ``next`` calls. A schedule whose consecutive activations are under a second apart (one
  that never fires, like ``59 23 31 2 *``) raises :class:`InvalidSchedule`.
- :func:`next_schedule_time_duration` is how long until the next activation after the most recent one,
  plus ``NEXT_SCHEDULE_DELTA`` (100 ms, against clock skew), never based on a time before the last run.
- :func:`job_from_template` builds the Job ``<cronjob>-<scheduled time in minutes since the epoch>`` with
  the template's labels and annotations, the ``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation
  (RFC 3339 in the CronJob's time zone), the CronJob as controller, and a copy of the template's spec.
- Nothing here mutates its arguments except the ``*_active_list`` helpers, which edit the working copy of
  a CronJob the controller owns.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import Any

from controller_manager.api.cron import ZERO, Schedule, load_location
from controller_manager.api.meta import controller_ref, deep_copy, format_time, meta, parse_time
from controller_manager.api.resources import CRONJOBS, JOBS
from controller_manager.controllerutil.controller_ref import new_controller_ref
from controller_manager.controllerutil.sharding import inherit_shard_labels

__all__ = [
    "CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION",
    "MANY_MISSED_LIMIT",
    "NEXT_SCHEDULE_DELTA",
    "InvalidSchedule",
    "MissedSchedules",
    "delete_from_active_list",
    "finished_condition",
    "format_rfc3339",
    "in_active_list",
    "in_active_list_by_name",
    "is_job_finished",
    "is_job_succeeded",
    "job_from_template",
    "job_name",
    "job_start_sort_key",
    "most_recent_schedule_time",
    "next_schedule_time",
    "next_schedule_time_duration",
    "to_datetime",
]

Obj = Mapping[str, Any]

CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = timedelta(milliseconds=100)
MANY_MISSED_LIMIT = 100


class MissedSchedules(enum.Enum):
    NONE = "none"
    FEW = "few"
    MANY = "many"


class InvalidSchedule(ValueError):
    """The schedule parses but makes no sense (its activations are under a second apart, or never come)."""


# --- time ---------------------------------------------------------------------------------------------------


def to_datetime(value: Any) -> datetime | None:
    """An API timestamp (RFC 3339 string) as an aware UTC datetime; None if absent or unparsable."""
    if not isinstance(value, str):
        return None
    ts = parse_time(value)
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def format_rfc3339(t: datetime) -> str:
    """Go's ``Format(time.RFC3339)``: seconds precision, ``Z`` for a zero offset, else ``+hh:mm``."""
    text = t.replace(microsecond=0).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _seconds_round(d: timedelta) -> int:
    """``Duration.Round(time.Second).Seconds()``: to the nearest second, halves away from zero."""
    micros = d // timedelta(microseconds=1)
    sign = -1 if micros < 0 else 1
    return sign * ((abs(micros) + 500_000) // 1_000_000)


def _seconds_trunc(d: timedelta) -> int:
    """``int64(d.Seconds())``: whole seconds, truncated toward zero."""
    micros = d // timedelta(microseconds=1)
    whole = abs(micros) // 1_000_000
    return whole if micros >= 0 else -whole


# --- schedule arithmetic ------------------------------------------------------------------------------------


def most_recent_schedule_time(cj: Obj, now: datetime, schedule: Schedule, include_starting_deadline: bool
                              ) -> tuple[datetime, datetime | None, MissedSchedules]:
    """(earliest time considered, most recent activation in (earliest, now] or None, how many were missed)."""
    spec = cj.get("spec") or {}
    status = cj.get("status") or {}
    earliest = to_datetime(status.get("lastScheduleTime")) or to_datetime(meta(cj).get("creationTimestamp")) or ZERO
    missed = MissedSchedules.NONE
    deadline = spec.get("startingDeadlineSeconds")
    if include_starting_deadline and isinstance(deadline, int):
        # Nothing older than the deadline may start any more, so do not look before it.
        scheduling_deadline = now - timedelta(seconds=deadline)
        if scheduling_deadline > earliest:
            earliest = scheduling_deadline

    t1 = schedule.next(earliest)
    t2 = schedule.next(t1)
    if now < t1:
        return earliest, None, missed
    if now < t2:
        return earliest, t1, missed

    between = _seconds_round(t2 - t1)
    if between < 1:
        raise InvalidSchedule("time difference between two schedules is less than 1 second")
    # Count the missed activations roughly from the interval, then let the schedule find the exact last
    # one from a point one interval before the estimate (irregular specs like "30 6-16/4 * * 1-5").
    elapsed = _seconds_trunc(now - t1)
    number_missed = elapsed // between + 1
    most_recent: datetime | None = None
    t = schedule.next(t1 + timedelta(seconds=(number_missed - 2) * between))
    while t != ZERO and t <= now:
        most_recent = t
        t = schedule.next(t)

    if number_missed > MANY_MISSED_LIMIT:
        missed = MissedSchedules.MANY
    elif number_missed > 0:
        missed = MissedSchedules.FEW
    return earliest, most_recent, missed


def next_schedule_time_duration(cj: Obj, now: datetime, schedule: Schedule) -> timedelta:
    """How long until the activation after the most recent one (or after now), plus the skew margin."""
    try:
        earliest, most_recent, missed = most_recent_schedule_time(cj, now, schedule, False)
    except InvalidSchedule:
        most_recent = now  # still come back at some point: aim for the next slot from now
    else:
        if most_recent is None:
            most_recent = earliest if missed is MissedSchedules.NONE else now
    return schedule.next(most_recent) + NEXT_SCHEDULE_DELTA - now


def next_schedule_time(cj: Obj, now: datetime, schedule: Schedule) -> tuple[datetime | None, bool]:
    """(the most recent unmet activation at or before now, or None; whether too many were missed).

    Raises :class:`InvalidSchedule` for a schedule that never sensibly fires."""
    _, most_recent, missed = most_recent_schedule_time(cj, now, schedule, True)
    if most_recent is None or most_recent > now:
        return None, False
    return most_recent, missed is MissedSchedules.MANY


# --- the active list (on the controller's own working copy) -------------------------------------------------


def _active(cj: Obj) -> list[Mapping[str, Any]]:
    return list((cj.get("status") or {}).get("active") or [])


def in_active_list(cj: Obj, uid: str | None) -> bool:
    return any(ref.get("uid") == uid for ref in _active(cj))


def in_active_list_by_name(cj: Obj, namespace: str | None, name: str) -> bool:
    return any(ref.get("name") == name and ref.get("namespace") == namespace for ref in _active(cj))


def delete_from_active_list(cj: MutableMapping[str, Any], uid: str | None) -> None:
    status = cj.setdefault("status", {})
    kept = [ref for ref in _active(cj) if ref.get("uid") != uid]
    if kept:
        status["active"] = kept
    else:
        status.pop("active", None)  # an empty list is omitted on the wire


# --- Jobs ---------------------------------------------------------------------------------------------------


def finished_condition(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` if the Job has that condition True (the first such), else None."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return str(cond["type"])
    return None


def is_job_finished(job: Obj) -> bool:
    return finished_condition(job) is not None


def is_job_succeeded(job: Obj) -> bool:
    return any(c.get("type") == "Complete" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def job_start_sort_key(job: Obj) -> tuple[int, float, str]:
    """Oldest first by ``status.startTime``, jobs that never started last, names breaking ties."""
    start = parse_time((job.get("status") or {}).get("startTime"))
    name = str(meta(job).get("name") or "")
    return (1, 0.0, name) if start is None else (0, start, name)


def is_controlled_by(job: Obj, cj: Obj) -> bool:
    ref = controller_ref(job)
    return ref is not None and ref.get("uid") == meta(cj).get("uid")


def job_name(cj: Obj, scheduled: datetime) -> str:
    """``<cronjob>-<minutes since the epoch>``: one name per activation, so a retry never makes a second Job."""
    return f"{meta(cj).get('name')}-{int(scheduled.timestamp()) // 60}"


def job_from_template(cj: Obj, scheduled: datetime) -> dict[str, Any]:
    """The Job to create for the activation at ``scheduled`` (raises UnknownTimeZone for a bad timeZone)."""
    template = (cj.get("spec") or {}).get("jobTemplate") or {}
    tmeta = template.get("metadata") or {}
    labels = inherit_shard_labels(cj, tmeta.get("labels")) or {}
    annotations = dict(tmeta.get("annotations") or {})
    zone = load_location(str((cj.get("spec") or {}).get("timeZone") or ""))
    annotations[CRONJOB_SCHEDULED_TIMESTAMP_ANNOTATION] = format_rfc3339(scheduled.astimezone(zone))
    job_meta: dict[str, Any] = {
        "name": job_name(cj, scheduled),
        "creationTimestamp": format_time(scheduled.timestamp()),
        "ownerReferences": [new_controller_ref(cj, CRONJOBS)],
    }
    if labels:
        job_meta["labels"] = labels
    if annotations:
        job_meta["annotations"] = annotations
    return {
        "apiVersion": JOBS.api_version,
        "kind": JOBS.kind,
        "metadata": job_meta,
        "spec": deep_copy(dict(template.get("spec") or {})),
    }
