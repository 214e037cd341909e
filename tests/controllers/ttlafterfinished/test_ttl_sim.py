"""The TTL-after-finished controller in-process against kube-sim: finished Jobs are deleted (Foreground) once
their TTL has run out on the controller's clock, and not before; with the Job controller running, a Job whose
pods succeed is cleaned up end to end."""

from __future__ import annotations

import time
from typing import Any

from controller_manager.api.meta import format_time
from controller_manager.api.resources import JOBS
from controller_manager.client.errors import NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.job import JobController
from controller_manager.controllers.ttlafterfinished import TTLAfterFinishedController
from tests.controllers.harness import Harness, controller_harness, wait_for

NS = "default"


def _job(name: str, ttl: int | None, **annotations: str) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    if annotations:
        template["metadata"] = {"annotations": {f"sim.controller-manager.io/{k.replace('_', '-')}": v
                                                for k, v in annotations.items()}}
    spec: dict[str, Any] = {"template": template}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


async def _finish(h: Harness, name: str, condition: str, at: float) -> None:
    """Write the finished status the Job controller would write (no Job controller runs in these tests)."""
    stamp = format_time(at)
    criteria = "SuccessCriteriaMet" if condition == "Complete" else "FailureTarget"
    status: dict[str, Any] = {"startTime": stamp, "conditions": [
        {"type": criteria, "status": "True", "lastTransitionTime": stamp},
        {"type": condition, "status": "True", "lastTransitionTime": stamp}]}
    if condition == "Complete":
        status.update(completionTime=stamp, succeeded=1)
    else:
        status.update(failed=1)
    await h.client.patch(JOBS, name, {"status": status}, NS, subresource="status")


async def _deleted_or_deleting(h: Harness, name: str) -> bool:
    """Foreground deletion: the Job is marked (deletionTimestamp + foregroundDeletion finalizer) until the
    garbage collector has removed its pods, then it goes."""
    try:
        job = await h.client.get(JOBS, name, NS)
    except NotFound:
        return True
    meta = job["metadata"]
    return bool(meta.get("deletionTimestamp")) and "foregroundDeletion" in (meta.get("finalizers") or [])


async def test_finished_jobs_go_when_their_ttl_runs_out() -> None:
    clock = FakeClock(start=float(int(time.time())))
    async with controller_harness(TTLAfterFinishedController, nodes=1, controller_clock=clock) as h:
        queue = h.controller(TTLAfterFinishedController).queue
        for name, ttl in (("zero", 0), ("thirty", 30), ("failed", 5), ("forever", None), ("running", 0)):
            await h.client.create(JOBS, _job(name, ttl), NS)
        await _finish(h, "zero", "Complete", clock.now())
        await _finish(h, "thirty", "Complete", clock.now())
        await _finish(h, "failed", "Failed", clock.now())
        await _finish(h, "forever", "Complete", clock.now())

        await wait_for(lambda: _deleted_or_deleting(h, "zero"), what="the TTL-0 job deleted")

        async def two_waiting() -> bool:
            return queue.waiting() == 2 and len(queue) == 0

        await wait_for(two_waiting, what="the other finished jobs to wait for their TTL")
        clock.advance(4.5)
        assert not await _deleted_or_deleting(h, "failed")
        clock.advance(1)
        await wait_for(lambda: _deleted_or_deleting(h, "failed"), what="the failed job deleted after 5s")
        assert not await _deleted_or_deleting(h, "thirty")
        clock.advance(25)
        await wait_for(lambda: _deleted_or_deleting(h, "thirty"), what="the job deleted after 30s")

        clock.advance(3600)
        for name in ("forever", "running"):  # no TTL, or not finished: never touched
            job = await h.client.get(JOBS, name, NS)
            assert not job["metadata"].get("deletionTimestamp")
        assert h.controller(TTLAfterFinishedController).health() is None


async def test_raising_the_ttl_before_it_runs_out_postpones_the_delete() -> None:
    clock = FakeClock(start=float(int(time.time())))
    async with controller_harness(TTLAfterFinishedController, nodes=1, controller_clock=clock) as h:
        queue = h.controller(TTLAfterFinishedController).queue
        await h.client.create(JOBS, _job("patient", 10), NS)
        await _finish(h, "patient", "Complete", clock.now())

        async def waiting() -> bool:
            return queue.waiting() == 1 and len(queue) == 0

        await wait_for(waiting, what="the job to wait for its TTL")
        await h.client.patch(JOBS, "patient", {"spec": {"ttlSecondsAfterFinished": 60}}, NS)
        clock.advance(11)
        await wait_for(waiting, what="the job to wait for its new TTL")
        assert not await _deleted_or_deleting(h, "patient")
        clock.advance(50)
        await wait_for(lambda: _deleted_or_deleting(h, "patient"), what="the job deleted at the new TTL")


async def test_with_the_job_controller_a_succeeded_job_is_cleaned_up() -> None:
    async with controller_harness(JobController, TTLAfterFinishedController, nodes=2) as h:
        await h.client.create(JOBS, _job("quick", 0, run_seconds="0.2", exit_code="0"), NS)

        async def gone_after_completing() -> bool:
            try:
                job = await h.client.get(JOBS, "quick", NS)
            except NotFound:
                return True
            done = any(c.get("type") == "Complete" and c.get("status") == "True"
                       for c in (job.get("status") or {}).get("conditions") or [])
            return done and await _deleted_or_deleting(h, "quick")

        await wait_for(gone_after_completing, timeout=30, what="the completed job to be deleted")
