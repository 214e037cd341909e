"""The node lifecycle controller's ``node_collector_*`` metrics, read from the default registry while the
controller runs monitor and tainting passes on a FakeClock. Each test uses zones of its own (the registry is
process-wide) and compares counters and histogram counts as deltas."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from controller_manager.api.resources import NODES
from controller_manager.controllers.nodelifecycle import metrics
from tests.prometheus import sample_value

from .fakes import node
from .test_controller import make, tainted, tick


def zone_key(zone: str) -> str:
    return f"region-1:\x00:{zone}"


def value(name: str, zone: str | None = None) -> float | None:
    return sample_value(name, {} if zone is None else {"zone": zone_key(zone)})


def gauges(zone: str) -> tuple[float | None, float | None, float | None]:
    return (value("node_collector_zone_size", zone), value("node_collector_zone_health", zone),
            value("node_collector_unhealthy_nodes_in_zone", zone))


def evictions(zone: str) -> float:
    return value("node_collector_evictions_total", zone) or 0.0


def zone_nodes(zone: str, count: int) -> list[dict[str, object]]:
    return [node(f"{zone}-{i}", zone=zone) for i in range(count)]


async def test_zone_gauges_follow_each_monitor_pass() -> None:
    ctrl, _client, clock, _ = make(zone_nodes("metrics-gauge-a", 3) + zone_nodes("metrics-gauge-b", 2))
    assert gauges("metrics-gauge-a") == (None, None, None)
    await ctrl.monitor_node_health()
    assert gauges("metrics-gauge-a") == (3, 100, 0)
    assert gauges("metrics-gauge-b") == (2, 100, 0)
    # 51 s of silence from all but one node of zone a: their Ready goes Unknown in this pass.
    await tick(ctrl, clock, 51, alive=("metrics-gauge-a-0",))
    assert gauges("metrics-gauge-a") == (3, pytest.approx(100 / 3), 2)
    assert gauges("metrics-gauge-b") == (2, 0, 2)
    await tick(ctrl, clock, 5, alive=("metrics-gauge-a-0", "metrics-gauge-a-1", "metrics-gauge-a-2"))
    assert gauges("metrics-gauge-a") == (3, 100, 0)


async def test_a_zone_without_nodes_is_reset() -> None:
    gone, kept = zone_nodes("metrics-gone", 2), zone_nodes("metrics-kept", 1)
    ctrl, _client, _clock, _ = make(gone + kept)
    await ctrl.monitor_node_health()
    assert gauges("metrics-gone") == (2, 100, 0)
    for n in gone:
        ctrl.ctx.informers.informer(NODES).store._remove(n["metadata"]["name"])
    await ctrl.monitor_node_health()
    assert gauges("metrics-gone") == (0, 100, 0)
    assert gauges("metrics-kept") == (1, 100, 0)


async def test_evictions_count_noexecute_taints_per_zone() -> None:
    down, up = zone_nodes("metrics-evict-down", 3), zone_nodes("metrics-evict-up", 2)
    ctrl, client, clock, _ = make(down + up)
    names = [n["metadata"]["name"] for n in down]
    alive = tuple(n["metadata"]["name"] for n in up)
    await ctrl.monitor_node_health()
    # The series exists from the moment the zone is known.
    assert value("node_collector_evictions_total", "metrics-evict-down") == 0
    assert value("node_collector_evictions_total", "metrics-evict-up") == 0
    before = evictions("metrics-evict-down")
    await tick(ctrl, clock, 51, alive=alive)
    await tick(ctrl, clock, 5, alive=alive)
    assert len(tainted(client, names)) == 1
    assert evictions("metrics-evict-down") - before == 1
    for _ in range(4):  # 0.1 nodes/s: the other two within 20 s
        await tick(ctrl, clock, 5, alive=alive)
    assert len(tainted(client, names)) == 3
    assert evictions("metrics-evict-down") - before == 3
    # A pass that finds them already tainted counts nothing more; the healthy zone never counted.
    await tick(ctrl, clock, 5, alive=alive)
    assert evictions("metrics-evict-down") - before == 3
    assert evictions("metrics-evict-up") == 0


async def test_health_update_durations_are_observed_per_node_and_per_pass() -> None:
    ctrl, _client, clock, _ = make(zone_nodes("metrics-durations", 4))
    per_node = value("node_collector_update_node_health_duration_seconds_count") or 0.0
    per_pass = value("node_collector_update_all_nodes_health_duration_seconds_count") or 0.0
    await ctrl.monitor_node_health()
    await tick(ctrl, clock, 5, alive=("metrics-durations-0",))
    assert (value("node_collector_update_node_health_duration_seconds_count") or 0.0) - per_node == 8
    assert (value("node_collector_update_all_nodes_health_duration_seconds_count") or 0.0) - per_pass == 2


def test_buckets_are_upstreams() -> None:
    # ExponentialBuckets(0.001, 4, 8) and ExponentialBuckets(0.01, 4, 8), then +Inf.
    assert metrics.UPDATE_NODE_HEALTH_DURATION._upper_bounds == [  # type: ignore[attr-defined]
        0.001, 0.004, 0.016, 0.064, 0.256, 1.024, 4.096, 16.384, float("inf")]
    assert metrics.UPDATE_ALL_NODES_HEALTH_DURATION._upper_bounds == [  # type: ignore[attr-defined]
        0.01, 0.04, 0.16, 0.64, 2.56, 10.24, 40.96, 163.84, float("inf")]
    types = {f.name: f.type for f in REGISTRY.collect() if f.name.startswith("node_collector_")}
    assert types == {"node_collector_zone_health": "gauge", "node_collector_zone_size": "gauge",
                     "node_collector_unhealthy_nodes_in_zone": "gauge", "node_collector_evictions": "counter",
                     "node_collector_update_node_health_duration_seconds": "histogram",
                     "node_collector_update_all_nodes_health_duration_seconds": "histogram"}
