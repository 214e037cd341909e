"""YAML scalars typed as go-yaml v2 (what sigs.k8s.io/yaml uses) types them, and Go's float texts.

Guarantees (go-yaml v2's resolve.go, strconv and encoding/json, as the real server runs them):
- :func:`resolve` gives the tag and value of a scalar's text: YAML 1.1 booleans (``y``/``n``, ``yes``/``no``,
  ``on``/``off`` in three casings), nulls (``~``, ``null``, empty), ``.inf``/``.nan``, integers as
  ``strconv.ParseInt(text, 0, 64)`` reads them once underscores are gone (``0x1F``, ``0o17``, ``017`` octal,
  ``0b101``), then uint64 (:class:`Uint64`), then floats matching go-yaml's pattern (``1e3``, ``08``, ``.5``;
  out of float64 range stays a string), timestamps (kept as their text, tag :data:`TIMESTAMP`). An explicit
  tag the text does not fit raises :class:`ResolveError` with go-yaml's message.
- :func:`format_g` is ``strconv.FormatFloat(f, 'g', -1, bits)``; :func:`json_float_text` is the text
  encoding/json writes for a float64.
"""

from __future__ import annotations

import calendar
import math
import re
import struct
from decimal import Decimal
from typing import Any

__all__ = [
    "BINARY", "BOOL", "FLOAT", "INT", "MAP", "MERGE", "NULL", "SEQ", "STR", "TIMESTAMP", "ResolveError", "Uint64",
    "format_g", "is_base60_float", "json_float_text", "resolve", "short_tag",
]

_PREFIX = "tag:yaml.org,2002:"
NULL = _PREFIX + "null"
BOOL = _PREFIX + "bool"
STR = _PREFIX + "str"
INT = _PREFIX + "int"
FLOAT = _PREFIX + "float"
TIMESTAMP = _PREFIX + "timestamp"
SEQ = _PREFIX + "seq"
MAP = _PREFIX + "map"
BINARY = _PREFIX + "binary"
MERGE = _PREFIX + "merge"

_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


class ResolveError(ValueError):
    """A tagged scalar whose text is not of that tag (the message without go-yaml's ``yaml: `` prefix)."""


class Uint64(int):
    """An integer go-yaml holds as uint64 (beyond int64): written like any integer, but no JSON map key."""


def _words(value: Any, tag: str, *words: str) -> dict[str, tuple[str, Any]]:
    return {w: (tag, value) for w in words}


_KNOWN: dict[str, tuple[str, Any]] = {
    **_words(True, BOOL, "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"),
    **_words(False, BOOL, "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"),
    **_words(None, NULL, "", "~", "null", "Null", "NULL"),
    **_words(math.nan, FLOAT, ".nan", ".NaN", ".NAN"),
    **_words(math.inf, FLOAT, ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"),
    **_words(-math.inf, FLOAT, "-.inf", "-.Inf", "-.INF"),
    "<<": (MERGE, "<<"),
}
_RESOLVABLE = frozenset({"", STR, BOOL, INT, FLOAT, NULL, TIMESTAMP})
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")  # what ParseFloat takes of a text starting with "."
_BASE60_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")


def short_tag(tag: str) -> str:
    return "!!" + tag[len(_PREFIX):] if tag.startswith(_PREFIX) else tag


_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _parse_uint(text: str) -> int | None:
    """``strconv.ParseUint(text, 0, 64)``: no sign; 0x/0o/0b prefixes, a leading 0 meaning octal."""
    if not text or not text[0].isdigit():
        return None
    base, digits = 10, text
    if text[0] == "0" and len(text) > 1:
        prefix = text[1].lower()
        base, digits = {"x": (16, text[2:]), "o": (8, text[2:]), "b": (2, text[2:])}.get(prefix, (8, text[1:]))
    allowed = _DIGITS[base]
    if not digits or not all(c in allowed for c in digits):
        return None
    number = int(digits, base)
    return number if number <= _UINT64_MAX else None


def _parse_int(text: str) -> int | None:
    """``strconv.ParseInt(text, 0, 64)``."""
    sign = -1 if text[:1] == "-" else 1
    magnitude = _parse_uint(text[1:] if text[:1] in "+-" else text)
    if magnitude is None:
        return None
    number = sign * magnitude
    return number if _INT64_MIN <= number <= _INT64_MAX else None


def _parse_float(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)`` for decimal texts; None where Go reports an error (out of range)."""
    number = float(text)
    return None if math.isinf(number) else number


_TIMESTAMP = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:([Tt])|( ))(\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,]\d+)?"
                        r"(Z|[+-]\d{2}:\d{2})?)?")


def _is_timestamp(text: str) -> bool:
    """go-yaml's parseTimestamp: a date, or a date and time with ``T``/``t`` and a zone, or with a space and
    no zone, each field in range as time.Parse checks it."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if m.group(6) is not None:
        if (m.group(4) is not None) != (m.group(9) is not None):
            return False  # "T" needs a zone; the space form takes none
        if int(m.group(6)) > 23 or int(m.group(7)) > 59 or int(m.group(8)) > 59:
            return False
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]


