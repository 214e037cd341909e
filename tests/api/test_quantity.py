"""resource.Quantity: upstream's tables (k8s.io/apimachinery/pkg/api/resource quantity_test.go) ported, plus
the cases where upstream's scanner and writer surprise (kept as they are: kube-sim must answer the same)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from controller_manager.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    ERR_FORMAT_WRONG,
    ERR_NUMERIC,
    ERR_SUFFIX,
    Quantity,
    QuantityError,
    canonicalize,
    go_float_text,
    milli_value,
    parse,
    parse_quantity,
    value,
)

# --- upstream's tables ------------------------------------------------------------------------------------
# TestQuantityParse: (input, mantissa, exponent, format); TestQuantityString: (mantissa, exponent, format,
# written, an alternate input written the same way); TestQuantityParseEmit; TestParseQuantity (input, written);
# TestQuantityParse's invalid inputs; TestJSONWhitespace (JSON text, written).

PARSE_TABLE = [
    ('0', 0, 0, DECIMAL_SI),
    ('0n', 0, 0, DECIMAL_SI),
    ('0u', 0, 0, DECIMAL_SI),
    ('0m', 0, 0, DECIMAL_SI),
    ('0Ki', 0, 0, BINARY_SI),
    ('0k', 0, 0, DECIMAL_SI),
    ('0Mi', 0, 0, BINARY_SI),
    ('0M', 0, 0, DECIMAL_SI),
    ('0Gi', 0, 0, BINARY_SI),
    ('0G', 0, 0, DECIMAL_SI),
    ('0Ti', 0, 0, BINARY_SI),
    ('0T', 0, 0, DECIMAL_SI),
    ('1', 1, 0, DECIMAL_SI),
    ('1Ki', 1024, 0, BINARY_SI),
    ('8Ki', 8*1024, 0, BINARY_SI),
    ('7Mi', 7*1024*1024, 0, BINARY_SI),
    ('6Gi', 6*1024*1024*1024, 0, BINARY_SI),
    ('5Ti', 5*1024*1024*1024*1024, 0, BINARY_SI),
    ('4Pi', 4*1024*1024*1024*1024*1024, 0, BINARY_SI),
    ('3Ei', 3*1024*1024*1024*1024*1024*1024, 0, BINARY_SI),
    ('10Ti', 10*1024*1024*1024*1024, 0, BINARY_SI),
    ('100Ti', 100*1024*1024*1024*1024, 0, BINARY_SI),
    ('5n', 5, -9, DECIMAL_SI),
    ('4u', 4, -6, DECIMAL_SI),
    ('3m', 3, -3, DECIMAL_SI),
    ('9', 9, 0, DECIMAL_SI),
    ('8k', 8, 3, DECIMAL_SI),
    ('50k', 5, 4, DECIMAL_SI),
    ('7M', 7, 6, DECIMAL_SI),
    ('6G', 6, 9, DECIMAL_SI),
    ('5T', 5, 12, DECIMAL_SI),
    ('40T', 4, 13, DECIMAL_SI),
    ('300T', 3, 14, DECIMAL_SI),
    ('2P', 2, 15, DECIMAL_SI),
    ('1E', 1, 18, DECIMAL_SI),
    ('1E-3', 1, -3, DECIMAL_EXPONENT),
    ('1e3', 1, 3, DECIMAL_EXPONENT),
    ('1E6', 1, 6, DECIMAL_EXPONENT),
    ('1e9', 1, 9, DECIMAL_EXPONENT),
    ('1E12', 1, 12, DECIMAL_EXPONENT),
    ('1e15', 1, 15, DECIMAL_EXPONENT),
    ('1E18', 1, 18, DECIMAL_EXPONENT),
    ('1e14', 1, 14, DECIMAL_EXPONENT),
    ('1e13', 1, 13, DECIMAL_EXPONENT),
    ('1e3', 1, 3, DECIMAL_EXPONENT),
    ('100.035k', 100035, 0, DECIMAL_SI),
    ('0.001', 1, -3, DECIMAL_SI),
    ('0.0005k', 5, -1, DECIMAL_SI),
    ('0.005', 5, -3, DECIMAL_SI),
    ('0.05', 5, -2, DECIMAL_SI),
    ('0.5', 5, -1, DECIMAL_SI),
    ('0.00050k', 5, -1, DECIMAL_SI),
    ('0.00500', 5, -3, DECIMAL_SI),
    ('0.05000', 5, -2, DECIMAL_SI),
    ('0.50000', 5, -1, DECIMAL_SI),
    ('0.5e0', 5, -1, DECIMAL_EXPONENT),
    ('0.5e-1', 5, -2, DECIMAL_EXPONENT),
    ('0.5e-2', 5, -3, DECIMAL_EXPONENT),
    ('0.5e0', 5, -1, DECIMAL_EXPONENT),
    ('10.035M', 10035, 3, DECIMAL_SI),
    ('1.2e3', 12, 2, DECIMAL_EXPONENT),
    ('1.3E+6', 13, 5, DECIMAL_EXPONENT),
    ('1.40e9', 14, 8, DECIMAL_EXPONENT),
    ('1.53E12', 153, 10, DECIMAL_EXPONENT),
    ('1.6e15', 16, 14, DECIMAL_EXPONENT),
    ('1.7E18', 17, 17, DECIMAL_EXPONENT),
    ('9.01', 901, -2, DECIMAL_SI),
    ('8.1k', 81, 2, DECIMAL_SI),
    ('7.123456M', 7123456, 0, DECIMAL_SI),
    ('6.987654321G', 6987654321, 0, DECIMAL_SI),
    ('5.444T', 5444, 9, DECIMAL_SI),
    ('40.1T', 401, 11, DECIMAL_SI),
    ('300.2T', 3002, 11, DECIMAL_SI),
    ('2.5P', 25, 14, DECIMAL_SI),
    ('1.01E', 101, 16, DECIMAL_SI),
    ('3.001n', 4, -9, DECIMAL_SI),
    ('1.1E-9', 2, -9, DECIMAL_EXPONENT),
    ('0.0000000001', 1, -9, DECIMAL_SI),
    ('0.0000000005', 1, -9, DECIMAL_SI),
    ('0.00000000050', 1, -9, DECIMAL_SI),
    ('0.5e-9', 1, -9, DECIMAL_EXPONENT),
    ('0.9n', 1, -9, DECIMAL_SI),
    ('0.00000012345', 124, -9, DECIMAL_SI),
    ('0.00000012354', 124, -9, DECIMAL_SI),
    ('12E', 12, 18, DECIMAL_SI),
    ('100.035Ki', 10243584, -2, BINARY_SI),
    ('0.5Mi', 512*1024, 0, BINARY_SI),
    ('0.05Gi', 536870912, -1, BINARY_SI),
    ('0.025Ti', 274877906944, -1, BINARY_SI),
    ('0.000000000001Ki', 2, -9, DECIMAL_SI),
    ('.001', 1, -3, DECIMAL_SI),
    ('.0001k', 100, -3, DECIMAL_SI),
    ('1.', 1, 0, DECIMAL_SI),
    ('1.G', 1, 9, DECIMAL_SI),
    ('9Ei', 2**63 - 1, 0, BINARY_SI),
    ('9223372036854775807Ki', 2**63 - 1, 0, BINARY_SI),
]
STRING_TABLE = [
    (1024*1024*1024, 0, BINARY_SI, '1Gi', '1024Mi'),
    (300*1024*1024, 0, BINARY_SI, '300Mi', '307200Ki'),
    (6*1024, 0, BINARY_SI, '6Ki', ''),
    (1001*1024*1024*1024, 0, BINARY_SI, '1001Gi', '1025024Mi'),
    (1024*1024*1024*1024, 0, BINARY_SI, '1Ti', '1024Gi'),
    (5, 0, BINARY_SI, '5', '5000m'),
    (500, -3, BINARY_SI, '500m', '0.5'),
    (1, 9, DECIMAL_SI, '1G', '1000M'),
    (1000, 6, DECIMAL_SI, '1G', '0.001T'),
    (1000000, 3, DECIMAL_SI, '1G', ''),
    (1000000000, 0, DECIMAL_SI, '1G', ''),
    (1, -3, DECIMAL_SI, '1m', '1000u'),
    (80, -3, DECIMAL_SI, '80m', ''),
    (1080, -3, DECIMAL_SI, '1080m', '1.08'),
    (108, -2, DECIMAL_SI, '1080m', '1080000000n'),
    (10800, -4, DECIMAL_SI, '1080m', ''),
    (300, 6, DECIMAL_SI, '300M', ''),
    (1, 12, DECIMAL_SI, '1T', ''),
    (1234567, 6, DECIMAL_SI, '1234567M', ''),
    (1234567, -3, BINARY_SI, '1234567m', ''),
    (3, 3, DECIMAL_SI, '3k', ''),
    (1025, 0, BINARY_SI, '1025', ''),
    (0, 0, DECIMAL_SI, '0', ''),
    (0, 0, BINARY_SI, '0', ''),
    (1, 9, DECIMAL_EXPONENT, '1e9', '.001e12'),
    (1, -3, DECIMAL_EXPONENT, '1e-3', '0.001e0'),
    (1, -9, DECIMAL_EXPONENT, '1e-9', '1000e-12'),
    (80, -3, DECIMAL_EXPONENT, '80e-3', ''),
    (300, 6, DECIMAL_EXPONENT, '300e6', ''),
    (1, 12, DECIMAL_EXPONENT, '1e12', ''),
    (1, 3, DECIMAL_EXPONENT, '1e3', ''),
    (3, 3, DECIMAL_EXPONENT, '3e3', ''),
    (3, 3, DECIMAL_SI, '3k', ''),
    (0, 0, DECIMAL_EXPONENT, '0', '00'),
    (1, -9, DECIMAL_SI, '1n', ''),
    (80, -9, DECIMAL_SI, '80n', ''),
    (1080, -9, DECIMAL_SI, '1080n', ''),
    (108, -8, DECIMAL_SI, '1080n', ''),
    (10800, -10, DECIMAL_SI, '1080n', ''),
    (1, -6, DECIMAL_SI, '1u', ''),
    (80, -6, DECIMAL_SI, '80u', ''),
    (1080, -6, DECIMAL_SI, '1080u', ''),
]
PARSE_EMIT = [
    ('1Ki', '1Ki'),
    ('1Mi', '1Mi'),
    ('1Gi', '1Gi'),
    ('1024Mi', '1Gi'),
    ('1000M', '1G'),
    ('.001Ki', '1024m'),
    ('.000001Ki', '1024u'),
    ('.000000001Ki', '1024n'),
    ('.000000000001Ki', '2n'),
]
REPARSE = [
    ('-999999999999999999', '-999999999999999999'),
    ('999999999999999999', '999999999999999999'),
    ('-999999999999999999.0', '-999999999999999999'),
    ('999999999999999999.0', '999999999999999999'),
    ('-999999999999999999.1', '-999999999999999999100m'),
    ('999999999999999999.1', '999999999999999999100m'),
    ('-9999999999999999999', '-9999999999999999999'),
    ('9999999999999999999', '9999999999999999999'),
    ('-1E', '-1E'),
    ('1E', '1E'),
    ('-1000000000000000000', '-1E'),
    ('1000000000000000000', '1E'),
    ('-9999999999999999999.0', '-9999999999999999999'),
    ('9999999999999999999.0', '9999999999999999999'),
    ('-1.0E', '-1E'),
    ('1.0E', '1E'),
    ('-1000000000000000000.0', '-1E'),
    ('1000000000000000000.0', '1E'),
    ('-9999999999999999999000m', '-9999999999999999999'),
    ('9999999999999999999000m', '9999999999999999999'),
    ('-9999999999999999999.1', '-9999999999999999999100m'),
    ('9999999999999999999.1', '9999999999999999999100m'),
    ('-1.0000000000000000001E', '-1000000000000000000100m'),
    ('1.0000000000000000001E', '1000000000000000000100m'),
    ('-1000000000000000000.1', '-1000000000000000000100m'),
    ('1000000000000000000.1', '1000000000000000000100m'),
    ('-1.000000000000000001E', '-1000000000000000001'),
    ('1.000000000000000001E', '1000000000000000001'),
    ('-1000000000000000001', '-1000000000000000001'),
    ('1000000000000000001', '1000000000000000001'),
    ('-10E', '-10E'),
    ('10E', '10E'),
    ('-10000000000000000000', '-10E'),
    ('10000000000000000000', '10E'),
    ('-10.0E', '-10E'),
    ('10.0E', '10E'),
    ('-10000000000000000000.0', '-10E'),
    ('10000000000000000000.0', '10E'),
    ('-10000000000000000000000m', '-10E'),
    ('10000000000000000000000m', '10E'),
    ('-10.0000000000000000001E', '-10000000000000000000100m'),
    ('10.0000000000000000001E', '10000000000000000000100m'),
    ('-10000000000000000000.1', '-10000000000000000000100m'),
    ('10000000000000000000.1', '10000000000000000000100m'),
    ('-10.000000000000000001E', '-10000000000000000001'),
    ('10.000000000000000001E', '10000000000000000001'),
    ('-10000000000000000001', '-10000000000000000001'),
    ('10000000000000000001', '10000000000000000001'),
    ('-9223372036854775809', '-9223372036854775809'),
    ('9223372036854775806', '9223372036854775806'),
    ('-9223372036854775809.0', '-9223372036854775809'),
    ('9223372036854775806.0', '9223372036854775806'),
    ('-9223372036854775809000m', '-9223372036854775809'),
    ('9223372036854775806000m', '9223372036854775806'),
    ('-9223372036854775809.1', '-9223372036854775809100m'),
    ('9223372036854775806.1', '9223372036854775806100m'),
    ('-9223372036854775808', '-9223372036854775808'),
    ('9223372036854775807', '9223372036854775807'),
    ('-9223372036854775808.0', '-9223372036854775808'),
    ('9223372036854775807.0', '9223372036854775807'),
    ('-9223372036854775808000m', '-9223372036854775808'),
    ('9223372036854775807000m', '9223372036854775807'),
    ('-9223372036854775808.1', '-9223372036854775808100m'),
    ('9223372036854775807.1', '9223372036854775807100m'),
    ('-9223372036854775807', '-9223372036854775807'),
    ('9223372036854775808', '9223372036854775808'),
    ('-9223372036854775807.0', '-9223372036854775807'),
    ('9223372036854775808.0', '9223372036854775808'),
    ('-9223372036854775807000m', '-9223372036854775807'),
    ('9223372036854775808000m', '9223372036854775808'),
    ('-9223372036854775807.1', '-9223372036854775807100m'),
    ('9223372036854775808.1', '9223372036854775808100m'),
]
INVALID = ['1.1.M', '1+1.0M', '0.1mi', '0.1am', 'aoeu', '.5i', '1i', '-3.01i', '-3.01e-', ' 1', '1 ']
JSON_WHITESPACE = [
    ('" 1"', '1'),
    ('"1 "', '1'),
    ('1', '1'),
    (' 1', '1'),
    ('1 ', '1'),
    ('10', '10'),
    ('-1', '-1'),
    (' -1', '-1'),
]



def _dec(mantissa: int, exponent: int) -> Decimal:
    return Decimal(mantissa).scaleb(exponent)


@pytest.mark.parametrize(("text", "mantissa", "exponent", "fmt"),
                         [pytest.param(*row, id=row[0]) for row in PARSE_TABLE])
def test_parse_table(text: str, mantissa: int, exponent: int, fmt: str) -> None:
    expected = _dec(mantissa, exponent)
    for written, want in ((text, expected), ("+" + text, expected), ("-" + text, -expected)):
        q = parse(written)
        assert (q.decimal(), q.format) == (want, fmt), written
        assert parse_quantity(written) == want


@pytest.mark.parametrize(("mantissa", "exponent", "fmt", "written", "alternate"),
                         [pytest.param(*row, id=f"{row[3]}-{row[2]}") for row in STRING_TABLE])
def test_string_table(mantissa: int, exponent: int, fmt: str, written: str, alternate: str) -> None:
    assert Quantity(mantissa, exponent, fmt).string() == written
    assert parse(written).text == written  # canonical input is kept as typed
    if alternate:
        q = parse(alternate)
        assert q.text is None
        assert q.string() == written
    if mantissa:
        assert Quantity(-mantissa, exponent, fmt, big=True).string() == "-" + written


@pytest.mark.parametrize(("text", "written"), [pytest.param(*row, id=row[0]) for row in PARSE_EMIT])
def test_parse_emit_table(text: str, written: str) -> None:
    assert parse(text).string() == written
    assert parse("-" + text).string() == "-" + written


@pytest.mark.parametrize(("text", "written"), [pytest.param(*row, id=row[0]) for row in REPARSE])
def test_reserialize_table(text: str, written: str) -> None:
    assert parse(text).string() == written
    assert canonicalize(text) == written


@pytest.mark.parametrize("text", [pytest.param(t, id=repr(t)) for t in ["", *INVALID]])
def test_invalid_table(text: str) -> None:
    with pytest.raises(QuantityError):
        parse(text)


@pytest.mark.parametrize(("json_text", "written"), [pytest.param(*row, id=repr(row[0])) for row in JSON_WHITESPACE])
def test_json_whitespace_table(json_text: str, written: str) -> None:
    import json

    assert canonicalize(json.loads(json_text)) == written


# --- errors: the three messages and which input gets which ------------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("", ERR_FORMAT_WRONG, id="empty"),
    pytest.param("abc", ERR_FORMAT_WRONG, id="letters"),
    pytest.param(" 1", ERR_FORMAT_WRONG, id="leading-space"),
    pytest.param("1 ", ERR_FORMAT_WRONG, id="trailing-space"),
    pytest.param("1.1.M", ERR_FORMAT_WRONG, id="two-points"),
    pytest.param("0x10", ERR_FORMAT_WRONG, id="hex"),
    pytest.param("1K", ERR_SUFFIX, id="capital-K"),
    pytest.param("1i", ERR_SUFFIX, id="lone-i"),
    pytest.param("0.1mi", ERR_SUFFIX, id="mi"),
    pytest.param("1e", ERR_SUFFIX, id="bare-e"),
    pytest.param("-3.01e-", ERR_SUFFIX, id="e-sign-only"),
    pytest.param("--1", ERR_SUFFIX, id="double-sign"),
    pytest.param("1e99999999999999999999", ERR_SUFFIX, id="exponent-beyond-int64"),
    pytest.param(".e-10", ERR_NUMERIC, id="no-digits-slow-path"),
])
def test_error_messages(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as e:
        parse(text)
    assert str(e.value) == message


# --- upstream's surprises, kept ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "written"), [
    pytest.param(".", "0", id="lone-point-is-zero"),
    pytest.param("-", "0", id="lone-sign-is-zero"),
    pytest.param("e3", "0", id="no-digits-is-zero"),
    pytest.param("1.", "1.", id="trailing-point-kept"),
    pytest.param("1.G", "1.G", id="trailing-point-suffix-kept"),
    pytest.param("+1", "+1", id="plus-kept"),
    pytest.param("+100m", "+100m", id="plus-kept-suffix"),
    pytest.param("010", "010", id="leading-zero-kept"),
    pytest.param("1.500k", "1.500k", id="fraction-kept-when-scale-is-whole"),
    pytest.param("1.000", "1", id="trailing-thousands-rewritten"),
    pytest.param("1E3", "1E3", id="capital-exponent-kept"),
    pytest.param("1e+3", "1e+3", id="exponent-sign-kept"),
    pytest.param("1e4294967297", "10", id="exponent-wraps-to-int32"),
    pytest.param("1000E", "1", id="beyond-E-loses-its-suffix"),
    pytest.param("1000e3", "1e6", id="exponent-rewritten"),
    pytest.param("1Ki", "1Ki", id="binary-kept"),
    pytest.param("8Ki", "8Ki", id="binary-multiple-of-8-rewritten"),
    pytest.param("1024Ki", "1Mi", id="binary-up"),
    pytest.param("1.5Gi", "1536Mi", id="binary-fraction"),
    pytest.param("0.5Ki", "512", id="binary-below-1024-is-decimal"),
    pytest.param("0.9Ki", "921600m", id="binary-not-whole-is-decimal"),
    pytest.param("9Ei", "9223372036854775807", id="binary-capped"),
    pytest.param("-9Ei", "-9223372036854775807", id="binary-capped-negative"),
    pytest.param("99999999999999999999E", "99999999999999999999E", id="decimal-not-capped"),
    pytest.param("12345678901234567890123e3", "12345678901234567890123e3", id="decimal-exponent-not-capped"),
    pytest.param("0.1n", "1n", id="below-nano-rounds-up"),
    pytest.param("-0.1n", "-1n", id="below-nano-rounds-away-from-zero"),
    pytest.param("1e-2147483647", "1e-9", id="tiny-exponent"),
    pytest.param("1e2147483647", "10e2147483646", id="huge-exponent"),
    pytest.param("-0", "0", id="negative-zero"),
    pytest.param("0.0", "0", id="zero-fraction"),
])
def test_written_form(text: str, written: str) -> None:
    assert parse(text).string() == written


@pytest.mark.parametrize(("given", "written"), [
    pytest.param(100, "100", id="int"),
    pytest.param(1000, "1k", id="int-thousands"),
    pytest.param(1.5, "1500m", id="float"),
    pytest.param(1.0, "1", id="whole-float"),
    pytest.param(1e21, "1e+21", id="float-exponent-kept-as-go-writes-it"),
    pytest.param(1e-7, "100e-9", id="float-small-is-an-exponent"),
    pytest.param(" 100m ", "100m", id="string-trimmed"),
    pytest.param("\u00a0100m", "100m", id="string-trimmed-nbsp"),
])
def test_json_values(given: str | int | float, written: str) -> None:
    assert canonicalize(given) == written


@pytest.mark.parametrize(("number", "text"), [
    (0.0, "0"), (-0.0, "-0"), (1.0, "1"), (1.5, "1.5"), (100.0, "100"), (1e20, "100000000000000000000"),
    (1e21, "1e+21"), (1.5e300, "1.5e+300"), (1e-6, "0.000001"), (1e-7, "1e-7"), (1.25e-10, "1.25e-10"),
    (-2.5e-8, "-2.5e-8"), (123456789.125, "123456789.125"),
])
def test_go_float_text(number: float, text: str) -> None:
    assert go_float_text(number) == text


@pytest.mark.parametrize("bad", [pytest.param(True, id="bool"), pytest.param(float("nan"), id="nan"),
                                 pytest.param(None, id="none"), pytest.param(float("inf"), id="inf")])
def test_bad_types(bad: object) -> None:
    with pytest.raises(ValueError, match="quantit"):
        parse_quantity(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="quantit"):
        canonicalize(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        pytest.param("100m", 100, 1, id="100m"),
        pytest.param("2", 2000, 2, id="2"),
        pytest.param("1.5", 1500, 2, id="1.5"),
        pytest.param("1Gi", 1073741824000, 1073741824, id="1Gi"),
        pytest.param("1n", 1, 1, id="1n-rounds-up"),
        pytest.param("-1.5", -1500, -2, id="negative-int64-form-rounds-away-from-zero"),
        pytest.param("-0.1n", 1, 1, id="negative-dec-form-truncates-plus-one"),
        pytest.param("-1.5Ki", -1536000, -1536, id="negative-dec-form-whole"),
    ],
)
def test_milli_and_value(text: str, milli: int, whole: int) -> None:
    assert milli_value(text) == milli
    assert value(text) == whole


@given(st.decimals(min_value=-(10**12), max_value=10**12, places=9, allow_nan=False, allow_infinity=False),
       st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-3"]))
def test_written_form_is_a_fixed_point_with_the_same_value(number: Decimal, suffix: str) -> None:
    text = f"{number:f}{suffix}"
    # Upstream writes decimal values of 1000E (10^21) and more without a suffix, which changes their value
    # (the ported String() table pins that quirk); the property holds below it.
    assume(abs(parse_quantity(text)) < Decimal(10) ** 21)
    written = canonicalize(text)
    assert canonicalize(written) == written
    assert parse_quantity(written) == parse_quantity(text)
    assert parse(written).format in (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT)
