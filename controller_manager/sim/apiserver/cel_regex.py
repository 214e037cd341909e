"""CEL's regular expressions as cel-go runs them: RE2 (Go's ``regexp``), not Python's ``re``.

``matches()`` and Kubernetes' ``find()``/``findAll()`` take RE2 patterns: no lookaround, no backreferences, no
``\\Z``, possessive or atomic groups, ``{n,m}`` at most 1000. Patterns compile with google-re2 (C++ RE2, the same
syntax as Go's); an invalid one is :class:`PatternError` with Go's ``regexp/syntax`` wording (``error parsing
regexp: missing closing ]: `[```), which is what cel-go reports at run time. :func:`find_all` keeps Go's rule for
empty matches (none right after a previous match), which Python's ``finditer`` does not.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

__all__ = ["PatternError", "compile_pattern", "find_all"]

# C++ RE2's error texts -> Go regexp/syntax's ErrorCode texts
_GO_CODES = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "trailing \\": "trailing backslash at end of expression",
    "invalid escape sequence": "invalid escape sequence",
    "invalid character class": "invalid character class",
    "invalid character class range": "invalid character class range",
    "no argument for repetition operator": "missing argument to repetition operator",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid UTF-8": "invalid UTF-8",
    "invalid named capture group": "invalid named capture",
    "duplicate capture group name": "duplicate capture group name",
    "pattern too large - compile failed": "expression too large",
    "bad repetition operator: nesting depth exceeded": "expression nests too deeply",
}
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # C++ RE2 logs every bad pattern to stderr otherwise


class PatternError(ValueError):
    """An invalid RE2 pattern; the message is Go's (``error parsing regexp: <code>: `<text>```)."""


def _go_error(message: str) -> str:
    code, _, arg = message.partition(": ")
    if code == "trailing \\":
        arg = ""
    return f"error parsing regexp: {_GO_CODES.get(code, code)}: `{arg}`"


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Any:
    """A compiled RE2 pattern (cached: rules repeat theirs); :class:`PatternError` when it is not valid."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        raw = e.args[0] if e.args else ""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        raise PatternError(_go_error(text)) from None


def search(pattern: str, text: str) -> str | None:
    """The leftmost match of ``pattern`` in ``text`` (Go's FindString), or None."""
    match = compile_pattern(pattern).search(text)
    return match.group(0) if match is not None else None


def find_all(pattern: str, text: str, limit: int = -1) -> list[str]:
    """Go's ``FindAllString(text, limit)``: successive non-overlapping matches, an empty match right after the
    previous match skipped; ``limit`` < 0: all of them."""
    compiled = compile_pattern(pattern)
    found: list[str] = []
    position, previous_end = 0, -1
    while position <= len(text) and (limit < 0 or len(found) < limit):
        match = compiled.search(text, position)
        if match is None:
            break
        start, end = match.span()
        accept = True
        if end == start:
            accept = start != previous_end
            position = end + 1  # past the empty match (one code point on)
        else:
            position = end
        previous_end = end
        if accept:
            found.append(match.group(0))
    return found
