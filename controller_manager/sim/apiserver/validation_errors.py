"""Field errors and the 422 Status, worded exactly as apimachinery's ``field.Error`` and ``NewInvalid``.

Guarantees:
- :class:`FieldError` renders its body as ``field.Error.ErrorBody()`` does: the type's words, the bad
  value printed the way Go's ``%q``/``%v``/``%#v`` would (``map[string]string{"app":"x"}``,
  ``v1.LabelSelector{...}``), then ``: detail``; Required, Forbidden and TooLong omit the value.
- :func:`invalid_status` builds the Status body: message ``<Kind>[.<group>] "<name>" is invalid: <errs>``
  (one error bare, several in ``[a, b]`` with duplicates dropped), reason ``Invalid``, code 422, details
  with name, group, kind and one cause per error (``reason`` = the error type, ``message`` = the body,
  ``field`` = the path).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
    return json.dumps(text, ensure_ascii=False)


def go_value(value: Any) -> str:
    """How ``ErrorBody`` prints a bad value: ``%q`` for strings, ``%v`` for scalars, ``%#v`` otherwise."""
    if isinstance(value, GoRepr):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return go_syntax(value)


def go_syntax(value: Any) -> str:
    """Go's ``%#v`` for the JSON shapes validation reports (string maps and lists)."""
    if isinstance(value, dict):
        if all(isinstance(v, str) for v in value.values()):
            inner = ", ".join(f"{go_quote(str(k))}:{go_quote(v)}" for k, v in sorted(value.items()))
            return f"map[string]string{{{inner}}}"
        inner = ", ".join(f"{go_quote(str(k))}:{go_syntax(v)}" for k, v in sorted(value.items()))
        return f"map[string]interface {{}}{{{inner}}}"
    if isinstance(value, list):
        if all(isinstance(v, str) for v in value):
            return "[]string{" + ", ".join(go_quote(v) for v in value) + "}"
        return "[]interface {}{" + ", ".join(go_syntax(v) for v in value) + "}"
    return go_value(value)


def string_map(value: Any) -> str:
    """``map[string]string{...}``, or ``map[string]string(nil)`` for an absent map."""
    if not value:
        return "map[string]string(nil)" if value is None else "map[string]string{}"
    return go_syntax(value)


def label_selector_repr(selector: Any) -> GoRepr:
    """A metav1.LabelSelector as ``%#v`` prints the dereferenced pointer."""
    if not isinstance(selector, dict):
        return GoRepr("null")
    exprs = selector.get("matchExpressions")
    if exprs:
        items = []
        for e in exprs:
            vals = e.get("values") if isinstance(e, dict) else None
            vals_text = "[]string(nil)" if vals is None else go_syntax([str(v) for v in vals])
            items.append(f'v1.LabelSelectorRequirement{{Key:{go_quote(str(e.get("key", "")))}, '
                         f'Operator:{go_quote(str(e.get("operator", "")))}, Values:{vals_text}}}')
        exprs_text = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        exprs_text = "[]v1.LabelSelectorRequirement(nil)"
    return GoRepr(f"v1.LabelSelector{{MatchLabels:{string_map(selector.get('matchLabels'))}, "
                  f"MatchExpressions:{exprs_text}}}")


def int_or_string_repr(value: Any) -> GoRepr:
    """An intstr.IntOrString value, which has no value-receiver String(), as ``%#v`` prints it."""
    if isinstance(value, str):
        return GoRepr(f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_quote(value)}}}")
    return GoRepr(f'intstr.IntOrString{{Type:0, IntVal:{int(value or 0)}, StrVal:""}}')


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
