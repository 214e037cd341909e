"""Who is in the ring, judged from shard Leases on the observer's clock; the shard Lease the elector keeps."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from controller_manager.clock import FakeClock
from controller_manager.runtime.leaderelection import LeaderElector, LeadershipLost
from controller_manager.runtime.sharding.membership import (
    RING_LABEL,
    SHARDER_IDENTITY,
    MembershipTracker,
    MemberState,
    member_name,
    shard_lease_config,
)
from tests.runtime.test_leaderelection import START, LeaseApi, LeaseStore, run_for

RING = "cm"


def lease(name: str, holder: str | None = None, renew: str = "t0", duration: int = 15,
          ring: str = RING) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-system", "labels": {RING_LABEL: ring}},
            "spec": {"holderIdentity": name if holder is None else holder, "leaseDurationSeconds": duration,
                     "renewTime": renew}}


def test_a_renewing_member_is_live_and_one_that_stops_expires_after_its_duration() -> None:
    t = MembershipTracker(RING)
    t.observe(lease("a"), now=100.0)
    t.observe(lease("b"), now=100.0)
    assert t.live(100.0) == {"a", "b"}
    t.observe(lease("a", renew="t1"), now=110.0)  # a renews, b does not
    assert t.live(114.9) == {"a", "b"}
    assert t.live(115.0) == {"a"}
    assert t.state("b", 115.0) is MemberState.EXPIRED
    assert t.expired(115.0) == ["b"]
    assert t.next_change(115.0) == pytest.approx(10.0)


def test_the_same_record_seen_again_does_not_keep_a_member_alive() -> None:
    t = MembershipTracker(RING)
    t.observe(lease("a"), now=0.0)
    t.observe(lease("a"), now=14.0)  # a resync: nothing changed
    assert t.live(15.0) == frozenset()


def test_released_fenced_and_missing_leases_are_dead() -> None:
    t = MembershipTracker(RING)
    t.observe(lease("a", holder=""), now=0.0)
    t.observe(lease("b", holder=SHARDER_IDENTITY), now=0.0)
    assert t.state("a", 0.0) is MemberState.DEAD
    assert t.state("b", 0.0) is MemberState.DEAD
    assert t.state("nobody", 0.0) is MemberState.DEAD
    assert t.live(0.0) == frozenset()
    assert t.expired(0.0) == []


def test_dead_for_counts_from_the_release_or_takeover() -> None:
    t = MembershipTracker(RING)
    t.observe(lease("a"), now=0.0)
    assert t.dead_for("a", 1.0) is None  # live
    assert t.dead_for("a", 20.0) is None  # expired, not yet fenced
    t.observe(lease("a", holder=SHARDER_IDENTITY), now=20.0)
    assert t.dead_for("a", 25.0) == 5.0
    assert t.dead_for("nobody", 25.0) is None


def test_other_rings_and_unlabelled_leases_are_ignored() -> None:
    t = MembershipTracker(RING)
    t.observe(lease("a", ring="other"), now=0.0)
    t.observe({"metadata": {"name": "kube-controller-manager"}, "spec": {"holderIdentity": "x"}}, now=0.0)
    assert t.names() == []


def test_member_names_are_label_values_and_fresh() -> None:
    name = member_name("Node_01.example.com")
    assert name.startswith("node-01-example-com-")
    assert len(name) <= 63
    assert member_name("h") != member_name("h")
    assert len(member_name("x" * 200)) <= 63


async def test_the_shard_lease_carries_the_ring_label_and_is_never_created_again() -> None:
    clock = FakeClock(START)
    store = LeaseStore()
    config = shard_lease_config(RING, "m1", namespace="kube-system", lease_duration=15, renew_deadline=10,
                                retry_period=2)
    elector = LeaderElector(LeaseApi(store), config, clock, rng=random.Random(0))
    await elector.acquire()
    assert store.leases[("kube-system", "m1")]["metadata"]["labels"] == {RING_LABEL: RING}
    # Someone strips the label: the next renewal puts it back.
    store.leases[("kube-system", "m1")]["metadata"]["labels"] = {}
    assert await elector.try_acquire_or_renew()
    assert store.leases[("kube-system", "m1")]["metadata"]["labels"] == {RING_LABEL: RING}
    # The sharder deleted it (the member was gone): it is lost, not made again.
    del store.leases[("kube-system", "m1")]
    renewing = asyncio.create_task(elector.renew_loop())
    await run_for(clock, 12.0, until=renewing.done)
    with pytest.raises(LeadershipLost):
        await renewing
    assert ("kube-system", "m1") not in store.leases


async def test_a_shard_lease_taken_over_by_the_sharder_is_lost_at_the_next_renewal() -> None:
    clock = FakeClock(START)
    store = LeaseStore()
    config = shard_lease_config(RING, "m1", namespace="kube-system", lease_duration=15, renew_deadline=10,
                                retry_period=2)
    api = LeaseApi(store)
    elector = LeaderElector(api, config, clock, rng=random.Random(0))
    await elector.acquire()
    taken = store.leases[("kube-system", "m1")]
    store.put({**taken, "spec": {**taken["spec"], "holderIdentity": SHARDER_IDENTITY}})
    renewing = asyncio.create_task(elector.renew_loop())
    passed = await run_for(clock, 12.0, until=renewing.done)
    with pytest.raises(LeadershipLost):
        await renewing
    assert passed < 3.0  # at the first renewal, not after the renew deadline
    assert not elector.may_write()

