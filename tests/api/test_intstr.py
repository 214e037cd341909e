"""intstr.GetScaledValueFromIntOrPercent, ported from apimachinery's intstr_test.go tables."""

from __future__ import annotations

import re

import pytest

from controller_manager.api.intstr import parse_int_or_percent, scaled_value


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        pytest.param(123, 0, False, 123, id="int passes through"),
        pytest.param("90%", 100, True, 90, id="percent of 100"),
        pytest.param("90%", 95, True, 86, id="percent rounded up"),
        pytest.param("90%", 95, False, 85, id="percent rounded down"),
        pytest.param("25%", 10, True, 3, id="maxSurge 25% of 10 rounds up"),
        pytest.param("25%", 10, False, 2, id="maxUnavailable 25% of 10 rounds down"),
        pytest.param("0%", 10, True, 0, id="zero percent"),
        pytest.param("100%", 7, False, 7, id="hundred percent"),
        pytest.param("150%", 4, True, 6, id="over a hundred percent"),
        pytest.param("+50%", 4, True, 2, id="explicit plus sign as strconv.Atoi accepts"),
        pytest.param("1%", 1, True, 1, id="tiny percent rounds up to one"),
        pytest.param("1%", 1, False, 0, id="tiny percent rounds down to zero"),
        pytest.param(0, 10, True, 0, id="int zero"),
    ],
)
def test_scaled_value(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param(None, "nil value for IntOrString", id="nil"),
        pytest.param("%", 'invalid value for IntOrString: invalid value "%": strconv.Atoi: parsing "": invalid syntax',
                     id="bare percent sign"),
        pytest.param("90#", "invalid value for IntOrString: invalid type: string is not a percentage", id="90#"),
        pytest.param("#%", 'invalid value for IntOrString: invalid value "#%": strconv.Atoi: parsing "#": '
                     "invalid syntax", id="#%"),
        pytest.param("90", "invalid value for IntOrString: invalid type: string is not a percentage",
                     id="number as string"),
        pytest.param(" 5%", 'invalid value for IntOrString: invalid value " 5%": strconv.Atoi: parsing " 5": '
                     "invalid syntax", id="blank is not a digit"),
        pytest.param("1_0%", 'invalid value for IntOrString: invalid value "1_0%": strconv.Atoi: parsing "1_0": '
                     "invalid syntax", id="python-only underscore"),
        pytest.param(True, "invalid value for IntOrString: invalid type: neither int nor percentage", id="bool"),
        pytest.param(1.5, "invalid value for IntOrString: invalid type: neither int nor percentage", id="float"),
    ],
)
def test_scaled_value_rejects(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        scaled_value(value, 100, True)  # type: ignore[arg-type]


def test_parse_reports_kind() -> None:
    assert parse_int_or_percent(3) == (3, False)
    assert parse_int_or_percent("30%") == (30, True)
    assert parse_int_or_percent("-5%") == (-5, True)
