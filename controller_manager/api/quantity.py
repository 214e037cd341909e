"""resource.Quantity as k8s.io/apimachinery/pkg/api/resource parses and writes it.

Guarantees (each one upstream's, bugs included, so kube-sim answers what a real API server answers):
- :func:`parse` is ``ParseQuantity``: the same scanner (``"."``, ``"-"`` and ``"e3"`` are zero; ``"1."`` and
  ``"1.G"`` are accepted), the same suffixes, an exponent read as int64 then truncated to int32 as Go does,
  values rounded away from zero to nano precision, binary-suffixed amounts capped at 2**63-1, and the same
  three errors (:data:`ERR_FORMAT_WRONG`, :data:`ERR_SUFFIX`, :data:`ERR_NUMERIC`) as :class:`QuantityError`.
- :meth:`Quantity.string` is ``Quantity.String()``: an input that parsed on upstream's int64 fast path and
  already "looks canonical" is written back as typed (``"+1"``, ``"1E3"``, ``"1.500k"``); anything else in
  canonical form: decimal SI in steps of 1000 (``"1.5"`` -> ``"1500m"``), ``<n>e<multiple of 3>`` for
  exponent inputs, steps of 1024 for binary inputs whose value is whole and at least 1024 in magnitude
  (else decimal SI). A decimal exponent beyond ``E`` has no suffix and is written without one, as upstream
  does (``"1000E"`` -> ``"1"``).
- :func:`canonicalize` is what the server writes for a JSON value of a Quantity field (a string, trimmed of
  Go's white space, or a number as encoding/json writes it); it is cached, being on kube-sim's write path.
- :func:`parse_quantity`, :func:`value` and :func:`milli_value` give the value as a ``Decimal``,
  ``Value()`` and ``MilliValue()`` (rounded up, for negatives as upstream's two internal forms do).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "BINARY_SI", "DECIMAL_EXPONENT", "DECIMAL_SI", "ERR_FORMAT_WRONG", "ERR_NUMERIC", "ERR_SUFFIX", "Quantity",
    "QuantityError", "canonicalize", "go_float_text", "milli_value", "parse", "parse_quantity", "trim_go_space",
    "value",
]

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

ERR_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"


class QuantityError(ValueError):
    """Text that is not a quantity; the message is upstream's error text."""


