"""deployment util invariants, checked with hypothesis."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller_manager.controllers.deployment.util_annotations import (
    MAX_REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    revision,
    set_new_replica_set_annotations,
)
from controller_manager.controllers.deployment.util_replicasets import (
    DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY,
    equal_ignore_hash,
)
from controller_manager.controllers.deployment.util_rollout import (
    get_replica_count_for_replica_sets,
    new_rs_new_replicas,
    proportional_scale_sizes,
)
from controller_manager.controllers.deployment.util_strategy import (
    max_surge,
    max_unavailable,
    min_available,
    replica_set_replicas,
    resolve_fenceposts,
)
from tests.controllers.deployment.util_fixtures import deployment, replica_set, rolling

int_or_percent = st.one_of(st.integers(0, 50), st.integers(0, 100).map(lambda p: f"{p}%"), st.none())


@given(int_or_percent, int_or_percent, st.integers(0, 1000))
def test_resolve_fenceposts_never_both_zero(surge_value: Any, unavailable_value: Any, desired: int) -> None:
    surge, unavailable = resolve_fenceposts(surge_value, unavailable_value, desired)
    assert surge >= 0
    assert unavailable >= 0
    assert (surge, unavailable) != (0, 0)
    if isinstance(surge_value, str):  # a percentage of maxSurge rounds up ...
        percent = int(surge_value[:-1])
        assert surge == -(-percent * desired // 100)
    if isinstance(unavailable_value, str) and surge:  # ... of maxUnavailable down
        assert unavailable == int(unavailable_value[:-1]) * desired // 100


@given(int_or_percent, int_or_percent, st.integers(0, 1000))
def test_availability_bounds(surge_value: Any, unavailable_value: Any, replicas: int) -> None:
    d = rolling(replicas, surge_value, unavailable_value)
    assert 0 <= max_unavailable(d) <= replicas
    assert 0 <= min_available(d) <= replicas
    assert max_surge(d) >= 0


@given(
    replicas=st.integers(0, 200),
    surge_value=st.one_of(st.integers(0, 20), st.integers(0, 100).map(lambda p: f"{p}%")),
    new_replicas=st.integers(0, 200),
    others=st.lists(st.integers(0, 200), max_size=4),
)
def test_new_rs_new_replicas_respects_surge(replicas: int, surge_value: Any, new_replicas: int,
                                            others: list[int]) -> None:
    d = rolling(replicas, surge_value, 1)
    new_rs = replica_set(d, new_replicas)
    all_rss = [new_rs, *(replica_set(d, n) for n in others)]
    result = new_rs_new_replicas(d, all_rss, new_rs)
    total = get_replica_count_for_replica_sets(all_rss)
    if result > new_replicas:
        # Growth goes toward spec.replicas and keeps the total within replicas + maxSurge.
        assert result <= replicas
        assert total - new_replicas + result <= replicas + max_surge(d)
    elif result < new_replicas:
        # Only an oversized new ReplicaSet (callers scale those down first) is brought back to spec.replicas.
        assert result == replicas


sizes = st.lists(st.integers(1, 60), min_size=1, max_size=5)
annotation = st.one_of(st.none(), st.integers(0, 200).map(str), st.just("bogus"))


@settings(max_examples=300)
@given(
    replicas=st.integers(0, 150),
    surge=st.integers(0, 10),
    status_replicas=st.integers(0, 150),
    rs_sizes=sizes,
    annotations=st.lists(annotation, min_size=5, max_size=5),
)
def test_proportional_scaling_hands_out_the_delta(replicas: int, surge: int, status_replicas: int,
                                                   rs_sizes: list[int], annotations: list[str | None]) -> None:
    d = rolling(replicas, surge, 0)
    d["status"] = {"replicas": status_replicas}
    rss = [
        replica_set(d, n, created=1_000.0 + i,
                    annotations=None if a is None else {MAX_REPLICAS_ANNOTATION: a})
        for i, (n, a) in enumerate(zip(rs_sizes, annotations, strict=False))
    ]
    allowed = replicas + surge if replicas > 0 else 0
    result, operation = proportional_scale_sizes(d, rss)
    new_sizes = [size for _, size in result]
    assert sorted(id(rs) for rs, _ in result) == sorted(id(rs) for rs in rss)
    assert all(size >= 0 for size in new_sizes)
    # Exactly the delta, unless the largest ReplicaSet had to stop at zero.
    assert sum(new_sizes) == allowed or (new_sizes[0] == 0 and sum(new_sizes) > allowed)
    assert operation == ("up" if allowed > sum(rs_sizes) else "down" if allowed < sum(rs_sizes) else "")


@settings(max_examples=300)
@given(replicas=st.integers(1, 150), surge=st.integers(0, 10), rs_sizes=sizes)
def test_proportional_scaling_moves_every_replica_set_one_way(replicas: int, surge: int, rs_sizes: list[int]) -> None:
    # Annotations consistent with the last size the controller wrote: every share moves with the Deployment.
    before = str(sum(rs_sizes))
    d = rolling(replicas, surge, 0)
    rss = [replica_set(d, n, created=1_000.0 + i, annotations={MAX_REPLICAS_ANNOTATION: before})
           for i, n in enumerate(rs_sizes)]
    result, operation = proportional_scale_sizes(d, rss)
    for rs, size in result:
        old = replica_set_replicas(rs)
        assert (size >= old) if operation == "up" else (size <= old)
    total = sum(size for _, size in result)
    # Rounding can leave the leftover bigger than the ReplicaSet it lands on; upstream clamps that one at zero
    # (sync.go scale()), and the next sync takes the rest, so the sum may stay above the target for a while.
    assert total == replicas + surge or (result[0][1] == 0 and total > replicas + surge)


@given(
    start=st.integers(0, 50),
    steps=st.lists(st.integers(1, 10**6), min_size=1, max_size=12),
    limit=st.integers(1, 40),
)
def test_revision_history_stays_within_limit(start: int, steps: list[int], limit: int) -> None:
    d = deployment()
    rs = replica_set(d, annotations={REVISION_ANNOTATION: str(start)})
    current = start
    for step in steps:
        proposed = current + step
        rs, changed = set_new_replica_set_annotations(d, rs, str(proposed), True, limit)
        assert changed
        assert revision(rs) == proposed
        history = rs["metadata"]["annotations"].get(REVISION_HISTORY_ANNOTATION, "")
        first_entry = "," not in history
        assert len(history) <= limit or first_entry  # the first entry is recorded whatever its length
        current = proposed
    # Never backwards.
    lower, changed = set_new_replica_set_annotations(d, rs, str(max(current - 1, 0)), True, limit)
    assert revision(lower) == current


labels = st.dictionaries(st.sampled_from(["app", "tier", "x"]), st.sampled_from(["a", "b"]), max_size=3)


@given(labels, labels, st.text(min_size=1, max_size=5), st.text(min_size=1, max_size=5))
def test_equal_ignore_hash_ignores_only_the_hash(l1: dict[str, str], l2: dict[str, str], h1: str, h2: str) -> None:
    t1: dict[str, Any] = {"metadata": {"labels": {**l1, DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: h1}}, "spec": {}}
    t2: dict[str, Any] = {"metadata": {"labels": {**l2, DEFAULT_DEPLOYMENT_UNIQUE_LABEL_KEY: h2}}, "spec": {}}
    assert equal_ignore_hash(t1, t1)
    assert equal_ignore_hash(t1, t2) == equal_ignore_hash(t2, t1) == (l1 == l2)
