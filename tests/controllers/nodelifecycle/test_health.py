"""Tables after upstream's TestMonitorNodeHealthUpdateStatus / ...WithLease and zone state computation,
on the pure health check."""

from __future__ import annotations

from typing import Any

import pytest

from controller_manager.api.meta import format_micro_time, format_time
from controller_manager.controllers.nodelifecycle.health import (
    NodeHealth,
    ZoneState,
    compute_node_health,
    compute_zone_state,
    reduced_qps,
)

from .fakes import T0, node

GRACE = 40.0
STARTUP = 60.0


def lease(renew: float) -> dict[str, Any]:
    return {"metadata": {"name": "n", "namespace": "kube-node-lease"}, "spec": {"renewTime": format_micro_time(renew)}}


def ready_of(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    return next((c for c in obj["status"]["conditions"] if c["type"] == "Ready"), None)


@pytest.mark.parametrize(("the_node", "elapsed", "expect_status", "expect_reason"), [
    pytest.param(node("n", ready=None, created=T0), 10.0, None, None,
                 id="created recently without status: within the startup grace"),
    pytest.param(node("n", ready=None, created=T0 - 3600), 10.0, "Unknown", "NodeStatusNeverUpdated",
                 id="created long ago and never posted status"),
    pytest.param(node("n", ready="False", heartbeat=T0, transition=T0), 10.0, None, None,
                 id="posted NotReady a short time ago"),
    pytest.param(node("n", ready="True", heartbeat=T0 - 3600), GRACE + 1, "Unknown", "NodeStatusUnknown",
                 id="status older than the grace period"),
    pytest.param(node("n", ready="True", heartbeat=T0), GRACE - 1, None, None,
                 id="status within the grace period"),
])
def test_update_status(the_node: dict[str, Any], elapsed: float, expect_status: str | None,
                       expect_reason: str | None) -> None:
    # The first look records "now" as the probe time (or the creation time for a node without status).
    first = compute_node_health(the_node, None, None, T0, STARTUP, GRACE)
    assert first.new_node is None or the_node["status"]["conditions"] == []
    check = compute_node_health(the_node, first.health, None, T0 + elapsed, STARTUP, GRACE)
    if expect_status is None:
        assert check.new_node is None
        return
    assert check.new_node is not None
    conditions = {c["type"]: c for c in check.new_node["status"]["conditions"]}
    assert set(conditions) >= {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure"}
    for ctype in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
        assert conditions[ctype]["status"] == expect_status
        assert conditions[ctype]["lastTransitionTime"] == format_time(T0 + elapsed)
    # Conditions the kubelet never posted are added as never updated; posted ones become NodeStatusUnknown.
    assert conditions["Ready"]["reason"] == expect_reason
    assert conditions["MemoryPressure"]["reason"] == "NodeStatusNeverUpdated"
    message = ("Kubelet never posted node status." if expect_reason == "NodeStatusNeverUpdated"
               else "Kubelet stopped posting node status.")
    assert conditions["Ready"]["message"] == message
    assert check.current_ready == conditions["Ready"]
    # The cached object is untouched.
    cached = ready_of(the_node)
    assert cached is None or cached["status"] != "Unknown"


def test_network_unavailable_is_left_alone() -> None:
    n = node("n", heartbeat=T0 - 3600, conditions=[{"type": "NetworkUnavailable", "status": "False"}])
    first = compute_node_health(n, None, None, T0, STARTUP, GRACE)
    check = compute_node_health(n, first.health, None, T0 + GRACE + 1, STARTUP, GRACE)
    assert check.new_node is not None
    network = [c for c in check.new_node["status"]["conditions"] if c["type"] == "NetworkUnavailable"]
    assert network == [{"type": "NetworkUnavailable", "status": "False"}]


def test_already_unknown_is_not_rewritten() -> None:
    n = node("n", ready="Unknown", heartbeat=T0 - 3600)
    first = compute_node_health(n, None, None, T0, STARTUP, GRACE)
    check = compute_node_health(n, first.health, None, T0 + GRACE + 1, STARTUP, GRACE)
    # The other conditions are added, but Ready did not change: nothing to write.
    assert check.new_node is None
    assert check.current_ready is not None
    assert check.current_ready["status"] == "Unknown"


@pytest.mark.parametrize(("renewals", "expect_unknown"), [
    pytest.param([T0 + 10, T0 + 30, T0 + 50], False, id="lease renewed: healthy with a stale status"),
    pytest.param([T0, T0, T0], True, id="lease not renewed: unknown"),
])
def test_lease_is_a_heartbeat(renewals: list[float], expect_unknown: bool) -> None:
    n = node("n", heartbeat=T0 - 3600)
    saved: NodeHealth | None = None
    check = None
    for step, renew in enumerate(renewals):
        check = compute_node_health(n, saved, lease(renew), T0 + 25 * step + 5, STARTUP, GRACE)
        saved = check.health
    assert check is not None
    assert (check.new_node is not None) is expect_unknown


def test_heartbeat_change_resets_probe_and_transition_change_resets_transition() -> None:
    n1 = node("n", heartbeat=T0, transition=T0)
    first = compute_node_health(n1, None, None, T0, STARTUP, GRACE)
    n2 = node("n", heartbeat=T0 + 30, transition=T0)
    second = compute_node_health(n2, first.health, None, T0 + 30, STARTUP, GRACE)
    assert second.health.probe_timestamp == T0 + 30
    assert second.health.ready_transition_timestamp == first.health.ready_transition_timestamp
    n3 = node("n", ready="False", heartbeat=T0 + 60, transition=T0 + 60)
    third = compute_node_health(n3, second.health, None, T0 + 61, STARTUP, GRACE)
    assert third.health.ready_transition_timestamp == T0 + 61


def _ready(status: str | None) -> dict[str, str] | None:
    return None if status is None else {"type": "Ready", "status": status}


@pytest.mark.parametrize(("statuses", "expected"), [
    pytest.param(["True", "True", "True"], (0, ZoneState.NORMAL), id="all ready"),
    pytest.param(["True", "False", "Unknown"], (2, ZoneState.NORMAL), id="two not ready is never partial"),
    pytest.param(["True", "False", "False", "Unknown"], (3, ZoneState.PARTIAL_DISRUPTION), id="3 of 4"),
    pytest.param(["True", "True", "False", "False", "Unknown"], (3, ZoneState.PARTIAL_DISRUPTION),
                 id="3 of 5 is 0.6 >= 0.55"),
    pytest.param(["True", "True", "True", "False", "False", "Unknown"], (3, ZoneState.NORMAL), id="3 of 6 is 0.5"),
    pytest.param(["False", "Unknown", None], (3, ZoneState.FULL_DISRUPTION), id="none ready"),
    pytest.param(["Unknown"], (1, ZoneState.FULL_DISRUPTION), id="single node down"),
    pytest.param([], (0, ZoneState.NORMAL), id="empty"),
])
def test_compute_zone_state(statuses: list[str | None], expected: tuple[int, ZoneState]) -> None:
    assert compute_zone_state([_ready(s) for s in statuses], 0.55) == expected


@pytest.mark.parametrize(("size", "threshold", "expected"), [
    pytest.param(50, 50, 0.0, id="at the threshold: stop"),
    pytest.param(51, 50, 0.01, id="large zone: secondary rate"),
    pytest.param(3, 50, 0.0, id="small zone: stop"),
])
def test_reduced_qps(size: int, threshold: int, expected: float) -> None:
    assert reduced_qps(size, threshold, 0.01) == expected
