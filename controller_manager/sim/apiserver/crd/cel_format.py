"""Kubernetes' CEL format library (``k8s.io/apiserver/pkg/cel/library/format.go``) at run time:
``format.dns1123Label().validate(s)`` is ``optional.none()`` for a valid ``s``, else ``optional.of`` the list of
what is wrong with it, in apimachinery's validation words; ``format.named("dns1123Label")`` is the named format
(``optional.none()`` for an unknown name).

Formats: ``dns1123Label``, ``dns1123Subdomain``, ``dns1035Label`` (and their ``...Prefix`` forms, which accept a
trailing dash, as generateName does), ``qualifiedName``, ``labelValue``, ``uri`` (Go's ParseRequestURI, near),
``uuid``, ``byte`` (standard base64), ``date`` and ``datetime`` (RFC 3339).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celpy import celtypes

from controller_manager.api import selectors
from controller_manager.sim.apiserver.crd.cel_runnable import NONE, Optional

__all__ = ["FUNCTIONS", "NamedFormat"]

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")


@dataclass(frozen=True)
class NamedFormat:
    """A ``kubernetes.NamedFormat`` value."""

    name: str
    check: Callable[[str], list[str]]


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """A name's check for a generateName prefix: a trailing dash is allowed (maskTrailingDash)."""
    return lambda s: check(s[:-1] + "a" if len(s) > 1 and s.endswith("-") else s)


def _qualified_name(s: str) -> list[str]:
    return [m.replace("a valid label key ", "a qualified name ", 1) for m in selectors.is_label_key(s)]


def _uri(s: str) -> list[str]:
    parts = urllib.parse.urlsplit(s)
    valid = (bool(parts.scheme) or s.startswith("/")) and " " not in s
    return [] if valid else ["invalid URI"]


def _uuid(s: str) -> list[str]:
    return [] if _UUID.fullmatch(s) else ["does not match the UUID format"]


def _byte(s: str) -> list[str]:
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _calendar(text: str, pattern: re.Pattern[str], error: str) -> list[str]:
    if not pattern.fullmatch(text):
        return [error]
    try:
        datetime.date(int(text[:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return [error]
    return []


_FORMATS: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "dns1123Label": ("DNS1123Label", selectors.is_dns1123_label),
    "dns1123Subdomain": ("DNS1123Subdomain", selectors.is_dns1123_subdomain),
    "dns1035Label": ("DNS1035Label", selectors.is_dns1035_label),
    "qualifiedName": ("QualifiedName", _qualified_name),
    "dns1123LabelPrefix": ("DNS1123LabelPrefix", _prefix(selectors.is_dns1123_label)),
    "dns1123SubdomainPrefix": ("DNS1123SubdomainPrefix", _prefix(selectors.is_dns1123_subdomain)),
    "dns1035LabelPrefix": ("DNS1035LabelPrefix", _prefix(selectors.is_dns1035_label)),
    "labelValue": ("LabelValue", selectors.is_label_value),
    "uri": ("URI", _uri),
    "uuid": ("UUID", _uuid),
    "byte": ("Byte", _byte),
    "date": ("Date", lambda s: _calendar(s, _DATE, "invalid date")),
    "datetime": ("DateTime", lambda s: _calendar(s, _DATETIME, "invalid datetime")),
}


def _named(name: Any) -> Optional:
    found = _FORMATS.get(str(name)) if isinstance(name, str) else None
    return Optional(NamedFormat(*found), True) if found is not None else NONE


def _validate(fmt: Any, value: Any) -> Optional:
    if not isinstance(fmt, NamedFormat) or not isinstance(value, str):
        raise TypeError("no such overload")
    errors = fmt.check(str(value))
    return Optional(celtypes.ListType([celtypes.StringType(e) for e in errors]), True) if errors else NONE


FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{f"format.{name}": (lambda found=found: NamedFormat(*found)) for name, found in _FORMATS.items()},
    "format.named": _named,
    "validate": _validate,
}