# sign, leading zeros, integer digits, ".", fraction digits, suffix (letters, sign, digits): the shape
# upstream's hand-written scanner accepts, anything else being ErrFormatWrong.
_SCAN = re.compile(r"([+-]?)(0*)([0-9]*)(?:(\.)([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")
_GO_INT = re.compile(r"[+-]?[0-9]+")

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = {e // 10: s for s, e in _BINARY_SUFFIXES.items()}

_INT64_MAX = 2**63 - 1
_MAX_INT64_FACTORS = 18  # decimal digits an int64 always holds
_NANO = -9


def _int32(n: int) -> int:
    """``n`` truncated to an int32, wrapping as Go's conversions and arithmetic do."""
    return (n + 2**31) % 2**32 - 2**31


def _pow10(n: int) -> int:
    """``10**n`` for ``n >= 0``, typed as the int it is."""
    return int(10**n)


def _go_rem(a: int, b: int) -> int:
    """Go's ``%``: the remainder takes the dividend's sign."""
    r = abs(a) % b
    return -r if a < 0 else r


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: ``mantissa * 10**exponent``, the format it is written in, and ``text``: the input
    when upstream keeps it as the written form. ``big`` says upstream holds it as an ``inf.Dec`` rather than
    a scaled int64 (only the rounding of negative ``Value()``s tells them apart)."""

    mantissa: int
    exponent: int
    format: str
    big: bool = False
    text: str | None = None

    def decimal(self) -> Decimal:
        """The exact value."""
        if self.mantissa == 0:
            return Decimal(0)
        return Decimal((self.mantissa < 0, tuple(map(int, str(abs(self.mantissa)))), self.exponent))

    def string(self) -> str:
        """``Quantity.String()``."""
        return self.text if self.text is not None else self.canonical()

    def canonical(self) -> str:
        """``CanonicalizeBytes``: number and suffix, ignoring the kept input text."""
        if self.mantissa == 0:
            return "0"
        fmt = self.format
        if fmt == BINARY_SI:
            whole = self._whole()
            if -1024 < self.decimal() < 1024 or whole is None:
                fmt = DECIMAL_SI  # below 1024 or fractional: a binary suffix would round
            else:
                number, power = _remove_factors(whole, 1024)
                return f"{number}{_BINARY_BY_POWER.get(power, '')}"
        elif fmt != DECIMAL_SI:
            fmt = DECIMAL_EXPONENT
        number, exponent = _canonical_decimal(self.mantissa, self.exponent)
        if fmt == DECIMAL_SI:
            return f"{number}{_DECIMAL_BY_EXPONENT.get(exponent, '')}"
        return f"{number}e{exponent}" if exponent else str(number)

    def _whole(self) -> int | None:
        """The value if it is a whole number, else None (``AsScale(0)`` not exact)."""
        if self.exponent >= 0:
            return self.mantissa * _pow10(self.exponent)
        whole, fraction = divmod(abs(self.mantissa), _pow10(-self.exponent))
        if fraction:
            return None
        return -whole if self.mantissa < 0 else whole

    def scaled_value(self, scale: int) -> int:
        """``ScaledValue(scale)``: the value in units of ``10**scale``, rounded up. The int64 form rounds a
        negative fraction away from zero, the inf.Dec form truncates and adds one, as upstream does."""
        shift = self.exponent - scale
        if shift >= 0:
            return self.mantissa * _pow10(shift)
        magnitude, fraction = divmod(abs(self.mantissa), _pow10(-shift))
        if self.mantissa >= 0:
            return magnitude + (1 if fraction else 0)
        if self.big:
            return -magnitude + (1 if fraction else 0)
        return -magnitude - (1 if fraction else 0)


def _remove_factors(n: int, base: int) -> tuple[int, int]:
    """``n`` divided by ``base`` as often as it divides evenly, and how often that was."""
    times = 0
    while n and n % base == 0:
        n //= base
        times += 1
    return n, times


def _canonical_decimal(mantissa: int, exponent: int) -> tuple[int, int]:
    """(number, exponent) with trailing zeros moved into the exponent, then the exponent lowered to a
    multiple of 3, in int32 arithmetic as upstream's ``AsCanonicalBytes``."""
    mantissa, times = _remove_factors(mantissa, 10)
    exponent = _int32(exponent + times)
    while _go_rem(exponent, 3):
        mantissa *= 10
        exponent = _int32(exponent - 1)
    return mantissa, exponent


def _interpret(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, or ErrSuffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _GO_INT.fullmatch(suffix[1:]):
        parsed = int(suffix[1:])
        if -(2**63) <= parsed <= _INT64_MAX:  # strconv.ParseInt(.., 10, 64), then int32(parsed)
            return 10, _int32(parsed), DECIMAL_EXPONENT
    raise QuantityError(ERR_SUFFIX)


def _digit_count(n: int) -> int:
    return len(str(abs(n))) if n else 0


def parse(text: str) -> Quantity:
    """``ParseQuantity``; raises :class:`QuantityError` with upstream's message."""
    if not text:
        raise QuantityError(ERR_FORMAT_WRONG)
    if text == "0":
        return Quantity(0, 0, DECIMAL_SI, text="0")
    m = _SCAN.fullmatch(text)
    if m is None:
        raise QuantityError(ERR_FORMAT_WRONG)
    sign, _zeros, num, dot, denom, suffix = m.groups()
    positive = sign != "-"
    denom = denom or ""
    number_text = text[: m.start(6)]  # what inf.Dec reads on the slow path: sign, zeros and all
    if not num and not dot and not suffix:
        number_text = "0"  # the scanner stops at the end of the zeros
    num = num or "0"
    base, exponent, fmt = _interpret(suffix)

    # Upstream's fast path: the digits fit an int64 (scaled by 2**exponent for binary suffixes).
    scale = 0
    multiplier = 1
    precision = -1
    if fmt == BINARY_SI:
        if exponent >= 0 and not denom:
            multiplier = 1 << exponent
            precision = 15 - len(num) - exponent * 3 // 10 - 1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale = _int32(scale - len(denom))
        if scale >= _NANO:
            shifted = num + denom
            digits = int(shifted)
            result = digits * multiplier
            if result <= _INT64_MAX:
                keep = text if _looks_canonical(fmt, exponent, scale, digits, shifted) else None
                return Quantity(result if positive else -result, scale, fmt, text=keep)
    return _parse_big(number_text, base, exponent, fmt)


def _looks_canonical(fmt: str, exponent: int, scale: int, digits: int, shifted: str) -> bool:
    """Whether upstream keeps the input text as the written form (its cheap canonical-form guess)."""
    if fmt == BINARY_SI:
        return exponent % 10 == 0 and digits & 0x07 != 0
    return _go_rem(scale, 3) == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _parse_big(number_text: str, base: int, exponent: int, fmt: str) -> Quantity:
    """Upstream's inf.Dec path: exact, then rounded up to nano and (binary only) capped at 2**63-1."""
    m = re.fullmatch(r"([+-]?)([0-9]*)\.?([0-9]*)", number_text)
    if m is None or not (m.group(2) or m.group(3)):
        raise QuantityError(ERR_NUMERIC)
    negative = m.group(1) == "-"
    magnitude = int(m.group(2) + m.group(3) or "0")
    inf_scale = len(m.group(3))  # inf.Dec's scale: value = unscaled * 10**-scale
    if base == 10:
        inf_scale = _int32(inf_scale + _int32(-exponent))
    else:
        magnitude <<= exponent
    power = -inf_scale
    if magnitude and power < _NANO:
        drop = _NANO - power
        if drop > _digit_count(magnitude):
            magnitude = 1
        else:
            whole, fraction = divmod(magnitude, _pow10(drop))
            magnitude = whole + (1 if fraction else 0)
        power = _NANO
    if magnitude:
        magnitude, times = _remove_factors(magnitude, 10)
        power += times
    if fmt == BINARY_SI and magnitude and _digit_count(magnitude) + power > 18 and (
            magnitude * _pow10(power) > _INT64_MAX if power >= 0 else magnitude > _INT64_MAX * _pow10(-power)):
        magnitude, power = _INT64_MAX, 0
    if fmt == BINARY_SI and magnitude and _digit_count(magnitude) + power <= 0:
        fmt = DECIMAL_SI  # a sliver below 1 is not written with a binary suffix
    return Quantity(-magnitude if negative else magnitude, power, fmt, big=True)


# Go's unicode.IsSpace for the code points strings.TrimSpace trims.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
            "\u2028\u2029\u202f\u205f\u3000"


def trim_go_space(text: str) -> str:
    """``strings.TrimSpace``."""
    return text.strip(_GO_SPACE)


def go_float_text(number: float) -> str:
    """A float64 as encoding/json writes it (the text a Quantity's UnmarshalJSON then sees): shortest
    digits, plain between 1e-6 and 1e21, else ``1e+21`` / ``1e-7`` style."""
    if not math.isfinite(number):
        raise QuantityError(ERR_FORMAT_WRONG)
    if number == 0:
        return "-0" if math.copysign(1, number) < 0 else "0"
    exact = Decimal(repr(number))
    if 1e-6 <= abs(number) < 1e21:
        text = f"{exact:f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    sign, digits, exp = exact.as_tuple()
    first, rest = str(digits[0]), "".join(map(str, digits[1:])).rstrip("0")
    power = int(exp) + len(digits) - 1
    mantissa = f"{first}.{rest}" if rest else first
    power_text = f"+{power:02d}" if power >= 0 else f"-{-power:02d}"
    if power_text.startswith("-0"):
        power_text = "-" + power_text[2:]  # encoding/json writes e-7, not e-07
    return f"{'-' if sign else ''}{mantissa}e{power_text}"


def _json_text(q: str | int | float) -> str:
    """The text UnmarshalJSON parses for a JSON value: a string trimmed, a number as Go writes it."""
    if isinstance(q, bool):
        raise QuantityError(ERR_FORMAT_WRONG)  # the literal true/false is no number
    if isinstance(q, str):
        return trim_go_space(q)
    if isinstance(q, int):
        return str(q)
    if isinstance(q, float):
        return go_float_text(q)
    raise QuantityError(f"not a quantity: {q!r}")


def parse_quantity(q: str | int | float) -> Decimal:
    """The exact value of a quantity given as text or a number; ``ValueError`` if it is not one."""
    if isinstance(q, bool) or not isinstance(q, str | int | float):
        raise QuantityError(f"not a quantity: {q!r}")
    if isinstance(q, float) and not math.isfinite(q):
        raise QuantityError(f"not a quantity: {q!r}")
    return _parsed(q, type(q).__name__).decimal()


def value(q: str | int | float) -> int:
    """``Value()``: the value rounded up to an integer (``"100m"`` -> 1, ``"1Gi"`` -> 1073741824)."""
    return _parsed(q, type(q).__name__).scaled_value(0)


def milli_value(q: str | int | float) -> int:
    """``MilliValue()``: thousandths, rounded up (``"100m"`` -> 100, ``"2"`` -> 2000)."""
    return _parsed(q, type(q).__name__).scaled_value(-3)


@functools.lru_cache(maxsize=4096)
def _parsed(q: str | int | float, _type: str) -> Quantity:
    # The type is part of the key: 1, 1.0 and True are equal keys but different JSON values.
    if isinstance(q, str):
        return parse(q)  # text given directly (not a JSON value): no trimming
    return parse(_json_text(q))


@functools.lru_cache(maxsize=4096)
def _canonical(q: str | int | float, _type: str) -> str:
    return _canonicalize(q)


def canonicalize(q: str | int | float) -> str:
    """Cached (the same few quantities recur in every object); see :func:`_canonicalize`."""
    return _canonical(q, type(q).__name__)


def _canonicalize(q: str | int | float) -> str:
    """What the server writes for a Quantity field whose JSON value is ``q``: ``UnmarshalJSON`` (strings
    trimmed of white space, numbers read as encoding/json wrote them) then ``String()``. Raises
    :class:`QuantityError` with upstream's message."""
    return parse(_json_text(q)).string()
