"""Int-or-percent values (``intstr.IntOrString``) scaled against a total, as apimachinery does it.

Guarantees:
- :func:`scaled_value` behaves as ``intstr.GetScaledValueFromIntOrPercent``: an int passes through
  unchanged; ``"N%"`` becomes ``ceil(N * total / 100)`` when ``round_up`` (how maxSurge resolves) and
  ``floor(...)`` otherwise (how maxUnavailable resolves).
- Anything else raises ``ValueError`` with upstream's wording (``nil value for IntOrString``,
  ``invalid value for IntOrString: invalid type: string is not a percentage``, ...), so messages a
  controller copies into events and conditions read as kube-controller-manager's do.
- The arithmetic is exact (integers only), so it never disagrees with upstream's float64 result on
  the small numbers replica counts are.
"""

from __future__ import annotations

import re

__all__ = ["IntOrStr", "parse_int_or_percent", "scaled_value"]

IntOrStr = int | str

# strconv.Atoi accepts an optional sign and ASCII digits only (no blanks, no underscores).
_ATOI = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _atoi(text: str) -> int:
    if not _ATOI.fullmatch(text):
        raise ValueError(f'strconv.Atoi: parsing "{text}": invalid syntax')
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f'strconv.Atoi: parsing "{text}": value out of range')
    return value


def parse_int_or_percent(value: IntOrStr | None) -> tuple[int, bool]:
    """``(number, is_percent)`` of an IntOrString (``getIntOrPercentValueSafely``); ValueError if invalid."""
    if value is None:
        raise ValueError("nil value for IntOrString")
    # bool is an int subclass in Python, but JSON true/false is never an IntOrString.
    if isinstance(value, bool):
        raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if isinstance(value, int):
        return value, False
    if isinstance(value, str):
        if not value.endswith("%"):
            raise ValueError("invalid value for IntOrString: invalid type: string is not a percentage")
        try:
            number = _atoi(value[:-1])
        except ValueError as err:
            raise ValueError(f'invalid value for IntOrString: invalid value "{value}": {err}') from None
        return number, True
    raise ValueError("invalid value for IntOrString: invalid type: neither int nor percentage")


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def scaled_value(value: IntOrStr | None, total: int, round_up: bool) -> int:
    """An int as is, or a percentage of ``total`` rounded up or down (``GetScaledValueFromIntOrPercent``)."""
    number, is_percent = parse_int_or_percent(value)
    if not is_percent:
        return number
    product = number * total
    return _ceil_div(product, 100) if round_up else product // 100
