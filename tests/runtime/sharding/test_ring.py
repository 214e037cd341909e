"""The consistent-hash ring: deterministic, stable under unrelated membership changes, ~1/n moves, balanced."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.runtime.sharding.ring import HashRing

KEYS = [f"ns-{i % 7}/obj-{i}" for i in range(2000)]
member_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
member_sets = st.sets(member_names, min_size=1, max_size=8)


def test_empty_ring_owns_nothing() -> None:
    assert HashRing([]).owner("a/b") is None


def test_owner_is_the_same_in_another_process() -> None:
    # Python salts hash() per process; the ring must not depend on it.
    ring = HashRing(["m1", "m2", "m3"])
    here = [ring.owner(k) for k in KEYS[:50]]
    code = ("from controller_manager.runtime.sharding.ring import HashRing;"
            f"r=HashRing(['m3','m1','m2']);print(','.join(str(r.owner(k)) for k in {KEYS[:50]!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PYTHONPATH": ":".join(sys.path)})
    assert out.stdout.strip().split(",") == here


@settings(max_examples=25, deadline=None)
@given(members=member_sets, other=member_names)
def test_a_join_moves_keys_only_to_the_newcomer(members: set[str], other: str) -> None:
    if other in members:
        return
    before = HashRing(members)
    after = HashRing(members | {other})
    for key in KEYS[:800]:
        old, new = before.owner(key), after.owner(key)
        assert new in (old, other)


@settings(max_examples=25, deadline=None)
@given(members=member_sets.filter(lambda s: len(s) >= 2), data=st.data())
def test_a_leave_moves_only_the_leavers_keys(members: set[str], data: st.DataObject) -> None:
    leaver = data.draw(st.sampled_from(sorted(members)))
    before = HashRing(members)
    after = HashRing(members - {leaver})
    for key in KEYS[:800]:
        if before.owner(key) != leaver:
            assert after.owner(key) == before.owner(key)
        else:
            assert after.owner(key) in members - {leaver}


@settings(max_examples=15, deadline=None)
@given(n=st.integers(min_value=1, max_value=6), seed=st.integers(min_value=0, max_value=10_000))
def test_about_one_nth_of_the_keys_move_when_a_member_joins(n: int, seed: int) -> None:
    members = {f"replica-{seed}-{i}" for i in range(n)}
    before = HashRing(members)
    after = HashRing(members | {f"replica-{seed}-new"})
    moved = sum(before.owner(k) != after.owner(k) for k in KEYS) / len(KEYS)
    fair = 1 / (n + 1)
    assert fair * 0.5 <= moved <= fair * 1.6, (moved, fair)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(min_value=2, max_value=6), seed=st.integers(min_value=0, max_value=10_000))
def test_shares_are_balanced_within_a_bound(n: int, seed: int) -> None:
    ring = HashRing({f"host-{seed}-{i}" for i in range(n)})
    counts: dict[str | None, int] = {}
    for key in KEYS:
        owner = ring.owner(key)
        counts[owner] = counts.get(owner, 0) + 1
    fair = len(KEYS) / n
    assert len(counts) == n
    assert max(counts.values()) <= fair * 1.45, counts
    assert min(counts.values()) >= fair * 0.6, counts


@settings(max_examples=15, deadline=None)
@given(n=st.integers(min_value=2, max_value=5), seed=st.integers(min_value=0, max_value=10_000),
       weight=st.sampled_from([0.25, 0.5, 0.75]))
def test_a_weighted_member_owns_about_its_weight_of_a_share(n: int, seed: int, weight: float) -> None:
    members = [f"host-{seed}-{i}" for i in range(n)]
    light = members[0]
    ring = HashRing(members, weights={light: weight})
    owned = sum(ring.owner(k) == light for k in KEYS) / len(KEYS)
    expected = weight / (weight + n - 1)
    assert expected * 0.5 <= owned <= expected * 1.6, (owned, expected)


@settings(max_examples=15, deadline=None)
@given(members=member_sets.filter(lambda s: len(s) >= 2), data=st.data())
def test_lightening_a_member_moves_only_its_keys_to_the_others(members: set[str], data: st.DataObject) -> None:
    light = data.draw(st.sampled_from(sorted(members)))
    equal = HashRing(members)
    weighted = HashRing(members, weights={light: 0.5})
    for key in KEYS[:800]:
        if equal.owner(key) != light:
            assert weighted.owner(key) == equal.owner(key)  # its remaining tokens are a subset of its old ones


def test_a_member_of_weight_zero_owns_nothing_unless_it_is_alone() -> None:
    ring = HashRing(["leader", "m1", "m2"], weights={"leader": 0.0})
    assert ring.members == {"leader", "m1", "m2"}
    assert {ring.owner(k) for k in KEYS} == {"m1", "m2"}
    alone = HashRing(["leader"], weights={"leader": 0.0})
    assert {alone.owner(k) for k in KEYS[:50]} == {"leader"}
    assert "weights={'leader': 0.0}" in repr(ring)


def test_negative_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        HashRing(["a"], weights={"a": -1.0})
