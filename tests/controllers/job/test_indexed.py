"""Indexed-Job helpers: indexed_job_utils_test.go's tables (intervals, succeeded/failed indexes, first pending
indexes, duplicated-index removal, generateName, failure counts, delayed deletion per index)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.pods import filter_active_pods
from controller_manager.controllers.job.context import SyncJobCtx, pods_with_delayed_deletion_per_index
from controller_manager.controllers.job.indexed import (
    Intervals,
    append_duplicated_index_pods_for_removal,
    calculate_failed_indexes,
    calculate_succeeded_indexes,
    first_pending_indexes,
    index_failure_count,
    is_index_failed,
    new_index_failure_counts,
    parse_indexes,
    pod_generate_name_with_index,
)

from .fakes import INDEX, build_pod

NO_INDEX = "-"


def hollow(descs: list[tuple[str, str]], finalizer: bool = False) -> list[dict[str, Any]]:
    pods = []
    for index, phase in descs:
        pod: dict[str, Any] = {"metadata": {}, "status": {"phase": phase}}
        if index != NO_INDEX:
            pod["metadata"]["annotations"] = {INDEX: index}
        if finalizer:
            pod["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
        pods.append(pod)
    return pods


def phases(pods: list[Any]) -> list[tuple[str, str]]:
    return [((p["metadata"].get("annotations") or {}).get(INDEX, NO_INDEX), p["status"]["phase"]) for p in pods]


def iv(*ranges: tuple[int, int]) -> Intervals:
    return Intervals(tuple(ranges))


@pytest.mark.parametrize(("prev", "pods", "completions", "want_status", "want"), [
    pytest.param("", [("1", "Succeeded")], 2, iv(), iv((1, 1)), id="one index"),
    pytest.param("", [("2", "Failed"), ("5", "Succeeded"), ("5", "Succeeded"), ("10", "Failed"),
                      ("10", "Succeeded")], 11, iv(), iv((5, 5), (10, 10)), id="two separate"),
    pytest.param("", [("0", "Running"), ("1", "Pending"), ("2", "Succeeded"), ("3", "Succeeded"), ("5", "Succeeded"),
                      ("6", "Succeeded"), ("7", "Succeeded")], 8, iv(), iv((2, 3), (5, 7)), id="two intervals"),
    pytest.param("", [("0", "Succeeded"), ("1", "Failed"), ("2", "Succeeded"), ("3", "Succeeded"),
                      ("4", "Succeeded"), ("5", "Succeeded"), (NO_INDEX, "Succeeded"), ("-2", "Succeeded")], 6,
                 iv(), iv((0, 0), (2, 5)), id="one index and one interval"),
    pytest.param("", [("0", "Succeeded"), ("1", "Succeeded"), ("2", "Succeeded"), ("3", "Failed"),
                      ("4", "Succeeded"), ("5", "Succeeded"), (NO_INDEX, "Succeeded"), ("-2", "Succeeded")], 5,
                 iv(), iv((0, 2), (4, 4)), id="out of range"),
    pytest.param("0-5,8-10", [], 8, iv((0, 5)), iv((0, 5)), id="prev interval out of range"),
    pytest.param("0-5,8-10", [], 10, iv((0, 5), (8, 9)), iv((0, 5), (8, 9)), id="prev interval partially out of range"),
    pytest.param("0,4,5,10-12", [("2", "Succeeded"), ("7", "Succeeded"), ("8", "Succeeded")], 13,
                 iv((0, 0), (4, 5), (10, 12)), iv((0, 0), (2, 2), (4, 5), (7, 8), (10, 12)),
                 id="prev and new separate"),
    pytest.param("3,4,6", [("2", "Succeeded"), ("7", "Succeeded"), ("8", "Succeeded")], 9,
                 iv((3, 4), (6, 6)), iv((2, 4), (6, 8)), id="prev between new"),
    pytest.param("2,7,8", [("3", "Succeeded"), ("4", "Succeeded"), ("6", "Succeeded")], 9,
                 iv((2, 2), (7, 8)), iv((2, 4), (6, 8)), id="new between prev"),
    pytest.param("2-7", [("0", "Succeeded"), ("3", "Succeeded"), ("5", "Succeeded"), ("9", "Succeeded")], 10,
                 iv((2, 7)), iv((0, 0), (2, 7), (9, 9)), id="new within prev"),
    pytest.param("0,1-foo,bar", [("3", "Succeeded")], 4, iv((0, 0)), iv((0, 0), (3, 3)), id="corrupted interval"),
])
def test_calculate_succeeded_indexes(prev: str, pods: list[tuple[str, str]], completions: int, want_status: Intervals,
                                     want: Intervals) -> None:
    job = {"spec": {"completions": completions}, "status": {"completedIndexes": prev}}
    got_status, got = calculate_succeeded_indexes(job, hollow(pods, finalizer=True))
    assert got_status == want_status
    assert got == want


@pytest.mark.parametrize(("intervals", "text"), [
    pytest.param(iv(), "", id="empty"),
    pytest.param(iv((1, 1)), "1", id="single"),
    pytest.param(iv((1, 2)), "1,2", id="pair written with a comma"),
    pytest.param(iv((0, 2), (4, 4), (6, 7), (9, 20)), "0-2,4,6,7,9-20", id="mixed"),
])
def test_intervals_string_round_trip(intervals: Intervals, text: str) -> None:
    assert str(intervals) == text
    assert parse_indexes(text, 100) == intervals


@pytest.mark.parametrize(("intervals", "index", "want"), [
    pytest.param(iv(), 4, False, id="empty"),
    pytest.param(iv((2, 4), (5, 7)), 1, False, id="before all"),
    pytest.param(iv((2, 4), (6, 8)), 9, False, id="after all"),
    pytest.param(iv((2, 4), (6, 8)), 5, False, id="in between"),
    pytest.param(iv((2, 4), (6, 8)), 2, True, id="in first"),
    pytest.param(iv((2, 4), (6, 8)), 8, True, id="in second"),
])
def test_intervals_have_index(intervals: Intervals, index: int, want: bool) -> None:
    assert intervals.has(index) is want


@pytest.mark.parametrize(("cnt", "completions", "active", "succeeded", "failed", "want"), [
    pytest.param(5, 3, [], iv(), None, [0, 1, 2], id="cnt greater than completions"),
    pytest.param(2, 5, [], iv(), None, [0, 1], id="cnt less than completions"),
    pytest.param(3, 10, [("0", "Running"), ("1", "Pending")], iv(), None, [2, 3, 4], id="first pods active"),
    pytest.param(6, 6, [("6", "Pending")], iv((4, 5)), None, [0, 1, 2, 3], id="last pods active or succeeded"),
    pytest.param(5, 20, [("3", "Pending"), ("5", "Running"), ("8", "Pending"), (NO_INDEX, "Running"),
                         ("-3", "Running")], iv((2, 4), (9, 9)), None, [0, 1, 6, 7, 10], id="mixed"),
    pytest.param(5, 20, [("3", "Pending"), ("9", "Pending")], iv((1, 1), (5, 5), (9, 9)), iv((2, 2), (6, 7)),
                 [0, 4, 8, 10, 11], id="with failed indexes"),
])
def test_first_pending_indexes(cnt: int, completions: int, active: list[tuple[str, str]], succeeded: Intervals,
                               failed: Intervals | None, want: list[int]) -> None:
    assert first_pending_indexes(hollow(active), succeeded, failed, None, cnt, completions) == want


@pytest.mark.parametrize(("pods", "want_rm", "want_left"), [
    pytest.param([(NO_INDEX, "Pending"), ("2", "Pending"), ("5", "Running"), ("6", "Running")],
                 [(NO_INDEX, "Pending"), ("6", "Running")], [("2", "Pending"), ("5", "Running")], id="all unique"),
    pytest.param([("5", "Pending"), ("0", "Running"), ("3", "Pending"), ("0", "Running"), ("3", "Running"),
                  ("0", "Pending"), ("6", "Running"), ("6", "Pending")],
                 [("0", "Pending"), ("0", "Running"), ("3", "Pending"), ("6", "Running"), ("6", "Pending")],
                 [("0", "Running"), ("3", "Running"), ("5", "Pending")], id="all with index"),
    pytest.param([(NO_INDEX, "Pending"), ("invalid", "Running"), ("-2", "Running"), ("0", "Pending"),
                  ("1", "Pending"), ("1", "Pending"), ("1", "Running")],
                 [(NO_INDEX, "Pending"), ("invalid", "Running"), ("-2", "Running"), ("1", "Pending"),
                  ("1", "Pending")], [("0", "Pending"), ("1", "Running")], id="mixed"),
])
def test_append_duplicated_index_pods_for_removal(pods: list[tuple[str, str]], want_rm: list[tuple[str, str]],
                                                  want_left: list[tuple[str, str]]) -> None:
    rm, left = append_duplicated_index_pods_for_removal(hollow(pods), 6)
    assert phases(rm) == want_rm
    assert phases(left) == want_left


@pytest.mark.parametrize(("name", "want"), [
    pytest.param("indexed-job", "indexed-job-1-", id="short job name"),
    pytest.param("hhhhhooooo" * 7, "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
                 id="job name exceeds MaxGeneratedNameLength"),
    pytest.param("hhhhhooooo" * 5 + "hhhhhoo", "hhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhhooooohhhhh-1-",
                 id="job name with index suffix exceeds MaxGeneratedNameLength"),
])
def test_pod_generate_name_with_index(name: str, want: str) -> None:
    assert pod_generate_name_with_index(name, 1) == want


@pytest.mark.parametrize(("value", "want"), [
    pytest.param(None, 0, id="no annotation"),
    pytest.param("2", 2, id="valid value"),
    pytest.param(str(2**31 - 1), 2**31 - 1, id="valid maxint32 value"),
    pytest.param(str(2**31), 0, id="too large value"),
    pytest.param("-1", 0, id="negative value"),
    pytest.param("xyz", 0, id="invalid int value"),
])
def test_get_index_failure_count(value: str | None, want: int) -> None:
    assert index_failure_count(build_pod(None, failure_count=value)) == want


FAIL_INDEX_POLICY = {"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3]}}]}
EXIT_3 = {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}


@pytest.mark.parametrize(("spec", "pod"), [
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0},
                 build_pod(None, failure_count="0", phase="Failed", index="0"),
                 id="failed pod exceeding backoffLimitPerIndex, when backoffLimitPerIndex=0"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 1},
                 build_pod(None, failure_count="1", phase="Failed", index="1"),
                 id="failed pod exceeding backoffLimitPerIndex, when backoffLimitPerIndex=1"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 1, "podFailurePolicy": FAIL_INDEX_POLICY},
                 build_pod(None, failure_count="0", status=EXIT_3, index="0"),
                 id="matching FailIndex pod failure policy"),
])
def test_is_index_failed(spec: dict[str, Any], pod: dict[str, Any]) -> None:
    assert is_index_failed({"spec": spec}, pod)


@pytest.mark.parametrize(("spec", "status", "pods", "want"), [
    pytest.param({"completions": 2, "backoffLimitPerIndex": 1}, {},
                 [build_pod(None, failure_count="0", phase="Failed", index="0"),
                  build_pod(None, failure_count="1", phase="Failed", index="1")], iv((1, 1)),
                 id="one new index failed"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0}, {},
                 [build_pod(None, failure_count="0", phase="Failed", index="0", finalizer=False)], iv(),
                 id="pod without finalizer is ignored"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0}, {},
                 [build_pod(None, failure_count="0", phase="Failed", index="3", finalizer=False)], iv(),
                 id="pod outside completions is ignored"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0}, {"failedIndexes": "0"},
                 [build_pod(None, failure_count="0", phase="Failed", index="1")], iv((0, 1)),
                 id="extend the failed indexes"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0}, {"failedIndexes": ""},
                 [build_pod(None, failure_count="0", phase="Failed", index="1")], iv((1, 1)),
                 id="prev failed indexes empty"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0}, {"failedIndexes": "9"},
                 [build_pod(None, failure_count="0", phase="Failed", index="1")], iv((1, 1)),
                 id="prev failed indexes outside the completions"),
])
def test_calculate_failed_indexes(spec: dict[str, Any], status: dict[str, Any], pods: list[dict[str, Any]],
                                  want: Intervals) -> None:
    assert calculate_failed_indexes({"spec": spec, "status": status}, pods) == want


NOW = 1_700_000_000.0


@pytest.mark.parametrize(("spec", "pods", "expected_rm", "want"), [
    pytest.param({"completions": 3, "backoffLimitPerIndex": 1},
                 [build_pod(None, uid="a", failure_count="0", phase="Failed", index="0"),
                  build_pod(None, uid="b", failure_count="1", phase="Failed", index="1"),
                  build_pod(None, uid="c", failure_count="0", phase="Failed", index="2")], set(), ["a", "c"],
                 id="failed pods corresponding to non-failed indexes are kept"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0},
                 [build_pod(None, uid="a", failure_count="0", phase="Failed", index="0", finalizer=False)], set(), [],
                 id="failed pod without finalizer; the pod's deletion is not delayed as it already started"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0},
                 [build_pod(None, uid="a", failure_count="0", phase="Failed", index="0")], {"a"}, [],
                 id="failed pod with expected finalizer removal"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 0},
                 [build_pod(None, uid="a", failure_count="0", phase="Failed", index="4")], set(), [],
                 id="failed pod with index outside of completions"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 1},
                 [build_pod(None, uid="a1", failure_count="0", phase="Failed", index="0"),
                  build_pod(None, uid="a2", failure_count="1", phase="Running", index="0")], set(), [],
                 id="failed pod for active index"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 1},
                 [build_pod(None, uid="a1", failure_count="0", phase="Failed", index="0"),
                  build_pod(None, uid="a2", failure_count="1", phase="Succeeded", index="0")], set(), [],
                 id="failed pod for succeeded index"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 4},
                 [build_pod(None, uid="a1", failure_count="0", phase="Failed", index="0"),
                  build_pod(None, uid="a3", failure_count="2", phase="Failed", index="0"),
                  build_pod(None, uid="a2", failure_count="1", phase="Failed", index="0")], set(), ["a3"],
                 id="only the pod with highest failure count is kept"),
    pytest.param({"completions": 2, "backoffLimitPerIndex": 4},
                 [build_pod(None, uid="a1", failure_count="1", phase="Failed", index="0", deleted=NOW - 1,
                            terminated=False),
                  build_pod(None, uid="a3", failure_count="1", phase="Failed", index="0", deleted=NOW,
                            terminated=False),
                  build_pod(None, uid="a2", failure_count="1", phase="Failed", index="0", deleted=NOW - 2,
                            terminated=False)], set(), ["a3"],
                 id="only the last failed pod is kept"),
])
def test_pods_with_delayed_deletion_per_index(spec: dict[str, Any], pods: list[dict[str, Any]], expected_rm: set[str],
                                              want: list[str]) -> None:
    job = {"spec": {**spec, "completionMode": "Indexed"}, "status": {}}
    _, succeeded = calculate_succeeded_indexes(job, pods)
    ctx = SyncJobCtx(job=job, pods=pods, active_pods=filter_active_pods(pods), succeeded_indexes=succeeded,
                     failed_indexes=calculate_failed_indexes(job, pods), expected_rm_finalizers=expected_rm)
    got = pods_with_delayed_deletion_per_index(ctx)
    assert sorted(p["metadata"]["uid"] for p in got.values()) == want


IGNORE_DISRUPTION = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                         "status": "True"}]}]}


@pytest.mark.parametrize(("spec", "pod", "want"), [
    pytest.param({}, None, (0, 0), id="first pod created"),
    pytest.param({}, build_pod(None, failure_count="0", phase="Failed", index="0"), (1, 0),
                 id="failed pod being replaced with 0 index failure count"),
    pytest.param({}, build_pod(None, failure_count="3", phase="Failed", index="0"), (4, 0),
                 id="failed pod being replaced with >0 index failure count"),
    pytest.param({"podFailurePolicy": IGNORE_DISRUPTION},
                 build_pod(None, failure_count="3", index="3", status={
                     "phase": "Failed", "conditions": [{"type": "DisruptionTarget", "status": "True"}]}), (3, 1),
                 id="failed pod being replaced, matching the ignore rule"),
])
def test_new_index_failure_counts(spec: dict[str, Any], pod: dict[str, Any] | None, want: tuple[int, int]) -> None:
    assert new_index_failure_counts({"spec": spec}, pod) == want
