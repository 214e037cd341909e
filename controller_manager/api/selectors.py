"""Label selectors exactly as apimachinery's ``labels`` package and ``metav1.LabelSelectorAsSelector``.

Guarantees:
- :func:`parse` accepts precisely the strings ``labels.Parse`` accepts (``=``, ``==``, ``!=``, ``in``,
  ``notin``, ``>``, ``<``, bare ``key`` for exists, ``!key`` for does-not-exist; blanks are spaces,
  tabs, CR and LF), validates keys and values the same way and raises :class:`InvalidSelector`
  with upstream's wording otherwise.
- A :class:`Selector` is immutable and hashable; its requirements are sorted by key, so ``str()``
  gives the canonical ``labels.Selector.String()`` form (values inside ``in``/``notin`` sorted).
- :data:`NOTHING` matches nothing (a nil ``metav1.LabelSelector``), :data:`EVERYTHING` everything.

The label key/value and DNS-1123 name checks live here too (``is_label_key`` and friends) because
selectors need them and the simulated apiserver's validation reuses the same wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "InvalidSelector",
    "Requirement",
    "Selector",
    "from_label_selector",
    "from_set",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_label_value",
    "parse",
]


class InvalidSelector(ValueError):
    """A selector string or metav1.LabelSelector that the API server would reject."""


# --- name syntax (apimachinery/pkg/api/validate/content) -------------------------------------------

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', "
                  "and must start and end with an alphanumeric character")
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                      "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                          "'-' or '.', and must start and end with an alphanumeric character")
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                      "start with an alphabetic character, and end with an alphanumeric character")

_LABEL_KEY_RE = re.compile(f"^{_LABEL_KEY_FMT}$")
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL_RE = re.compile(f"^{_DNS1035_LABEL_FMT}$")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's RegexError wording: ``msg (e.g. 'a' or 'b', regex used for validation is '...')``."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def _blen(value: str) -> int:
    # Go measures strings in bytes.
    return len(value.encode())


def _full(regex: re.Pattern[str], value: str) -> bool:
    # Go's "$" does not match before a trailing newline the way Python's does.
    return regex.fullmatch(value) is not None and "\n" not in value


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(max_len_error(63))
    if not _full(_DNS1123_LABEL_RE, value):
        if _full(_DNS1123_SUBDOMAIN_RE, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > 253:
        errs.append(max_len_error(253))
    if not _full(_DNS1123_SUBDOMAIN_RE, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(max_len_error(63))
    if not _full(_DNS1035_LABEL_RE, value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_label_key(value: str) -> list[str]:
    """content.IsLabelKey (a "qualified name"): ``[prefix/]name``; empty list when valid."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a valid label key " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _full(_LABEL_KEY_RE, name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    """content.IsLabelValue; empty list when valid."""
    errs: list[str] = []
    if _blen(value) > 63:
        errs.append(max_len_error(63))
    if not _full(_LABEL_VALUE_RE, value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# --- requirements and selectors ---------------------------------------------------------------------

IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
EXISTS, DOES_NOT_EXIST, GREATER_THAN, LESS_THAN = "exists", "!", "gt", "lt"
_BINARY = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_ALL_OPS = (*_BINARY, EXISTS, DOES_NOT_EXIST)
_EQUALITY_OPS = frozenset((IN, EQUALS, DOUBLE_EQUALS))


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


def _go_list(values: Iterable[str]) -> str:
    return "[" + " ".join(values) + "]"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key op values`` term; build through :meth:`new` to get upstream's validation."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def new(cls, key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
        """labels.NewRequirement: validates key, operator, value count and each value."""
        vals = tuple(values)
        errs: list[str] = []
        key_errs = is_label_key(key)
        if key_errs:
            errs.append(f'key: Invalid value: "{key}": ' + "; ".join(key_errs))
        if operator in (IN, NOT_IN):
            if not vals:
                errs.append(f"values: Invalid value: {_go_list(vals)}: for 'in', 'notin' operators, "
                            "values set can't be empty")
        elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                errs.append(f"values: Invalid value: {_go_list(vals)}: exact-match compatibility requires one "
                            "single value")
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                errs.append(f"values: Invalid value: {_go_list(vals)}: values set must be empty for exists and "
                            "does not exist")
        elif operator in (GREATER_THAN, LESS_THAN):
            if len(vals) != 1:
                errs.append(f"values: Invalid value: {_go_list(vals)}: for 'Gt', 'Lt' operators, exactly one "
                            "value is required")
            for i, v in enumerate(vals):
                if _go_int(v) is None:
                    errs.append(f'values[{i}]: Invalid value: "{v}": for \'Gt\', \'Lt\' operators, the value must '
                                "be an integer")
        else:
            quoted = ", ".join(f'"{o}"' for o in _ALL_OPS)
            errs.append(f'operator: Unsupported value: "{operator}": supported values: {quoted}')
        for i, v in enumerate(vals):
            value_errs = is_label_value(v)
            if value_errs:
                errs.append(f'values[{i}][{key}]: Invalid value: "{v}": ' + "; ".join(value_errs))
        if errs:
            raise InvalidSelector(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
        return cls(key, operator, vals)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have, want = _go_int(labels[self.key]), _go_int(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        vals = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({vals})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{vals}"


@dataclass(frozen=True, slots=True)
class Selector:
    """An AND of requirements sorted by key; ``nothing`` marks labels.Nothing()."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    # (key, value) pairs when every requirement is a single-value equality (matchLabels, the common case):
    # matching is then a few dict lookups, on the hot path of every controller sync.
    _pairs: tuple[tuple[str, str], ...] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if all(r.operator in _EQUALITY_OPS and len(r.values) == 1 for r in self.requirements):
            object.__setattr__(self, "_pairs", tuple((r.key, r.values[0]) for r in self.requirements))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        pairs = self._pairs
        if pairs is not None:
            if not pairs:
                return True
            if labels is None:
                return False
            for key, value in pairs:  # noqa: SIM110 -- a plain loop: no generator frame on the hot path
                if key not in labels or labels[key] != value:
                    return False
            return True
        ls: Mapping[str, str] = labels if labels is not None else {}
        return all(r.matches(ls) for r in self.requirements)

    def is_empty(self) -> bool:
        """True when the selector does not restrict anything (Everything); Nothing is not empty."""
        return not self.nothing and not self.requirements

    def add(self, *reqs: Requirement) -> Selector:
        if self.nothing:
            return self
        return Selector(tuple(sorted((*self.requirements, *reqs), key=lambda r: r.key)))

    def requires_exact_match(self, label: str) -> str | None:
        """The one value ``label`` must have, if the selector pins it (RequiresExactMatch)."""
        for r in self.requirements:
            if r.key == label:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


# --- the string parser (labels.Parse) ---------------------------------------------------------------

_WS = " \t\r\n"
_SPECIAL = "=!(),><"
_TOKENS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "in": "in", "<": "<",
           "!=": "!=", "notin": "notin", "(": "("}
_ID, _EOS, _ERR = "ID", "EOS", "ERR"


def _lex(text: str) -> list[tuple[str, str]]:
    """Tokens as (kind, literal); a keyword's kind is its literal, identifiers are ``ID``."""
    out: list[tuple[str, str]] = []
    data = text.encode()
    pos, n = 0, len(data)
    while True:
        while pos < n and chr(data[pos]) in _WS:
            pos += 1
        if pos >= n or data[pos] == 0:
            out.append((_EOS, ""))
            return out
        ch = chr(data[pos])
        if ch in _SPECIAL:
            # The longest run of special symbols that still forms a token.
            buf, best, best_end = "", "", pos
            j = pos
            while j < n and chr(data[j]) in _SPECIAL:
                buf += chr(data[j])
                j += 1
                if buf in _TOKENS:
                    best, best_end = buf, j
                elif best:
                    break
            if not best:
                out.append((_ERR, f"error expected: keyword found '{buf}'"))
                pos = j
                continue
            out.append((_TOKENS[best], best))
            pos = best_end
        else:
            j = pos
            while j < n and data[j] != 0 and chr(data[j]) not in _SPECIAL and chr(data[j]) not in _WS:
                j += 1
            lit = data[pos:j].decode(errors="replace")
            out.append((_TOKENS.get(lit, _ID), lit))
            pos = j


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def _at(self, i: int, values: bool) -> tuple[str, str]:
        kind, lit = self.items[min(i, len(self.items) - 1)]
        if values and kind in (IN, NOT_IN):
            kind = _ID
        return kind, lit

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        return self._at(self.pos, values)

    def consume(self, values: bool = True) -> tuple[str, str]:
        tok = self._at(self.pos, values)
        self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self.lookahead()
            if kind in (_ID, "!"):
                try:
                    reqs.append(self.requirement())
                except InvalidSelector as e:
                    raise InvalidSelector(f"unable to parse requirement: {e}") from None
                kind, lit = self.consume()
                if kind == _EOS:
                    return reqs
                if kind == ",":
                    k2, l2 = self.lookahead()
                    if k2 not in (_ID, "!"):
                        raise InvalidSelector(f"found '{l2}', expected: identifier after ','")
                    continue
                raise InvalidSelector(f"found '{lit}', expected: ',' or 'end of string'")
            if kind == _EOS:
                return reqs
            raise InvalidSelector(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        operator: str | None = None
        kind, lit = self.consume()
        if kind == "!":
            operator = DOES_NOT_EXIST
            kind, lit = self.consume()
        if kind != _ID:
            raise InvalidSelector(f"found '{lit}', expected: identifier")
        key_errs = is_label_key(lit)
        if key_errs:
            raise InvalidSelector(f'Invalid value: "{lit}": ' + "; ".join(key_errs))
        key = lit
        if operator == DOES_NOT_EXIST or self.lookahead()[0] in (_EOS, ","):
            # "!x=a" ends here as "!x"; the caller then trips over the "=".
            return Requirement.new(key, operator or EXISTS)
        op_kind, op_lit = self.consume(values=False)
        op = {IN: IN, NOT_IN: NOT_IN, "=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS, ">": GREATER_THAN,
              "<": LESS_THAN}.get(op_kind)
        if op is None:
            raise InvalidSelector(f"found '{op_lit}', expected: {', '.join(_BINARY_NAMES)}")
        values = self.set_values() if op in (IN, NOT_IN) else self.exact_value()
        return Requirement.new(key, op, sorted(values))

    def set_values(self) -> set[str]:
        kind, lit = self.consume()
        if kind != "(":
            raise InvalidSelector(f"found '{lit}' expected: '('")
        kind, lit = self.lookahead()
        if kind in (_ID, ","):
            vals = self.identifiers()
            if self.consume()[0] != ")":
                raise InvalidSelector(f"found '{lit}', expected: ')'")
            return vals
        if kind == ")":
            self.consume()
            return {""}
        raise InvalidSelector(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> set[str]:
        vals: set[str] = set()
        while True:
            kind, lit = self.consume()
            if kind == _ID:
                vals.add(lit)
                k2, l2 = self.lookahead()
                if k2 == ",":
                    continue
                if k2 == ")":
                    return vals
                raise InvalidSelector(f"found '{l2}', expected: ',' or ')'")
            if kind == ",":
                if not vals:
                    vals.add("")
                k2, _ = self.lookahead()
                if k2 == ")":
                    vals.add("")
                    return vals
                if k2 == ",":
                    vals.add("")
                continue
            raise InvalidSelector(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        kind, _ = self.lookahead()
        if kind in (_EOS, ","):
            return {""}
        kind, lit = self.consume()
        if kind == _ID:
            return {lit}
        raise InvalidSelector(f"found '{lit}', expected: identifier")


_BINARY_NAMES = ("in", "notin", "=", "==", "!=", "gt", "lt")


def parse(text: str) -> Selector:
    """labels.Parse: the string form (``"a=b,c!=d,e in (x,y),f notin (z),g,!h"``)."""
    reqs = _Parser(text).parse()
    return Selector(tuple(sorted(reqs, key=lambda r: r.key)))


def from_set(labels: Mapping[str, str] | None) -> Selector:
    """labels.SelectorFromSet: equality on every pair, no validation; None or {} is EVERYTHING."""
    if not labels:
        return EVERYTHING
    return Selector(tuple(Requirement(k, EQUALS, (v,)) for k, v in sorted(labels.items())))


_LS_OPS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def from_label_selector(ls: Mapping[str, Any] | None) -> Selector:
    """metav1.LabelSelectorAsSelector: None -> NOTHING, no terms -> EVERYTHING, else the AND of all terms."""
    if ls is None:
        return NOTHING
    match_labels = ls.get("matchLabels") or {}
    match_exprs = ls.get("matchExpressions") or []
    if not match_labels and not match_exprs:
        return EVERYTHING
    reqs: list[Requirement] = []
    for k, v in match_labels.items():
        reqs.append(Requirement.new(str(k), EQUALS, (str(v),)))
    for expr in match_exprs:
        if not isinstance(expr, Mapping):
            raise InvalidSelector(f"{expr!r} is not a valid label selector requirement")
        op = _LS_OPS.get(str(expr.get("operator", "")))
        if op is None:
            raise InvalidSelector(f'"{expr.get("operator", "")}" is not a valid label selector operator')
        reqs.append(Requirement.new(str(expr.get("key", "")), op, [str(v) for v in expr.get("values") or ()]))
    return EVERYTHING.add(*reqs)
