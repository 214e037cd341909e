"""controller_utils: pod ranking, slow start, hashes and ReplicaSet orderings (ported from controller_utils_test.go)."""

from __future__ import annotations

import asyncio
import functools
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.api.meta import format_time
from controller_manager.controllerutil.controller_utils import (
    POD_DELETION_COST_ANNOTATION,
    SLOW_START_INITIAL_BATCH_SIZE,
    active_pods_less,
    compute_hash,
    filter_active_replica_sets,
    get_deletion_cost_from_pod_annotations,
    pod_keys,
    pods_with_ranks_less,
    ranks_by_colocated_pods,
    replica_sets_by_creation_timestamp,
    replica_sets_by_size_newer,
    replica_sets_by_size_older,
    safe_encode_string,
    slow_start_batch,
    sort_active_pods,
    sort_active_pods_with_ranks,
)

NOW = 1_700_000_000.0
HOUR = 3600.0
THEN_1_MONTH = NOW - 31 * 24 * HOUR


def make_pod(
    name: str,
    node: str = "",
    phase: str = "Running",
    ready: bool = False,
    restarts: list[int] | None = None,
    ready_since: float | None = None,
    created: float | None = None,
    annotations: dict[str, str] | None = None,
    uid: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if created is not None:
        meta["creationTimestamp"] = format_time(created)
    if annotations:
        meta["annotations"] = annotations
    if uid:
        meta["uid"] = uid
    status: dict[str, Any] = {"phase": phase}
    if ready:
        cond: dict[str, Any] = {"type": "Ready", "status": "True"}
        if ready_since is not None:
            cond["lastTransitionTime"] = format_time(ready_since)
        status["conditions"] = [cond]
    if restarts is not None:
        status["containerStatuses"] = [{"name": f"c{i}", "restartCount": r} for i, r in enumerate(restarts)]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def names(pods: list[Any]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# --- TestSortingActivePods -------------------------------------------------------------------------

ACTIVE_PODS_ORDER = [
    make_pod("unscheduled", phase="Pending"),
    make_pod("scheduledButPending", node="bar", phase="Pending"),
    make_pod("unknownPhase", node="foo", phase="Unknown"),
    make_pod("runningButNotReady", node="foo"),
    make_pod("runningNoLastTransitionTime", node="foo", ready=True, restarts=[3, 0]),
    make_pod("runningWithLastTransitionTime", node="foo", ready=True, restarts=[3, 0], ready_since=NOW),
    make_pod("runningLongerTime", node="foo", ready=True, restarts=[3, 0], ready_since=THEN_1_MONTH),
    make_pod("lowerContainerRestartCount", node="foo", ready=True, restarts=[2, 1], ready_since=THEN_1_MONTH,
             created=NOW),
    make_pod("oldest", node="foo", ready=True, restarts=[2, 1], ready_since=THEN_1_MONTH, created=THEN_1_MONTH),
]


def test_sorting_active_pods() -> None:
    rng = random.Random(7)
    for _ in range(20):
        shuffled = ACTIVE_PODS_ORDER[:]
        rng.shuffle(shuffled)
        assert names(sort_active_pods(shuffled)) == names(ACTIVE_PODS_ORDER)


def test_sorting_does_not_mutate_input() -> None:
    shuffled = list(reversed(ACTIVE_PODS_ORDER))
    before = list(shuffled)
    sort_active_pods(shuffled)
    assert shuffled == before


def test_active_pods_less_is_a_strict_order_on_the_table() -> None:
    for i, a in enumerate(ACTIVE_PODS_ORDER):
        for j, b in enumerate(ACTIVE_PODS_ORDER):
            assert active_pods_less(a, b) is (i < j), (names([a, b]))


# --- TestSortingActivePodsWithRanks ----------------------------------------------------------------

unscheduled = make_pod("unscheduled", phase="Pending")
scheduled_pending = make_pod("pending", node="node", phase="Pending")
unknown_phase = make_pod("unknown-phase", node="node", phase="Unknown")
running_not_ready = make_pod("not-ready", node="node")
ready_no_ltt = make_pod("ready-no-last-transition-time", node="node", ready=True, restarts=[0])
ready_now = make_pod("ready-now", node="node", ready=True, restarts=[0], ready_since=NOW, created=NOW)
ready_then = make_pod("ready-then", node="node", ready=True, restarts=[0], ready_since=THEN_1_MONTH,
                      created=THEN_1_MONTH)
ready_now_high_restarts = make_pod("ready-high-restarts", node="node", ready=True, restarts=[9001], ready_since=NOW,
                                   created=NOW)
ready_now_created_then = make_pod("ready-now-created-then", node="node", ready=True, restarts=[0], ready_since=NOW,
                                  created=THEN_1_MONTH)
low_cost = make_pod("low-deletion-cost", node="node", ready=True, restarts=[0], ready_since=NOW, created=THEN_1_MONTH,
                    annotations={POD_DELETION_COST_ANNOTATION: "10"})
high_cost = make_pod("high-deletion-cost", node="node", ready=True, restarts=[0], ready_since=NOW,
                     created=THEN_1_MONTH, annotations={POD_DELETION_COST_ANNOTATION: "100"})
unscheduled_5h = make_pod("unscheduled-5-hours", phase="Pending", created=NOW - 5 * HOUR)
unscheduled_8h = make_pod("unscheduled-10-hours", phase="Pending", created=NOW - 8 * HOUR)
ready_2h = make_pod("ready-2-hours", ready=True, restarts=[0], ready_since=NOW - 2 * HOUR, created=THEN_1_MONTH)
ready_5h = make_pod("ready-5-hours", ready=True, restarts=[0], ready_since=NOW - 5 * HOUR, created=THEN_1_MONTH)
ready_8h = make_pod("ready-10-hours", ready=True, restarts=[0], ready_since=NOW - 8 * HOUR, created=THEN_1_MONTH)


@pytest.mark.parametrize(
    ("p1", "p2"),
    [
        pytest.param(unscheduled, unscheduled, id="unscheduled"),
        pytest.param(scheduled_pending, scheduled_pending, id="pending"),
        pytest.param(unknown_phase, unknown_phase, id="unknown"),
        pytest.param(running_not_ready, running_not_ready, id="not ready"),
        pytest.param(ready_now_created_then, ready_now_created_then, id="ready now created then"),
        pytest.param(ready_now, ready_now, id="ready now"),
        pytest.param(ready_then, ready_then, id="ready then"),
        pytest.param(ready_now_high_restarts, ready_now_high_restarts, id="high restarts"),
        pytest.param(unscheduled_5h, unscheduled_8h, id="created 5h and 8h ago share a log2 bucket"),
        pytest.param(ready_5h, ready_8h, id="ready 5h and 8h ago share a log2 bucket"),
    ],
)
def test_ranked_equality(p1: dict[str, Any], p2: dict[str, Any]) -> None:
    assert not pods_with_ranks_less(p1, 1, p2, 1, NOW)
    assert not pods_with_ranks_less(p2, 1, p1, 1, NOW)


@pytest.mark.parametrize(
    ("lesser", "lesser_rank", "greater", "greater_rank"),
    [
        pytest.param(unscheduled, 1, scheduled_pending, 2, id="unscheduled first despite lower rank"),
        pytest.param(unscheduled, 2, scheduled_pending, 1, id="unscheduled first"),
        pytest.param(scheduled_pending, 1, unknown_phase, 2, id="pending before unknown"),
        pytest.param(unknown_phase, 1, running_not_ready, 2, id="unknown before running"),
        pytest.param(running_not_ready, 1, ready_no_ltt, 1, id="not ready before ready"),
        pytest.param(ready_no_ltt, 1, ready_now, 1, id="no ready time before a ready time"),
        pytest.param(ready_now, 2, ready_no_ltt, 1, id="higher rank first"),
        pytest.param(ready_now, 1, ready_then, 1, id="ready for less time first"),
        pytest.param(ready_now, 2, ready_then, 1, id="rank before ready time"),
        pytest.param(ready_now_high_restarts, 1, ready_now, 1, id="more restarts first"),
        pytest.param(ready_now, 2, ready_now_high_restarts, 1, id="rank before restarts"),
        pytest.param(ready_now, 1, ready_now_created_then, 1, id="newer first"),
        pytest.param(ready_now_created_then, 2, ready_now, 1, id="rank before age"),
        pytest.param(low_cost, 2, high_cost, 1, id="lower deletion cost first"),
        pytest.param(ready_2h, 1, ready_5h, 1, id="different log2 buckets of ready time"),
    ],
)
def test_ranked_inequality(lesser: dict[str, Any], lesser_rank: int, greater: dict[str, Any],
                           greater_rank: int) -> None:
    assert pods_with_ranks_less(lesser, lesser_rank, greater, greater_rank, NOW)
    assert not pods_with_ranks_less(greater, greater_rank, lesser, lesser_rank, NOW)


def test_same_bucket_tie_breaks_on_uid_and_skips_restarts() -> None:
    # Within one log2 bucket of ready time upstream decides by UID, before looking at restarts.
    a = make_pod("a", ready=True, restarts=[0], ready_since=NOW - 5 * HOUR, uid="aaa")
    b = make_pod("b", ready=True, restarts=[50], ready_since=NOW - 8 * HOUR, uid="bbb")
    assert pods_with_ranks_less(a, 0, b, 0, NOW)
    assert not pods_with_ranks_less(b, 0, a, 0, NOW)
    # Without a reference time the comparison is exact: the newer ready time goes first.
    assert pods_with_ranks_less(a, 0, b, 0, None)


def test_sidecar_restarts_break_ties() -> None:
    def with_sidecar(name: str, sidecar_restarts: int) -> dict[str, Any]:
        p = make_pod(name, node="n", ready=True, restarts=[1], ready_since=NOW, created=NOW)
        p["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}, {"name": "init"}]
        p["status"]["initContainerStatuses"] = [
            {"name": "proxy", "restartCount": sidecar_restarts},
            {"name": "init", "restartCount": 99},  # a plain init container never counts
        ]
        return p

    flappy, calm = with_sidecar("flappy", 5), with_sidecar("calm", 1)
    assert pods_with_ranks_less(flappy, 0, calm, 0, NOW)
    assert not pods_with_ranks_less(calm, 0, flappy, 0, NOW)


def test_sort_with_ranks_orders_whole_list() -> None:
    pods = [ready_then, ready_now, running_not_ready, unscheduled, scheduled_pending, unknown_phase]
    expected = ["unscheduled", "pending", "unknown-phase", "not-ready", "ready-now", "ready-then"]
    for seed in range(10):
        shuffled = pods[:]
        random.Random(seed).shuffle(shuffled)
        assert names(sort_active_pods_with_ranks(shuffled, [0] * len(shuffled), NOW)) == expected
    with pytest.raises(ValueError, match="same length"):
        sort_active_pods_with_ranks(pods, [0], NOW)


@st.composite
def _ranked_pod(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    ready = draw(st.booleans())
    cost = draw(st.sampled_from([None, "-5", "0", "3"]))
    pod = make_pod(
        draw(st.sampled_from(["a", "b", "c"])),
        node=draw(st.sampled_from(["", "n1", "n2"])),
        phase=draw(st.sampled_from(["Pending", "Running", "Unknown"])),
        ready=ready,
        restarts=draw(st.none() | st.lists(st.integers(0, 2), max_size=2)),
        ready_since=draw(st.none() | st.sampled_from([NOW - 1, NOW - 3, NOW - 1000, NOW + 5])) if ready else None,
        created=draw(st.none() | st.sampled_from([NOW - 1, NOW - 2, NOW - 3000])),
        annotations={"controller.kubernetes.io/pod-deletion-cost": cost} if cost is not None else None,
        uid=draw(st.sampled_from(["", "u1", "u2"])),
    )
    return pod, draw(st.integers(0, 2))


@given(pods=st.lists(_ranked_pod(), min_size=0, max_size=8), now=st.sampled_from([NOW, None]))
def test_sort_with_ranks_agrees_with_less(pods: list[tuple[dict[str, Any], int]], now: float | None) -> None:
    # The sort compares three ways in one pass; it must order exactly as sorting with two
    # ``ActivePodsWithRanks.Less`` calls per comparison does.
    def cmp(i: int, j: int) -> int:
        (pi, ri), (pj, rj) = pods[i], pods[j]
        if pods_with_ranks_less(pi, ri, pj, rj, now):
            return -1
        return 1 if pods_with_ranks_less(pj, rj, pi, ri, now) else 0

    expected = [pods[i][0] for i in sorted(range(len(pods)), key=functools.cmp_to_key(cmp))]
    got = sort_active_pods_with_ranks([p for p, _ in pods], [r for _, r in pods], now)
    assert [id(p) for p in got] == [id(p) for p in expected]


def test_ranks_count_active_related_pods_on_the_same_node() -> None:
    a1, a2, b1 = make_pod("a1", node="a"), make_pod("a2", node="a"), make_pod("b1", node="b")
    gone = make_pod("gone", node="b", phase="Succeeded")
    unscheduled_pod = make_pod("u", phase="Pending")
    assert ranks_by_colocated_pods([a1, b1, unscheduled_pod], [a1, a2, b1, gone, unscheduled_pod]) == [2, 1, 1]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(None, 0, id="absent"),
        pytest.param("10", 10, id="positive"),
        pytest.param("-10", -10, id="negative"),
        pytest.param("0", 0, id="zero"),
        pytest.param("+10", 0, id="plus sign is invalid"),
        pytest.param("008", 0, id="leading zeros are invalid"),
        pytest.param("", 0, id="empty"),
        pytest.param("1_0", 0, id="underscore"),
        pytest.param("abc", 0, id="not a number"),
        pytest.param("2147483647", 2147483647, id="int32 max"),
        pytest.param("2147483648", 0, id="out of int32 range"),
        pytest.param("-2147483648", -2147483648, id="int32 min"),
    ],
)
def test_deletion_cost(value: str | None, expected: int) -> None:
    annotations = {} if value is None else {POD_DELETION_COST_ANNOTATION: value}
    assert get_deletion_cost_from_pod_annotations(annotations) == expected


# --- ReplicaSets -----------------------------------------------------------------------------------


def rs(name: str, replicas: int, created: float) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": format_time(created)}, "spec": {"replicas": replicas}}


def test_filter_active_replica_sets() -> None:
    # TestActiveReplicaSetsFiltering
    sets = [rs("zero", 0, NOW), None, rs("foo", 1, NOW), rs("bar", 2, NOW)]
    assert names(filter_active_replica_sets(sets)) == ["foo", "bar"]


def test_replica_set_orderings() -> None:
    old_big, new_big = rs("old-big", 3, NOW - 100), rs("new-big", 3, NOW)
    small, tie_b, tie_a = rs("small", 1, NOW - 500), rs("b", 0, NOW - 50), rs("a", 0, NOW - 50)
    sets = [new_big, small, tie_b, old_big, tie_a]
    assert names(replica_sets_by_creation_timestamp(sets)) == ["small", "old-big", "a", "b", "new-big"]
    assert names(replica_sets_by_size_older(sets)) == ["old-big", "new-big", "small", "a", "b"]
    assert names(replica_sets_by_size_newer(sets)) == ["new-big", "old-big", "small", "b", "a"]


# --- ComputeHash -----------------------------------------------------------------------------------

TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def test_compute_hash_differs_by_collision_count() -> None:
    # TestComputeHash: collision counts 1 vs 2, and nil vs MaxInt32, give different hashes.
    assert compute_hash({}, 1) != compute_hash({}, 2)
    assert compute_hash({}, None) != compute_hash({}, 2**31 - 1)


def test_compute_hash_is_stable_and_canonical() -> None:
    reordered = {"spec": {"containers": [{"image": "nginx", "name": "c"}]}, "metadata": {"labels": {"app": "web"}}}
    assert compute_hash(TEMPLATE, None) == compute_hash(reordered, None)
    assert compute_hash(TEMPLATE, None) != compute_hash({**TEMPLATE, "spec": {"containers": []}}, None)
    # Pinned: a change of the hash input would rename every ReplicaSet a Deployment creates from now on.
    assert compute_hash(TEMPLATE, None) == "5776f98846"
    assert compute_hash(TEMPLATE, 1) == "7fdf679775"
    assert compute_hash({}, None) == "5859f96865"


def test_fnv1a_matches_the_reference_vectors() -> None:
    # The FNV-1a 32 of "" is the offset basis, of "a" 0xe40c292c (the published test vectors);
    # compute_hash of {} is the encoding of FNV-1a("{}").
    assert _fnv(b"") == 0x811C9DC5
    assert _fnv(b"a") == 0xE40C292C
    assert compute_hash({}, None) == safe_encode_string(str(_fnv(b"{}")))


def _fnv(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) % 2**32
    return h


JSON_VALUES = st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=5)


@given(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=5),
       st.none() | st.integers(min_value=0, max_value=2**31 - 1))
