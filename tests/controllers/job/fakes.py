"""Stand-ins for the Job controller's unit tests: a recording client (upstream's FakePodControl plus a status
handler capture), a controller on a never-run informer factory and a FakeClock, and object builders."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller_manager.api.meta import format_time, key_of
from controller_manager.api.resources import Resource
from controller_manager.client.errors import ApiError, Forbidden, NotFound
from controller_manager.clock import FakeClock
from controller_manager.controllers.job import JobController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformer, SharedInformerFactory

TRACKING = "batch.kubernetes.io/job-tracking"
INDEX = "batch.kubernetes.io/job-completion-index"
FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
IGNORED_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
# Long ago: finished pods never put the Job into pod-recreation backoff (upstream's testFinishedAt).
FINISHED_AT = "1970-01-01T00:00:01Z"


@dataclass
class RecordingClient:
    """Records pod creates (attempts, as FakePodControl's Templates), deletes and patches.

    ``error`` makes every pod write fail after being recorded; ``create_limit`` makes creates beyond it fail
    without being recorded (FakePodControl.CreateLimit).
    """

    error: ApiError | None = None
    status_error: ApiError | None = None
    create_limit: int = 0
    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    creates: list[dict[str, Any]] = field(default_factory=list)
    create_calls: int = 0
    deletes: list[str] = field(default_factory=list)
    patches: list[tuple[str, Any]] = field(default_factory=list)
    status_updates: list[dict[str, Any]] = field(default_factory=list)
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = self.objects.get((res.plural, name))
        if obj is None:
            raise NotFound(404, "NotFound", f'{res.plural} "{name}" not found')
        return obj

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.create_calls += 1
        if self.create_limit and self.create_calls > self.create_limit:
            raise Forbidden(403, "Forbidden", "not creating pod, limit already reached")
        self.creates.append(dict(obj))
        if self.error is not None:
            raise self.error
        meta = dict(obj.get("metadata") or {})
        meta.setdefault("name", f"{meta.get('generateName', '')}{next(self._names)}")
        meta["namespace"] = namespace
        return {**obj, "metadata": meta}

    async def delete(self, res: Resource, name: str, namespace: str | None = None, **options: Any) -> dict[str, Any]:
        self.deletes.append(name)
        if self.error is not None:
            raise self.error
        return {"kind": "Status", "status": "Success"}

    async def patch(self, res: Resource, name: str, patch: Any, namespace: str | None = None, *,
                    patch_type: str = "merge", subresource: str | None = None) -> dict[str, Any]:
        self.patches.append((name, patch))
        if self.error is not None:
            raise self.error
        return {"metadata": {"name": name, "namespace": namespace}}

    async def update_status(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.status_updates.append(copy.deepcopy(dict(obj)))
        if self.status_error is not None:
            raise self.status_error
        return copy.deepcopy(dict(obj))  # what the server stored: never the caller's dict


def new_controller(client: RecordingClient | None = None, *, now: float = 1_700_000_000.0
                   ) -> tuple[JobController, RecordingClient, FakeClock]:
    client = client or RecordingClient()
    clock = FakeClock(start=now)
    factory = SharedInformerFactory(client, clock)  # type: ignore[arg-type]
    ctx = ControllerContext(client=client, informers=factory, clock=clock,  # type: ignore[arg-type]
                            events=EventBroadcaster(client, clock))
    return JobController(ctx), client, clock


def cache(informer: SharedInformer, *objs: Mapping[str, Any]) -> None:
    """Put objects in an informer's cache without telling the handlers (upstream's ``GetIndexer().Add``)."""
    for obj in objs:
        informer.store._put(key_of(obj), dict(obj))


def new_job(parallelism: int | None = 1, completions: int | None = 1, backoff_limit: int = 6,
            mode: str | None = None, name: str = "foobar", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "selector": {"matchLabels": {"foo": "bar"}},
        "template": {"metadata": {"labels": {"foo": "bar"}}, "spec": {"containers": [{"image": "foo/bar"}]}},
        "backoffLimit": backoff_limit,
        **spec,
    }
    if parallelism is not None:
        body["parallelism"] = parallelism
    if completions is not None:
        body["completions"] = completions
    if mode is not None:
        body["completionMode"] = mode
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "1",
                         "generation": 1},
            "spec": body, "status": {}}


_pod_names = itertools.count()


def build_pod(job: Mapping[str, Any] | None = None, *, uid: str | None = None, phase: str = "Running",
              finalizer: bool = True, index: str | None = None, deleted: float | None = None,
              ready: bool = False, failure_count: str | None = None, ignored_count: str | None = None,
              terminated: bool | None = None, status: Mapping[str, Any] | None = None,
              name: str | None = None) -> dict[str, Any]:
    """A pod of ``job`` (controller ref, selector labels) in ``phase``; terminal pods finished long ago."""
    name = name or uid or f"pod-{next(_pod_names)}"
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": uid or name, "resourceVersion": "1"}
    if job is not None:
        meta["labels"] = dict(job["spec"]["selector"]["matchLabels"])
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
                                    "uid": job["metadata"]["uid"], "controller": True,
                                    "blockOwnerDeletion": True}]
    if finalizer:
        meta["finalizers"] = [TRACKING]
    annotations: dict[str, str] = {}
    if index is not None:
        annotations[INDEX] = index
    if failure_count is not None:
        annotations[FAILURE_COUNT] = failure_count
    if ignored_count is not None:
        annotations[IGNORED_COUNT] = ignored_count
    if annotations:
        meta["annotations"] = annotations
    if deleted is not None:
        meta["deletionTimestamp"] = format_time(deleted)
    if status is not None:
        pod_status = dict(status)
    else:
        pod_status = {"phase": phase}
        if terminated if terminated is not None else phase in ("Succeeded", "Failed"):
            pod_status["containerStatuses"] = [{"name": "c", "state": {"terminated": {"finishedAt": FINISHED_AT}}}]
        if ready:
            pod_status["conditions"] = [{"type": "Ready", "status": "True"}]
    return {"metadata": meta, "spec": {"containers": [{"name": "c"}]}, "status": pod_status}
