"""The event recorder, against an in-test API fake: the exact Events written, counted, aggregated, filtered."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from controller_manager.api.resources import DEPLOYMENTS, EVENTS, NODES, Resource
from controller_manager.client.errors import AlreadyExists, ApiConnectionError, Forbidden, NotFound
from controller_manager.clock import FakeClock
from controller_manager.runtime.events import MAX_QUEUED_EVENTS, EventBroadcaster

START = 1_700_000_000.0  # FakeClock's default start: 2023-11-14T22:13:20Z
START_TEXT = "2023-11-14T22:13:20Z"

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "prod", "uid": "uid-1", "resourceVersion": "42"},
    "spec": {"replicas": 3},
}


class FakeEventsApi:
    """create/patch/get of core/v1 Events with the API's NotFound/AlreadyExists semantics."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str, Any]] = []  # (verb, namespace, name, body)
        self.failures: list[Exception] = []  # raised by the next calls, in order
        self.hang = False
        self._rv = 100

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    async def _maybe_fail(self) -> None:
        if self.hang:
            await asyncio.get_running_loop().create_future()
        if self.failures:
            raise self.failures.pop(0)

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        assert res is EVENTS
        ns = namespace or obj["metadata"]["namespace"]
        name = obj["metadata"]["name"]
        self.calls.append(("create", ns, name, obj))
        await self._maybe_fail()
        if "resourceVersion" in obj["metadata"]:
            raise AssertionError("a create must not carry a resourceVersion")
        if (ns, name) in self.objects:
            raise AlreadyExists(409, "AlreadyExists", f'events "{name}" already exists')
        stored = {**obj, "metadata": {**obj["metadata"], "resourceVersion": self._next_rv(), "uid": f"ev-{name}"}}
        self.objects[(ns, name)] = stored
        return stored

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = "merge",
        subresource: str | None = None,
    ) -> dict[str, Any]:
        assert res is EVENTS
        assert patch_type == "strategic"
        assert namespace is not None
        self.calls.append(("patch", namespace, name, patch))
        await self._maybe_fail()
        current = self.objects.get((namespace, name))
        if current is None:
            raise NotFound(404, "NotFound", f'events "{name}" not found')
        stored = {**current, **patch, "metadata": {**current["metadata"], "resourceVersion": self._next_rv()}}
        self.objects[(namespace, name)] = stored
        return stored

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        current = self.objects.get((namespace or "", name))
        if current is None:
            raise NotFound(404, "NotFound", f'events "{name}" not found')
        return current

    def events(self) -> list[dict[str, Any]]:
        return list(self.objects.values())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def api() -> FakeEventsApi:
    return FakeEventsApi()


@pytest.fixture
async def broadcaster(api: FakeEventsApi, clock: FakeClock) -> AsyncIterator[EventBroadcaster]:
    b = EventBroadcaster(api, clock, rng=random.Random(7))
    task = asyncio.create_task(b.run(), name="event-writer")
    yield b
    await stop(task, clock)


async def stop(task: asyncio.Task[None], clock: FakeClock) -> None:
    """Cancel the writer and let its bounded drain finish on the fake clock."""
    task.cancel()
    async with asyncio.timeout(5):
        while not task.done():
            clock.advance(1.0)
            await asyncio.sleep(0)
    await asyncio.gather(task, return_exceptions=True)


def calls_reach(api: FakeEventsApi, n: int) -> Callable[[], bool]:
    return lambda: len(api.calls) == n


async def until(predicate: Callable[[], bool], clock: FakeClock | None = None, step: float = 0.0) -> None:
    """Run the loop (and move the fake clock by ``step`` per turn) until ``predicate()`` holds."""
    async with asyncio.timeout(5):
        while True:
            if predicate():
                return
            if clock is not None and step:
                clock.advance(step)
            await asyncio.sleep(0)


async def test_event_fields_as_kube_controller_manager_writes_them(
    broadcaster: EventBroadcaster, api: FakeEventsApi
) -> None:
    broadcaster.recorder("deployment-controller").event(
        DEPLOYMENT, "Normal", "ScalingReplicaSet", "Scaled up replica set web-5d4 to 3"
    )
    await until(lambda: len(api.calls) == 1)
    verb, ns, name, body = api.calls[0]
    assert (verb, ns) == ("create", "prod")
    assert name == f"web.{int(START * 1e9):x}"
    assert body == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "prod"},
        "involvedObject": {
            "kind": "Deployment",
            "namespace": "prod",
            "name": "web",
            "uid": "uid-1",
            "apiVersion": "apps/v1",
            "resourceVersion": "42",
        },
        "reason": "ScalingReplicaSet",
        "message": "Scaled up replica set web-5d4 to 3",
        "source": {"component": "deployment-controller"},
        "firstTimestamp": START_TEXT,
        "lastTimestamp": START_TEXT,
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "deployment-controller",
        "reportingInstance": "",
    }


