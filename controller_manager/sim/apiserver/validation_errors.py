"""Field errors and the 422 Status, worded exactly as apimachinery's ``field.Error`` and ``NewInvalid``.

Guarantees:
- :class:`FieldError` renders its body as ``field.Error.ErrorBody()`` does: the type's words, the bad
  value (``%v`` for numbers and booleans, ``%q`` for strings, ``json.Marshal`` for lists, maps and
  structs: ``{"app":"x"}``, ``["a","b"]``), then ``: detail``; Required, Forbidden and TooLong omit the value.
- :func:`invalid_status` builds the Status body: message ``<Kind>[.<group>] "<name>" is invalid: <errs>``
  (one error bare, several in ``[a, b]`` with duplicates dropped), reason ``Invalid``, code 422, details
  with name, group, kind and one cause per error (``reason`` = the error type, ``message`` = the body,
  ``field`` = the path).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from controller_manager.api.resources import Resource

__all__ = ["OMIT", "FieldError", "GoRepr", "invalid_status"]

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TYPE_INVALID = "FieldValueTypeInvalid"
TOO_MANY = "FieldValueTooMany"

_WORDS = {
    REQUIRED: "Required value",
    INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    DUPLICATE: "Duplicate value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    TYPE_INVALID: "Invalid value",
    TOO_MANY: "Too many",
}


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


@dataclass(frozen=True, slots=True)
class GoRepr:
    """A bad value already rendered the way Go prints it (structs, typed pointers)."""

    text: str


@dataclass(frozen=True, slots=True)
class FieldError:
    type: str  # FieldValueRequired, FieldValueInvalid, ...
    field: str  # "spec.template.metadata.labels"
    detail: str = ""
    bad_value: Any = OMIT

    def body(self) -> str:
        words = _WORDS.get(self.type, self.type)
        if self.type in (REQUIRED, FORBIDDEN, TOO_LONG) or self.bad_value is OMIT:
            text = words
        else:
            text = f"{words}: {go_value(self.bad_value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, path, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(INVALID, path, detail, value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, path, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(DUPLICATE, path, "", value)


def not_supported(path: str, value: Any, valid: list[str] | tuple[str, ...]) -> FieldError:
    detail = "supported values: " + ", ".join(f'"{v}"' for v in valid) if valid else ""
    return FieldError(NOT_SUPPORTED, path, detail, value)


def go_quote(text: str) -> str:
    """Go's ``%q`` (``strconv.Quote``): printable runes kept, others escaped as ``\\n``, ``\\x01``, ``\\u00ad``."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _GO_NAMED_ESCAPES:
            out.append(_GO_NAMED_ESCAPES[ch])
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


_GO_NAMED_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
                     "\v": "\\v"}


def go_float(value: float) -> str:
    """Go's ``%v`` for a float64: the shortest digits, exponent form below 1e-4 or from 1e6 on (``1e+06``)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    digits = Decimal(repr(value))
    exponent = digits.adjusted()
    if value != 0 and (exponent < -4 or exponent >= 6):
        mantissa = format(digits.scaleb(-exponent).normalize(), "f")
        return f"{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    text = format(digits.normalize(), "f")
    return "-0" if text == "0" and str(value).startswith("-") else text


def _json_float(value: float) -> str:
    """How ``encoding/json`` writes a float64: plain decimals, exponent form below 1e-6 or from 1e21 on."""
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(value)  # shortest digits in e-notation, like strconv's 'e' with precision -1
        mantissa, _, exp = text.partition("e")
        sign, digits = exp[0], exp[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits}"
    text = format(Decimal(repr(value)).normalize(), "f")
    return text


def go_json(value: Any, *, sort_keys: bool = True) -> str:
    """``json.Marshal``'s text for a JSON-shaped value: compact, map keys sorted, ``<``, ``>`` and ``&`` escaped.

    ``sort_keys=False`` keeps the dict order, for values that stand for Go structs (fields in declaration order).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, GoRepr):
        return value.text
    if isinstance(value, Mapping):
        items = sorted(value.items(), key=lambda kv: str(kv[0])) if sort_keys else list(value.items())
        return "{" + ",".join(f"{_json_string(str(k))}:{go_json(v, sort_keys=sort_keys)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v, sort_keys=sort_keys) for v in value) + "]"
    return _json_string(str(value))


def _json_string(text: str) -> str:
    quoted = json.dumps(text, ensure_ascii=False)
    return (quoted.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def go_value(value: Any) -> str:
    """How ``ErrorBody`` prints a bad value: ``%v`` for numbers and booleans, ``%q`` for strings, and
    ``json.Marshal`` for everything else (lists, maps, structs; a nil pointer is ``null``)."""
    if isinstance(value, GoRepr):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)


def string_map(value: Any) -> str:
    """A ``map[string]string`` bad value as ``json.Marshal`` writes it: ``{"app":"x"}``; ``null`` when nil."""
    if value is None:
        return "null"
    return go_json({str(k): str(v) for k, v in dict(value).items()})


def label_selector_repr(selector: Any) -> GoRepr:
    """A ``*metav1.LabelSelector`` bad value as ``json.Marshal`` writes it (empty fields omitted)."""
    if not isinstance(selector, dict):
        return GoRepr("null")
    out: dict[str, Any] = {}
    if selector.get("matchLabels"):
        out["matchLabels"] = GoRepr(string_map(selector["matchLabels"]))
    exprs = selector.get("matchExpressions")
    if exprs:
        items: list[Any] = []
        for e in exprs:
            e = e if isinstance(e, dict) else {}
            item: dict[str, Any] = {"key": str(e.get("key", "")), "operator": str(e.get("operator", ""))}
            if e.get("values"):
                item["values"] = [str(v) for v in e["values"]]
            items.append(item)
        out["matchExpressions"] = items
    return GoRepr(go_json(out, sort_keys=False))


def int_or_string_repr(value: Any) -> GoRepr:
    """An ``intstr.IntOrString`` bad value as its ``MarshalJSON`` writes it: ``"50%"`` or ``3``."""
    if isinstance(value, str):
        return GoRepr(_json_string(value))
    return GoRepr(str(int(value or 0)))


def _aggregate(errors: list[FieldError]) -> str:
    msgs: list[str] = []
    for e in errors:
        text = str(e)
        if text not in msgs:
            msgs.append(text)
    return msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"


def invalid_status(resource: Resource | tuple[str, str], name: str, errors: list[FieldError]) -> dict[str, Any]:
    """The 422 Status of ``errors.NewInvalid``; ``resource`` is a Resource or a (group, kind) pair."""
    group, kind = (resource.group, resource.kind) if isinstance(resource, Resource) else resource
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid'
    if errors:
        message += ": " + _aggregate(errors)
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "Invalid", "details": details, "code": 422}
