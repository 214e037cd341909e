"""Recording fakes for the CronJob controller's unit tests (upstream's fakeJobControl, fakeCJControl and
record.FakeRecorder), and a controller built on a never-run informer factory and a FakeClock."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller_manager.api.meta import key_of
from controller_manager.clock import FakeClock
from controller_manager.controllers.cronjob import CronJobController
from controller_manager.runtime.controller import ControllerContext
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import SharedInformer, SharedInformerFactory


@dataclass
class FakeRecorder:
    """Keeps "<type> <reason> <message>" strings, as record.FakeRecorder does."""

    events: list[str] = field(default_factory=list)

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str, **_: Any) -> None:
        self.events.append(f"{type} {reason} {message}")

    def reasons(self) -> list[str]:
        return [e.split(" ")[1] for e in self.events]

    def warnings(self) -> int:
        return sum(1 for e in self.events if e.startswith("Warning "))


@dataclass
class FakeJobControl:
    """Creates succeed (or raise ``create_error``) and are kept; gets return ``job`` (or raise ``error``)."""

    job: dict[str, Any] | None = None
    create_error: Exception | None = None
    error: Exception | None = None
    jobs: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        assert self.job is not None
        return self.job

    async def create_job(self, namespace: str, job: Mapping[str, Any]) -> dict[str, Any]:
        if self.create_error is not None:
            raise self.create_error
        created = copy.deepcopy(dict(job))
        created["metadata"]["namespace"] = namespace
        created["metadata"]["uid"] = "test-uid"
        self.jobs.append(created)
        return created

    async def delete_job(self, namespace: str, name: str) -> None:
        if self.error is not None:
            raise self.error
        self.deleted.append(name)


@dataclass
class FakeCronJobControl:
    """``get_cron_job`` answers ``cron_job``; status updates are recorded."""

    cron_job: dict[str, Any] | None = None
    updates: list[dict[str, Any]] = field(default_factory=list)

    async def get_cron_job(self, namespace: str, name: str) -> dict[str, Any]:
        assert self.cron_job is not None
        return copy.deepcopy(self.cron_job)

    async def update_status(self, cron_job: Mapping[str, Any]) -> dict[str, Any]:
        self.updates.append(copy.deepcopy(dict(cron_job)))
        return dict(cron_job)


@dataclass
class Fixture:
    controller: CronJobController
    jobs: FakeJobControl
    cron_jobs: FakeCronJobControl
    recorder: FakeRecorder
    clock: FakeClock


def new_controller(now: datetime, jobs: FakeJobControl | None = None,
                   cron_jobs: FakeCronJobControl | None = None) -> Fixture:
    clock = FakeClock(start=now.timestamp())
    client: Any = object()  # the fakes below take every write; nothing may reach a client
    factory = SharedInformerFactory(client, clock)
    ctx = ControllerContext(client=client, informers=factory, clock=clock, events=EventBroadcaster(client, clock))
    controller = CronJobController(ctx)
    fixture = Fixture(controller, jobs or FakeJobControl(), cron_jobs or FakeCronJobControl(), FakeRecorder(), clock)
    controller.job_control = fixture.jobs
    controller.cron_job_control = fixture.cron_jobs
    controller.recorder = fixture.recorder  # type: ignore[assignment]
    return fixture


def cache(informer: SharedInformer, *objs: dict[str, Any]) -> None:
    """Put objects in an informer's cache without telling the handlers (upstream's ``GetIndexer().Add``)."""
    for obj in objs:
        informer.store._put(key_of(obj), obj)
