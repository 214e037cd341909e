"""The envelope benchmark's harness end to end at its tiniest profile (kube-sim and the daemon as processes):
every figure is produced, and the pieces that compute them give the right answers on known inputs."""

from __future__ import annotations

import math

import pytest

from bench import envelope


def test_plan_respects_the_namespace_threshold_and_the_pod_count() -> None:
    profile = envelope.PROFILES["full"]
    planned = envelope.plan(profile)
    per_namespace: dict[str, int] = {}
    for p in planned:
        per_namespace[p.namespace] = per_namespace.get(p.namespace, 0) + p.replicas
    assert max(per_namespace.values()) <= envelope.NAMESPACE_PODS
    assert sum(per_namespace.values()) + profile.nodes == profile.pods  # the DaemonSet has one pod per node
    assert {p.replicas for p in planned} >= {250, 30, 5}
    assert any(p.service for p in planned)
    assert not all(p.service for p in planned)


def test_quantile_interpolates_as_histogram_quantile() -> None:
    # 100 observations: 90 under 0.1 s, 10 between 0.1 and 1 s.
    series = [(0.01, 50.0), (0.1, 90.0), (1.0, 100.0), (math.inf, 100.0)]
    assert envelope.quantile(0.5, series) == pytest.approx(0.01)
    assert envelope.quantile(0.99, series) == pytest.approx(0.1 + 0.9 * 9 / 10)
    assert envelope.quantile(0.99, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert envelope.quantile(0.99, [(0.1, 0.0), (1.0, 0.0), (math.inf, 5.0)]) == 1.0  # past the last bound


def test_quantile_bounds_name_the_bucket_holding_it() -> None:
    # 100 waits: 90 under 1 s, 9 in (1, 10], 1 in (100, 1000]: the p99 is in (1, 10], the max in (100, 1000].
    series = [(1.0, 90.0), (10.0, 99.0), (100.0, 99.0), (1000.0, 100.0), (math.inf, 100.0)]
    assert envelope.quantile_bounds(0.99, series) == (1.0, 10.0)
    assert envelope.quantile_bounds(1.0, series) == (100.0, 1000.0)
    assert envelope.quantile_bounds(0.5, series) == (0.0, 1.0)
    assert envelope.quantile_bounds(0.99, [(1.0, 0.0), (math.inf, 0.0)]) is None
    assert envelope.quantile_bounds(0.99, [(1.0, 0.0), (math.inf, 3.0)]) == (1.0, math.inf)
    before = {'workqueue_queue_duration_seconds_bucket{name="a",le="0.1"}': 5.0,
              'workqueue_queue_duration_seconds_bucket{name="a",le="+Inf"}': 5.0}
    after = {'workqueue_queue_duration_seconds_bucket{name="a",le="0.1"}': 5.0,
             'workqueue_queue_duration_seconds_bucket{name="a",le="+Inf"}': 7.0}
    # only what was observed in between counts
    assert envelope.queue_p99s(envelope.queue_waits(before, after)) == {"a": 0.1}


@pytest.mark.timeout(180)  # ~15 CPU-seconds, but a minute of wall clock on a loaded machine
async def test_tiny_profile_runs_end_to_end() -> None:
    figures, details = await envelope.run(envelope.PROFILES["tiny"], label="tiny")
    names = " | ".join(f.name for f in figures)
    for part in ("daemon RSS", "daemon CPU, average", "workqueue queue time p99", "initial cache sync, streaming",
                 "kube-sim peak RSS", "kube-sim CPU", "event-to-action p99, every pair", "fail-over: standby holds",
                 "cyclic garbage collector's pauses", "daemon's API requests during churn"):
        assert part in names
    assert all(f.value >= 0 and not math.isnan(f.value) for f in figures)
    assert details["churn"]["job_pods"] > 0
    assert details["churn"]["deployment_pods"] > 0
    assert details["churn"]["errors"] == 0
    assert details["sync"]["watch-list"]["fallbacks"] == 0
    assert details["queue_p99_s"]  # queues saw work during the churn
    # Both processes count their collector's pauses (python_gc_pause_seconds), the daemon its requests' time.
    usage = details["usage"]
    assert 0 <= usage["daemon_gc_pause_share"] < 1
    assert 0 <= usage["sim_gc_pause_share"] < 1
    assert usage["daemon_api_request_mean_ms"] > 0
    # Every kind of trigger the churn makes was answered and timed from kube-sim's audit log.
    reacted = details["event_to_action"]
    assert reacted["pod_creates_attributed"] > 0
    assert reacted["watch_broken"] is None
    for pair in ("deployment-scale -> replicaset-write", "replicaset-scale-up -> pod-create",
                 "job-create -> pod-create"):
        assert reacted["pairs"][pair]["count"] > 0, pair
    # The standby took the Lease from the killed leader, then synced, then wrote.
    over = details["failover"]
    assert over["holder_after"] != over["holder_before"]
    assert 0 < over["lease_held_s"] <= over["informers_synced_s"] <= over["first_controller_write_s"]
    assert over["first_controller_write_s"] <= over["probe_acted_s"]


def test_share_over_a_bucket_bound_is_exact() -> None:
    series = [(0.1, 90.0), (1.0, 98.0), (10.0, 100.0), (math.inf, 100.0)]
    assert envelope.share_over(1.0, series) == pytest.approx(0.02)
    assert envelope.share_over(0.1, series) == pytest.approx(0.10)
