"""Printers of ``batch``: jobs and cron jobs."""

from __future__ import annotations

from typing import Any

from controller_manager.api.meta import parse_time
from controller_manager.sim.apiserver.tables.cells import (
    AGE,
    CONTAINERS,
    IMAGES,
    NAME,
    SELECTOR,
    Column,
    Obj,
    Printer,
    age,
    bool_ptr,
    condition_status,
    container_cells,
    format_label_selector,
    human_duration,
    integer,
    meta,
    name,
    pod_template_containers,
    since,
    spec,
    status,
)


def _job_completions(job: Obj) -> str:
    succeeded = integer(status(job).get("succeeded"))
    completions = spec(job).get("completions")
    if completions is not None:
        return f"{succeeded}/{completions}"
    parallelism = integer(spec(job).get("parallelism"))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: Obj, now: float) -> str:
    start = parse_time(status(job).get("startTime"))
    if start is None:
        return ""
    end = parse_time(status(job).get("completionTime"))
    return human_duration((now if end is None else end) - start)


def _job_status(job: Obj) -> str:
    conditions = status(job).get("conditions")
    if condition_status(conditions, "Complete") == "True":
        return "Complete"
    if condition_status(conditions, "Failed") == "True":
        return "Failed"
    if meta(job).get("deletionTimestamp") is not None:
        return "Terminating"
    if condition_status(conditions, "Suspended") == "True":
        return "Suspended"
    if condition_status(conditions, "FailureTarget") == "True":
        return "FailureTarget"
    return "Running"


def _job_cells(job: Obj, now: float) -> list[Any]:
    names, images = container_cells(pod_template_containers(spec(job).get("template")))
    return [name(job), _job_status(job), _job_completions(job), _job_duration(job, now), age(job, now),
            names, images, format_label_selector(spec(job).get("selector"))]


def _cron_job_cells(cj: Obj, now: float) -> list[Any]:
    cj_spec = spec(cj)
    job_spec = spec(cj_spec.get("jobTemplate") or {})
    last = status(cj).get("lastScheduleTime")
    names, images = container_cells(pod_template_containers(job_spec.get("template")))
    return [name(cj), str(cj_spec.get("schedule") or ""), cj_spec.get("timeZone") or "<none>",
            bool_ptr(cj_spec.get("suspend")), len(status(cj).get("active") or []),
            since(last, now) if last else "<none>", age(cj, now), names, images,
            format_label_selector(job_spec.get("selector"))]


PRINTERS: dict[str, Printer] = {
    "Job": Printer((NAME, Column("Status"), Column("Completions"), Column("Duration"), AGE, CONTAINERS, IMAGES,
                    SELECTOR), _job_cells),
    "CronJob": Printer((NAME, Column("Schedule"), Column("Timezone"), Column("Suspend", "boolean"),
                        Column("Active", "integer"), Column("Last Schedule"), AGE, CONTAINERS, IMAGES, SELECTOR),
                       _cron_job_cells),
}
