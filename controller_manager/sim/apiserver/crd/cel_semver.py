"""Kubernetes' CEL semver library (``k8s.io/apiserver/pkg/cel/library/semverlib.go``, version 1) at run time.

``semver(s)`` parses strictly as blang/semver v4 does (``MAJOR.MINOR.PATCH[-pre][+build]``, no leading zeroes, its
error texts: ``No Major.Minor.Patch elements found``...); ``semver(s, true)`` first normalizes as the library
does (a ``v`` prefix dropped, leading zeroes removed, missing minor and patch filled with 0). ``isSemver`` tells
whether it would parse; ``major()``, ``minor()``, ``patch()``; ``compareTo``, ``isGreaterThan``, ``isLessThan`` by
semver precedence (build metadata ignored; a pre-release sorts before its release, numeric identifiers before
alphanumeric ones).
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from celpy import celtypes

__all__ = ["FUNCTIONS", "Semver", "SemverError", "compare"]

_DIGITS = frozenset(string.digits)
_ALPHANUMERIC = frozenset(string.ascii_letters + string.digits + "-")


class SemverError(ValueError):
    """A string that is not a version (its message is blang/semver's)."""


@dataclass(frozen=True)
class Semver:
    """A ``kubernetes.Semver`` value."""

    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = field(default=(), compare=False)  # not part of a version's identity


def _quoted(text: str) -> str:
    return json.dumps(text)  # Go's %q, for the ASCII these texts hold


def _number(text: str, what: str) -> int:
    if not text or not set(text) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {what} number {_quoted(text)}")
    if len(text) > 1 and text.startswith("0"):
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {_quoted(text)}")
    return int(text)


def _pre_release(text: str) -> int | str:
    if not text:
        raise SemverError("Prerelease is empty")
    if set(text) <= _DIGITS:
        if len(text) > 1 and text.startswith("0"):
            raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {_quoted(text)}")
        return int(text)
    if not set(text) <= _ALPHANUMERIC:
        raise SemverError(f"Invalid character(s) found in prerelease {_quoted(text)}")
    return text


def parse(text: str) -> Semver:
    """blang/semver's Parse."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    rest = parts[2]
    build: tuple[str, ...] = ()
    if "+" in rest:
        rest, _, meta = rest.partition("+")
        build = tuple(meta.split("."))
    pre: tuple[int | str, ...] = ()
    if "-" in rest:
        rest, _, release = rest.partition("-")
        pre = tuple(_pre_release(part) for part in release.split("."))
    patch = _number(rest, "patch")
    for part in build:
        if not part:
            raise SemverError("Build meta data is empty")
        if not set(part) <= _ALPHANUMERIC:
            raise SemverError(f"Invalid character(s) found in build meta data {_quoted(part)}")
    return Semver(major, minor, patch, pre, build)


def normalize_and_parse(text: str) -> Semver:
    """The library's normalization (``semver(s, true)``), then :func:`parse`."""
    parts = text.removeprefix("v").split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            trimmed = part.lstrip("0")
            parts[i] = trimmed if trimmed and trimmed[0] in _DIGITS else "0" + trimmed
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _identifier_order(a: int | str, b: int | str) -> int:
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    if isinstance(a, int):
        return -1
    if isinstance(b, int):
        return 1
    return (a > b) - (a < b)


def compare(a: Semver, b: Semver) -> int:
    """Semver precedence: -1, 0 or 1."""
    core = (a.major, a.minor, a.patch), (b.major, b.minor, b.patch)
    if core[0] != core[1]:
        return -1 if core[0] < core[1] else 1
    if not a.pre or not b.pre:
        return (not a.pre) - (not b.pre)
    for x, y in zip(a.pre, b.pre, strict=False):
        order = _identifier_order(x, y)
        if order:
            return order
    return (len(a.pre) > len(b.pre)) - (len(a.pre) < len(b.pre))


def _semver_of(value: Any) -> Semver:
    if not isinstance(value, Semver):
        raise TypeError("no such overload")
    return value


def _parser(text: Any, normalize: Any = False) -> Semver:
    if not isinstance(text, str) or not isinstance(normalize, bool | celtypes.BoolType):
        raise TypeError("no such overload")
    return normalize_and_parse(str(text)) if normalize else parse(str(text))


def _is_semver(text: Any, normalize: Any = False) -> Any:
    try:
        _parser(text, normalize)
    except SemverError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "semver": _parser, "isSemver": _is_semver,
    "major": lambda v: celtypes.IntType(_semver_of(v).major),
    "minor": lambda v: celtypes.IntType(_semver_of(v).minor),
    "patch": lambda v: celtypes.IntType(_semver_of(v).patch),
}
