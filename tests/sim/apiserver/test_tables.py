"""Server-side printing helpers."""

from __future__ import annotations

import pytest

from controller_manager.api.resources import CONFIGMAPS, NODES
from controller_manager.sim.apiserver.tables import human_duration, table


@pytest.mark.parametrize(("seconds", "text"), [
    pytest.param(-5, "<invalid>", id="future"),
    pytest.param(-1, "0s", id="almost-now"),
    pytest.param(119, "119s", id="seconds"),
    pytest.param(150, "2m30s", id="minutes-seconds"),
    pytest.param(600, "10m", id="minutes"),
    pytest.param(3 * 3600 + 60, "3h1m", id="hours-minutes"),
    pytest.param(10 * 3600, "10h", id="hours"),
    pytest.param(3 * 86400 + 3600, "3d1h", id="days-hours"),
    pytest.param(30 * 86400, "30d", id="days"),
    pytest.param(3 * 365 * 86400 + 86400, "3y1d", id="years-days"),
    pytest.param(9 * 365 * 86400, "9y", id="years"),
])
def test_human_duration(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_node_row() -> None:
    node = {"metadata": {"name": "n1", "creationTimestamp": "2024-01-01T00:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.37.0"}}}
    doc = table(NODES, [node], 1704067200 + 90, "7")
    assert doc["rows"][0]["cells"] == ["n1", "Ready,SchedulingDisabled", "control-plane", "90s", "v1.37.0"]
    assert doc["metadata"] == {"resourceVersion": "7"}


def test_default_columns() -> None:
    doc = table(CONFIGMAPS, [{"metadata": {"name": "c", "creationTimestamp": "2024-01-01T00:00:00Z"}}], 0, "1",
                include_object="None")
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Created At"]
    assert doc["rows"] == [{"cells": ["c", "2024-01-01T00:00:00Z"]}]
