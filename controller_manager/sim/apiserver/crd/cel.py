"""``x-kubernetes-validations``: CEL rules of a CRD's schema, checked when the CRD is written and evaluated
against custom resources, as ``pkg/apiserver/schema/cel`` and the CRD validation of apiextensions-apiserver do.

Rules compile as upstream compiles them: parsed by cel-python's grammar (cel-go's syntax-error wording from
:mod:`..cel_syntax`), type-checked by :mod:`..cel_checker` (cel-go's checker, the one the DRA selectors use) in the
rule's environment: ``self`` and ``oldSelf`` typed from the node's schema (:mod:`.cel_types`; ``oldSelf`` an
``optional_type`` under ``optionalOldSelf``) over Kubernetes' base library, then costed (:mod:`.cel_cost`). They
run on cel-python (made runnable there by :mod:`.cel_runnable`) with this module's library and the IP/CIDR values
of :mod:`.cel_net`; regexes are RE2 (:mod:`..cel_regex`).

Guarantees:
- :func:`check_schema` (CRD create/update): per rule, upstream's checks of ``rule`` (required), ``message``
  (non-empty, one line; a multi-line rule needs one), ``messageExpression``, ``reason`` (one of the four
  ``FieldValue*``), ``fieldPath`` (a valid path into the schema), then compilation: any issue cel-go's parser or
  checker reports (a syntax error, an undeclared name, ``undefined field 'x'``, ``found no matching overload for
  '_==_' applied to '(double, int)'``, an invalid ``matches`` pattern...) is ``...x-kubernetes-validations[i].rule:
  Invalid value: {"Rule":...}: compilation failed: ERROR: <input>:L:C: ...`` with cel-go's source line and caret;
  a rule whose type is not bool is ``cel expression must evaluate to a bool``, a ``messageExpression`` not of
  type string ``messageExpression must evaluate to a string``; a rule over the cost budget (times how often it may
  run) is ``Forbidden: estimated rule cost exceeds budget by factor of <f> (...)`` (and the schema's total over
  its own budget refuses the schema, naming the four most expensive rules); a transition rule under a list
  that is not a map list (or an atomic map) is ``oldSelf cannot be used on the uncorrelatable portion of the schema
  within <path>``; ``optionalOldSelf`` without ``oldSelf`` in the rule is refused.
- :func:`validate` (custom resource create/update): every rule of every schema node holding a non-null
  value, ``self`` being that value (typed by the schema: ``number`` as double, ``date``/``date-time`` strings as
  timestamps, ``duration`` as durations, ``byte`` as bytes, properties CEL cannot spell by their escaped names;
  the root with ``apiVersion``, ``kind`` and ``metadata.name``/``generateName``). A rule using ``oldSelf`` (a
  transition rule) runs on update only, where the old value correlates (object properties by name,
  ``x-kubernetes-list-type: map`` items by key), unless ``optionalOldSelf`` makes ``oldSelf`` an optional.
- A rule evaluating to false is the field error of its ``reason`` at its node's path (plus ``fieldPath``):
  ``Invalid value`` (the value for a scalar, omitted for an object or list), ``Forbidden``, ``Required``,
  ``Duplicate value``; the detail is ``messageExpression``'s result, else ``message``, else ``failed rule:
  <rule>``. A rule that fails to evaluate is ``Invalid value: "<type>": <error> evaluating rule: <rule>``.
  On update, a failing rule that does not use ``oldSelf`` on a value the update left unchanged is
  ratcheted (CRDValidationRatcheting; upstream warns, kube-sim drops it).
- The library run: ``size``/``has``/``all``/``exists``/``exists_one``/``map``/``filter`` (CEL's own); lists'
  ``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``; strings' ``charAt``, ``indexOf``,
  ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``,
  ``join``, ``format``, ``strings.quote``; ``matches``, ``find``, ``findAll`` (RE2); ``url()``/``isURL()`` with
  ``getScheme``, ``getHost``, ``getHostname``, ``getPort``, ``getEscapedPath``, ``getQuery``;
  ``quantity()``/``isQuantity()`` with ``sign``, ``isInteger``, ``asInteger``, ``asApproximateFloat``, ``add``,
  ``sub``, ``compareTo``, ``isLessThan``, ``isGreaterThan``; ``ip()``/``cidr()`` and their methods; ``sets.*``;
  the named formats (``format.dns1123Label().validate(s)``...); ``semver()``/``isSemver()`` and their methods;
  optional values (``.?``, ``[?]``, ``optional.of/none/ofNonZeroValue``, ``hasValue``, ``value``, ``orValue``,
  ``or``, ``optMap``, ``optFlatMap``); ``cel.bind``; the two-variable comprehensions; numbers compare across
  int, uint and double as in Kubernetes' CEL.

Not done: rules inside ``allOf``; running what the checker accepts but this library lacks (image,
authz: a rule using them fails when it runs); cost refusals short of 100x
for rules using a function whose estimate :mod:`.cel_cost` approximates; cel-go's exact syntax-error texts
beyond the shapes :mod:`..cel_syntax` knows.
"""

from __future__ import annotations

import base64
import functools
import math
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import celpy
import orjson
from celpy import adapter as celpy_adapter
from celpy import celtypes
from celpy import evaluation as celpy_evaluation
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from controller_manager.api import quantity as k8s_quantity
from controller_manager.sim.apiserver import cel_checker, cel_regex, cel_syntax
from controller_manager.sim.apiserver import validation_errors as fe
from controller_manager.sim.apiserver.crd import cel_cost, cel_format, cel_net, cel_runnable, cel_semver, cel_types
from controller_manager.sim.apiserver.validation_errors import FieldError

__all__ = ["check_schema", "has_rules", "validate"]

Obj = dict[str, Any]

SELF, OLD_SELF = "self", "oldSelf"
REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
_INPUT = "<input>"


