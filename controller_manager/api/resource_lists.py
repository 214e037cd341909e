"""Arithmetic on ResourceLists (``{"cpu": "500m", "memory": "1Gi"}``) as quota and LimitRanger do it.

Guarantees (``k8s.io/apiserver/pkg/quota/v1`` helpers over ``resource.Quantity``):
- A :class:`Amount` keeps a quantity's exact value and the format it was written in (decimal SI, binary
  SI or decimal exponent); :meth:`Amount.text` writes it as ``Quantity.String()`` would.
- :func:`add` keeps the first operand's format (the second's where the first is zero), as ``Quantity.Add``
  does; keys of either side are kept.
- :func:`subtract`, :func:`mask`, :func:`less_than_or_equal` follow the quota helpers of the same names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from controller_manager.api.quantity import canonicalize, parse_quantity

__all__ = ["Amount", "ResourceList", "add", "less_than_or_equal", "mask", "parse_list", "render", "subtract"]

_SUFFIX = re.compile(r"^[+-]?[0-9.]+(.*)$")
_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = ("n", "u", "m", "", "k", "M", "G", "T", "P", "E")


@dataclass(frozen=True, slots=True)
class Amount:
    value: Decimal
    format: str = "decimal"  # "decimal", "binary" or "exponent"

    @classmethod
    def of(cls, quantity: Any) -> Amount:
        """The amount of a quantity as a client sent it; ``ValueError`` for what is not a quantity."""
        if isinstance(quantity, str):  # (amounts never change: the texts every pod repeats are read once)
            return _amount_of_text(quantity)
        return cls(parse_quantity(quantity), _format_of(quantity))

    def text(self) -> str:
        """``Quantity.String()``: the canonical form in this amount's format."""
        value = self.value.normalize()  # an amount, not a text: no trailing zeros to keep
        if value.is_zero():
            return "0"
        if self.format == "binary" and value == value.to_integral_value() and abs(value) >= 1024:
            return canonicalize(f"{value / 1024:f}Ki")
        if self.format == "exponent":
            return canonicalize(f"{value:f}e0")
        return canonicalize(f"{value:f}")

    def plus(self, other: Amount) -> Amount:
        """``Quantity.Add``: the receiver's format, unless it is zero (then the other's)."""
        return Amount(self.value + other.value, other.format if self.value == 0 else self.format)

    def minus(self, other: Amount) -> Amount:
        """``Quantity.Sub``: likewise."""
        return Amount(self.value - other.value, other.format if self.value == 0 else self.format)


ResourceList = dict[str, Amount]


@functools.lru_cache(maxsize=4096)
def _amount_of_text(quantity: str) -> Amount:
    return Amount(parse_quantity(quantity), _format_of(quantity))


def _format_of(quantity: Any) -> str:
    if isinstance(quantity, (int, float)):
        return "decimal"
    m = _SUFFIX.match(str(quantity))
    suffix = m.group(1) if m else ""
    if suffix in _BINARY_SUFFIXES:
        return "binary"
    return "decimal" if suffix in _DECIMAL_SUFFIXES else "exponent"


def parse_list(raw: Any) -> ResourceList:
    """A ResourceList from its JSON form; entries that are not quantities are skipped (validation reports
    them)."""
    out: ResourceList = {}
    if not isinstance(raw, Mapping):
        return out
    for name, quantity in raw.items():
        try:
            out[str(name)] = Amount.of(quantity)
        except ValueError:
            continue
    return out


def render(items: ResourceList) -> dict[str, str]:
    return {name: amount.text() for name, amount in items.items()}


def add(a: ResourceList, b: ResourceList) -> ResourceList:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out[name].plus(amount) if name in out else amount
    return out


def subtract(a: ResourceList, b: ResourceList) -> ResourceList:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out[name].minus(amount) if name in out else Amount(-amount.value, amount.format)
    return out


def mask(items: ResourceList, names: Iterable[str]) -> ResourceList:
    keep = set(names)
    return {name: amount for name, amount in items.items() if name in keep}


def less_than_or_equal(a: ResourceList, b: ResourceList) -> list[str]:
    """The names whose amount in ``a`` exceeds ``b``'s (names absent from ``b`` are not limited)."""
    return [name for name, amount in a.items() if name in b and amount.value > b[name].value]
