"""resource.Quantity parsing: upstream's TestQuantityParse table, its negative/explicit-plus variants,
and its invalid inputs."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_manager.api.quantity import canonicalize, milli_value, parse_quantity, value

MAX = Decimal(2**63 - 1)
Ki, Mi, Gi, Ti, Pi, Ei = (Decimal(2) ** (10 * i) for i in range(1, 7))

# (input, expected value) from upstream's TestQuantityParse.
PARSE = [
    ("0", Decimal(0)), ("0n", Decimal(0)), ("0u", Decimal(0)), ("0m", Decimal(0)), ("0Ki", Decimal(0)),
    ("0k", Decimal(0)), ("0Mi", Decimal(0)), ("0M", Decimal(0)), ("0Gi", Decimal(0)), ("0G", Decimal(0)),
    ("0Ti", Decimal(0)), ("0T", Decimal(0)),
    ("1", Decimal(1)),
    ("1Ki", Ki), ("8Ki", 8 * Ki), ("7Mi", 7 * Mi), ("6Gi", 6 * Gi), ("5Ti", 5 * Ti), ("4Pi", 4 * Pi),
    ("3Ei", 3 * Ei), ("10Ti", 10 * Ti), ("100Ti", 100 * Ti),
    ("5n", Decimal("5e-9")), ("4u", Decimal("4e-6")), ("3m", Decimal("3e-3")), ("9", Decimal(9)),
    ("8k", Decimal(8000)), ("50k", Decimal(50000)), ("7M", Decimal("7e6")), ("6G", Decimal("6e9")),
    ("5T", Decimal("5e12")), ("40T", Decimal("4e13")), ("300T", Decimal("3e14")), ("2P", Decimal("2e15")),
    ("1E", Decimal("1e18")),
    ("1E-3", Decimal("1e-3")), ("1e3", Decimal(1000)), ("1E6", Decimal("1e6")), ("1e9", Decimal("1e9")),
    ("1E12", Decimal("1e12")), ("1e15", Decimal("1e15")), ("1E18", Decimal("1e18")),
    ("1e14", Decimal("1e14")), ("1e13", Decimal("1e13")), ("100.035k", Decimal(100035)),
    ("0.001", Decimal("0.001")), ("0.0005k", Decimal("0.5")), ("0.005", Decimal("0.005")),
    ("0.05", Decimal("0.05")), ("0.5", Decimal("0.5")), ("0.00050k", Decimal("0.5")),
    ("0.00500", Decimal("0.005")), ("0.05000", Decimal("0.05")), ("0.50000", Decimal("0.5")),
    ("0.5e0", Decimal("0.5")), ("0.5e-1", Decimal("0.05")), ("0.5e-2", Decimal("0.005")),
    ("10.035M", Decimal("10035e3")),
    ("1.2e3", Decimal(1200)), ("1.3E+6", Decimal("1.3e6")), ("1.40e9", Decimal("1.4e9")),
    ("1.53E12", Decimal("1.53e12")), ("1.6e15", Decimal("1.6e15")), ("1.7E18", Decimal("1.7e18")),
    ("9.01", Decimal("9.01")), ("8.1k", Decimal(8100)), ("7.123456M", Decimal(7123456)),
    ("6.987654321G", Decimal(6987654321)), ("5.444T", Decimal("5.444e12")), ("40.1T", Decimal("4.01e13")),
    ("300.2T", Decimal("3.002e14")), ("2.5P", Decimal("2.5e15")), ("1.01E", Decimal("1.01e18")),
    # Rounded up to nano, capped at int64 for binary suffixes.
    ("3.001n", Decimal("4e-9")), ("1.1E-9", Decimal("2e-9")), ("0.0000000001", Decimal("1e-9")),
    ("0.0000000005", Decimal("1e-9")), ("0.00000000050", Decimal("1e-9")), ("0.5e-9", Decimal("1e-9")),
    ("0.9n", Decimal("1e-9")), ("0.00000012345", Decimal("124e-9")), ("0.00000012354", Decimal("124e-9")),
    ("9Ei", MAX), ("9223372036854775807Ki", MAX), ("12E", Decimal("12e18")),
    ("100.035Ki", Decimal("102435.84")), ("0.5Mi", Mi / 2), ("0.05Gi", Decimal("53687091.2")),
    ("0.025Ti", Decimal("27487790694.4")),
    ("0.000000000001Ki", Decimal("2e-9")), (".001", Decimal("0.001")), (".0001k", Decimal("0.1")),
    ("1.", Decimal(1)), ("1.G", Decimal("1e9")),
]


@pytest.mark.parametrize(("text", "expected"), [pytest.param(t, e, id=t) for t, e in PARSE])
def test_parse(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected
    assert parse_quantity("+" + text) == expected
    assert parse_quantity("-" + text) == -expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(t, id=repr(t))
        for t in ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
                  "1e4294967297", " 1", "1 ", ".", "1K", "e3", "1Gi ", "--1", "1e", "0x10"]
    ],
)
def test_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="quantit"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(3, Decimal(3), id="int"),
        pytest.param(0.25, Decimal("0.25"), id="float"),
        pytest.param(1.5e3, Decimal(1500), id="float-exponent"),
    ],
)
def test_numbers(given: float, expected: Decimal) -> None:
    assert parse_quantity(given) == expected


@pytest.mark.parametrize("bad", [pytest.param(True, id="bool"), pytest.param(float("nan"), id="nan"),
                                 pytest.param(None, id="none")])
def test_bad_types(bad: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_huge_exponent_stays_exact() -> None:
    assert parse_quantity("1e2147483647") == Decimal("1e2147483647")
    assert parse_quantity("1e-2147483647") == Decimal("1e-9")


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        pytest.param("100m", 100, 1, id="100m"),
        pytest.param("2", 2000, 2, id="2"),
        pytest.param("1.5", 1500, 2, id="1.5"),
        pytest.param("1Gi", 1073741824000, 1073741824, id="1Gi"),
        pytest.param("1n", 1, 1, id="1n-rounds-up"),
        pytest.param("-1.5", -1500, -1, id="negative-rounds-toward-ceiling"),
    ],
)
def test_milli_and_value(text: str, milli: int, whole: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == whole


@pytest.mark.parametrize(("given", "written"), [
    pytest.param("0", "0", id="zero"),
    pytest.param("0Mi", "0", id="zero-binary"),
    pytest.param("1000m", "1", id="milli-to-unit"),
    pytest.param("0.5", "500m", id="fraction-to-milli"),
    pytest.param("1.5", "1500m", id="fraction-keeps-digits"),
    pytest.param("1000", "1k", id="whole-thousands"),
    pytest.param("1024", "1024", id="plain-number-stays-decimal"),
    pytest.param("1500M", "1500M", id="not-a-whole-G"),
    pytest.param("5G", "5G", id="suffix-kept"),
    pytest.param("1n", "1n", id="nano"),
    pytest.param("0.0000000001", "1n", id="below-nano-rounds-up"),
    pytest.param("0.001m", "1u", id="micro"),
    pytest.param("-1", "-1", id="negative"),
    pytest.param("1024Mi", "1Gi", id="binary-up"),
    pytest.param("1.5Gi", "1536Mi", id="binary-down"),
    pytest.param("1023Ki", "1023Ki", id="binary-kept"),
    pytest.param("-1024Mi", "-1Gi", id="binary-negative"),
    pytest.param("0.5Ki", "512", id="binary-below-1024-is-decimal"),
    pytest.param("0.9Ki", "921600m", id="binary-not-whole-is-decimal"),
    pytest.param("1e3", "1e3", id="exponent"),
    pytest.param("1E3", "1e3", id="exponent-upper"),
    pytest.param("12e6", "12e6", id="exponent-kept"),
    pytest.param("1.2e6", "1200e3", id="exponent-multiple-of-3"),
    pytest.param("1e-3", "1e-3", id="exponent-negative"),
    pytest.param(100, "100", id="json-int"),
    pytest.param(1.5, "1500m", id="json-float"),
])
def test_canonical_form_is_what_the_server_writes(given: str | int | float, written: str) -> None:
    assert canonicalize(given) == written


@given(st.decimals(min_value=-(10**12), max_value=10**12, places=9, allow_nan=False, allow_infinity=False),
       st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-3"]))
def test_canonical_form_is_a_fixed_point_with_the_same_value(number: Decimal, suffix: str) -> None:
    text = f"{number:f}{suffix}"
    written = canonicalize(text)
    assert canonicalize(written) == written
    assert parse_quantity(written) == parse_quantity(text)