class CELCompileError(ValueError):
    """A rule that does not compile; the message is cel-go's ``issues.String()`` form."""


class CELResultTypeError(CELCompileError):
    """A rule (or message expression) whose result is known, from the schema and the operators, to be of
    another type than it must be."""


# --- values ----------------------------------------------------------------------------------------------


class URL:
    """The value of ``url(<string>)``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts = urllib.parse.urlsplit(text)


@dataclass(frozen=True)
class Quantity:
    """The value of ``quantity(<string>)``."""

    value: Decimal


def _obj(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _schema_or_none(value: Any) -> Obj | None:
    return value if isinstance(value, dict) else None


def to_cel(value: Any, schema: Obj | None) -> Any:
    """A JSON value as Kubernetes' CEL sees it through its schema."""
    if value is None:
        return None
    schema = schema or {}
    if isinstance(value, dict):
        props = _obj(schema.get("properties"))
        extra = _schema_or_none(schema.get("additionalProperties"))
        if extra is not None:  # a map: its keys as they are
            return celtypes.MapType({celtypes.StringType(k): to_cel(v, extra) for k, v in value.items()})
        fields = {}
        for k, v in value.items():  # an object: its fields as CEL names them (escaped)
            name = cel_types.escape(k)
            if name is not None:
                fields[celtypes.StringType(name)] = to_cel(v, _schema_or_none(props.get(k)))
                if k in cel_types.RESERVED:  # a keyword field is reached by its plain name too
                    fields[celtypes.StringType(k)] = fields[celtypes.StringType(name)]
        return celtypes.MapType(fields)
    if isinstance(value, list):
        items = _schema_or_none(schema.get("items"))
        return celtypes.ListType([to_cel(v, items) for v in value])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int | float):
        if schema.get("type") == "number" or isinstance(value, float):
            return celtypes.DoubleType(value)
        return celtypes.IntType(value)
    if isinstance(value, str):
        fmt = schema.get("format") if schema.get("type") == "string" else None
        if fmt in ("date-time", "date"):
            try:
                return celtypes.TimestampType(value if fmt == "date-time" else f"{value}T00:00:00Z")
            except (ValueError, TypeError):
                pass
        elif fmt == "byte":
            try:
                return celtypes.BytesType(base64.b64decode(value, validate=True))
            except ValueError:
                pass
        elif fmt == "duration":
            try:
                return celtypes.DurationType(value)
            except (ValueError, TypeError):
                pass
        return celtypes.StringType(value)
    return celpy_adapter.json_to_cel(value)


def _root_value(obj: Obj) -> Obj:
    meta = _obj(obj.get("metadata"))
    kept = {k: meta[k] for k in ("name", "generateName") if k in meta}
    return {**obj, "metadata": kept}


# --- the library ---------------------------------------------------------------------------------------------


class _NoOverload(TypeError):
    pass


