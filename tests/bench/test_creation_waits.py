"""bench/creation_waits.py: what a creation sync's queue waits are made of, on a fake clock."""

from __future__ import annotations

import pytest

from bench.creation_waits import one


async def test_a_fast_api_keeps_every_wait_under_a_second() -> None:
    for kind in ("replicaset", "job"):
        w = await one(kind, 0.05)
        assert w.syncs >= 2
        assert w.over_1s == 0, w


async def test_the_only_long_wait_is_the_owner_woken_during_its_own_creation_sync() -> None:
    # Six serial writes (slow start 1, 2, 4, 8, 10, then status); the first pod's event re-adds the ReplicaSet
    # one latency in, and client-go times it from there: a wait of the other five latencies, nothing more.
    latency = 0.3
    w = await one("replicaset", latency)
    assert w.over_1s == 1
    assert w.wait_sum == pytest.approx(5 * latency, abs=0.05)
    assert w.sync_sum == pytest.approx(7 * latency, abs=0.05)  # the creation sync, then one status write
    # The Job's pod events are batched for 1 s: the same sync leaves it 5 latencies - 1 s.
    job = await one("job", latency)
    assert job.over_1s == 0
    assert job.wait_sum == pytest.approx(5 * latency - 1.0, abs=0.05)