def test_compute_hash_properties(template: dict[str, Any], collision: int | None) -> None:
    h = compute_hash(template, collision)
    assert h == compute_hash(dict(reversed(list(template.items()))), collision)
    assert 1 <= len(h) <= 10  # a uint32 in decimal, one character per digit
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_safe_encode_string() -> None:
    # Digits map to fixed letters: '0' (48) % 27 = 21 -> '4', '9' (57) % 27 = 3 -> 'f'.
    assert safe_encode_string("09") == "4f"


def test_pod_keys() -> None:
    assert pod_keys([make_pod("a"), make_pod("b")]) == ["default/a", "default/b"]


# --- slowStartBatch --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "fail_from", "expected_successes", "expected_calls", "expected_batches"),
    [
        pytest.param(10, None, 10, 10, [1, 2, 4, 3], id="all succeed"),
        pytest.param(10, 0, 0, 1, [1], id="first call fails"),
        pytest.param(10, 3, 3, 7, [1, 2, 4], id="failure in third batch stops after it"),
        pytest.param(0, None, 0, 0, [], id="nothing to do"),
        pytest.param(1, None, 1, 1, [1], id="one"),
    ],
)
async def test_slow_start_batch(count: int, fail_from: int | None, expected_successes: int, expected_calls: int,
                                expected_batches: list[int]) -> None:
    calls: list[int] = []
    batches: list[int] = []
    in_flight = 0

    async def fn(index: int) -> None:
        nonlocal in_flight
        calls.append(index)
        in_flight += 1
        if in_flight == 1:
            batches.append(0)
        batches[-1] += 1
        await asyncio.sleep(0)
        in_flight -= 1
        if fail_from is not None and index >= fail_from:
            raise RuntimeError(f"boom {index}")

    successes, err = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, fn)
    assert successes == expected_successes
    assert sorted(calls) == list(range(expected_calls))
    assert batches == expected_batches
    if fail_from is None:
        assert err is None
    else:
        assert isinstance(err, RuntimeError)


async def test_slow_start_batch_propagates_cancellation() -> None:
    started = asyncio.Event()

    async def fn(_: int) -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(slow_start_batch(4, 1, fn), name="slow-start")
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