def _num(value: Any) -> float | int | None:
    """A number as a plain Python one (celpy's own types refuse to compare across int and double)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return None


def _compare(op: Callable[[Any, Any], bool], base: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """A relational operator that also compares int, uint and double with each other (as Kubernetes' CEL
    environment does)."""

    def compare(left: Any, right: Any) -> Any:
        for operand in (left, right):
            if isinstance(operand, CELEvalError):
                return operand
        a, b = _num(left), _num(right)
        if a is not None and b is not None and type(left) is not type(right):
            return celtypes.BoolType(op(a, b))
        if isinstance(left, Quantity) or isinstance(right, Quantity):
            return celtypes.BoolType(op(left, right))
        return base(left, right)

    return compare


def _is_sorted(value: Any) -> Any:
    items = list(_list(value))
    return celtypes.BoolType(all(_le(items[i], items[i + 1]) for i in range(len(items) - 1)))


def _le(a: Any, b: Any) -> bool:
    return bool(a <= b)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _NoOverload("no such overload")
    return value


def _sum(value: Any) -> Any:
    items = _list(value)
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for item in items[1:]:
        total = total + item
    return total


def _min_max(pick: Callable[..., Any]) -> Callable[..., Any]:
    def fn(value: Any, *more: Any) -> Any:
        items = _list(value) if not more else [value, *more]
        if not items:
            raise ValueError("min called on empty list" if pick is min else "max called on empty list")
        return pick(items)

    return fn


def _index_of(last: bool) -> Callable[..., Any]:
    def fn(target: Any, needle: Any, *offset: Any) -> Any:
        if isinstance(target, str):
            if not isinstance(needle, str):
                raise _NoOverload("no such overload")
            if offset:
                start = int(offset[0])
                if start < 0 or start > len(target):
                    raise IndexError(f"index out of range: {start}")
                found = target.rfind(needle, 0, start + len(needle)) if last else target.find(needle, start)
            else:
                found = target.rfind(needle) if last else target.find(needle)
            return celtypes.IntType(found)
        items = _list(target)
        positions = [i for i, item in enumerate(items) if item == needle]
        if not positions:
            return celtypes.IntType(-1)
        return celtypes.IntType(positions[-1] if last else positions[0])

    return fn


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _NoOverload("no such overload")
    return value


def _char_at(text: Any, index: Any) -> Any:
    text, i = _string(text), int(index)
    if i < 0 or i > len(text):
        raise IndexError(f"index out of range: {i}")
    return celtypes.StringType(text[i:i + 1])


def _replace(text: Any, old: Any, new: Any, *limit: Any) -> Any:
    count = int(limit[0]) if limit else -1
    return celtypes.StringType(_string(text).replace(_string(old), _string(new), count))


def _split(text: Any, sep: Any, *limit: Any) -> Any:
    text, sep = _string(text), _string(sep)
    n = int(limit[0]) if limit else -1
    if n == 0:
        return celtypes.ListType([])
    parts = list(text) if sep == "" else text.split(sep, n - 1 if n > 0 else -1)
    if sep == "" and n > 0 and len(parts) > n:
        parts = [*parts[:n - 1], "".join(parts[n - 1:])]
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(text: Any, start: Any, *end: Any) -> Any:
    text = _string(text)
    s = int(start)
    e = int(end[0]) if end else len(text)
    if s < 0 or s > len(text) or e < s or e > len(text):
        raise IndexError(f"index out of range: {s if s < 0 or s > len(text) else e}")
    return celtypes.StringType(text[s:e])


def _join(items: Any, *sep: Any) -> Any:
    return celtypes.StringType((_string(sep[0]) if sep else "").join(_string(i) for i in _list(items)))


def _format(template: Any, args: Any) -> Any:
    """The strings extension's ``format``: ``%s``, ``%d``, ``%f`` (``%.Nf``), ``%e``, ``%x``, ``%X``, ``%o``,
    ``%b`` and ``%%``."""
    text, values = _string(template), list(_list(args))
    out: list[str] = []
    i = used = 0
    while i < len(text):
        ch = text[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        m = re.match(r"%(\.\d+)?([sdfeExXob%])", text[i:])
        if m is None:
            raise ValueError(f"could not parse formatting clause: unrecognized formatting clause \"{text[i:i + 2]}\"")
        precision, verb = m.group(1), m.group(2)
        i += m.end()
        if verb == "%":
            out.append("%")
            continue
        if used >= len(values):
            raise IndexError(f"index {used} out of range")
        value = values[used]
        used += 1
        out.append(_format_one(value, verb, precision))
    return celtypes.StringType("".join(out))


def _format_one(value: Any, verb: str, precision: str | None) -> str:
    if verb == "s":
        return _to_string(value)
    if verb == "d":
        return str(int(value))
    if verb in "fe":
        digits = int(precision[1:]) if precision else 6
        return f"{float(value):.{digits}{verb}}"
    if verb in "xX":
        data = value.encode() if isinstance(value, str) else None
        text = data.hex() if data is not None else format(int(value), "x")
        return text.upper() if verb == "X" else text
    if verb == "o":
        return format(int(value), "o")
    return format(int(value), "b")


def go_float(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'g', -1, 64)``, how cel-go writes a double as a string."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    nd, dp = len(digits), len(digits) + int(exponent)
    eprec = nd if nd >= dp else 6
    exp = dp - 1
    prefix = "-" if sign else ""
    if exp < -4 or exp >= eprec:
        mantissa = digits[0] + ("." + digits[1:] if nd > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{prefix}0.{'0' * -dp}{digits}"
    if dp >= nd:
        return prefix + digits + "0" * (dp - nd)
    return f"{prefix}{digits[:dp]}.{digits[dp:]}"


def _cel_string(value: Any) -> Any:
    """CEL's ``string()`` conversion, doubles as cel-go writes them."""
    if isinstance(value, float):
        return celtypes.StringType(go_float(float(value)))
    if isinstance(value, cel_net.IP | cel_net.CIDR):
        return celtypes.StringType(str(value))
    return _BASE_STRING(value)