def _resolve_implicit(tag: str, text: str) -> tuple[str, Any]:
    hint = text[:1]
    if tag not in (STR, BINARY) and (hint == "" or hint in "+-0123456789yYnNtTfFoO~."):
        known = _KNOWN.get(text)
        if known is not None:
            return known
        if hint == ".":
            if _DOT_FLOAT.fullmatch(text) and (number := _parse_float(text)) is not None:
                return FLOAT, number
        elif hint in "+-0123456789":
            if tag in ("", TIMESTAMP) and _is_timestamp(text):
                return TIMESTAMP, text
            plain = text.replace("_", "")
            integer = _parse_int(plain)
            if integer is not None:
                return INT, integer
            unsigned = _parse_uint(plain)
            if unsigned is not None:
                return INT, Uint64(unsigned)
            if _YAML_FLOAT.fullmatch(plain) and (number := _parse_float(plain)) is not None:
                return FLOAT, number
            if plain.startswith("0b") or plain.startswith("-0b"):
                digits = plain[2:] if plain[0] == "0" else "-" + plain[3:]
                if re.fullmatch(r"-?[01]+", digits) and _INT64_MIN <= int(digits, 2) <= _UINT64_MAX:
                    value = int(digits, 2)
                    return INT, value if value <= _INT64_MAX else Uint64(value)
    return STR, text


def resolve(tag: str, text: str) -> tuple[str, Any]:
    """(tag, value) of a scalar's text; ``tag`` is its explicit tag or ``""``."""
    if tag not in _RESOLVABLE:
        return tag, text
    rtag, value = _resolve_implicit(tag, text)
    if tag in ("", rtag, STR, BINARY):
        return rtag, value
    if tag == FLOAT and rtag == INT:
        return FLOAT, float(value)
    raise ResolveError(f"cannot decode {short_tag(rtag)} `{text}` as a {short_tag(tag)}")


def is_base60_float(text: str) -> bool:
    """Texts go-yaml quotes because YAML 1.1 readers take them as sexagesimal numbers (``1:20``)."""
    return bool(text) and (text[0] in "+-" or text[0].isdigit()) and ":" in text \
        and _BASE60_FLOAT.fullmatch(text) is not None


def _shortest_digits(number: float, bits: int) -> tuple[str, int]:
    """(digits, decimal point position) of the shortest text that reads back as ``number`` (a float32 when
    ``bits`` is 32), as strconv finds them."""
    if bits == 32:
        single = struct.unpack("f", struct.pack("f", number))[0]
        for precision in range(1, 10):
            text = f"{single:.{precision - 1}e}"
            if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
                break
        exact = Decimal(text)
    else:
        exact = Decimal(repr(number))
    _, digit_tuple, exponent = exact.as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    point = len(digit_tuple) + int(exponent)
    return digits, point


def format_g(number: float, bits: int = 64) -> str:
    """``strconv.FormatFloat(number, 'g', -1, bits)``."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    sign = "-" if math.copysign(1, number) < 0 else ""
    if number == 0:
        return sign + "0"
    digits, point = _shortest_digits(abs(number), bits)
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def json_float_text(number: float) -> str:
    """The text encoding/json writes for a float64 (callers reject NaN and infinities first)."""
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        return format_g(number).replace("e-0", "e-")  # e-07 -> e-7, as encoding/json trims it
    digits, point = _shortest_digits(magnitude, 64) if magnitude else ("0", 1)
    sign = "-" if math.copysign(1, number) < 0 else ""
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"
