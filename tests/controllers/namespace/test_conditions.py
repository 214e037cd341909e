"""Namespace deletion conditions: upstream's ``status_condition_utils_test.go`` tables and messages."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_time
from controller_manager.client import ServerError
from controller_manager.controllers.namespace.conditions import (
    CONTENT_FAILURE,
    CONTENT_REMAINING,
    DISCOVERY_FAILURE,
    FINALIZERS_REMAINING,
    GV_PARSING_FAILURE,
    ContentTotals,
    GroupDiscoveryFailed,
    NamespaceConditionUpdater,
    new_successful_condition,
    update_conditions,
)

NOW = 1_700_000_000.0
LATER = NOW + 60
Cond = dict[str, Any]


def ok(type_: str) -> Cond:
    return new_successful_condition(type_, NOW)


def cond(type_: str, status: str, reason: str = "", message: str = "") -> Cond:
    c: Cond = {"type": type_, "status": status}
    if reason or message:
        c.update(reason=reason, message=message)
    return c


def without_time(conditions: list[Cond]) -> list[Cond]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]


ALL_OK_AFTER = [ok(GV_PARSING_FAILURE), ok(CONTENT_FAILURE), ok(CONTENT_REMAINING), ok(FINALIZERS_REMAINING)]


@pytest.mark.parametrize(("new", "starting", "expected"), [
    pytest.param([], [cond("unknown", "True")], [cond("unknown", "True"), ok(DISCOVERY_FAILURE), *ALL_OK_AFTER],
                 id="leave unknown"),
    pytest.param([], [cond(DISCOVERY_FAILURE, "True")], [ok(DISCOVERY_FAILURE), *ALL_OK_AFTER],
                 id="replace with success"),
    pytest.param([], [cond(GV_PARSING_FAILURE, "True"), cond(DISCOVERY_FAILURE, "True")],
                 [ok(GV_PARSING_FAILURE), ok(DISCOVERY_FAILURE), ok(CONTENT_FAILURE), ok(CONTENT_REMAINING),
                  ok(FINALIZERS_REMAINING)],
                 id="leave different order"),
    pytest.param([cond(GV_PARSING_FAILURE, "True", "foo", "bar")],
                 [cond(GV_PARSING_FAILURE, "False"), cond(DISCOVERY_FAILURE, "True")],
                 [cond(GV_PARSING_FAILURE, "True", "foo", "bar"), ok(DISCOVERY_FAILURE), ok(CONTENT_FAILURE),
                  ok(CONTENT_REMAINING), ok(FINALIZERS_REMAINING)],
                 id="overwrite with failure"),
    pytest.param([cond(GV_PARSING_FAILURE, "True", "foo", "bar")], [cond(DISCOVERY_FAILURE, "True")],
                 [ok(DISCOVERY_FAILURE), cond(GV_PARSING_FAILURE, "True", "foo", "bar"), ok(CONTENT_FAILURE),
                  ok(CONTENT_REMAINING), ok(FINALIZERS_REMAINING)],
                 id="write new failure"),
])
def test_update_conditions(new: list[Cond], starting: list[Cond], expected: list[Cond]) -> None:
    before = [dict(c) for c in starting]
    actual, changed = update_conditions(starting, new, NOW)
    assert changed
    assert without_time(actual) == without_time(expected)
    assert starting == before  # the input is not mutated


def test_update_conditions_is_a_no_op_when_nothing_changed() -> None:
    current, _ = update_conditions([], [], NOW)
    again, changed = update_conditions(current, [], LATER)
    assert not changed
    assert again == current


def test_transition_time_moves_only_when_the_status_flips() -> None:
    failing = cond(CONTENT_FAILURE, "True", "ContentDeletionFailed", "first")
    current, _ = update_conditions([], [{**failing, "lastTransitionTime": format_time(NOW)}], NOW)
    reworded, changed = update_conditions(current, [{**failing, "message": "second"}], LATER)
    assert changed
    (c,) = [c for c in reworded if c["type"] == CONTENT_FAILURE]
    assert (c["message"], c["lastTransitionTime"]) == ("second", format_time(NOW))
    healed, _ = update_conditions(reworded, [], LATER)
    (c,) = [c for c in healed if c["type"] == CONTENT_FAILURE]
    assert (c["status"], c["reason"], c["lastTransitionTime"]) == ("False", "ContentDeleted", format_time(LATER))


REMAINING = {("apps.k8s.io", "daemonsets"): 5, ("apps.k8s.io", "deployments"): 5}
FINALIZERS = {"service-catalog": 6, "kubedb": 5}
REMAINING_COND = cond(CONTENT_REMAINING, "True", "SomeResourcesRemain",
                      "Some resources are remaining: daemonsets.apps.k8s.io has 5 resource instances, "
                      "deployments.apps.k8s.io has 5 resource instances")
FINALIZERS_COND = cond(FINALIZERS_REMAINING, "True", "SomeFinalizerRemain",
                       "Some finalizers are remaining: kubedb in 5 resource instances, "
                       "service-catalog in 6 resource instances")


@pytest.mark.parametrize(("totals", "expected"), [
    pytest.param(ContentTotals(), [], id="nothing"),
    pytest.param(ContentTotals(dict(REMAINING), {}), [REMAINING_COND], id="just remaining"),
    pytest.param(ContentTotals({}, dict(FINALIZERS)), [FINALIZERS_COND], id="just finalizers"),
    pytest.param(ContentTotals(dict(REMAINING), dict(FINALIZERS)), [REMAINING_COND, FINALIZERS_COND], id="both"),
])
def test_process_content_totals(totals: ContentTotals, expected: list[Cond]) -> None:
    u = NamespaceConditionUpdater(NOW)
    u.process_content_totals(totals)
    assert without_time(u.new_conditions) == expected
    assert all(c["lastTransitionTime"] == format_time(NOW) for c in u.new_conditions)


def test_core_group_resources_keep_upstreams_trailing_dot() -> None:
    u = NamespaceConditionUpdater(NOW)
    u.process_content_totals(ContentTotals({("", "pods"): 2}, {}))
    assert u.new_conditions[0]["message"] == "Some resources are remaining: pods. has 2 resource instances"


@pytest.mark.parametrize(("error", "message"), [
    pytest.param(GroupDiscoveryFailed({"metrics.k8s.io/v1beta1": ServerError(503, "ServiceUnavailable", "down"),
                                       "custom.io/v1": ServerError(503, "ServiceUnavailable", "gone")}),
                 "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of server APIs: "
                 "custom.io/v1: gone, metrics.k8s.io/v1beta1: down", id="group-discovery-failed"),
    pytest.param(RuntimeError("connection refused"), "connection refused", id="other-error"),
])
def test_process_discover_resources_err(error: BaseException, message: str) -> None:
    u = NamespaceConditionUpdater(NOW)
    u.process_discover_resources_err(error)
    assert without_time(u.new_conditions) == [cond(DISCOVERY_FAILURE, "True", "DiscoveryFailed", message)]


def test_process_group_version_err() -> None:
    u = NamespaceConditionUpdater(NOW)
    u.process_group_version_err(ValueError('unexpected GroupVersion string: "a/b/c"'))
    assert without_time(u.new_conditions) == [
        cond(GV_PARSING_FAILURE, "True", "GroupVersionParsingFailed", 'unexpected GroupVersion string: "a/b/c"')]


def test_delete_content_errors_become_one_sorted_condition() -> None:
    u = NamespaceConditionUpdater(NOW)
    u.process_delete_content_err(RuntimeError("z failed"))
    u.process_delete_content_err(RuntimeError("a failed"))
    conditions, changed = u.update([])
    assert changed
    (failure,) = [c for c in conditions if c["type"] == CONTENT_FAILURE]
    assert without_time([failure]) == [cond(CONTENT_FAILURE, "True", "ContentDeletionFailed",
                                            "Failed to delete all resource types, 2 remaining: a failed, z failed")]
    assert [c["status"] for c in conditions if c["type"] != CONTENT_FAILURE] == ["False"] * 4
