"""The chaos soak's 2-minute seeded profile (``bench.chaos``): kube-sim with API faults, two controller-manager
replicas with short leases, a churning workload, leaders killed, stopped and paused past their lease. Only the
invariants are asserted (none violated, everything converges within the bound), never timings."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import Profile, run_soak

# About three CPU-minutes: `make chaos-quick` runs it, `make test` does not, to stay within its 10 minutes on
# 2 cores.
pytestmark = [pytest.mark.e2e, pytest.mark.chaos, pytest.mark.xdist_group("e2e")]

PROFILE = Profile(seed=2026, minutes=2.0, replicas=2, chaos_interval=12.0, converge_timeout=300.0, rss_interval=5.0)


@pytest.mark.timeout(900)
async def test_two_minutes_of_chaos_keep_every_invariant_and_converge(tmp_path: Path) -> None:
    report = await run_soak(PROFILE, tmp_path)
    print(report.summary())
    assert [(v.invariant, v.message) for v in report.violations] == []
    assert report.converged, report.unconverged
    assert report.kills + report.terms + report.pauses >= 1  # the seeded schedule did strike
    assert report.objects_churned > 0
    assert report.writes_by_replicas > 0  # the audit log saw the replicas at work
