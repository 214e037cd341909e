"""The chaos soak's arithmetic, without a soak: the RSS trend of the calm stretch and the report's summary."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.chaos import FLAT_FLOOR_MIB, Report, _flat, _slope, _trend


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


def _sawtooth(minutes: int, interval: float, height: float) -> list[float]:
    """A leader's RSS between 5-minute collections: up ``height`` MiB, back down at each collection."""
    per_period = int(300 / interval)
    return [110.0 + height * (i % per_period) / per_period for i in range(int(minutes * 60 / interval))]


def test_the_collections_sawtooth_is_noise_and_a_leak_climbs_out_of_it() -> None:
    calm = _sawtooth(60, 10.0, 5.0)
    rise, noise = _trend(calm, 10.0)
    assert abs(rise) <= noise
    # 0.2 MiB a minute: 12 MiB over the hour, far beyond a 5 MiB sawtooth's band.
    leaking = [y + 0.2 * i * 10.0 / 60 for i, y in enumerate(calm)]
    rise, noise = _trend(leaking, 10.0)
    assert rise == pytest.approx(12.0, abs=0.5)
    assert rise > noise


@given(st.floats(min_value=0.01, max_value=5), st.integers(min_value=3, max_value=400))
def test_a_clean_line_is_all_trend_and_no_noise(per_minute: float, n: int) -> None:
    rise, noise = _trend([100.0 + per_minute * i * 10.0 / 60 for i in range(n)], 10.0)
    assert noise == pytest.approx(0.0, abs=1e-6)
    assert rise == pytest.approx(per_minute * (n - 1) * 10.0 / 60, rel=1e-6)


def test_the_summary_says_whether_the_trend_is_beyond_noise() -> None:
    report = Report(seed=1, minutes=5, replicas=3, calm_minutes=60,
                    rss_calm={"replica-1#2": {"first": 95.0, "half": 101.0, "last": 100.0, "slope_mib_per_min": 0.05,
                                              "second_half_slope_mib_per_min": 0.0, "rise_mib": 3.0,
                                              "noise_mib": 4.2, "flat": True, "second_half_rise_mib": 0.1,
                                              "second_half_noise_mib": 3.9, "second_half_flat": True}})
    assert ("[flat: +3.0 MiB in a 4.2 MiB band; second half flat: +0.1 MiB in a 3.9 MiB band]"
            in report.summary())


def test_a_few_pages_are_no_trend_however_quiet_the_process() -> None:
    # An idle standby: +0.15 MiB over 50 minutes with almost no scatter.
    assert _flat(0.15, 0.05)
    assert not _flat(FLAT_FLOOR_MIB + 0.1, 0.05)
    assert not _flat(12.0, 3.0)