def _to_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return go_float(float(value))
    if isinstance(value, list):
        return "[" + ", ".join(_to_string(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_to_string(k)}: {_to_string(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    return str(value)


class _RegexError(ValueError):
    """A pattern RE2 refuses, in the words cel-go reports it with at run time."""


def _find(text: Any, pattern: Any) -> Any:
    try:
        found = cel_regex.search(_string(pattern), _string(text))
    except cel_regex.PatternError as e:
        raise _RegexError(f"Illegal regex: {e}") from None
    return celtypes.StringType(found or "")


def _find_all(text: Any, pattern: Any, *limit: Any) -> Any:
    try:
        found = cel_regex.find_all(_string(pattern), _string(text), int(limit[0]) if limit else -1)
    except cel_regex.PatternError as e:
        raise _RegexError(f"Illegal regex: {e}") from None
    return celtypes.ListType([celtypes.StringType(f) for f in found])


def _quote(text: str) -> str:
    """The strings extension's ``strings.quote``: double-quoted, with backslash escapes for the quote, the
    backslash and ``\\a \\b \\f \\n \\r \\t \\v`` (other characters as they are)."""
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", "\\": "\\\\", '"': '\\"'}
    return '"' + "".join(escapes.get(char, char) for char in text) + '"'


def _matches(text: Any, pattern: Any) -> Any:
    """CEL's ``matches``: RE2, unanchored; an invalid pattern is Go's regexp error."""
    try:
        return celtypes.BoolType(cel_regex.search(_string(pattern), _string(text)) is not None)
    except cel_regex.PatternError as e:
        raise _RegexError(str(e)) from None


def _is_url(text: Any) -> bool:
    text = _string(text)
    parts = urllib.parse.urlsplit(text)
    return bool(parts.scheme and (parts.netloc or parts.path.startswith("/"))) or text.startswith("/")


def _url(text: Any) -> URL:
    if not _is_url(text):
        raise ValueError(f"URL parse error during conversion from string: parse \"{text}\": invalid URI for "
                         "request")
    return URL(_string(text))


def _url_part(getter: Callable[[URL], str]) -> Callable[[Any], Any]:
    def fn(value: Any) -> Any:
        if not isinstance(value, URL):
            raise _NoOverload("no such overload")
        return celtypes.StringType(getter(value))

    return fn


def _hostname(u: URL) -> str:
    host = u.parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        return host[1:host.index("]")]
    return host.rpartition(":")[0] if ":" in host else host


def _port(u: URL) -> str:
    host = u.parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        rest = host[host.index("]") + 1:]
        return rest[1:] if rest.startswith(":") else ""
    return host.rpartition(":")[2] if ":" in host else ""


def _is_quantity(text: Any) -> Any:
    try:
        k8s_quantity.parse_quantity(_string(text))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _quantity(text: Any) -> Quantity:
    try:
        return Quantity(k8s_quantity.parse_quantity(_string(text)))
    except ValueError as e:
        raise ValueError(str(e)) from None


def _q(value: Any) -> Decimal:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    raise _NoOverload("no such overload")


def _q_sign(value: Any) -> Any:
    v = _q(value)
    return celtypes.IntType((v > 0) - (v < 0))


def _q_is_integer(value: Any) -> Any:
    v = _q(value)
    return celtypes.BoolType(v == v.to_integral_value() and abs(v) < 2**63)


def _q_as_integer(value: Any) -> Any:
    v = _q(value)
    if v != v.to_integral_value() or abs(v) >= 2**63:
        raise ValueError("cannot convert value to integer")
    return celtypes.IntType(int(v))


def _order(value: Any, other: Any) -> int:
    """``compareTo`` of two quantities or two semvers: -1, 0 or 1."""
    if isinstance(value, cel_semver.Semver) and isinstance(other, cel_semver.Semver):
        return cel_semver.compare(value, other)
    a, b = _q(value), _q(other)
    return (a > b) - (a < b)


_METHODS: dict[str, Callable[..., Any]] = {
    "isSorted": _is_sorted, "sum": _sum, "min": _min_max(min), "max": _min_max(max),
    "indexOf": _index_of(last=False), "lastIndexOf": _index_of(last=True),
    "charAt": _char_at, "lowerAscii": lambda s: celtypes.StringType(_string(s).lower()),
    "upperAscii": lambda s: celtypes.StringType(_string(s).upper()), "replace": _replace, "split": _split,
    "substring": _substring, "trim": lambda s: celtypes.StringType(_string(s).strip()), "join": _join,
    "format": _format, "find": _find, "findAll": _find_all,
    "getScheme": _url_part(lambda u: u.parts.scheme), "getHost": _url_part(lambda u: u.parts.netloc.rpartition("@")[2]),
    "getHostname": _url_part(_hostname), "getPort": _url_part(_port),
    "getEscapedPath": _url_part(lambda u: u.parts.path), "getQuery": lambda u: celtypes.MapType({
        celtypes.StringType(k): celtypes.ListType([celtypes.StringType(v) for v in vs])
        for k, vs in urllib.parse.parse_qs(u.parts.query, keep_blank_values=True).items()}),
    "sign": _q_sign, "isInteger": _q_is_integer, "asInteger": _q_as_integer,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(_q(q))),
    "add": lambda q, o: Quantity(_q(q) + _q(o)), "sub": lambda q, o: Quantity(_q(q) - _q(o)),
    "compareTo": lambda v, o: celtypes.IntType(_order(v, o)),
    "isLessThan": lambda v, o: celtypes.BoolType(_order(v, o) < 0),
    "isGreaterThan": lambda v, o: celtypes.BoolType(_order(v, o) > 0), "matches": _matches,
    **cel_runnable.FUNCTIONS, **cel_net.FUNCTIONS, **cel_format.FUNCTIONS, **cel_semver.FUNCTIONS,
    # ext.Sets, ext.Strings' quote
    "sets.contains": lambda a, b: celtypes.BoolType(all(x in _list(a) for x in _list(b))),
    "sets.equivalent": lambda a, b: celtypes.BoolType(all(x in _list(a) for x in _list(b))
                                                      and all(x in _list(b) for x in _list(a))),
    "sets.intersects": lambda a, b: celtypes.BoolType(any(x in _list(a) for x in _list(b))),
    "strings.quote": lambda s: celtypes.StringType(_quote(_string(s))),
}
_BASE_STRING = celpy_evaluation.base_functions["string"]
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "url": _url, "isURL": lambda s: celtypes.BoolType(_is_url(s)), "quantity": _quantity,
    "isQuantity": _is_quantity,
}


@functools.cache
def _library() -> dict[str, Callable[..., Any]]:
    base = celpy_evaluation.base_functions
    ops = {"_<_": _compare(lambda a, b: a < b, base["_<_"]), "_<=_": _compare(lambda a, b: a <= b, base["_<=_"]),
           "_>_": _compare(lambda a, b: a > b, base["_>_"]), "_>=_": _compare(lambda a, b: a >= b, base["_>=_"]),
           "_==_": _equal(base["_==_"], negate=False), "_!=_": _equal(base["_!=_"], negate=True)}
    return {**_METHODS, **_FUNCTIONS, **ops, "string": _cel_string}


# the library's own value types (compared by value)
_OPAQUE = (Quantity, URL, cel_runnable.Optional, cel_net.IP, cel_net.CIDR, cel_format.NamedFormat,
           cel_semver.Semver)


def _equal(base: Callable[..., Any], *, negate: bool) -> Callable[[Any, Any], Any]:
    def equal(left: Any, right: Any) -> Any:
        for operand in (left, right):
            if isinstance(operand, CELEvalError):
                return operand  # an operand that failed fails the comparison
        # ``string`` names the type as well as the conversion (overridden here for doubles' text)
        left, right = (celtypes.StringType if v is _cel_string else v for v in (left, right))
        if isinstance(left, type) or isinstance(right, type):
            return celtypes.BoolType((left is right) != negate)
        a, b = _num(left), _num(right)
        if a is not None and b is not None and type(left) is not type(right):
            return celtypes.BoolType((a == b) != negate)
        if isinstance(left, _OPAQUE) or isinstance(right, _OPAQUE):
            return celtypes.BoolType((left == right) != negate)
        return base(left, right)

    return equal


# --- compiling -------------------------------------------------------------------------------------------------


@functools.cache
def _env() -> celpy.Environment:
    # Building the CEL grammar's parser takes half a second: done on the first rule compiled, not at import,
    # so a kube-sim that never sees a CRD with validation rules (most runs) starts without it.
    return celpy.Environment()


@dataclass(frozen=True)
class Compiled:
    program: Any
    uses_old_self: bool
    cost: cel_cost.Estimate  # of one evaluation (:mod:`.cel_cost`)


def _issue(text: str, line: int, column: int, message: str) -> str:
    """cel-go's ``issues.String()`` for one issue: the position, then the source line and a caret under it."""
    source = text.splitlines()[line - 1] if text.splitlines() else ""
    return f"ERROR: {_INPUT}:{line}:{column}: {message}\n | {source}\n | {'.' * (column - 1)}^"


@functools.lru_cache(maxsize=1024)
def _parse(text: str) -> Any:
    """cel-python's parse tree of ``text``, optional syntax's "?" blanked out (see :mod:`.cel_runnable`)."""
    try:
        return _env().compile(cel_syntax.blank_marks(text, cel_syntax.optional_marks(text)))
    except CELParseError as e:
        issues = cel_syntax.syntax_issues(text, _stops_at)
        if issues:  # the shapes whose cel-go wording is known
            raise CELCompileError(cel_checker.issues_text(text, issues)) from None
        line, column = getattr(e, "line", None) or 1, getattr(e, "column", None) or 1
        detail = str(e.args[0]).splitlines()[0] if e.args else "syntax error"
        if detail.strip() == text.splitlines()[line - 1].strip() if text.splitlines() else True:
            detail = "Syntax error: mismatched input"
        raise CELCompileError(_issue(text, line, column, detail)) from None


def _stops_at(text: str) -> int | None:
    """Where cel-python's parser stops on ``text`` (an offset), or None when it parses."""
    try:
        _env().compile(text)
    except CELParseError as e:
        line, column = getattr(e, "line", None) or 1, getattr(e, "column", None) or 1
        starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
        return starts[min(line, len(starts)) - 1] + column - 1
    return None


def parse_expression(text: str) -> Any:
    """cel-python's parse tree of ``text``; :class:`CELCompileError` with cel-go's issue text for a syntax
    error."""
    return _parse(text)


_COMPILED: dict[tuple[str, int, bool, str, bool], tuple[Obj | None, Compiled | CELCompileError]] = {}
_COMPILED_MAX = 4096
_TYPES: dict[tuple[int, bool], tuple[Obj | None, cel_types.RuleTypes]] = {}
# Kubernetes' base environment (1.37): CEL's standard library and extensions, and Kubernetes' libraries
_LIBRARY = cel_checker.library(cel_checker.STANDARD, cel_checker.KUBERNETES)


def compile_rule(text: str, schema: Obj | None = None, *, root: bool = False, result: str = "bool",
                 optional_old_self: bool = False) -> Compiled:
    """A rule (``result`` "bool") or message expression ("string") ready to run; :class:`CELCompileError`
    with cel-go's issue text when it does not compile, :class:`CELResultTypeError` when it gives another type.
    ``optional_old_self``: the rule's ``oldSelf`` is optional. Compiled once per rule text and schema (stored
    schemas are never mutated; the cache keeps the schema it was keyed by alive, so its id stays its own)."""
    key = (text, id(schema), root, result, optional_old_self)
    cached = _COMPILED.get(key)
    if cached is None:
        try:
            outcome: Compiled | CELCompileError = _compile(text, schema, root, result, optional_old_self)
        except CELCompileError as e:
            outcome = e
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.pop(next(iter(_COMPILED)))
        cached = _COMPILED[key] = (schema, outcome)
    if isinstance(cached[1], CELCompileError):
        raise type(cached[1])(str(cached[1]))
    return cached[1]


def _rule_types(schema: Obj | None, root: bool) -> cel_types.RuleTypes:
    """The types of a schema node's ``self`` (once per node: its object types keep one generated name)."""
    cached = _TYPES.get((id(schema), root))
    if cached is None:
        if len(_TYPES) >= _COMPILED_MAX:
            _TYPES.pop(next(iter(_TYPES)))
        types = cel_types.rule_types(schema, root=root) if schema is not None else \
            cel_types.RuleTypes(cel_checker.DYN, {})
        cached = _TYPES[(id(schema), root)] = (schema, types)
    return cached[1]


def _compile(text: str, schema: Obj | None, root: bool, result: str, optional_old_self: bool) -> Compiled:
    tree = _parse(text)
    env = _rule_types(schema, root).environment(_LIBRARY, optional_old_self=optional_old_self)
    try:
        checked = cel_checker.check_expression(tree, text, env)
    except cel_checker.CheckError as e:
        raise CELCompileError(cel_checker.issues_text(text, e.issues)) from None
    if result == "bool" and checked.type != cel_checker.BOOL:
        raise CELResultTypeError("cel expression must evaluate to a bool")
    if result == "string" and checked.type != cel_checker.STRING:
        raise CELResultTypeError("messageExpression must evaluate to a string")
    program = _env().program(cel_runnable.runnable(tree, checked), functions=_library())
    cost = cel_cost.rule_cost(checked, schema, root=root) if schema is not None else cel_cost.Estimate(0, True)
    return Compiled(program, OLD_SELF in checked.references, cost)


# --- checking a CRD's rules ------------------------------------------------------------------------------------


def _go_rule(rule: Obj) -> str:
    """The internal ValidationRule as json.Marshal writes it (the bad value of a rule's compile error)."""
    reason = rule.get("reason")
    return orjson.dumps({"Rule": rule.get("rule", ""), "Message": rule.get("message", ""),
                         "MessageExpression": rule.get("messageExpression", ""), "Reason": reason,
                         "FieldPath": rule.get("fieldPath", ""), "OptionalOldSelf": rule.get("optionalOldSelf")
                         }).decode()


def check_schema(schema: Obj, path: str) -> list[FieldError]:
    """The errors of every ``x-kubernetes-validations`` rule of a version's schema (see the module docstring), then
    the schema's cost total: over 100,000,000, each of the (up to four) most expensive rules "contributed", and the
    schema itself is refused."""
    # upstream reports every malformed rule first, then the CEL errors (compilation, cost, transition rules)
    errs: list[FieldError] = []
    cel_errs: list[FieldError] = []
    costs = _CostTotal()
    _check_node(schema, path, errs, cel_errs, costs, root=True)
    errs += cel_errs
    refusal = cel_cost.refusal(cel_cost.Estimate(costs.total, costs.exact),
                               "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                               limit=cel_cost.CRD_COST_LIMIT)
    if refusal is not None:
        for _, where in costs.most_expensive:
            errs.append(fe.forbidden(where, "contributed to estimated rule cost total exceeding cost limit for "
                                            "entire OpenAPIv3 schema"))
        errs.append(fe.forbidden(path, refusal))
    return errs


@dataclass
class _CostTotal:
    """apiextensions' TotalCost: every rule's and messageExpression's cost (times its cardinality), and the four
    most expensive of those over 1% of the CRD limit."""

    total: int = 0
    exact: bool = True
    most_expensive: list[tuple[int, str]] = field(default_factory=list)

    def observe(self, where: str, estimate: cel_cost.Estimate, cardinality: int = 1) -> None:
        cost = (estimate.cost or 0) * cardinality
        self.total += cost
        self.exact = self.exact and estimate.exact
        if cost >= cel_cost.CRD_COST_LIMIT // 100:
            self.most_expensive.append((cost, where))
            self.most_expensive.sort(key=lambda entry: -entry[0])
            del self.most_expensive[4:]


def _check_node(schema: Obj, path: str, errs: list[FieldError], cel_errs: list[FieldError], costs: _CostTotal, *,
                root: bool = False, uncorrelatable: str | None = None, cardinality: int | None = 1) -> bool:
    """Checks the node's children, then its own rules (upstream's order). ``uncorrelatable``: the path of the
    highest ancestor under which an update's old value cannot be found for this node (an array that is not a map
    list, an atomic map's fields): no transition rule may be declared here. ``cardinality``: the product of the list
    and map ancestors' maxItems/maxProperties (None: one is unbounded). Returns whether a rule at this level or
    deeper is malformed (upstream then compiles none here)."""
    malformed = False
    props = schema.get("properties")
    if isinstance(props, dict):
        within = uncorrelatable or (path if schema.get("x-kubernetes-map-type") == "atomic" else None)
        for key, sub in sorted(props.items()):
            if isinstance(sub, dict):
                malformed |= _check_node(sub, f"{path}.properties[{key}]", errs, cel_errs, costs,
                                         uncorrelatable=within, cardinality=cardinality)
    if isinstance(schema.get("items"), dict):
        within = uncorrelatable or (path if schema.get("x-kubernetes-list-type") != "map" else None)
        malformed |= _check_node(schema["items"], f"{path}.items", errs, cel_errs, costs, uncorrelatable=within,
                                 cardinality=_times(cardinality, schema.get("maxItems")))
    if isinstance(schema.get("additionalProperties"), dict):
        malformed |= _check_node(schema["additionalProperties"], f"{path}.additionalProperties", errs, cel_errs,
                                 costs, uncorrelatable=uncorrelatable,
                                 cardinality=_times(cardinality, schema.get("maxProperties")))
    rules = schema.get("x-kubernetes-validations")
    if isinstance(rules, list) and rules:
        schema_errs = _rule_form_errors(schema, rules, path)
        errs += schema_errs
        malformed |= bool(schema_errs)
        if not malformed:
            _compile_rules(schema, rules, path, cel_errs, costs, root=root, uncorrelatable=uncorrelatable,
                           cardinality=cel_cost.max_cardinality(schema, cardinality))
    return malformed


def _times(cardinality: int | None, limit: Any) -> int | None:
    """A child's cardinality under a list or map of at most ``limit`` entries (None: unbounded)."""
    if cardinality is None or not isinstance(limit, int) or isinstance(limit, bool):
        return None
    return cardinality * max(limit, 0)


def _rule_form_errors(schema: Obj, rules: list[Any], path: str) -> list[FieldError]:
    """Upstream's checks of each rule's fields before anything compiles."""
    schema_errs: list[FieldError] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        rpath = f"{path}.x-kubernetes-validations[{i}]"
        text, message = str(rule.get("rule") or ""), str(rule.get("message") or "")
        expression = str(rule.get("messageExpression") or "")
        if not text.strip():
            schema_errs.append(fe.required(f"{rpath}.rule", "rule is not specified"))
        elif message and not message.strip():
            schema_errs.append(fe.invalid(f"{rpath}.message", message, "must be non-empty if specified"))
        elif "\n" in message.strip():
            schema_errs.append(fe.invalid(f"{rpath}.message", message, "must not contain line breaks"))
        elif "\n" in text.strip() and not message.strip():
            schema_errs.append(fe.required(f"{rpath}.message", "message must be specified if rule contains line "
                                                                "breaks"))
        if expression and not expression.strip():
            schema_errs.append(fe.required(f"{rpath}.messageExpression",
                                           "messageExpression must be non-empty if specified"))
        reason = rule.get("reason")
        if reason is not None and reason not in REASONS:
            schema_errs.append(fe.not_supported(f"{rpath}.reason", reason, list(REASONS)))
        field_path = str(rule.get("fieldPath") or "")
        if field_path and not field_path.strip():
            schema_errs.append(fe.invalid(f"{rpath}.fieldPath", field_path, "must be non-empty if specified"))
        if "\n" in field_path:
            schema_errs.append(fe.invalid(f"{rpath}.fieldPath", field_path, "must not contain line breaks"))
        if field_path and _field_path(field_path, schema) is None:
            schema_errs.append(fe.invalid(f"{rpath}.fieldPath", field_path, "must be a valid path"))
    return schema_errs


def _compile_rules(schema: Obj, rules: list[Any], path: str, errs: list[FieldError], costs: _CostTotal, *,
                   root: bool, uncorrelatable: str | None, cardinality: int) -> None:
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        rpath = f"{path}.x-kubernetes-validations[{i}]"
        optional_old_self = bool(rule.get("optionalOldSelf"))
        try:
            compiled = compile_rule(str(rule.get("rule")), schema, root=root, optional_old_self=optional_old_self)
        except CELCompileError as e:
            detail = str(e) if isinstance(e, CELResultTypeError) else f"compilation failed: {e}"
            errs.append(FieldError(fe.INVALID, f"{rpath}.rule", detail, fe.GoRepr(_go_rule(rule))))
            continue
        refusal = cel_cost.refusal(compiled.cost, "estimated rule cost", cardinality)
        if refusal is not None:
            errs.append(fe.forbidden(f"{rpath}.rule", refusal))
        costs.observe(f"{rpath}.rule", compiled.cost, cardinality)
        expression = str(rule.get("messageExpression") or "")
        if expression.strip():
            try:
                message = compile_rule(expression, schema, root=root, result="string",
                                       optional_old_self=optional_old_self)
            except CELCompileError as e:
                detail = str(e) if isinstance(e, CELResultTypeError) else f"messageExpression compilation failed: {e}"
                errs.append(FieldError(fe.INVALID, f"{rpath}.messageExpression", detail, fe.GoRepr(_go_rule(rule))))
            else:
                refusal = cel_cost.refusal(message.cost, "estimated messageExpression cost")
                if refusal is not None:
                    errs.append(fe.forbidden(f"{rpath}.messageExpression", refusal))
                costs.observe(f"{rpath}.messageExpression", message.cost)
        if compiled.uses_old_self and uncorrelatable is not None:
            errs.append(fe.invalid(f"{rpath}.rule", rule.get("rule"), "oldSelf cannot be used on the uncorrelatable "
                                                                      f"portion of the schema within {uncorrelatable}"))
        if rule.get("optionalOldSelf") is not None and not compiled.uses_old_self:
            errs.append(fe.invalid(f"{rpath}.optionalOldSelf", rule["optionalOldSelf"],
                                   "may not be set if oldSelf is not used in rule"))


_PATH_PART = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]")


def _field_path(text: str, schema: Obj) -> str | None:
    """A rule's ``fieldPath`` normalized (``.a['b.c']`` -> ``a.b.c``), or None when the schema has no such
    field."""
    parts: list[str] = []
    pos = 0
    current: Any = schema
    text = text.strip()
    while pos < len(text):
        m = _PATH_PART.match(text, pos)
        if m is None:
            return None
        name = m.group(1) if m.group(1) is not None else m.group(2).replace("\\'", "'")
        pos = m.end()
        if not isinstance(current, dict):
            return None
        props = _obj(current.get("properties"))
        if name in props:
            current = props[name]
        elif isinstance(current.get("additionalProperties"), dict):
            current = current["additionalProperties"]
        else:
            return None
        parts.append(name)
    return ".".join(parts) if parts else None


# --- evaluating rules on custom resources -----------------------------------------------------------------


def has_rules(schema: Any) -> bool:
    """Whether a schema holds any ``x-kubernetes-validations`` (upstream builds no CEL validator otherwise)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    all_of = schema.get("allOf")
    children = [*_obj(schema.get("properties")).values(), schema.get("items"), schema.get("additionalProperties"),
                *(all_of if isinstance(all_of, list) else [])]
    return any(has_rules(child) for child in children)


def validate(schema: Obj, obj: Obj, old: Obj | None) -> list[FieldError]:
    """The errors of the rules of ``schema`` (a version's openAPIV3Schema) on ``obj``, an update's ``old``
    object giving ``oldSelf``."""
    errs: list[FieldError] = []
    _validate_node(schema, _root_value(obj), _root_value(old) if old is not None else None, "",
                   errs, root=True, unchanged=old is not None and _same(obj, old))
    return errs


def _same(value: Any, old: Any) -> bool:
    """Whether an update left a value as it was (JSON equality: ``1`` is not ``1.0`` or ``true``)."""
    return type(value) is type(old) and orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        old, option=orjson.OPT_SORT_KEYS)


def _validate_node(schema: Obj, value: Any, old: Any, path: str, errs: list[FieldError], *,
                   root: bool = False, unchanged: bool | None = None) -> None:
    if value is None:
        return
    rules = schema.get("x-kubernetes-validations")
    if isinstance(rules, list) and rules:
        if unchanged is None:
            unchanged = old is not None and _same(value, old)
        _evaluate(schema, rules, value, old, path, errs, root=root, unchanged=unchanged)
    if isinstance(value, dict):
        props = _obj(schema.get("properties"))
        extra = _schema_or_none(schema.get("additionalProperties"))
        correlatable = schema.get("x-kubernetes-map-type") in (None, "granular", "atomic")
        old_map = old if isinstance(old, dict) and correlatable else {}
        for key, item in value.items():
            sub = props.get(key) if isinstance(props.get(key), dict) else extra
            if sub is None:
                continue
            child = f"{path}.{key}" if path else key
            if props.get(key) is None and extra is not None:
                child = f"{path}[{key}]" if path else f"[{key}]"
            _validate_node(sub, item, old_map.get(key), child, errs)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        keys = schema.get("x-kubernetes-list-map-keys") if schema.get("x-kubernetes-list-type") == "map" else None
        old_items: dict[tuple[Any, ...], Any] = {}
        if keys and isinstance(old, list):
            for item in old:
                if isinstance(item, dict):
                    old_items.setdefault(tuple(item.get(k) for k in keys), item)
        for i, item in enumerate(value):
            previous = old_items.get(tuple(item.get(k) for k in keys)) if keys and isinstance(item, dict) else None
            _validate_node(items, item, previous, f"{path}[{i}]", errs)


def _type_of(schema: Obj) -> str:
    return str(schema.get("type") or "")


def _evaluate(schema: Obj, rules: list[Any], value: Any, old: Any, path: str, errs: list[FieldError], *,
              root: bool, unchanged: bool) -> None:
    """``unchanged``: an update left the value as it was: a failing rule that does not use ``oldSelf`` is
    ratcheted (upstream's CRDValidationRatcheting: a warning, not an error), so objects written before a
    rule was added stay updatable."""
    shown_path = path or "<nil>"
    self_value = to_cel(value, schema)
    old_value = to_cel(old, schema) if old is not None else None
    for rule in rules:
        if not isinstance(rule, dict) or not str(rule.get("rule") or "").strip():
            continue
        text = str(rule["rule"])
        try:
            compiled = compile_rule(text, schema, root=root, optional_old_self=bool(rule.get("optionalOldSelf")))
        except CELCompileError as e:
            detail = str(e) if isinstance(e, CELResultTypeError) else f"compilation failed: {e}"
            errs.append(fe.invalid(shown_path, _type_of(schema), f"rule compile error: {detail}"))
            continue
        optional = bool(rule.get("optionalOldSelf"))
        if compiled.uses_old_self and old is None and not optional:
            continue  # a transition rule runs only where an old value correlates
        activation: dict[str, Any] = {SELF: self_value}
        if optional:
            activation[OLD_SELF] = cel_runnable.Optional(old_value, old is not None)
        elif old is not None:  # (the messageExpression may use oldSelf where the rule does not)
            activation[OLD_SELF] = old_value
        result, error = _run(compiled, activation)
        if error is not None:
            errs.append(_eval_error(shown_path, schema, rule, error))
            continue
        if result is True or (unchanged and not compiled.uses_old_self):
            continue
        if not isinstance(result, bool):
            errs.append(fe.invalid(shown_path, _type_of(schema), f"'no such overload': call arguments did not match "
                                                                 f"a supported operator, function or macro signature "
                                                                 f"for rule: {_rule_text(rule)}"))
            continue
        detail = _message(rule, activation, schema, root)
        field_path = _field_path(str(rule.get("fieldPath") or ""), schema) if rule.get("fieldPath") else None
        where = path
        if field_path:
            where = f"{path}.{field_path}" if path else field_path
        errs.append(_reason_error(where or "<nil>", value, schema, detail, rule.get("reason")))


def _run(compiled: Compiled, activation: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        result = compiled.program.evaluate(activation)
    except CELEvalError as e:
        return None, _eval_text(e)
    except Exception as e:  # the library's own failures (an operator on a wrong type)
        return None, f"no such overload: {e}"
    if isinstance(result, CELEvalError):
        return None, _eval_text(result)
    if isinstance(result, celtypes.BoolType):
        return bool(result), None
    return result, None


def _eval_text(e: CELEvalError) -> str:
    """cel-go's words for a runtime error: ``no such key: x``, ``division by zero``, ``no such overload``."""
    message = str(e.args[0]) if e.args else str(e)
    if len(e.args) >= 3 and isinstance(e.args[1], type) and issubclass(
            e.args[1], _RegexError | cel_runnable.OptionalError | cel_net.NetError | cel_semver.SemverError) \
            and e.args[2]:
        return str(e.args[2][0])  # the library's own error, which celpy wraps as an overflow
    m = re.match(r"no such member in mapping: '(.*)'", message)
    if m:
        return f"no such key: {m.group(1)}"
    if "divide by zero" in message:
        return "division by zero"
    if "overload" in message:
        return "no such overload"
    if "list index out of range" in message or "index out of" in message:
        return "index out of bounds"
    return message


def _eval_error(path: str, schema: Obj, rule: Obj, error: str) -> FieldError:
    if error.startswith("no such overload"):
        return fe.invalid(path, _type_of(schema), f"'{error}': call arguments did not match a supported operator, "
                                                  f"function or macro signature for rule: {_rule_text(rule)}")
    return fe.invalid(path, _type_of(schema), f"{error} evaluating rule: {_rule_text(rule)}")


def _rule_text(rule: Obj) -> str:
    message = str(rule.get("message") or "").strip()
    return message or str(rule.get("rule") or "").strip()


def _message(rule: Obj, activation: dict[str, Any], schema: Obj, root: bool) -> str:
    expression = str(rule.get("messageExpression") or "")
    if expression.strip():
        try:
            compiled = compile_rule(expression, schema, root=root, result="string",
                                    optional_old_self=bool(rule.get("optionalOldSelf")))
        except CELCompileError:
            compiled = None
        if compiled is not None:
            result, error = _run(compiled, {k: v for k, v in activation.items()})
            if error is None and isinstance(result, str):
                text = result.strip()
                if text and "\n" not in text and len(text) <= 5 * 1024:
                    return text
    message = str(rule.get("message") or "").strip()
    return message or f"failed rule: {str(rule.get('rule') or '').strip()}"


def _reason_error(path: str, value: Any, schema: Obj, detail: str, reason: Any) -> FieldError:
    shown: Any = fe.OMIT if isinstance(value, dict | list) else value
    if reason == "FieldValueForbidden":
        return fe.forbidden(path, detail)
    if reason == "FieldValueRequired":
        return fe.required(path, detail)
    if reason == "FieldValueDuplicate":
        return FieldError(fe.DUPLICATE, path, "", shown)
    return FieldError(fe.INVALID, path, detail, shown)
