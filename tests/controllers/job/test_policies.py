"""Pod-recreation backoff (backoff_utils_test.go), pod failure policy matching and success policy matching."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.controllers.job.backoff import (
    BackoffRecord,
    BackoffStore,
    finished_time,
    remaining_time_per_index,
)
from controller_manager.controllers.job.indexed import Intervals
from controller_manager.controllers.job.pod_failure_policy import match_pod_failure_policy
from controller_manager.controllers.job.success_policy import match_success_policy

from .fakes import build_pod

T = datetime(2009, 11, 10, 23, 0, 0, tzinfo=UTC).timestamp()


def micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def finished_pod(phase: str, at: float) -> dict[str, Any]:
    return {"metadata": {}, "status": {"phase": phase, "containerStatuses": [
        {"state": {"terminated": {"finishedAt": micro(at)}}}]}}


@pytest.mark.parametrize(("initial", "succeeded", "failed", "want"), [
    pytest.param(None, [], [T], (1, T), id="Empty backoff store and one new failure"),
    pytest.param(None, [], [T, T - 0.001], (2, T), id="Empty backoff store and two new failures"),
    pytest.param(None, [T], [T - 0.002, T - 0.001], (0, None), id="two failures followed by success"),
    pytest.param(None, [T - 0.002], [T, T - 0.004, T - 0.003, T - 0.001], (2, T),
                 id="two failures, one success and two more failures"),
    pytest.param(BackoffRecord("key", 2, None), [], [T], (3, T),
                 id="Backoff store having failure count 2 and one new failure"),
    pytest.param(None, [T], [T], (0, None), id="success and failure at same timestamp"),
    pytest.param(None, [], [], (0, None), id="no success/failure"),
    pytest.param(None, [T], [], (0, None), id="one success"),
])
def test_new_backoff_record(initial: BackoffRecord | None, succeeded: list[float], failed: list[float],
                            want: tuple[int, float | None]) -> None:
    store = BackoffStore()
    if initial is not None:
        store.update(initial)
    record = store.new_backoff_record("key", [finished_pod("Succeeded", t) for t in succeeded],
                                      [finished_pod("Failed", t) for t in failed])
    assert (record.failures_after_last_success, record.last_failure_time) == pytest.approx(want)


def cstatus(*terminated_at: float | None) -> list[dict[str, Any]]:
    return [{"state": {"terminated": {"finishedAt": micro(t)}} if t is not None else {"running": {}}}
            for t in terminated_at]


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param({"status": {"containerStatuses": cstatus(T - 1, T, T - 2)}}, T,
                 id="multiple containers and all containers terminated"),
    pytest.param({"metadata": {"deletionTimestamp": format_time(T)},
                  "status": {"containerStatuses": cstatus(T - 1, None, T - 2)}}, T,
                 id="one container running: fallback to deletionTimestamp"),
    pytest.param({"metadata": {"deletionTimestamp": format_time(T), "deletionGracePeriodSeconds": 30},
                  "status": {"containerStatuses": cstatus(None)}}, T - 30,
                 id="fallback to deletionTimestamp, decremented by grace period"),
    pytest.param({"status": {"containerStatuses": [{"state": {"terminated": {}}}], "conditions": [
        {"type": "Ready", "status": "False", "reason": "PodFailed", "lastTransitionTime": format_time(T)}]}}, T,
        id="fallback to PodReady.LastTransitionTime when status of the condition is False"),
    pytest.param({"metadata": {"deletionTimestamp": format_time(T)},
                  "status": {"containerStatuses": [{"state": {"terminated": {}}}], "conditions": [
                      {"type": "Ready", "status": "True", "lastTransitionTime": format_time(T - 30)}]}}, T,
                 id="skip fallback to PodReady.LastTransitionTime when status of the condition is True"),
    pytest.param({"metadata": {"creationTimestamp": format_time(T)},
                  "status": {"containerStatuses": [{"state": {"terminated": {}}}]}}, T,
                 id="fallback to creationTimestamp"),
    pytest.param({"status": {"containerStatuses": cstatus(T - 1), "initContainerStatuses": cstatus(T)}}, T,
                 id="init container and all containers terminated"),
])
def test_get_finished_time(pod: dict[str, Any], want: float) -> None:
    assert finished_time({"metadata": {}, **pod}) == pytest.approx(want)


@pytest.mark.parametrize(("failures", "last", "now", "want"), [
    pytest.param(0, None, T, 0, id="no failures"),
    pytest.param(1, T, T, 5, id="one failure; current time and failure time are same"),
    pytest.param(1, T, T + 1, 4, id="one failure; current time == 1 second + failure time"),
    pytest.param(1, T, T + 5, 0, id="one failure; current time == expected backoff time"),
    pytest.param(1, T, T + 6, 0, id="one failure; current time == expected backoff time + 1 Second"),
    pytest.param(3, T, T, 20, id="three failures; current time and failure time are same"),
    pytest.param(8, T, T, 640, id="eight failures; backoff not exceeding maxBackoff"),
    pytest.param(9, T, T, 700, id="nine failures; backoff exceeding maxBackoff"),
])
def test_get_remaining_backoff_time(failures: int, last: float | None, now: float, want: float) -> None:
    assert BackoffRecord("k", failures, last).remaining_time(now, 5, 700) == pytest.approx(want)


@pytest.mark.parametrize(("pod", "want"), [
    pytest.param(None, 0, id="no failures"),
    pytest.param(build_pod(None, phase="Failed", failure_count="2", deleted=T, terminated=False), 20,
                 id="two prev failures; current time and failure time are same"),
    pytest.param(build_pod(None, phase="Failed", failure_count="1", ignored_count="1", deleted=T, terminated=False),
                 20, id="one prev failure counted and one ignored; current time and failure time are same"),
])
def test_get_remaining_backoff_time_per_index(pod: dict[str, Any] | None, want: float) -> None:
    assert remaining_time_per_index(T, 5, 700, pod) == pytest.approx(want)


def failed_pod(*containers: tuple[str, int], conditions: list[dict[str, str]] | None = None,
               init: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    def cs(items: tuple[tuple[str, int], ...] | list[tuple[str, int]]) -> list[dict[str, Any]]:
        return [{"name": n, "state": {"terminated": {"exitCode": c}}} for n, c in items]
    status: dict[str, Any] = {"phase": "Failed", "containerStatuses": cs(containers),
                              "conditions": conditions or []}
    if init:
        status["initContainerStatuses"] = cs(init)
    return {"metadata": {"name": "mypod-0", "namespace": "default"}, "status": status}


EXIT_RULES = {"rules": [
    {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1, 2, 3]}},
    {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [5, 6, 7]}},
]}
DISRUPTION = [{"type": "DisruptionTarget", "status": "True"}]


@pytest.mark.parametrize(("policy", "pod", "want"), [
    pytest.param(None, failed_pod(("main", 5)), (None, True, None), id="no policy counts"),
    pytest.param(EXIT_RULES, failed_pod(("main", 2)), (None, False, "Ignore"), id="ignored exit code"),
    pytest.param(EXIT_RULES, failed_pod(("main", 5)),
                 ("Container main for pod default/mypod-0 failed with exit code 5 matching FailJob rule at index 1",
                  True, "FailJob"), id="fail job on exit code"),
    pytest.param(EXIT_RULES, failed_pod(("main", 42)), (None, True, None), id="no rule matches: counted"),
    pytest.param({"rules": [{"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                                                  "values": [5]}}]},
                 failed_pod(("monitoring", 5), ("main", 42)), (None, True, None),
                 id="container name restriction"),
    pytest.param({"rules": [{"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}}]},
                 failed_pod(("main", 3)), (None, True, "Count"), id="NotIn counts"),
    pytest.param({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}}]},
                 failed_pod(("main", 0)), (None, True, None), id="exit code 0 never matches"),
    pytest.param({"rules": [{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [4]}}]},
                 failed_pod(("main", 0), init=[("setup", 4)]), (None, True, "FailIndex"),
                 id="init container exit code"),
    pytest.param({"rules": [{"action": "Ignore", "onPodConditions": DISRUPTION}]},
                 failed_pod(("main", 137), conditions=DISRUPTION), (None, False, "Ignore"),
                 id="disruption ignored"),
    pytest.param({"rules": [{"action": "FailJob", "onPodConditions": DISRUPTION}]},
                 failed_pod(("main", 137), conditions=DISRUPTION),
                 ("Pod default/mypod-0 has condition DisruptionTarget matching FailJob rule at index 0", True,
                  "FailJob"), id="fail job on pod condition"),
    pytest.param({"rules": [{"action": "Bogus", "onExitCodes": {"operator": "In", "values": [5]}},
                            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [5]}}]},
                 failed_pod(("main", 5)), (None, False, "Ignore"), id="unknown action falls through"),
])
def test_match_pod_failure_policy(policy: dict[str, Any] | None, pod: dict[str, Any],
                                  want: tuple[str | None, bool, str | None]) -> None:
    assert match_pod_failure_policy(policy, pod) == want


def iv(*ranges: tuple[int, int]) -> Intervals:
    return Intervals(tuple(ranges))


@pytest.mark.parametrize(("rules", "completions", "succeeded", "want"), [
    pytest.param(None, 10, iv((0, 9)), ("", False), id="no policy"),
    pytest.param([{"succeededCount": 2}], 10, iv(), ("", False), id="nothing succeeded"),
    pytest.param([{"succeededIndexes": "0-2"}], 10, iv((0, 1)), ("", False), id="indexes not all succeeded"),
    pytest.param([{"succeededIndexes": "0-2"}], 10, iv((0, 3)), ("Matched rules at index 0", True),
                 id="indexes all succeeded"),
    pytest.param([{"succeededIndexes": "0-2,5", "succeededCount": 2}], 10, iv((1, 1), (5, 6)),
                 ("Matched rules at index 0", True), id="count of listed indexes reached"),
    pytest.param([{"succeededIndexes": "foo"}, {"succeededCount": 3}], 10, iv((3, 5)),
                 ("Matched rules at index 1", True), id="unparsable indexes skip the rule"),
    pytest.param([{"succeededCount": 4}], 10, iv((3, 5)), ("", False), id="count not reached"),
    pytest.param([{"succeededIndexes": "8-12"}], 10, iv((8, 9)), ("Matched rules at index 0", True),
                 id="rule indexes past completions are cut"),
])
def test_match_success_policy(rules: list[dict[str, Any]] | None, completions: int, succeeded: Intervals,
                              want: tuple[str, bool]) -> None:
    policy = {"rules": rules} if rules is not None else None
    assert match_success_policy(policy, completions, succeeded) == want
