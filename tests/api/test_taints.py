"""Toleration/taint matching: upstream's TestTolerationToleratesTaint and TestFindMatchingUntoleratedTaint
tables (k8s.io/api/core/v1, component-helpers/scheduling/corev1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from controller_manager.api.taints import (
    find_untolerated_taint,
    taint_to_string,
    tolerates,
    tolerates_all,
    untolerated_taints,
)

NS, NE, PNS = "NoSchedule", "NoExecute", "PreferNoSchedule"


def tol(key: str = "", op: str = "", value: str = "", effect: str = "") -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": op, "effect": effect}
    if value:
        t["value"] = value
    return t


def taint(key: str, value: str = "", effect: str = NS) -> dict[str, Any]:
    return {"key": key, "value": value, "effect": effect}


SLA = "node.kubernetes.io/sla"

TOLERATES = [
    pytest.param(tol("foo", "Exists", effect=NS), taint("foo"), True, id="exists-same-key-effect-no-value"),
    pytest.param(tol("foo", "Exists", effect=NS), taint("foo", "bar"), True, id="exists-same-key-effect-with-value"),
    pytest.param(tol("", "Exists", effect=NS), taint("foo", "bar"), True, id="empty-key-exists-matches-all-keys"),
    pytest.param(tol("foo", "Equal", "bar", NS), taint("foo", "bar"), True, id="equal-same-value"),
    pytest.param(tol("foo", "Equal", "value1", NS), taint("foo", "value2"), False, id="equal-different-value"),
    pytest.param(tol("foo", "Equal", "bar", NS), taint("foo", "bar", NE), False, id="equal-different-effect"),
    pytest.param(tol(SLA, "Gt", "950", NS), taint(SLA, "800"), False, id="gt-below-threshold"),
    pytest.param(tol(SLA, "Gt", "750", NS), taint(SLA, "950"), True, id="gt-above-threshold"),
    pytest.param(tol(SLA, "Lt", "800", NS), taint(SLA, "950"), False, id="lt-above-threshold"),
    pytest.param(tol(SLA, "Lt", "950", NS), taint(SLA, "800"), True, id="lt-below-threshold"),
    pytest.param(tol(SLA, "Gt", "950", NS), taint(SLA, "950"), False, id="gt-equal-value"),
    pytest.param(tol(SLA, "Gt", "950", NS), taint(SLA, "high"), False, id="gt-non-numeric-taint"),
    pytest.param(tol("k", "Gt", "-100", NS), taint("k", "-200"), False, id="gt-negative-values"),
    pytest.param(tol("k", "Gt", "9223372036854775806", NS), taint("k", "100"), False, id="gt-large-int64"),
    pytest.param(tol("k", "Gt", "1", NS), taint("k", "9223372036854775808"), False, id="gt-past-int64"),
    # Beyond upstream's table: the remaining rules of ToleratesTaint.
    pytest.param(tol("foo", "Exists"), taint("foo", "x", NE), True, id="empty-effect-matches-all-effects"),
    pytest.param(tol("", "Exists"), taint("any", "x", PNS), True, id="empty-key-empty-effect-tolerates-everything"),
    pytest.param(tol("foo", "", "bar", NS), taint("foo", "bar"), True, id="empty-operator-means-equal"),
    pytest.param(tol("foo", "", "", NS), taint("foo", "bar"), False, id="empty-operator-value-mismatch"),
    pytest.param(tol("other", "Exists", effect=NS), taint("foo"), False, id="different-key"),
    pytest.param(tol("foo", "Bogus", effect=NS), taint("foo"), False, id="unknown-operator"),
]


@pytest.mark.parametrize(("toleration", "the_taint", "expected"), TOLERATES)
def test_tolerates(toleration: Mapping[str, Any], the_taint: Mapping[str, Any], expected: bool) -> None:
    before = (dict(toleration), dict(the_taint))
    assert tolerates(toleration, the_taint) is expected
    assert (dict(toleration), dict(the_taint)) == before


UNTOLERATED = [
    pytest.param([], [], None, True, id="empty-tolerations-tolerate-empty-taints"),
    pytest.param([tol("foo", "Exists", effect=NS)], [], None, True, id="non-empty-tolerations-empty-taints"),
    pytest.param([tol("foo", "Exists", effect=NS)], [taint("foo")], None, True, id="tolerations-match-all"),
    pytest.param([tol("foo", "Exists", effect=NS)], [taint("bar")], (), True, id="no-taint-passes-the-filter"),
    pytest.param([tol("foo", "Exists", effect=NS)], [taint("bar")], None, False, id="no-filter-untolerated"),
    pytest.param([tol("foo", "Exists", effect=NE)], [taint("foo", effect=NE), taint("bar", effect=NS)], (NE,), True,
                 id="filter-by-effect"),
    pytest.param([tol(SLA, "Gt", "950", NS)], [taint(SLA, "800")], None, False, id="gt-below"),
    pytest.param([tol(SLA, "Gt", "750", NS)], [taint(SLA, "950")], None, True, id="gt-above"),
    pytest.param([tol(SLA, "Lt", "800", NS)], [taint(SLA, "950")], None, False, id="lt-above"),
    pytest.param([tol(SLA, "Gt", "950", NS)], [taint(SLA, "high")], None, False, id="gt-non-numeric"),
    pytest.param([tol(SLA, "Gt", "950", NS), tol(SLA, "Exists", effect=NS)], [taint(SLA, "high")], None, True,
                 id="gt-parse-error-ignored-when-later-toleration-matches"),
]


@pytest.mark.parametrize(("tolerations", "taints", "effects", "tolerated"), UNTOLERATED)
def test_find_untolerated(tolerations: list[dict[str, Any]], taints: list[dict[str, Any]],
                          effects: tuple[str, ...] | None, tolerated: bool) -> None:
    assert (find_untolerated_taint(tolerations, taints, effects) is None) is tolerated
    assert tolerates_all(tolerations, taints, effects) is tolerated
    assert (not untolerated_taints(tolerations, taints, effects)) is tolerated


def test_default_effects_ignore_prefer_no_schedule() -> None:
    taints = [taint("a", effect=PNS), taint("b", effect=NS), taint("c", effect=NE)]
    assert untolerated_taints([], taints, ("NoSchedule", "NoExecute")) == taints[1:]
    assert untolerated_taints(None, taints) == taints[1:]
    assert untolerated_taints([tol("b", "Exists")], taints) == [taints[2]]
    assert tolerates_all([tol("", "Exists")], taints, None)


@pytest.mark.parametrize(
    ("the_taint", "text"),
    [pytest.param(taint("k", "v", NE), "k=v:NoExecute", id="with-value"),
     pytest.param(taint("k", "", NS), "k:NoSchedule", id="no-value")],
)
def test_taint_to_string(the_taint: Mapping[str, Any], text: str) -> None:
    assert taint_to_string(the_taint) == text
