"""resource.Quantity parsing: ``"100m"``, ``"1Gi"``, ``"1.5e3"`` to exact Decimals.

Guarantees (as k8s.io/apimachinery/pkg/api/resource ParseQuantity):
- The grammar is ``[+-]? (digits [. digits?] | . digits) suffix`` where the suffix is a binary SI
  suffix (Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal
  exponent (``e``/``E`` followed by a signed integer within int32). Nothing else, not even
  surrounding whitespace, is accepted: bad input raises ``ValueError``.
- Results are exact ``Decimal`` values, rounded away from zero to nano precision (upstream keeps at
  most 9 fractional digits) and clamped to +/-(2**63 - 1), as upstream does.
- ``int`` input is taken as is; ``float`` input through its shortest repr. ``bool`` is rejected.
"""

from __future__ import annotations

import functools
import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_UP, Context, Decimal

__all__ = ["canonicalize", "milli_value", "parse_quantity", "value"]

_NUMBER = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(.*)", re.DOTALL)

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_INT32_MAX = 2**31 - 1
_MAX_ALLOWED = Decimal(2**63 - 1)
_NANO = Decimal("1e-9")
# Enough digits for any in-range value at nano precision (19 integer digits + 9 fractional),
# with room for intermediate products before the clamp.
_CTX = Context(prec=80, Emax=MAX_EMAX, Emin=MIN_EMIN)
_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def _split_suffix(suffix: str) -> tuple[int, int]:
    """(base, exponent) of a suffix: ``Ki`` -> (2, 10), ``m`` -> (10, -3), ``e6`` -> (10, 6)."""
    if suffix in _BINARY:
        return 2, _BINARY[suffix]
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    m = _EXPONENT.fullmatch(suffix)
    if m is None:
        raise ValueError(f"{_FORMAT_WRONG}; bad suffix {suffix!r}")
    exponent = int(m.group(1))
    # Upstream keeps the exponent in an int32 that is later negated: reject rather than wrap.
    if not -_INT32_MAX <= exponent <= _INT32_MAX:
        raise ValueError("unable to parse quantity's suffix")
    return 10, exponent


def parse_quantity(q: str | int | float) -> Decimal:
    """The value of a Kubernetes quantity; ``ValueError`` if it is not one."""
    if isinstance(q, bool):
        raise ValueError(f"not a quantity: {q!r}")
    if isinstance(q, int):
        return Decimal(q)
    if isinstance(q, float):
        if q != q or q in (float("inf"), float("-inf")):
            raise ValueError(f"not a quantity: {q!r}")
        q = repr(q)
    if not isinstance(q, str):
        raise ValueError(f"not a quantity: {q!r}")
    if not q:
        raise ValueError(_FORMAT_WRONG)
    m = _NUMBER.fullmatch(q)
    if m is None:
        raise ValueError(f"{_FORMAT_WRONG}; got {q!r}")
    sign, digits, suffix = m.groups()
    base, exponent = _split_suffix(suffix)
    number = Decimal(digits.rstrip(".") or "0")
    magnitude = _CTX.multiply(number, Decimal(2**exponent)) if base == 2 else number.scaleb(exponent, _CTX)
    if magnitude.is_zero():
        return Decimal(0)
    # Whoever asks for a sliver of a resource gets the smallest unit: round up (away from zero)
    # to nano, upstream's finest scale.
    if magnitude.as_tuple().exponent < -9:  # type: ignore[operator]
        magnitude = magnitude.quantize(_NANO, rounding=ROUND_UP, context=_CTX)
    # Upstream caps binary-suffixed amounts (only those) at the int64 maximum.
    if base == 2 and magnitude > _MAX_ALLOWED:
        magnitude = _MAX_ALLOWED
    magnitude = magnitude.normalize(_CTX)
    if magnitude.as_tuple().exponent > 0 and magnitude.adjusted() < 40:  # type: ignore[operator]
        magnitude = magnitude.quantize(Decimal(1), context=_CTX)  # "1E+3" -> "1000": friendlier to read
    return -magnitude if sign == "-" else magnitude


def value(q: str | int | float) -> int:
    """Quantity.Value(): the value rounded up to an integer (``"100m"`` -> 1, ``"1Gi"`` -> 1073741824)."""
    return int(parse_quantity(q).to_integral_value(rounding=ROUND_CEILING))


def milli_value(q: str | int | float) -> int:
    """Quantity.MilliValue(): thousandths, rounded up (``"100m"`` -> 100, ``"2"`` -> 2000)."""
    return int((parse_quantity(q) * 1000).to_integral_value(rounding=ROUND_CEILING))


_DECIMAL_SUFFIXES = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIXES = {exp // 10: suffix for suffix, exp in _BINARY.items()}


@functools.lru_cache(maxsize=4096)
def _canonical(q: str | int | float, _type: str) -> str:
    return _canonicalize(q)


def canonicalize(q: str | int | float) -> str:
    """Cached (the same few quantities recur in every object); see :func:`_canonicalize`."""
    return _canonical(q, type(q).__name__)  # the type too: 1, 1.0 and True are equal keys


def _canonicalize(q: str | int | float) -> str:
    """The text a real API server writes for a quantity (``Quantity.String()`` after parsing): the value in
    the format the input used, with the largest suffix that keeps the number whole.

    Decimal inputs (``m``, ``k``, ``M``, no suffix...) come back in SI steps of 1000 (``"1000m"`` -> ``"1"``,
    ``"0.5"`` -> ``"500m"``, ``"1500"`` -> ``"1500"``); exponent inputs as ``<n>e<multiple of 3>``
    (``"1.2e6"`` -> ``"1200e3"``); binary inputs in steps of 1024 (``"1024Mi"`` -> ``"1Gi"``,
    ``"1.5Gi"`` -> ``"1536Mi"``) unless the value is below 1024 or not whole, which is written as decimal
    SI instead, as upstream does to avoid rounding. Raises ``ValueError`` for what is not a quantity."""
    amount = parse_quantity(q)
    if amount.is_zero():
        return "0"
    fmt = _format_of(q)
    if fmt == "binary" and (abs(amount) < 1024 or amount != amount.to_integral_value()):
        fmt = "decimal"
    if fmt == "binary":
        whole = int(amount)
        exponent = 0
        while whole % 1024 == 0:
            whole //= 1024
            exponent += 1
        return f"{whole}{_BINARY_SUFFIXES.get(exponent, '')}" if exponent <= 6 else f"{amount}"
    sign, digits, exp = amount.as_tuple()
    mantissa = int("".join(map(str, digits)) or "0")
    exponent = int(exp)
    while mantissa and mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3  # down to a multiple of 3, so the suffix is an SI one
    mantissa *= 10**shift
    exponent -= shift
    number = f"{'-' if sign else ''}{mantissa}"
    if fmt == "exponent":
        return number if exponent == 0 else f"{number}e{exponent}"
    return number + _DECIMAL_SUFFIXES[exponent]


def _format_of(q: str | int | float) -> str:
    """The format a quantity was written in: ``decimal`` (SI suffix or none), ``binary`` or ``exponent``."""
    if isinstance(q, int):
        return "decimal"
    text = repr(q) if isinstance(q, float) else q
    m = _NUMBER.fullmatch(text)
    suffix = m.group(3) if m else ""
    if suffix in _BINARY:
        return "binary"
    return "decimal" if suffix in _DECIMAL else "exponent"

