"""The chaos soak's arithmetic, without a soak: the RSS trend of the calm stretch and the report's summary."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.chaos import Report, _slope


def test_a_flat_series_has_no_slope_and_a_leak_shows_per_minute() -> None:
    assert _slope([100.0] * 12, 10.0) == 0.0
    # 1 MiB more every 10-second sample: 6 MiB a minute.
    assert _slope([100.0 + i for i in range(12)], 10.0) == pytest.approx(6.0)
    assert _slope([100.0], 10.0) == 0.0


@given(st.lists(st.floats(min_value=50, max_value=500), min_size=2, max_size=40),
       st.floats(min_value=-5, max_value=5), st.floats(min_value=1, max_value=60))
def test_adding_a_linear_trend_adds_exactly_its_slope(noise: list[float], per_minute: float, interval: float) -> None:
    trended = [y + per_minute * i * interval / 60 for i, y in enumerate(noise)]
    assert _slope(trended, interval) - _slope(noise, interval) == pytest.approx(per_minute, abs=1e-6)


def test_the_summary_names_the_calm_stretch_and_its_trend() -> None:
    report = Report(seed=1, minutes=60, replicas=3, calm_minutes=20,
                    rss_calm={"replica-0#4": {"first": 110.0, "half": 111.5, "last": 112.0, "slope_mib_per_min": 0.05,
                                              "second_half_slope_mib_per_min": 0.01}},
                    calm_cluster_objects={"first": 85, "half": 97, "last": 100})
    summary = report.summary()
    assert "calm 20 min, replica-0#4 RSS 110->112 MiB (+0.05 MiB/min; second half +0.01)" in summary
    assert "cluster objects over the calm stretch 85->97->100" in summary
    assert "calm" not in Report(seed=1, minutes=2, replicas=2).summary()
