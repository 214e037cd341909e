"""Leader election against an in-test Lease store with resourceVersions and Conflict, on a FakeClock."""

from __future__ import annotations

import asyncio
import copy
import random
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from controller_manager.api.meta import format_micro_time, parse_time
from controller_manager.api.resources import LEASES, Resource
from controller_manager.client.errors import AlreadyExists, ApiConnectionError, Conflict, NotFound
from controller_manager.clock import FakeClock
from controller_manager.runtime.leaderelection import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    default_identity,
)
from tests.prometheus import sample_value

NS, NAME = "kube-system", "controller-manager"
START = 1_700_000_000.0


class LeaseStore:
    """The API server's side: Leases by (namespace, name), a resourceVersion per write."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = 0

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._rv += 1
        meta = obj["metadata"]
        stored = copy.deepcopy(dict(obj))
        stored["metadata"] = {**meta, "resourceVersion": str(self._rv), "uid": meta.get("uid") or "lease-uid"}
        self.leases[(meta["namespace"], meta["name"])] = stored
        return copy.deepcopy(stored)

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.leases[(NS, NAME)]["spec"]
        return spec


class LeaseApi:
    """One process's view of the store: get/create/update with NotFound, AlreadyExists and Conflict."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.down = False  # every call fails to connect
        self.hang = False  # every call hangs
        self.before_write: Callable[[], None] | None = None  # runs just before a create/update lands

    async def _gate(self) -> None:
        if self.hang:
            await asyncio.get_running_loop().create_future()
        if self.down:
            raise ApiConnectionError("connection refused")

    def _hook(self) -> None:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook()

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        assert res is LEASES
        await self._gate()
        lease = self.store.leases.get((namespace or "", name))
        if lease is None:
            raise NotFound(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return copy.deepcopy(lease)

    async def create(self, res: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> dict[str, Any]:
        assert res is LEASES
        await self._gate()
        self._hook()
        key = (namespace or obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.store.leases:
            raise AlreadyExists(409, "AlreadyExists", f'leases.coordination.k8s.io "{key[1]}" already exists')
        return self.store.put(obj)

    async def update(self, res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        assert res is LEASES
        await self._gate()
        self._hook()
        meta = obj["metadata"]
        current = self.store.leases.get((meta["namespace"], meta["name"]))
        if current is None:
            raise NotFound(404, "NotFound", "not found")
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        return self.store.put(obj)


def config(identity: str, **kw: Any) -> LeaderElectionConfig:
    return LeaderElectionConfig(namespace=NS, name=NAME, identity=identity, **kw)


def elector(store: LeaseStore, clock: FakeClock, identity: str, seed: int = 0, **kw: Any) -> LeaderElector:
    return LeaderElector(LeaseApi(store), config(identity, **kw), clock, rng=random.Random(seed))


def api_of(le: LeaderElector) -> LeaseApi:
    api = le._client
    assert isinstance(api, LeaseApi)
    return api


async def run_for(clock: FakeClock, seconds: float, until: Callable[[], bool] | None = None, dt: float = 0.05) -> float:
    """Advance the fake clock in small steps, letting tasks run; stop early once ``until()`` holds.
    Returns the simulated seconds that passed."""
    passed = 0.0
    while passed < seconds:
        for _ in range(6):
            await asyncio.sleep(0)
        if until is not None and until():
            return passed
        clock.advance(dt)
        passed += dt
    for _ in range(6):
        await asyncio.sleep(0)
    return passed


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def store() -> LeaseStore:
    return LeaseStore()


class Tasks:
    """Named tasks a test starts; all cancelled and awaited at teardown."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[Any]] = []

    def start(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self.tasks.append(task)
        return task


@pytest.fixture
async def tasks(clock: FakeClock) -> AsyncIterator[Tasks]:
    t = Tasks()
    yield t
    for task in t.tasks:
        task.cancel()
    # Releases on cancel are bounded by the fake clock: keep it moving until everything has stopped.
    async with asyncio.timeout(5):
        while not all(task.done() for task in t.tasks):
            clock.advance(0.5)
            await asyncio.sleep(0)
    await asyncio.gather(*t.tasks, return_exceptions=True)


def master_status(identity_name: str = NAME) -> float | None:
    return sample_value("leader_election_master_status", {"name": identity_name})


async def test_single_candidate_creates_the_lease_and_leads(store: LeaseStore, clock: FakeClock) -> None:
    le = elector(store, clock, "host-a_1")
    assert master_status() == 0
    await asyncio.wait_for(le.acquire(), 5)
    assert le.is_leader
    assert le.leader == "host-a_1"
    assert master_status() == 1
    stamp = format_micro_time(START)
    assert store.spec() == {
        "holderIdentity": "host-a_1",
        "leaseDurationSeconds": 15,
        "acquireTime": stamp,
        "renewTime": stamp,
        "leaseTransitions": 0,
    }
    lease = store.leases[(NS, NAME)]
    assert (lease["apiVersion"], lease["kind"]) == ("coordination.k8s.io/v1", "Lease")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)


async def test_renewals_move_renew_time_and_keep_acquire_time(
    store: LeaseStore, clock: FakeClock, tasks: Tasks
) -> None:
    le = elector(store, clock, "a")
    await le.acquire()
    acquired = store.spec()["acquireTime"]
    tasks.start(le.renew_loop(), "renew-a")
    await run_for(clock, 10.0)
    spec = store.spec()
    assert spec["acquireTime"] == acquired
    assert spec["holderIdentity"] == "a"
    assert spec["leaseTransitions"] == 0
    renewed = parse_time(spec["renewTime"])
    assert renewed is not None
    assert clock.now() - 2.5 <= renewed <= clock.now()  # renewed every retry period
    assert le.is_leader


async def test_two_candidates_exactly_one_leads(store: LeaseStore, clock: FakeClock, tasks: Tasks) -> None:
    a, b = elector(store, clock, "a", seed=1), elector(store, clock, "b", seed=2)
    ta = tasks.start(a.acquire(), "acquire-a")
    tb = tasks.start(b.acquire(), "acquire-b")
    await run_for(clock, 1.0, until=lambda: ta.done() or tb.done())
    winner, loser = (a, b) if ta.done() else (b, a)
    tasks.start(winner.renew_loop(), "renew-winner")

    def never_two_leaders() -> bool:
        assert not (a.is_leader and b.is_leader)
        return False

    await run_for(clock, 60.0, until=never_two_leaders)
    assert [a.is_leader, b.is_leader].count(True) == 1
    assert winner.is_leader
    assert not (tb if loser is b else ta).done()
    assert store.spec()["holderIdentity"] == winner.config.identity
    assert loser.leader == winner.config.identity


async def test_crashed_leader_is_replaced_after_lease_duration(
    store: LeaseStore, clock: FakeClock, tasks: Tasks
) -> None:
    a = elector(store, clock, "a", release_on_cancel=False)
    b = elector(store, clock, "b", seed=3)
    await a.acquire()
    renew_a = tasks.start(a.renew_loop(), "renew-a")
    tb = tasks.start(b.acquire(), "acquire-b")
    await run_for(clock, 30.0)
    assert not tb.done()
    last_renew = store.spec()["renewTime"]
    renew_a.cancel()  # a crashes: no release
    await asyncio.gather(renew_a, return_exceptions=True)
    assert store.spec()["renewTime"] == last_renew
    took = await run_for(clock, 60.0, until=tb.done)
    # b must watch the record stay unchanged for the full 15 s; its jittered polls (2..4.4 s) add lag.
    assert 13.0 <= took <= 15.0 + 2 * 4.4 + 0.5
    assert b.is_leader
    spec = store.spec()
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1


async def test_release_hands_over_within_a_retry_period(store: LeaseStore, clock: FakeClock, tasks: Tasks) -> None:
    a = elector(store, clock, "a")
    b = elector(store, clock, "b", seed=4)
    await a.acquire()
    renew_a = tasks.start(a.renew_loop(), "renew-a")
    tb = tasks.start(b.acquire(), "acquire-b")
    await run_for(clock, 20.0)
    renew_a.cancel()  # release_on_cancel
    await run_for(clock, 0.2, until=renew_a.done)
    assert renew_a.cancelled()
    released = store.spec()
    assert released["holderIdentity"] == ""
    assert released["leaseDurationSeconds"] == 1
    assert released["acquireTime"] == released["renewTime"]
    assert not a.is_leader
    took = await run_for(clock, 30.0, until=tb.done)
    assert took <= 2.0 * (1 + 1.2) + 0.2
    assert store.spec()["holderIdentity"] == "b"
    assert store.spec()["leaseTransitions"] == 1


@pytest.mark.parametrize("failure", [pytest.param("down", id="api-down"), pytest.param("hang", id="api-hangs")])
async def test_renew_failure_past_deadline_raises_leadership_lost(
    store: LeaseStore, clock: FakeClock, tasks: Tasks, failure: str
) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    renew = tasks.start(a.renew_loop(), "renew-a")
    await run_for(clock, 5.0)
    assert not renew.done()
    setattr(api_of(a), failure, True)
    took = await run_for(clock, 30.0, until=renew.done)
    with pytest.raises(LeadershipLost):
        renew.result()
    # The failing renewal started within one retry period of the outage; it gives up at the 10 s deadline.
    assert 10.0 - 0.1 <= took <= 10.0 + 2.0 + 0.2
    assert not a.is_leader
    assert master_status() == 0


async def test_leader_that_recovers_within_deadline_keeps_leading(
    store: LeaseStore, clock: FakeClock, tasks: Tasks
) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    renew = tasks.start(a.renew_loop(), "renew-a")
    api_of(a).down = True
    await run_for(clock, 7.0)
    api_of(a).down = False
    await run_for(clock, 20.0)
    assert not renew.done()
    assert a.is_leader


async def test_lease_transitions_count_holder_changes(store: LeaseStore, clock: FakeClock) -> None:
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    await a.acquire()
    assert store.spec()["leaseTransitions"] == 0
    assert await a.release()
    await asyncio.wait_for(b.acquire(), 5)
    assert store.spec()["leaseTransitions"] == 1
    assert await b.release()
    await asyncio.wait_for(a.acquire(), 5)
    assert store.spec()["leaseTransitions"] == 2
    assert await a.try_acquire_or_renew()  # a renewal is not a transition
    assert store.spec()["leaseTransitions"] == 2


async def test_existing_foreign_holder_is_respected_until_it_expires(
    store: LeaseStore, clock: FakeClock, tasks: Tasks
) -> None:
    # Held by a kube-controller-manager whose renewTime is an hour old by our clock: its timestamps are
    # not trusted; only watching the record stand still for leaseDurationSeconds counts.
    holder = "master-0_3f1c3b1e-0f63-4c1e-9a7c-2b5d2e0e8c11"
    old = format_micro_time(START - 3600)
    store.put(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "acquireTime": old,
                "renewTime": old,
                "leaseTransitions": 4,
            },
        }
    )
    seen: list[str] = []
    b = LeaderElector(LeaseApi(store), config("b"), clock, on_new_leader=seen.append, rng=random.Random(5))
    tb = tasks.start(b.acquire(), "acquire-b")
    await run_for(clock, 14.5)
    assert not tb.done()
    assert b.leader == holder
    took = await run_for(clock, 30.0, until=tb.done)
    assert took <= 4.4 + 0.5
    assert store.spec()["holderIdentity"] == "b"
    assert store.spec()["leaseTransitions"] == 5
    assert seen == [holder, "b"]


async def test_foreign_holder_that_keeps_renewing_is_never_displaced(
    store: LeaseStore, clock: FakeClock, tasks: Tasks
) -> None:
    def foreign_renew() -> None:
        stamp = format_micro_time(clock.now())
        store.put({**store.leases[(NS, NAME)], "spec": {**store.spec(), "renewTime": stamp}})

    store.put(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"holderIdentity": "kcm-1", "leaseDurationSeconds": 15, "renewTime": format_micro_time(START)},
        }
    )
    b = elector(store, clock, "b", seed=6)
    tb = tasks.start(b.acquire(), "acquire-b")
    for _ in range(30):
        await run_for(clock, 2.0)
        foreign_renew()
    assert not tb.done()
    assert store.spec()["holderIdentity"] == "kcm-1"


async def test_conflict_loses_the_round(store: LeaseStore, clock: FakeClock) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    assert await a.release()
    b = elector(store, clock, "b")
    # Between b's read and b's write, someone else writes the Lease: b's update is a 409.
    api_of(b).before_write = lambda: store.put(
        {**store.leases[(NS, NAME)], "spec": {**store.spec(), "holderIdentity": "c"}}
    )
    assert await b.try_acquire_or_renew() is False
    assert not b.is_leader
    assert store.spec()["holderIdentity"] == "c"


async def test_create_race_lost_with_already_exists(store: LeaseStore, clock: FakeClock) -> None:
    b = elector(store, clock, "b")
    api_of(b).before_write = lambda: store.put(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NS},
            "spec": {"holderIdentity": "c", "leaseDurationSeconds": 15},
        }
    )
    assert await b.try_acquire_or_renew() is False
    assert await b.try_acquire_or_renew() is False  # now it sees c's fresh lease
    assert b.leader == "c"


async def test_leader_renews_after_conflict_through_the_slow_path(store: LeaseStore, clock: FakeClock) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    # An unrelated write (say, a label) bumps the resourceVersion: the optimistic update conflicts,
    # the re-read shows a still holds it, and the renewal goes through.
    store.put({**store.leases[(NS, NAME)], "metadata": {**store.leases[(NS, NAME)]["metadata"], "labels": {"x": "y"}}})
    clock.advance(2.0)
    slow_before = sample_value("leader_election_slowpath_total", {"name": NAME}) or 0.0
    assert await a.try_acquire_or_renew()
    assert store.spec()["renewTime"] == format_micro_time(START + 2.0)
    assert sample_value("leader_election_slowpath_total", {"name": NAME}) == slow_before + 1


async def test_events_and_new_leader_hook(store: LeaseStore, clock: FakeClock) -> None:
    recorded: list[tuple[str, str, str, str]] = []

    class Recorder:
        def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
            recorded.append((obj["kind"], type, reason, message))

    leaders: list[str] = []
    a = LeaderElector(LeaseApi(store), config("a"), clock, on_new_leader=leaders.append, events=Recorder())  # type: ignore[arg-type]
    await a.acquire()
    await a.release()
    assert recorded == [
        ("Lease", "Normal", "LeaderElection", "a became leader"),
        ("Lease", "Normal", "LeaderElection", "a stopped leading"),
    ]
    assert leaders == ["a"]


async def test_release_when_not_holding_writes_nothing(store: LeaseStore, clock: FakeClock) -> None:
    b = elector(store, clock, "b")
    assert await b.release()
    assert store.leases == {}


async def test_a_partitioned_leader_stops_intake_then_writes_before_anyone_can_take_over(
    store: LeaseStore, clock: FakeClock, tasks: Tasks
) -> None:
    a = elector(store, clock, "a")
    b = elector(store, clock, "b", seed=5)
    await a.acquire()
    renew = tasks.start(a.renew_loop(), "renew-a")
    tb = tasks.start(b.acquire(), "acquire-b")
    await run_for(clock, 6.0)
    assert a.may_write()
    assert a.intake_open()
    api_of(a).hang = True  # a can no longer reach the API server; b still can
    cut = clock.monotonic()
    closed: dict[str, float] = {}

    def watch() -> bool:
        for name, is_open in (("intake", a.intake_open), ("write", a.may_write)):
            if name not in closed and not is_open():
                closed[name] = clock.monotonic() - cut
        if tb.done():
            closed.setdefault("taken_over", clock.monotonic() - cut)
        return tb.done()

    await run_for(clock, 40.0, until=watch)
    assert b.is_leader
    # The last renewal was sent at most a retry period (plus jitter) before the cut.
    assert closed["intake"] <= 2 * 2.0
    assert closed["write"] <= 10.0
    assert closed["write"] < closed["taken_over"] - 2.0  # a margin for writes already in flight
    with pytest.raises(LeadershipLost):
        await renew


async def test_a_paused_leader_wakes_up_fenced(store: LeaseStore, clock: FakeClock, tasks: Tasks) -> None:
    # SIGSTOP: nothing of a runs while its lease expires and b takes over; on SIGCONT a's clock has jumped.
    a = elector(store, clock, "a", release_on_cancel=False)
    b = elector(store, clock, "b", seed=6)
    await a.acquire()
    renew = tasks.start(a.renew_loop(), "renew-a")
    await run_for(clock, 3.0)
    renew.cancel()
    await asyncio.gather(renew, return_exceptions=True)
    tb = tasks.start(b.acquire(), "acquire-b")
    await run_for(clock, 40.0, until=tb.done)
    assert b.is_leader
    writes = store._rv
    # Woken: before a single request, a knows it may not write nor start work.
    assert a.is_leader  # it has not found out yet...
    assert not a.may_write()
    assert not a.intake_open()
    intake = tasks.start(a.wait_for_intake(), "intake-a")
    woken = tasks.start(a.renew_loop(), "renew-a-woken")
    took = await run_for(clock, 15.0, until=woken.done)
    with pytest.raises(LeadershipLost):
        woken.result()
    assert took < 0.5  # its first renewal read the Lease naming b: lost at once, not at the renew deadline
    assert store._rv == writes  # ...and its renewal attempt wrote nothing over b
    assert store.spec()["holderIdentity"] == "b"
    assert not intake.done()


async def test_intake_waits_for_the_next_renewal(store: LeaseStore, clock: FakeClock, tasks: Tasks) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    tasks.start(a.renew_loop(), "renew-a")
    await run_for(clock, 3.0)
    api_of(a).down = True
    await run_for(clock, 4.5)
    assert not a.intake_open()
    assert a.may_write()  # writes already under way may still finish
    intake = tasks.start(a.wait_for_intake(), "intake-a")
    await run_for(clock, 1.0)
    assert not intake.done()
    api_of(a).down = False
    await run_for(clock, 3.0, until=intake.done)
    assert intake.done()
    assert a.intake_open()
    assert a.is_leader


async def test_release_reads_again_after_a_conflict(store: LeaseStore, clock: FakeClock) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    # A renewal cancelled in flight had landed: the Lease moved on without a knowing its resourceVersion.
    store.put(store.leases[(NS, NAME)])
    assert await a.release()
    assert store.spec()["holderIdentity"] == ""
    assert not a.is_leader


async def test_release_after_a_conflict_leaves_another_holder_alone(store: LeaseStore, clock: FakeClock) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    lease = store.leases[(NS, NAME)]
    store.put({**lease, "spec": {**lease["spec"], "holderIdentity": "b"}})
    assert await a.release()
    assert store.spec()["holderIdentity"] == "b"
    assert not a.is_leader


async def test_check_reports_a_stuck_leader(store: LeaseStore, clock: FakeClock) -> None:
    a = elector(store, clock, "a")
    assert a.check(20.0) is None
    await a.acquire()
    clock.advance(30.0)
    assert a.check(20.0) is None
    clock.advance(10.0)
    assert a.check(20.0) == f"failed election to renew leadership on lease {NAME}"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param(
            {"lease_duration": 10, "renew_deadline": 10},
            "leaseDuration must be greater than renewDeadline",
            id="lease-not-longer-than-deadline",
        ),
        pytest.param(
            {"renew_deadline": 2.4, "retry_period": 2},
            "renewDeadline must be greater than retryPeriod",
            id="deadline-within-jittered-retry",
        ),
        pytest.param(
            {"retry_period": 0, "renew_deadline": 1}, "retryPeriod must be greater than zero", id="zero-retry"
        ),
        pytest.param({"identity": ""}, "Lock identity is empty", id="no-identity"),
    ],
)
def test_config_validation(kw: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"namespace": NS, "name": NAME, "identity": "a", **kw}
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(**args)


def test_default_identity_is_hostname_underscore_uuid() -> None:
    ident = default_identity()
    assert re.fullmatch(r".+_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", ident)
    assert ident != default_identity()
