"""The Job controller's two queues, as upstream has them: ``job`` for Jobs and ``job_orphan_pod`` for the
finalizer cleanup of orphaned pods, each with its own workers and metrics (fake client, fake clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.resources import Resource
from controller_manager.clock import FakeClock
from controller_manager.runtime.controller import run_controller
from controller_manager.runtime.informers import Added, Deleted, Updated
from tests.prometheus import sample_value

from .fakes import RecordingClient, build_pod, cache, new_controller, new_job

LATENCY = 0.05  # every pod write takes this long on the fake clock: an API server under load


@dataclass
class SlowClient(RecordingClient):
    """A recording client whose pod creates and patches take ``LATENCY`` on the controller's clock."""

    clock: FakeClock | None = None
    first_create_at: float | None = None
    patching: int = 0
    most_patching: int = 0
    patched_at: list[float] = field(default_factory=list)

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        assert self.clock is not None
        if self.first_create_at is None:
            self.first_create_at = self.clock.monotonic()
        await self.clock.sleep(LATENCY)
        return await super().create(res, obj, namespace)

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        assert self.clock is not None
        self.patching += 1
        self.most_patching = max(self.most_patching, self.patching)
        try:
            await self.clock.sleep(LATENCY)
        finally:
            self.patching -= 1
        self.patched_at.append(self.clock.monotonic())
        return await super().patch(res, name, patch, namespace, patch_type=patch_type, subresource=subresource)


async def run_until(clock: FakeClock, done: Any, limit: float, step: float = 0.01) -> float:
    """Advance the fake clock in ``step``s, letting the workers run between steps, until ``done()``; the time
    it took. Fails after ``limit`` seconds of fake time."""
    start = clock.monotonic()
    while not done():
        assert clock.monotonic() - start < limit, "fake-time limit reached"
        clock.advance(step)
        for _ in range(10):
            await asyncio.sleep(0)
    return clock.monotonic() - start


def adds(queue: str) -> float:
    return sample_value("workqueue_adds_total", {"name": queue}) or 0.0


async def test_a_deleted_jobs_orphans_do_not_hold_up_other_jobs() -> None:
    # A running Job of 200 pods is deleted: each pod still carries the tracking finalizer, so each becomes an
    # orphan to clean up, a patch apiece. A Job created just after must not wait behind those 200 patches (on
    # 5 workers, 2 s at 50 ms a patch): upstream cleans orphans on a queue and worker of their own.
    client = SlowClient()
    jm, _, clock = new_controller(client)
    client.clock = clock
    gone = new_job(parallelism=200, completions=200, name="gone")
    pods = [build_pod(gone, name=f"gone-{i}") for i in range(200)]
    cache(jm.pod_informer, *pods)
    fresh = new_job(name="fresh")
    fresh["spec"]["selector"] = {"matchLabels": {"job": "fresh"}}
    fresh["spec"]["template"]["metadata"]["labels"] = {"job": "fresh"}
    cache(jm.job_informer, fresh)
    job_adds, orphan_adds = adds("job"), adds("job_orphan_pod")

    runner = asyncio.create_task(run_controller(jm, 5))
    try:
        jm._on_job(Deleted(gone))
        jm._on_job(Added(fresh))
        waited = await run_until(clock, lambda: client.first_create_at is not None, limit=30.0)
        assert waited < 1.0, f"the new Job's first pod was created after {waited:.2f} s"

        # The orphans are all cleaned, one patch at a time (upstream's single orphan worker).
        took = await run_until(clock, lambda: len(client.patched_at) == 200, limit=60.0)
        assert client.most_patching == 1
        assert took >= 199 * LATENCY
        assert sorted(name for name, _ in client.patches) == sorted(p["metadata"]["name"] for p in pods)
    finally:
        jm.queue.shut_down()
        await run_until(clock, runner.done, limit=10.0)  # in-flight syncs may be waiting on the fake clock

    # The job queue saw the two Job keys only; the orphans went to their own queue.
    assert adds("job") - job_adds == 2
    assert adds("job_orphan_pod") - orphan_adds == 200
    assert jm.queue.name == "job"
    assert jm.orphan_queue.name == "job_orphan_pod"


async def test_job_events_count_as_retries_as_upstreams_add_after_does() -> None:
    # enqueueSyncJobImmediately is AddAfter(key, 0): workqueue_retries_total counts it, as it counts the
    # batched AddAfter(key, 1 s) of pod and status events.
    jm, _, _ = new_controller()
    job = new_job(name="counted")
    before = sample_value("workqueue_retries_total", {"name": "job"}) or 0.0
    jm._on_job(Added(job))
    updated = {**job, "metadata": {**job["metadata"], "resourceVersion": "2"}}
    jm._on_job(Updated(job, updated))  # status only: batched
    respec = {**updated, "metadata": {**updated["metadata"], "resourceVersion": "3", "generation": 2}}
    jm._on_job(Updated(updated, respec))  # spec changed: at once
    jm._on_job(Deleted(respec))
    assert (sample_value("workqueue_retries_total", {"name": "job"}) or 0.0) - before == 4
    jm.queue.shut_down()
    jm.orphan_queue.shut_down()


@dataclass
class RecordingAdmission:
    """A shard member's admission that admits everything and remembers what it was asked."""

    asked: list[tuple[str, str]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    def admit(self, queue: Any, key: str) -> bool:
        self.asked.append((queue.name, key))
        return True

    def release(self, key: str) -> None:
        self.released.append(key)


async def test_orphan_keys_pass_the_shard_admission_with_their_kind_prefix() -> None:
    # Sharding parks keys whose root another member owns; an orphan pod is told from a Job by its "pod:" prefix.
    client = SlowClient()
    jm, _, clock = new_controller(client)
    client.clock = clock
    admission = RecordingAdmission()
    jm.ctx.admission = admission
    gone = new_job(name="gone-sharded")
    pod = build_pod(gone, name="left-behind")
    cache(jm.pod_informer, pod)
    runner = asyncio.create_task(run_controller(jm, 5))
    try:
        jm._on_job(Deleted(gone))
        await run_until(clock, lambda: len(client.patched_at) == 1, limit=5.0)
    finally:
        jm.queue.shut_down()
        await run_until(clock, runner.done, limit=10.0)
    assert ("job_orphan_pod", "pod:default/left-behind") in admission.asked
    assert ("job", "default/gone-sharded") in admission.asked
    assert "pod:default/left-behind" in admission.released