async def test_host_and_cluster_scoped_object(api: FakeEventsApi, clock: FakeClock) -> None:
    b = EventBroadcaster(api, clock, host="cm-0")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-n1"}}
    b.recorder("node-controller").event(node, "Warning", "NodeNotReady", "Node n1 status is now: NodeNotReady")
    task = asyncio.create_task(b.run(), name="event-writer")
    try:
        await until(lambda: len(api.calls) == 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    body = api.calls[0][3]
    assert body["metadata"]["namespace"] == "default"
    assert body["involvedObject"] == {"kind": "Node", "name": "n1", "uid": "u-n1", "apiVersion": "v1"}
    assert body["source"] == {"component": "node-controller", "host": "cm-0"}
    assert body["reportingInstance"] == "cm-0"


async def test_identical_events_patch_count_and_last_timestamp(
    broadcaster: EventBroadcaster, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = broadcaster.recorder("deployment-controller")
    rec.event(DEPLOYMENT, "Warning", "FailedCreate", "quota exceeded")
    await until(lambda: len(api.calls) == 1)
    first_name = api.calls[0][2]
    for n in (2, 3):
        clock.advance(30)
        rec.event(DEPLOYMENT, "Warning", "FailedCreate", "quota exceeded")
        await until(calls_reach(api, n))
    middle, later = "2023-11-14T22:13:50Z", "2023-11-14T22:14:20Z"
    assert api.calls[1:] == [
        ("patch", "prod", first_name, {"count": 2, "lastTimestamp": middle, "message": "quota exceeded"}),
        ("patch", "prod", first_name, {"count": 3, "lastTimestamp": later, "message": "quota exceeded"}),
    ]
    [stored] = api.events()
    assert (stored["count"], stored["firstTimestamp"], stored["lastTimestamp"]) == (3, START_TEXT, later)


async def test_events_differing_in_type_or_object_are_separate(
    broadcaster: EventBroadcaster, api: FakeEventsApi
) -> None:
    rec = broadcaster.recorder("deployment-controller")
    other = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "name": "api", "uid": "uid-2"}}
    rec.event(DEPLOYMENT, "Normal", "R", "m")
    rec.event(DEPLOYMENT, "Warning", "R", "m")
    rec.event(other, "Normal", "R", "m")
    await until(lambda: len(api.calls) == 3)
    assert [c[0] for c in api.calls] == ["create"] * 3
    assert len({c[2] for c in api.calls}) == 3


