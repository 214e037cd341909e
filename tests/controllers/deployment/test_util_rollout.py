"""deployment util: rollout arithmetic (TestGetReplicaCountForReplicaSets, TestResolveFenceposts,
TestNewRSNewReplicas, TestDeploymentComplete, TestDeploymentProgressing, TestDeploymentTimedOut, TestMaxUnavailable,
TestMinAvailable, TestGetReplicaSetFraction, TestAnnotationUtils/IsSaturated, and sync_test.go's TestScale)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.controllers.deployment import util_strategy
from controller_manager.controllers.deployment.util_annotations import (
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
    set_replicas_annotations,
)
from controller_manager.controllers.deployment.util_conditions import NEW_RS_AVAILABLE_REASON, TIMED_OUT_REASON
from controller_manager.controllers.deployment.util_replicasets import filter_active_replica_sets, find_active_or_latest
from controller_manager.controllers.deployment.util_rollout import (
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
    get_actual_replica_count_for_replica_sets,
    get_available_replica_count_for_replica_sets,
    get_proportion,
    get_ready_replica_count_for_replica_sets,
    get_replica_count_for_replica_sets,
    get_replica_set_fraction,
    get_replica_set_proportion,
    get_terminating_replica_count_for_replica_sets,
    has_progress_deadline,
    has_revision_history_limit,
    is_saturated,
    new_rs_new_replicas,
    proportional_scale_sizes,
)
from controller_manager.controllers.deployment.util_strategy import (
    deployment_replicas,
    is_recreate,
    is_rolling_update,
    min_available,
    replica_set_replicas,
    resolve_fenceposts,
)
from tests.controllers.deployment.util_fixtures import deployment, replica_set, rolling

INT32_MAX = 2**31 - 1


def _rs(name: str, replicas: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return replica_set(deployment(name), replicas, status=status)


def _count_sets() -> dict[str, dict[str, Any]]:
    # rs2 deliberately keeps observedGeneration 0 (upstream's table sets rs1's twice): a reported
    # terminatingReplicas counts even before the first sync.
    return {
        "rs1": _rs("foo-rs", 1, {"observedGeneration": 1, "replicas": 2, "terminatingReplicas": 3}),
        "rs2": _rs("bar-rs", 2, {"replicas": 3, "terminatingReplicas": 1}),
        "rs3": _rs("unsynced-rs", 3, {"replicas": 0}),
        "rs4": _rs("dropped-rs", 1, {"observedGeneration": 1, "replicas": 1}),
    }


@pytest.mark.parametrize(
    ("names", "count", "actual", "terminating"),
    [
        pytest.param(["rs1"], 1, 2, 3, id="scaling down rs1"),
        pytest.param(["rs1", "rs2"], 3, 5, 4, id="scaling down rs1 and rs2"),
        pytest.param(["rs3"], 3, 0, 0, id="scaling up rs3"),
        pytest.param(["rs1", "rs2", "rs3"], 6, 5, 4, id="scaling down rs1 and rs2 and scaling up rs3"),
        pytest.param(["rs4"], 1, 1, None, id="invalid/unknown terminating status for rs4"),
        pytest.param(["rs1", "rs2", "rs3", "rs4"], 7, 6, None, id="unknown terminating status with the others"),
    ],
)
def test_get_replica_count_for_replica_sets(names: list[str], count: int, actual: int, terminating: int | None) -> None:
    sets = _count_sets()
    chosen: list[dict[str, Any] | None] = [sets[n] for n in names]
    chosen.append(None)  # a missing new ReplicaSet is skipped
    assert get_replica_count_for_replica_sets(chosen) == count
    assert get_actual_replica_count_for_replica_sets(chosen) == actual
    assert get_terminating_replica_count_for_replica_sets(chosen) == terminating


def test_ready_and_available_counts() -> None:
    sets = [_rs("a", 3, {"readyReplicas": 2, "availableReplicas": 1}), _rs("b", 1, {"readyReplicas": 1}), None]
    assert get_ready_replica_count_for_replica_sets(sets) == 3
    assert get_available_replica_count_for_replica_sets(sets) == 1


@pytest.mark.parametrize(
    ("max_surge", "max_unavailable", "desired", "surge", "unavailable"),
    [
        pytest.param("0%", "0%", 0, 0, 1, id="both zero resolve to one unavailable"),
        pytest.param("39%", "39%", 10, 4, 3, id="surge rounds up, unavailable down"),
        pytest.param(None, "39%", 10, 0, 3, id="nil surge"),
        pytest.param("39%", None, 10, 4, 0, id="nil unavailable"),
        pytest.param(None, None, 10, 0, 1, id="both nil"),
        pytest.param(2, 0, 10, 2, 0, id="ints pass through"),
    ],
)
def test_resolve_fenceposts(max_surge: Any, max_unavailable: Any, desired: int, surge: int, unavailable: int) -> None:
    assert resolve_fenceposts(max_surge, max_unavailable, desired) == (surge, unavailable)


@pytest.mark.parametrize(
    ("max_surge", "max_unavailable"),
    [pytest.param("oops", "39%", id="bad surge"), pytest.param("55%", "urg", id="bad unavailable")],
)
def test_resolve_fenceposts_invalid(max_surge: str, max_unavailable: str) -> None:
    with pytest.raises(ValueError, match="invalid value for IntOrString"):
        resolve_fenceposts(max_surge, max_unavailable, 10)


@pytest.mark.parametrize(
    ("strategy", "dep_replicas", "new_rs_replicas", "max_surge", "expected"),
    [
        pytest.param("RollingUpdate", 1, 5, 1, 5, id="can not scale up - to newRSReplicas"),
        pytest.param("RollingUpdate", 6, 2, 10, 6, id="scale up - to depReplicas"),
        pytest.param("Recreate", 3, 1, 1, 3, id="recreate - to depReplicas"),
        pytest.param("RollingUpdate", 10, 2, "15%", 9, id="percent surge rounds up and bounds the total"),
    ],
)
def test_new_rs_new_replicas(strategy: str, dep_replicas: int, new_rs_replicas: int, max_surge: Any,
                             expected: int) -> None:
    d = deployment(replicas=dep_replicas, strategy={
        "type": strategy, "rollingUpdate": {"maxUnavailable": 1, "maxSurge": max_surge}})
    rs5 = replica_set(d, 5)
    new_rs = replica_set(d, new_rs_replicas)
    assert new_rs_new_replicas(d, [rs5], new_rs) == expected


def test_new_rs_new_replicas_errors() -> None:
    d = deployment(strategy={"type": "BlueGreen"})
    with pytest.raises(ValueError, match="deployment type BlueGreen isn't supported"):
        new_rs_new_replicas(d, [], replica_set(d))
    d = deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
    with pytest.raises(ValueError, match="nil value for IntOrString"):
        new_rs_new_replicas(d, [], replica_set(d))


def _complete_case(desired: int, current: int, updated: int, available: int, max_unavailable: int,
                   max_surge: int) -> dict[str, Any]:
    d = rolling(desired, max_surge, max_unavailable)
    d["status"] = {"replicas": current, "updatedReplicas": updated, "availableReplicas": available}
    return d


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        pytest.param(_complete_case(5, 5, 5, 4, 1, 0), False, id="not complete: min but not all pods become available"),
        pytest.param(_complete_case(5, 5, 5, 3, 1, 0), False, id="not complete: min availability is not honored"),
        pytest.param(_complete_case(5, 5, 5, 5, 0, 0), True, id="complete"),
        pytest.param(_complete_case(5, 5, 4, 5, 0, 0), False, id="not complete: all pods available but not updated"),
        pytest.param(_complete_case(1, 2, 1, 1, 0, 1), False, id="not complete: still running old pods"),
        pytest.param(_complete_case(1, 1, 1, 0, 1, 1), False, id="not complete: one replica deployment never comes up"),
    ],
)
def test_deployment_complete(d: dict[str, Any], expected: bool) -> None:
    assert deployment_complete(d, d["status"]) is expected


def test_deployment_complete_needs_current_generation() -> None:
    d = _complete_case(5, 5, 5, 5, 0, 0)
    d["metadata"]["generation"] = 3
    assert not deployment_complete(d, {**d["status"], "observedGeneration": 2})
    assert deployment_complete(d, {**d["status"], "observedGeneration": 3})


def _st(current: int, updated: int, ready: int, available: int) -> dict[str, int]:
    return {"replicas": current, "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": available}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(_st(10, 4, 4, 4), _st(10, 6, 4, 4), True, id="progressing: updated pods"),
        pytest.param(_st(10, 4, 4, 4), _st(10, 4, 4, 4), False, id="not progressing"),
        pytest.param(_st(10, 4, 6, 6), _st(8, 4, 6, 6), True, id="progressing: old pods removed"),
        pytest.param(_st(10, 7, 3, 3), _st(10, 6, 3, 3), False, id="not progressing: less new pods"),
        pytest.param(_st(10, 4, 7, 7), _st(8, 8, 5, 5), True, id="progressing: less overall but more new pods"),
        pytest.param(_st(10, 10, 9, 8), _st(10, 10, 10, 8), True, id="progressing: more ready pods"),
        pytest.param(_st(10, 10, 10, 9), _st(10, 10, 10, 10), True, id="progressing: more available pods"),
    ],
)
def test_deployment_progressing(old: dict[str, int], new: dict[str, int], expected: bool) -> None:
    assert deployment_progressing({"status": old}, new) is expected


def _t(minute: int, second: int) -> float:
    return 1_451_606_400.0 + minute * 60 + second  # 2016-01-01T00:mm:ssZ


def _timed(pds: int | None, reason: str, last_update: str | None) -> dict[str, Any]:
    spec = {} if pds is None else {"progressDeadlineSeconds": pds}
    condition = {"type": "Progressing", "status": "True", "reason": reason}
    if last_update is not None:
        condition["lastUpdateTime"] = last_update
    return {"spec": spec, "status": {"conditions": [condition]}}


@pytest.mark.parametrize(
    ("d", "now", "expected"),
    [
        pytest.param(_timed(None, "", "2016-01-01T00:01:09Z"), _t(1, 20), False,
                     id="nil progressDeadlineSeconds specified - no timeout"),
        pytest.param(_timed(INT32_MAX, "", "2016-01-01T00:01:09Z"), _t(1, 20), False,
                     id="infinite progressDeadlineSeconds specified - no timeout"),
        pytest.param(_timed(10, "", "2016-01-01T00:01:09Z"), _t(1, 20), True, id="10s deadline, 11s since progress"),
        pytest.param(_timed(10, "", "2016-01-01T00:01:11Z"), _t(1, 20), False, id="10s deadline, 9s since progress"),
        pytest.param(_timed(10, "", "2016-01-01T00:01:10Z"), _t(1, 20), False, id="exactly at the deadline"),
        pytest.param(_timed(None, NEW_RS_AVAILABLE_REASON, None), _t(1, 20), False,
                     id="previous status was a complete deployment"),
        pytest.param(_timed(10, NEW_RS_AVAILABLE_REASON, "2000-01-01T00:00:00Z"), _t(1, 20), False,
                     id="a complete rollout never times out"),
        pytest.param(_timed(10, TIMED_OUT_REASON, "2016-01-01T00:01:19Z"), _t(1, 20), True,
                     id="timed out stays timed out"),
        pytest.param(_timed(10, "", None), _t(1, 20), True, id="missing update time reads as long ago"),
        pytest.param({"spec": {"progressDeadlineSeconds": 10}, "status": {}}, _t(1, 20), False,
                     id="no Progressing condition: no base to judge"),
    ],
)
def test_deployment_timed_out(d: dict[str, Any], now: float, expected: bool) -> None:
    assert deployment_timed_out(d, d["status"], now) is expected


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        pytest.param(rolling(10, 1, 5), 5, id="maxUnavailable less than replicas"),
        pytest.param(rolling(10, 1, 10), 10, id="maxUnavailable equal replicas"),
        pytest.param(rolling(5, 1, 10), 5, id="maxUnavailable greater than replicas"),
        pytest.param(rolling(0, 1, 10), 0, id="maxUnavailable with replicas is 0"),
        pytest.param(deployment(replicas=None, strategy={"type": "Recreate"}), 0,
                     id="maxUnavailable with Recreate deployment strategy"),
        pytest.param(rolling(10, 1, "50%"), 5, id="maxUnavailable less than replicas with percents"),
        pytest.param(rolling(10, 1, "100%"), 10, id="maxUnavailable equal replicas with percents"),
        pytest.param(rolling(5, 1, "100%"), 5, id="maxUnavailable greater than replicas with percents"),
        pytest.param(rolling(5, "bad", "100%"), 0, id="invalid values read as zero"),
    ],
)
def test_max_unavailable(d: dict[str, Any], expected: int) -> None:
    assert util_strategy.max_unavailable(d) == expected


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        pytest.param(rolling(10, 1, 5), 5, id="replicas greater than maxUnavailable"),
        pytest.param(rolling(10, 1, 10), 0, id="replicas equal maxUnavailable"),
        pytest.param(rolling(5, 1, 10), 0, id="replicas less than maxUnavailable"),
        pytest.param(rolling(0, 1, 10), 0, id="replicas is 0"),
        pytest.param(deployment(replicas=10, strategy={"type": "Recreate"}), 0,
                     id="minAvailable with Recreate deployment strategy"),
        pytest.param(rolling(10, 1, "60%"), 4, id="replicas greater than maxUnavailable with percents"),
        pytest.param(rolling(10, 1, "100%"), 0, id="replicas equal maxUnavailable with percents"),
        pytest.param(rolling(5, 1, "100%"), 0, id="replicas less than maxUnavailable with percents"),
    ],
)
def test_min_available(d: dict[str, Any], expected: int) -> None:
    assert min_available(d) == expected


def test_max_surge_and_strategy() -> None:
    assert util_strategy.max_surge(rolling(10, "25%", "25%")) == 3
    assert util_strategy.max_surge(deployment(replicas=10, strategy={"type": "Recreate"})) == 0
    assert is_rolling_update(rolling(1, 1, 0))
    assert not is_recreate(rolling(1, 1, 0))
    assert deployment_replicas(deployment(replicas=None)) == 1  # the API default
    assert replica_set_replicas(None) == 0


@pytest.mark.parametrize(
    ("spec", "deadline", "history"),
    [
        pytest.param({}, False, False, id="unset"),
        pytest.param({"progressDeadlineSeconds": 600, "revisionHistoryLimit": 10}, True, True, id="set"),
        pytest.param({"progressDeadlineSeconds": INT32_MAX, "revisionHistoryLimit": INT32_MAX}, False, False,
                     id="MaxInt32 means none"),
        pytest.param({"progressDeadlineSeconds": 0, "revisionHistoryLimit": 0}, True, True, id="zero is a limit"),
    ],
)
def test_has_progress_deadline_and_history_limit(spec: dict[str, int], deadline: bool, history: bool) -> None:
    assert has_progress_deadline({"spec": spec}) is deadline
    assert has_revision_history_limit({"spec": spec}) is history


@pytest.mark.parametrize(
    ("annotation", "replicas", "available", "expected"),
    [
        pytest.param("1", 1, 1, True, id="saturated"),
        pytest.param("2", 1, 1, False, id="desired annotation differs"),
        pytest.param("1", 1, 0, False, id="not all available"),
        pytest.param(None, 1, 1, False, id="no annotation"),
        pytest.param("one", 1, 1, False, id="unparsable annotation"),
    ],
)
def test_is_saturated(annotation: str | None, replicas: int, available: int, expected: bool) -> None:
    d = deployment()
    d["metadata"]["annotations"][REVISION_ANNOTATION] = "1"
    annotations = {} if annotation is None else {DESIRED_REPLICAS_ANNOTATION: annotation}
    rs = replica_set(d, replicas, annotations=annotations, status={"availableReplicas": available})
    assert is_saturated(d, rs) is expected
    assert is_saturated(d, None) is False


@pytest.mark.parametrize(
    ("d_replicas", "status_replicas", "surge", "rs_replicas", "annotations", "expected"),
    [
        pytest.param(0, 0, 0, 10, None, -10, id="empty deployment always scales to 0"),
        pytest.param(10, 0, 0, 5, None, 0, id="unsynced deployment does not scale without max-replicas"),
        pytest.param(10, 0, 0, 5, {MAX_REPLICAS_ANNOTATION: "0"}, 0,
                     id="unsynced deployment does not scale with max-replicas 0"),
        pytest.param(120, 100, 0, 50, None, 10, id="scale up by 1/5 without max-replicas"),
        pytest.param(120, 100, 0, 50, {MAX_REPLICAS_ANNOTATION: "0"}, 10,
                     id="scale up by 1/5 with max-replicas 0"),
        pytest.param(120, 0, 0, 50, {MAX_REPLICAS_ANNOTATION: "100"}, 10, id="scale up by 1/5"),
        pytest.param(120, 0, 10, 50, {MAX_REPLICAS_ANNOTATION: "110"}, 9, id="scale up with maxSurge by ~1/5"),
        pytest.param(10, 0, 0, 6, {MAX_REPLICAS_ANNOTATION: "12"}, -1, id="scale down by 1/6"),
        pytest.param(100, 0, 10, 50, {MAX_REPLICAS_ANNOTATION: "130"}, -8, id="scale down with maxSurge by ~1/6"),
        pytest.param(3, 0, 0, 1, {MAX_REPLICAS_ANNOTATION: "2"}, 1, id="a half rounds away from zero"),
    ],
)
def test_get_replica_set_fraction(d_replicas: int, status_replicas: int, surge: int, rs_replicas: int,
                                  annotations: dict[str, str] | None, expected: int) -> None:
    d = rolling(d_replicas, surge, 1)
    d["status"] = {"replicas": status_replicas}
    rs = replica_set(d, rs_replicas, annotations=annotations)
    assert get_replica_set_fraction(rs, d) == expected


def test_get_replica_set_proportion_bounds() -> None:
    d = rolling(20, 0, 1)
    rs = replica_set(d, 5, annotations={MAX_REPLICAS_ANNOTATION: "10"})  # fraction: +5
    assert get_replica_set_proportion(rs, d, 10, 0) == 5
    assert get_replica_set_proportion(rs, d, 10, 7) == 3  # only 3 left to add
    assert get_replica_set_proportion(rs, d, 10, 10) == 0
    assert get_replica_set_proportion(None, d, 10, 0) == 0
    assert get_replica_set_proportion(replica_set(d, 0), d, 10, 0) == 0  # never scale up from zero
    shrink = rolling(2, 0, 1)
    assert get_replica_set_proportion(rs, shrink, -2, 0) == -2  # fraction -4, bounded by what is left
    assert get_proportion is get_replica_set_proportion


# --- sync.go TestScale: the scale() decision built from util ----------------------------------------

NEW_T, OLD_T, OLDER_T = "2016-05-20T02:00:00Z", "2016-05-20T01:00:00Z", "2016-05-20T00:00:00Z"


def _controller_deployment(replicas: int, max_surge: int = 0, max_unavailable: int = 0) -> dict[str, Any]:
    """deployment_controller_test.go newDeployment: RollingUpdate, fenceposts 0/0 unless given."""
    return rolling(replicas, max_surge, max_unavailable)


def _scale_rs(name: str, replicas: int, created: str, old_d: dict[str, Any], desired: int | None = None,
              available: int | None = None) -> dict[str, Any]:
    want = deployment_replicas(old_d) if desired is None else desired
    rs: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": name, "creationTimestamp": created},
        "spec": {"replicas": replicas, "template": {}},
    }
    if available is not None:
        rs["status"] = {"availableReplicas": available}
    rs, _ = set_replicas_annotations(rs, want, want + util_strategy.max_surge(old_d))
    return rs


def _scale(d: dict[str, Any], new_rs: dict[str, Any] | None, old_rss: list[dict[str, Any]]) -> dict[str, int]:
    """The sizes dc.scale would write, decided with util as sync.go decides."""
    active_or_latest = find_active_or_latest(new_rs, old_rss)
    if active_or_latest is not None:
        return {active_or_latest["metadata"]["name"]: deployment_replicas(d)}
    if is_saturated(d, new_rs):
        return {rs["metadata"]["name"]: 0 for rs in filter_active_replica_sets(old_rss)}
    if not is_rolling_update(d):
        return {}
    active = filter_active_replica_sets([*old_rss, new_rs])
    sizes, _ = proportional_scale_sizes(d, active)
    return {rs["metadata"]["name"]: size for rs, size in sizes}


@pytest.mark.parametrize(
    ("d", "old_d", "new", "olds", "expected", "desired"),
    [
        pytest.param(_controller_deployment(12), _controller_deployment(10), ("foo-v1", 10, NEW_T), [],
                     {"foo-v1": 12}, {}, id="normal scaling event: 10 -> 12"),
        pytest.param(_controller_deployment(5), _controller_deployment(10), ("foo-v1", 10, NEW_T), [],
                     {"foo-v1": 5}, {}, id="normal scaling event: 10 -> 5"),
        pytest.param(_controller_deployment(10), _controller_deployment(5), ("foo-v2", 2, NEW_T),
                     [("foo-v1", 3, OLD_T)], {"foo-v2": 4, "foo-v1": 6}, {}, id="proportional scaling: 5 -> 10"),
        pytest.param(_controller_deployment(3), _controller_deployment(5), ("foo-v2", 2, NEW_T),
                     [("foo-v1", 3, OLD_T)], {"foo-v2": 1, "foo-v1": 2}, {}, id="proportional scaling: 5 -> 3"),
        pytest.param(_controller_deployment(4), _controller_deployment(9), ("foo-v2", 8, NEW_T),
                     [("foo-v1", 1, OLD_T)], {"foo-v2": 4, "foo-v1": 0}, {}, id="proportional scaling: 9 -> 4"),
        pytest.param(_controller_deployment(10), _controller_deployment(7), ("foo-v3", 2, NEW_T),
                     [("foo-v2", 3, OLD_T), ("foo-v1", 2, OLDER_T)], {"foo-v3": 3, "foo-v2": 4, "foo-v1": 3}, {},
                     id="proportional scaling: 7 -> 10"),
        pytest.param(_controller_deployment(8), _controller_deployment(13), ("foo-v3", 2, NEW_T),
                     [("foo-v2", 8, OLD_T), ("foo-v1", 3, OLDER_T)], {"foo-v3": 1, "foo-v2": 5, "foo-v1": 2}, {},
                     id="proportional scaling: 13 -> 8"),
        pytest.param(_controller_deployment(4), _controller_deployment(3), ("foo-v3", 1, NEW_T),
                     [("foo-v2", 1, OLD_T), ("foo-v1", 1, OLDER_T)], {"foo-v3": 2, "foo-v2": 1, "foo-v1": 1}, {},
                     id="leftover distribution: 3 -> 4 scales up the new replica set"),
        pytest.param(_controller_deployment(2), _controller_deployment(3), ("foo-v3", 1, NEW_T),
                     [("foo-v2", 1, OLD_T), ("foo-v1", 1, OLDER_T)], {"foo-v3": 1, "foo-v2": 1, "foo-v1": 0}, {},
                     id="leftover distribution: 3 -> 2 scales down the older replica set"),
        pytest.param(_controller_deployment(5), _controller_deployment(4), None,
                     [("foo-v2", 2, OLD_T), ("foo-v1", 2, OLDER_T)], {"foo-v2": 3, "foo-v1": 2}, {},
                     id="proportional scaling (no new rs): 4 -> 5"),
        pytest.param(_controller_deployment(0), _controller_deployment(6), ("foo-v3", 3, NEW_T),
                     [("foo-v2", 2, OLD_T), ("foo-v1", 1, OLDER_T)], {"foo-v3": 0, "foo-v2": 0, "foo-v1": 0}, {},
                     id="proportional scaling: 6 -> 0"),
        pytest.param(_controller_deployment(6), _controller_deployment(6), ("foo-v3", 0, NEW_T),
                     [("foo-v2", 0, OLD_T), ("foo-v1", 0, OLDER_T)], {"foo-v3": 6, "foo-v2": 0, "foo-v1": 0}, {},
                     id="proportional scaling: 0 -> 6"),
        pytest.param(_controller_deployment(5), _controller_deployment(5), ("foo-v3", 2, NEW_T),
                     [("foo-v2", 1, OLD_T), ("foo-v1", 1, OLDER_T)], {"foo-v3": 2, "foo-v2": 2, "foo-v1": 1},
                     {"foo-v2": 3}, id="differing desired-replicas annotations"),
        pytest.param(_controller_deployment(20, 2), _controller_deployment(10, 2), ("foo-v2", 6, NEW_T),
                     [("foo-v1", 6, OLD_T)], {"foo-v2": 11, "foo-v1": 11}, {}, id="deployment with surge pods"),
        pytest.param(_controller_deployment(50, 6), _controller_deployment(10, 3), ("foo-v2", 5, NEW_T),
                     [("foo-v1", 8, OLD_T)], {"foo-v2": 22, "foo-v1": 34}, {}, id="change both surge and size"),
        pytest.param(_controller_deployment(14), _controller_deployment(10), None,
                     [("foo-v2", 7, NEW_T), ("foo-v1", 3, OLD_T)], {"foo-v2": 10, "foo-v1": 4}, {},
                     id="change both size and template"),
    ],
)
def test_scale(d: dict[str, Any], old_d: dict[str, Any], new: tuple[str, int, str] | None,
               olds: list[tuple[str, int, str]], expected: dict[str, int], desired: dict[str, int]) -> None:
    new_rs = None if new is None else _scale_rs(*new, old_d, desired.get(new[0]))
    old_rss = [_scale_rs(*spec, old_d, desired.get(spec[0])) for spec in olds]
    current = {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in [*old_rss, *([new_rs] if new_rs else [])]}
    assert {**current, **_scale(d, new_rs, old_rss)} == expected


def test_scale_saturated_but_broken_new_replica_set_does_not_affect_old_pods() -> None:
    d = _controller_deployment(2, 1, 1)
    new_rs = _scale_rs("foo-v2", 2, NEW_T, d, available=0)
    old_rs = _scale_rs("foo-v1", 1, OLD_T, d)
    assert _scale(d, new_rs, [old_rs]) == {"foo-v2": 2, "foo-v1": 1}
    # Once its pods are available, the saturated new ReplicaSet retires the old ones.
    available = _scale_rs("foo-v2", 2, NEW_T, d, available=2)
    assert _scale(d, available, [old_rs]) == {"foo-v1": 0}


def test_proportional_scale_sizes_order_and_operation() -> None:
    d = _controller_deployment(4)
    old_d = _controller_deployment(3)
    rss = [_scale_rs("a", 1, OLDER_T, old_d), _scale_rs("b", 1, OLD_T, old_d), _scale_rs("c", 1, NEW_T, old_d)]
    sizes, operation = proportional_scale_sizes(d, rss)
    assert operation == "up"
    assert [rs["metadata"]["name"] for rs, _ in sizes] == ["c", "b", "a"]
    sizes, operation = proportional_scale_sizes(_controller_deployment(2), rss)
    assert operation == "down"
    assert [rs["metadata"]["name"] for rs, _ in sizes] == ["a", "b", "c"]
    sizes, operation = proportional_scale_sizes(_controller_deployment(3), rss)
    assert operation == ""
    assert [size for _, size in sizes] == [1, 1, 1]
