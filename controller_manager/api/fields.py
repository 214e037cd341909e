"""Field selectors exactly as apimachinery's ``fields.ParseSelector``.

Guarantees:
- Terms are split on commas not escaped by a backslash, sorted as strings, and each is split at
  its first unescaped ``!=``, ``==`` or ``=``; values are unescaped (``\\\\``, ``\\,``, ``\\=``) and an
  unescaped ``,``/``=`` or any other escape is an :class:`InvalidSelector`, as upstream.
- ``matches(get)`` asks ``get(field)`` for each field; a missing field (None) reads as ``""``, the
  way ``fields.Set.Get`` answers for an absent key.
- ``str()`` re-escapes values and writes ``==`` as ``=`` (upstream's String()).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller_manager.api.selectors import InvalidSelector

__all__ = ["FieldSelector", "escape_value", "parse_field_selector", "unescape_value"]

_OPERATORS = ("!=", "==", "=")  # order matters: the longest operator sharing a prefix wins


def escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """fields.UnescapeValue; raises InvalidSelector with upstream's message."""
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise InvalidSelector(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Go prints the rune with %v, i.e. its code point.
            raise InvalidSelector(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise InvalidSelector("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped; ``""`` gives no terms."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    escaped = False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def split_term(term: str) -> tuple[str, str, str] | None:
    """(lhs, op, rhs) at the first unescaped operator, or None."""
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op in _OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
        i += 1
    return None


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An AND of (field, op, value) terms; op is ``=``, ``==`` or ``!=``; no terms matches everything."""

    requirements: tuple[tuple[str, str, str], ...] = ()

    def matches(self, get: Callable[[str], str | None]) -> bool:
        for field, op, value in self.requirements:
            have = get(field)
            have = "" if have is None else have
            if (have == value) == (op == "!="):
                return False
        return True

    def matches_set(self, fields: Mapping[str, str]) -> bool:
        return self.matches(fields.get)

    def is_empty(self) -> bool:
        return not self.requirements

    def requires_exact_match(self, field: str) -> str | None:
        for f, op, value in self.requirements:
            if f == field and op != "!=":
                return value
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{'!=' if op == '!=' else '='}{escape_value(v)}" for f, op, v in self.requirements)


def parse_field_selector(text: str) -> FieldSelector:
    """fields.ParseSelector: ``"a=b,c!=d,e==f"``; raises InvalidSelector."""
    reqs: list[tuple[str, str, str]] = []
    for term in sorted(split_terms(text)):
        if not term:
            continue
        parts = split_term(term)
        if parts is None:
            raise InvalidSelector(f"invalid selector: '{text}'; can't understand '{term}'")
        lhs, op, rhs = parts
        reqs.append((lhs, op, unescape_value(rhs)))
    return FieldSelector(tuple(reqs))