async def test_similar_events_are_aggregated_from_the_tenth_message(
    broadcaster: EventBroadcaster, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = broadcaster.recorder("replicaset-controller")
    for i in range(1, 12):
        rec.event(DEPLOYMENT, "Warning", "FailedCreate", f"error {i}")
        await until(calls_reach(api, i))
        clock.advance(1)
    verbs = [(c[0], c[3]["message"]) for c in api.calls]
    assert verbs[:9] == [("create", f"error {i}") for i in range(1, 10)]
    aggregate_name = api.calls[9][2]
    assert verbs[9] == ("create", "(combined from similar events): error 10")
    assert api.calls[10] == (
        "patch",
        "prod",
        aggregate_name,
        {"count": 2, "lastTimestamp": "2023-11-14T22:13:30Z", "message": "(combined from similar events): error 11"},
    )
    aggregate = api.objects[("prod", aggregate_name)]
    assert aggregate["reason"] == "FailedCreate"
    assert aggregate["involvedObject"]["name"] == "web"
    assert aggregate["firstTimestamp"] == "2023-11-14T22:13:29Z"
    assert aggregate["source"] == {"component": "replicaset-controller"}

    # Ten minutes of quiet start a fresh aggregation window.
    clock.advance(601)
    rec.event(DEPLOYMENT, "Warning", "FailedCreate", "error 12")
    await until(lambda: len(api.calls) == 12)
    assert api.calls[11][0] == "create"
    assert api.calls[11][3]["message"] == "error 12"


async def test_spam_filter_allows_burst_of_25_then_one_per_5_minutes(
    broadcaster: EventBroadcaster, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = broadcaster.recorder("deployment-controller")
    # Distinct reasons, so that neither counting nor aggregation folds them together.
    for i in range(30):
        rec.event(DEPLOYMENT, "Normal", f"Reason{i}", "m")
    await until(lambda: broadcaster.pending == 0)
    await until(lambda: len(api.calls) == 25)
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(api.calls) == 25
    assert [c[3]["reason"] for c in api.calls] == [f"Reason{i}" for i in range(25)]

    clock.advance(300)
    rec.event(DEPLOYMENT, "Normal", "Later1", "m")
    rec.event(DEPLOYMENT, "Normal", "Later2", "m")
    await until(lambda: broadcaster.pending == 0 and len(api.calls) == 26)
    for _ in range(5):
        await asyncio.sleep(0)
    assert [c[3]["reason"] for c in api.calls[25:]] == ["Later1"]

    # Another object has its own bucket.
    other = {**DEPLOYMENT, "metadata": {**DEPLOYMENT["metadata"], "name": "api", "uid": "uid-2"}}
    rec.event(other, "Normal", "Reason0", "m")
    await until(lambda: len(api.calls) == 27)


async def test_event_never_blocks_and_overflow_is_dropped(api: FakeEventsApi, clock: FakeClock) -> None:
    b = EventBroadcaster(api, clock)  # no writer running: everything stays buffered
    rec = b.recorder("deployment-controller")
    for i in range(MAX_QUEUED_EVENTS + 5):
        rec.event(DEPLOYMENT, "Normal", f"R{i}", "m")
    assert b.pending == MAX_QUEUED_EVENTS
    assert b.dropped == 5
    assert api.calls == []


async def test_event_returns_while_writer_is_stuck(broadcaster: EventBroadcaster, api: FakeEventsApi) -> None:
    api.hang = True
    rec = broadcaster.recorder("deployment-controller")
    rec.event(DEPLOYMENT, "Normal", "First", "m")
    await until(lambda: len(api.calls) == 1)
    for i in range(50):
        rec.event(DEPLOYMENT, "Normal", f"R{i}", "m")
    assert broadcaster.pending == 50


@pytest.mark.parametrize(
    ("event_type", "obj", "resource"),
    [
        pytest.param("Info", DEPLOYMENT, None, id="unsupported-type"),
        pytest.param("Normal", {"metadata": {"name": "web", "namespace": "prod"}}, None, id="no-kind"),
        pytest.param("Normal", {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {}}, None, id="no-name"),
    ],
)
async def test_events_that_cannot_be_built_are_dropped(
    api: FakeEventsApi, clock: FakeClock, event_type: str, obj: dict[str, Any], resource: Resource | None
) -> None:
    b = EventBroadcaster(api, clock)
    b.recorder("c").event(obj, event_type, "R", "m", resource=resource)
    assert b.pending == 0


async def test_resource_supplies_kind_for_list_items(api: FakeEventsApi, clock: FakeClock) -> None:
    b = EventBroadcaster(api, clock)
    item = {"metadata": {"name": "web", "namespace": "prod", "uid": "u"}}  # as in a List response
    b.recorder("c").event(item, "Normal", "R", "m", resource=DEPLOYMENTS)
    b.recorder("c").event({"metadata": {"name": "n1"}}, "Normal", "R", "m", resource=NODES)
    assert b.pending == 2
    b2 = EventBroadcaster(api, clock)
    task = asyncio.create_task(b2.run(), name="event-writer")
    try:
        b2.recorder("c").event(item, "Normal", "R", "m", resource=DEPLOYMENTS)
        await until(lambda: len(api.calls) == 1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert api.calls[0][3]["involvedObject"] == {
        "kind": "Deployment",
        "namespace": "prod",
        "name": "web",
        "uid": "u",
        "apiVersion": "apps/v1",
    }


async def test_names_are_unique_within_one_clock_tick(api: FakeEventsApi, clock: FakeClock) -> None:
    b = EventBroadcaster(api, clock)
    suffixes = [b.name_suffix() for _ in range(3)]
    assert [int(s, 16) for s in suffixes] == [int(START * 1e9) + i for i in range(3)]


async def test_connection_errors_retry_12_times_on_the_clock(
    broadcaster: EventBroadcaster, api: FakeEventsApi, clock: FakeClock
) -> None:
    api.failures = [ApiConnectionError("connection refused") for _ in range(20)]
    broadcaster.recorder("deployment-controller").event(DEPLOYMENT, "Normal", "R", "m")
    await until(lambda: len(api.calls) == 1)
    # The first pause is random below 10 s; the rest are 10 s each.
    clock.advance(9.999)
    await until(lambda: len(api.calls) == 2)
    for n in range(3, 13):
        clock.advance(9.99)
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(api.calls) == n - 1
        clock.advance(0.02)
        await until(calls_reach(api, n))
    clock.advance(60)
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(api.calls) == 12  # given up after 12 tries
    # The writer is free again.
    api.failures = []
    broadcaster.recorder("deployment-controller").event(DEPLOYMENT, "Normal", "Next", "m")
    await until(lambda: len(api.calls) == 13)
    assert api.events()[0]["reason"] == "Next"


async def test_a_retry_that_succeeds_writes_the_event(
    broadcaster: EventBroadcaster, api: FakeEventsApi, clock: FakeClock
) -> None:
    api.failures = [ApiConnectionError("reset")]
    broadcaster.recorder("c").event(DEPLOYMENT, "Normal", "R", "m")
    await until(lambda: len(api.events()) == 1, clock, step=1.0)
    assert [c[0] for c in api.calls] == ["create", "create"]


async def test_api_errors_abandon_the_event(broadcaster: EventBroadcaster, api: FakeEventsApi) -> None:
    api.failures = [Forbidden(403, "Forbidden", "events is forbidden")]
    rec = broadcaster.recorder("c")
    rec.event(DEPLOYMENT, "Normal", "R1", "m")
    rec.event(DEPLOYMENT, "Normal", "R2", "m")
    await until(lambda: len(api.calls) == 2)
    assert [c[3]["reason"] for c in api.calls] == ["R1", "R2"]
    assert [e["reason"] for e in api.events()] == ["R2"]


async def test_patch_of_aged_out_event_falls_back_to_create(
    broadcaster: EventBroadcaster, api: FakeEventsApi, clock: FakeClock
) -> None:
    rec = broadcaster.recorder("c")
    rec.event(DEPLOYMENT, "Warning", "BackOff", "crash")
    await until(lambda: len(api.calls) == 1)
    name = api.calls[0][2]
    api.objects.clear()  # the apiserver's event TTL removed it
    clock.advance(10)
    rec.event(DEPLOYMENT, "Warning", "BackOff", "crash")
    await until(lambda: len(api.calls) == 3)
    assert [(c[0], c[2]) for c in api.calls] == [("create", name), ("patch", name), ("create", name)]
    [stored] = api.events()
    assert stored["count"] == 2
    assert stored["firstTimestamp"] == START_TEXT
    assert stored["lastTimestamp"] == "2023-11-14T22:13:30Z"
    # Counting continues from the recreated event.
    rec.event(DEPLOYMENT, "Warning", "BackOff", "crash")
    await until(lambda: len(api.calls) == 4)
    assert api.calls[3][0] == "patch"
    assert api.events()[0]["count"] == 3


async def test_shutdown_writes_what_is_buffered_once(api: FakeEventsApi, clock: FakeClock) -> None:
    b = EventBroadcaster(api, clock)
    task = asyncio.create_task(b.run(), name="event-writer")
    api.hang = True
    rec = b.recorder("c")
    for i in range(3):
        rec.event(DEPLOYMENT, "Normal", f"R{i}", "m")
    await until(lambda: len(api.calls) == 1)  # R0 in flight, R1 and R2 buffered
    api.hang = False
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert [e["reason"] for e in api.events()] == ["R0", "R1", "R2"]
    assert b.pending == 0


async def test_shutdown_drain_is_bounded(api: FakeEventsApi, clock: FakeClock) -> None:
    b = EventBroadcaster(api, clock, drain_timeout=5.0)
    task = asyncio.create_task(b.run(), name="event-writer")
    api.hang = True
    b.recorder("c").event(DEPLOYMENT, "Normal", "R", "m")
    await until(lambda: len(api.calls) == 1)
    b.recorder("c").event(DEPLOYMENT, "Normal", "Buffered", "m")
    task.cancel()
    await until(lambda: len(api.calls) == 2)  # the drain tries the in-flight event once more
    for _ in range(5):
        await asyncio.sleep(0)
    assert not task.done()
    clock.advance(5.0)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(api.calls) == 2  # the drain ran out of time before the buffered event
