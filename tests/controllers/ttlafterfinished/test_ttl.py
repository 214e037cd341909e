"""The TTL-after-finished controller's logic: upstream's TestTimeLeft table, and the sync (processJob) against a
recording client with the FakeClock as the controller's clock."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller_manager.api.meta import format_time, key_of
from controller_manager.api.resources import JOBS, Resource
from controller_manager.client.errors import NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.ttlafterfinished import TTLAfterFinishedController
from controller_manager.controllers.ttlafterfinished.controller import JobNotCleanable, needs_cleanup, time_left
from controller_manager.runtime.controller import ControllerContext, Result
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated

NOW = datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC)
S = timedelta(seconds=1)


def new_job(completed: datetime | None = None, failed: datetime | None = None, ttl: int | None = None,
            *, uid: str = "uid-1") -> dict[str, Any]:
    conditions = [{"type": kind, "status": "True", "lastTransitionTime": format_time(when.timestamp())}
                  for kind, when in (("Complete", completed), ("Failed", failed)) if when is not None]
    spec: dict[str, Any] = {"selector": {"matchLabels": {"foo": "bar"}},
                            "template": {"metadata": {"labels": {"foo": "bar"}},
                                         "spec": {"containers": [{"name": "c", "image": "foo/bar"}]}}}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "foobar", "namespace": "default", "uid": uid, "resourceVersion": "1"},
            "spec": spec, "status": {"conditions": conditions}}


@pytest.mark.parametrize(("completed", "failed", "ttl", "error", "left", "expire"), [
    pytest.param(None, None, 100, "should not be cleaned up", None, None, id="Error case: Job unfinished"),
    pytest.param(NOW, None, None, "should not be cleaned up", None, None, id="Error case: Job completed now, no TTL"),
    pytest.param(NOW, None, 0, None, timedelta(0), NOW, id="Job completed now, 0s TTL"),
    pytest.param(NOW, None, 10, None, 10 * S, NOW + 10 * S, id="Job completed now, 10s TTL"),
    pytest.param(NOW - 10 * S, None, 15, None, 5 * S, NOW + 5 * S, id="Job completed 10s ago, 15s TTL"),
    pytest.param(None, NOW, None, "should not be cleaned up", None, None, id="Error case: Job failed now, no TTL"),
    pytest.param(None, NOW, 0, None, timedelta(0), NOW, id="Job failed now, 0s TTL"),
    pytest.param(None, NOW, 10, None, 10 * S, NOW + 10 * S, id="Job failed now, 10s TTL"),
    pytest.param(None, NOW - 10 * S, 15, None, 5 * S, NOW + 5 * S, id="Job failed 10s ago, 15s TTL"),
    pytest.param(NOW + 30 * S, None, 10, None, 40 * S, NOW + 40 * S, id="Job finished in the future (clock skew)"),
])
def test_time_left(completed: datetime | None, failed: datetime | None, ttl: int | None, error: str | None,
                   left: timedelta | None, expire: datetime | None) -> None:
    job = new_job(completed, failed, ttl)
    if error is not None:
        with pytest.raises(JobNotCleanable, match=error):
            time_left(job, NOW)
        return
    assert time_left(job, NOW) == (left, expire)


def test_finished_without_transition_time_is_an_error() -> None:
    job = new_job(NOW, ttl=0)
    del job["status"]["conditions"][0]["lastTransitionTime"]
    with pytest.raises(JobNotCleanable, match="unable to find the time when the Job default/foobar finished"):
        time_left(job, NOW)


@pytest.mark.parametrize(("job", "expected"), [
    pytest.param(new_job(ttl=10), False, id="unfinished"),
    pytest.param(new_job(NOW), False, id="no ttl"),
    pytest.param(new_job(NOW, ttl=10), True, id="complete with ttl"),
    pytest.param(new_job(None, NOW, ttl=10), True, id="failed with ttl"),
    pytest.param({**new_job(ttl=10), "status": {"conditions": [{"type": "Complete", "status": "False"}]}}, False,
                 id="condition false"),
])
def test_needs_cleanup(job: dict[str, Any], expected: bool) -> None:
    assert needs_cleanup(job) is expected


@dataclass
class RecordingClient:
    live: dict[str, Any] | None = None
    deletes: list[dict[str, Any]] = field(default_factory=list)
    gets: int = 0

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.gets += 1
        if self.live is None:
            raise NotFound(404, "NotFound", f'jobs.batch "{name}" not found')
        return self.live

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        assert res is JOBS
        self.deletes.append({"name": name, "namespace": namespace, **options})
        return {"kind": "Status", "status": "Success"}


def new_controller(live: dict[str, Any] | None) -> tuple[TTLAfterFinishedController, RecordingClient, FakeClock]:
    client = RecordingClient(live)
    clock = FakeClock(start=NOW.timestamp())
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(client, clock))  # type: ignore[arg-type]
    return TTLAfterFinishedController(ctx), client, clock


def _cache(controller: TTLAfterFinishedController, job: dict[str, Any]) -> None:
    controller.job_informer.store._put(key_of(job), job)


async def test_expired_job_is_deleted_foreground_with_uid_precondition() -> None:
    job = new_job(NOW - 20 * S, ttl=10)
    controller, client, _ = new_controller(copy.deepcopy(job))
    _cache(controller, job)
    assert await controller.sync("default/foobar") is None
    assert client.deletes == [{"name": "foobar", "namespace": "default", "propagation_policy": "Foreground",
                               "uid": "uid-1"}]


async def test_job_not_expired_yet_comes_back_when_it_expires() -> None:
    job = new_job(NOW - 4 * S, ttl=10)
    controller, client, clock = new_controller(copy.deepcopy(job))
    _cache(controller, job)
    assert await controller.sync("default/foobar") == Result(requeue_after=6.0)
    assert client.gets == 0
    clock.advance(6)
    assert await controller.sync("default/foobar") is None
    assert len(client.deletes) == 1


async def test_ttl_raised_since_the_cache_saw_it_is_honoured() -> None:
    cached = new_job(NOW - 20 * S, ttl=10)
    live = new_job(NOW - 20 * S, ttl=100)
    controller, client, _ = new_controller(live)
    _cache(controller, cached)
    assert await controller.sync("default/foobar") == Result(requeue_after=80.0)
    assert client.deletes == []


@pytest.mark.parametrize("live", [
    pytest.param(None, id="gone from the API server"),
    pytest.param({**new_job(NOW - 20 * S, ttl=10), "metadata": {**new_job()["metadata"],
                                                                "deletionTimestamp": format_time(NOW.timestamp())}},
                 id="already being deleted"),
    pytest.param(new_job(None, None, ttl=10), id="no longer finished (restarted under the same name)"),
])
async def test_live_recheck_prevents_the_delete(live: dict[str, Any] | None) -> None:
    controller, client, _ = new_controller(live)
    _cache(controller, new_job(NOW - 20 * S, ttl=10))
    assert await controller.sync("default/foobar") is None
    assert client.gets == 1
    assert client.deletes == []


async def test_the_live_copy_uid_is_the_precondition() -> None:
    """A namesake recreated meanwhile and itself expired is deleted by its own UID, never the old one's."""
    live = new_job(NOW - 30 * S, ttl=10, uid="uid-2")
    controller, client, _ = new_controller(live)
    _cache(controller, new_job(NOW - 20 * S, ttl=10, uid="uid-1"))
    await controller.sync("default/foobar")
    assert [d["uid"] for d in client.deletes] == ["uid-2"]


