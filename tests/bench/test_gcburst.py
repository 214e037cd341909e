"""The garbage-collector burst benchmark at its smallest: every owner's dependents are collected, and what it
reports adds up (each wait observed is one item handed out; the workqueue metrics still see them)."""

from __future__ import annotations

import pytest

from bench import gcburst
from controller_manager.runtime.workqueue.metrics import stats_for


@pytest.mark.timeout(60)
async def test_a_small_burst_is_collected_and_measured() -> None:
    exported = stats_for(gcburst.ATTEMPT_TO_DELETE).queue_duration
    before = sum(exported.counts)
    got = await gcburst.run(owners=2, dependents=5, period=0.05, busy_ms=0.0, latency=0.0)
    assert got["owners"] == 2
    # Each dependent and owner handed out at least once; every hand-out's wait reached the exported histogram.
    assert got["items"] >= 2 * (5 + 1)
    assert got["items"] == got["adds"]
    assert stats_for(gcburst.ATTEMPT_TO_DELETE).queue_duration is exported
    assert sum(exported.counts) - before == got["items"]
    # Each dependent read live at least once before its delete; the graph saw each dependent go.
    assert got["gets"] >= 2 * 5
    assert got["graph_changes"] >= 2 * 5
    assert 0.0 <= got["share_over_1s"] <= 1.0
    assert got["p50_s"] <= got["p99_s"] <= got["max_s"]
