"""The controller's wiring on a fake clock: which namespaces are queued and when, how a pass's outcome
becomes a requeue, and the periodic resync (``--namespace-sync-period``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.clock import FakeClock
from controller_manager.controllers.namespace import NamespaceController
from controller_manager.controllers.namespace.controller import (
    RESYNC_KEY,
    ns_controller_rate_limiter,
    requeue_delay,
)
from controller_manager.controllers.namespace.deleter import ResourcesRemainingError
from controller_manager.runtime.controller import ControllerContext, Result
from controller_manager.runtime.events import EventBroadcaster
from controller_manager.runtime.informers import Added, Deleted, SharedInformerFactory, Updated
from tests.controllers.namespace.fakes import FakeClient

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def ns(name: str, *, deleting: bool) -> Obj:
    meta: Obj = {"name": name, "resourceVersion": "1", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "spec": {"finalizers": ["kubernetes"]}}


class FakeDeleter:
    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.raise_: BaseException | None = None

    async def delete(self, name: str) -> None:
        self.deleted.append(name)
        if self.raise_ is not None:
            raise self.raise_


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def controller(clock: FakeClock) -> Iterator[NamespaceController]:
    client = FakeClient().as_client()
    ctx = ControllerContext(client=client, informers=SharedInformerFactory(client, clock), clock=clock,
                            events=EventBroadcaster(client, clock), options={"namespace_sync_period": 300.0})
    c = NamespaceController(ctx)
    c.deleter = FakeDeleter()  # type: ignore[assignment]
    yield c
    c.queue.shut_down()


async def next_key(controller: NamespaceController) -> str:
    key = await controller.queue.get()
    assert key is not None
    controller.queue.done(key)
    return key


def test_identity() -> None:
    assert (NamespaceController.name, NamespaceController.alias) == ("namespace-controller", "namespace")
    assert NamespaceController.workers_option == "concurrent-namespace-syncs"
    assert NamespaceController.default_workers == 10


@pytest.mark.parametrize("event", [
    pytest.param(Added(ns("a", deleting=False)), id="added-active"),
    pytest.param(Updated(ns("a", deleting=False), ns("a", deleting=False)), id="updated-active"),
    pytest.param(Deleted(ns("a", deleting=True)), id="deleted"),
])
def test_namespaces_not_being_deleted_are_ignored(controller: NamespaceController, clock: FakeClock,
                                                  event: Any) -> None:
    controller._on_namespace(event)
    clock.advance(60)
    assert len(controller.queue) == 0


@pytest.mark.parametrize("event", [
    pytest.param(Added(ns("a", deleting=True)), id="added"),
    pytest.param(Updated(ns("a", deleting=False), ns("a", deleting=True)), id="updated"),
])
async def test_deleting_namespaces_are_queued_after_the_grace_period(controller: NamespaceController,
                                                                     clock: FakeClock, event: Any) -> None:
    controller._on_namespace(event)
    clock.advance(4.9)
    assert len(controller.queue) == 0
    clock.advance(0.1)
    assert len(controller.queue) == 1
    assert await next_key(controller) == "a"


async def test_a_pass_with_content_remaining_requeues_after_half_the_estimate(controller: NamespaceController) -> None:
    controller.informer.replace([ns("a", deleting=True)], "1")
    deleter: FakeDeleter = controller.deleter  # type: ignore[assignment]
    deleter.raise_ = ResourcesRemainingError(15)
    assert await controller.sync("a") == Result(requeue_after=8.0)
    deleter.raise_ = None
    assert await controller.sync("a") is None
    assert deleter.deleted == ["a", "a"]


async def test_other_failures_propagate_for_backoff(controller: NamespaceController) -> None:
    controller.informer.replace([ns("a", deleting=True)], "1")
    deleter: FakeDeleter = controller.deleter  # type: ignore[assignment]
    deleter.raise_ = RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        await controller.sync("a")


async def test_a_namespace_gone_from_the_cache_is_not_touched(controller: NamespaceController) -> None:
    assert await controller.sync("gone") is None
    deleter: FakeDeleter = controller.deleter  # type: ignore[assignment]
    assert deleter.deleted == []


async def test_resync_requeues_every_deleting_namespace_each_period(controller: NamespaceController,
                                                                    clock: FakeClock) -> None:
    controller.informer.replace([ns("a", deleting=True), ns("b", deleting=False)], "1")
    clock.advance(5)
    assert await next_key(controller) == "a"
    clock.advance(295)
    assert await next_key(controller) == RESYNC_KEY
    assert await controller.sync(RESYNC_KEY) == Result(requeue_after=300.0)
    clock.advance(5)
    assert await next_key(controller) == "a"
    assert len(controller.queue) == 0


@pytest.mark.parametrize(("estimate", "delay"), [
    pytest.param(0, 1.0, id="zero"),
    pytest.param(1, 1.0, id="one"),
    pytest.param(15, 8.0, id="finalizers"),
    pytest.param(30, 16.0, id="default-pod-grace"),
])
def test_requeue_delay(estimate: int, delay: float) -> None:
    assert requeue_delay(estimate) == delay


def test_rate_limiter_retries_at_least_every_minute(controller: NamespaceController, clock: FakeClock) -> None:
    limiter = ns_controller_rate_limiter(controller.ctx)
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[0] == pytest.approx(0.005)
    assert delays[1] == pytest.approx(0.01)
    assert max(delays) == 60.0