async def test_finished_in_the_future_waits_for_our_clock() -> None:
    job = new_job(NOW + 30 * S, ttl=0)
    controller, client, clock = new_controller(copy.deepcopy(job))
    _cache(controller, job)
    assert await controller.sync("default/foobar") == Result(requeue_after=30.0)
    clock.advance(30)
    assert await controller.sync("default/foobar") is None
    assert len(client.deletes) == 1


@pytest.mark.parametrize("job", [
    pytest.param(None, id="not cached"),
    pytest.param(new_job(ttl=10), id="unfinished"),
    pytest.param(new_job(NOW), id="no ttl"),
])
async def test_sync_ignores_jobs_that_need_no_cleanup(job: dict[str, Any] | None) -> None:
    controller, client, _ = new_controller(job)
    if job is not None:
        _cache(controller, job)
    assert await controller.sync("default/foobar") is None
    assert client.gets == 0


async def test_only_finished_jobs_with_a_ttl_are_enqueued() -> None:
    controller, _, _ = new_controller(None)
    queue = controller.queue
    controller._on_job(Added(new_job(ttl=10)))
    controller._on_job(Added(new_job(NOW)))
    deleting = new_job(NOW, ttl=10)
    deleting["metadata"]["deletionTimestamp"] = format_time(NOW.timestamp())
    controller._on_job(Updated(deleting, deleting))
    controller._on_job(Deleted(new_job(NOW, ttl=10)))
    assert len(queue) == 0
    controller._on_job(Updated(new_job(ttl=10), new_job(NOW, ttl=10)))
    assert len(queue) == 1
