"""Objects as a Go API server holds them: strict decoding of request bodies, and Go's JSON rules on output.

A real kube-apiserver decodes every body into its Go struct and writes every response from one, so
what a client reads is what encoding/json makes of that struct, whatever the client sent. This module
gives kube-sim the same two steps over plain dicts, driven by :mod:`schema`:

- :func:`decode` reads a parsed JSON (or YAML) body as sigs.k8s.io/json's case-sensitive decoder does:
  the first value of a wrong type is a :class:`GoTypeError` carrying encoding/json's message
  (``json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32``);
  unknown and duplicate fields are dropped and reported as strict errors with upstream's paths
  (``unknown field "spec.template.spec.containers[0].imagee"``), at most 100, each once.
- :func:`normalize` writes a dict as encoding/json would write the struct it decodes to: keys in Go's
  field order, non-``omitempty`` fields always present (zero values included, nil slices, maps and
  pointers as ``null``), ``omitempty`` empties dropped, times in UTC at the type's precision, durations,
  quantities and bytes in their canonical text. Fields the type does not have are dropped.
  ``decode`` returns its result in this form too.

Values of the custom types keep upstream's own rules: ``metav1.Time`` at second precision (a zero time
is ``null``), ``MicroTime`` at microseconds, ``Duration`` as Go prints it, ``Quantity`` canonical,
``IntOrString`` as int or string, ``RawExtension``/``FieldsV1``/``interface{}`` (and apiextensions' ``JSON``)
as given. apiextensions' ``JSONSchemaPropsOrBool``/``OrArray``/``OrStringArray`` are a schema or a bool/a list of
schemas/a list of strings; their UnmarshalJSON reads a nested schema with a plain (case-sensitive, not strict)
decode, so fields unknown there are dropped without a report, as upstream drops them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import orjson

from controller_manager.api import quantity
from controller_manager.sim.apiserver import schema
from controller_manager.sim.apiserver.schema import OMIT, Field, Struct, Type, zero_json

__all__ = ["GoTypeError", "decode", "format_duration", "normalize", "parse_duration", "parse_json_strict"]

_MAX_STRICT_ERRORS = 100
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1),
               "uint64": (0, 2**64 - 1)}
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_RFC3339_MICRO = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{6})(Z|[+-]\d{2}:\d{2})")
_LAYOUT = "2006-01-02T15:04:05Z07:00"
_LAYOUT_MICRO = "2006-01-02T15:04:05.000000Z07:00"


class GoTypeError(ValueError):
    """A value Go could not decode into its field; the message is the one the real server reports."""


class _DuplicateKeys(dict[str, Any]):
    """An object of a parsed body that repeated keys (the last value kept, as Go keeps it)."""

    __slots__ = ("duplicates",)

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.duplicates = [k for i, (k, _) in enumerate(pairs) if any(k == p for p, _ in pairs[:i])]


class JSONNumber(float):
    """A JSON number kept with its text, for the fields that read the text rather than the value:
    ``Quantity.UnmarshalJSON`` parses the literal bytes, so ``1e3`` stays ``1e3`` where ``1000`` is ``1k``."""

    __slots__ = ("text",)
    text: str


def parse_json_strict(raw: bytes | str, parse_float: Callable[[str], float] | None = None) -> Any:
    """Parse JSON keeping a record of repeated keys, for :func:`decode`'s duplicate-field errors. A body
    that repeats a key anywhere is a :class:`_DuplicateKeys` at its top too (so :func:`decode` knows not to
    take parts of it as equal to a stored object's). ``parse_float`` reads numbers with a fraction or an
    exponent (see :class:`JSONNumber`). Raises ``ValueError`` on malformed input."""
    if isinstance(raw, bytes):
        value = _parse_without_duplicates(raw, parse_float)
        if value is not _MAYBE_DUPLICATES:
            return value
    return _parse_recording_duplicates(raw, parse_float)


_MAYBE_DUPLICATES: Any = object()
_PLAIN_DECODER = msgspec.json.Decoder()


def _parse_without_duplicates(raw: bytes, parse_float: Callable[[str], float] | None) -> Any:
    """The common body, parsed in C. msgspec keeps the last of repeated keys silently, so the body is known to
    have none when it holds as many colons as its re-encoding does: each member brings one (whitespace around
    it changes nothing), strings hold theirs literally in both texts, and a dropped duplicate takes at least
    its own away. A ``\\u`` escape could spell a colon the re-encoding writes plainly, so such a body goes the
    slow way; so does what msgspec refuses and Python's json reads (NaN, a lone surrogate, a float beyond
    range), to be read or refused as before."""
    if b"\\u" in raw:
        return _MAYBE_DUPLICATES
    try:
        value = (_PLAIN_DECODER if parse_float is None else msgspec.json.Decoder(float_hook=parse_float)).decode(raw)
        again = orjson.dumps(value, default=float)  # (a JSONNumber is a float)
    except (msgspec.DecodeError, TypeError):  # TypeError: an integer beyond 64 bits
        return _MAYBE_DUPLICATES
    return value if raw.count(b":") == again.count(b":") else _MAYBE_DUPLICATES


def _parse_recording_duplicates(raw: bytes | str, parse_float: Callable[[str], float] | None) -> Any:
    repeated = False

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal repeated
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        repeated = True
        return _DuplicateKeys(pairs)

    text = raw.decode() if isinstance(raw, bytes) else raw
    value = json.JSONDecoder(object_pairs_hook=pairs_hook, parse_float=parse_float).decode(text)
    if repeated and type(value) is dict:
        value = _DuplicateKeys(list(value.items()))
    return value


# --- the custom types -------------------------------------------------------------------------------------


def _parse_time(text: str, pattern: re.Pattern[str], layout: str) -> datetime:
    m = pattern.fullmatch(text)
    if m is None:
        raise GoTypeError(f'parsing time "{text}" as "{layout}": cannot parse "{text}" as "{layout}"')
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zone = m.group(7), m.group(8)
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        raise GoTypeError(f'parsing time "{text}": day out of range') from None
    if fraction:
        moment += timedelta(microseconds=int((fraction[1:] + "000000")[:6]))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        moment -= sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    return moment


def _time(value: Any, micro: bool) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise GoTypeError(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
    if not micro and len(value) == 20 and value[19] == "Z" and _RFC3339.fullmatch(value):
        return value  # already as Go writes it: the common case
    if micro:
        moment = _parse_time(value, _RFC3339_MICRO, _LAYOUT_MICRO)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return _parse_time(value, _RFC3339, _LAYOUT).strftime("%Y-%m-%dT%H:%M:%SZ")


_DURATION_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
                   "m": 60_000_000_000, "h": 3_600_000_000_000}
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?([a-zµμ]+)")


def parse_duration(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds."""
    original = text
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("+-") if text[:1] in "+-" else text
    if text == "0":
        return 0
    if not text:
        raise GoTypeError(f'time: invalid duration "{original}"')
    total = 0
    pos = 0
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None or not (m.group(1) or m.group(2)):
            raise GoTypeError(f'time: invalid duration "{original}"')
        unit = _DURATION_UNITS.get(m.group(3))
        if unit is None:
            raise GoTypeError(f'time: unknown unit "{m.group(3)}" in duration "{original}"')
        whole = int(m.group(1) or 0) * unit
        frac = m.group(2) or ""
        if frac:
            whole += int(frac) * unit // 10 ** len(frac)
        total += whole
        pos = m.end()
    if total > 2**63 - 1:
        raise GoTypeError(f'time: invalid duration "{original}"')
    return sign * total


def format_duration(ns: int) -> str:
    """Go's time.Duration.String: ``1h2m3.5s``, ``150ms``, ``0s``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = _decimal(rest, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return sign + seconds


def _decimal(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def _duration(value: Any) -> str:
    if not isinstance(value, str):
        raise GoTypeError(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
    return format_duration(parse_duration(value))


def _quantity(value: Any) -> str:
    # Quantity.UnmarshalJSON: null is zero; anything else is parsed as its JSON text (a string's contents,
    # trimmed), so true, objects and arrays fail with the format error and bad text with ParseQuantity's.
    if value is None:
        return "0"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise GoTypeError(quantity.ERR_FORMAT_WRONG)
    if type(value) is JSONNumber:
        value = value.text  # the number's literal text, as UnmarshalJSON reads it
    try:
        return quantity.canonicalize(value)
    except ValueError as e:
        raise GoTypeError(str(e)) from None


def _int_or_string(value: Any) -> int | str:
    if value is None:
        return 0
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and -(2**31) <= value < 2**31:
        return value
    shown = _json_kind(value) if not isinstance(value, int | float) or isinstance(value, bool) else \
        f"number {value}"
    raise GoTypeError(f"json: cannot unmarshal {shown} into Go value of type int32")


def _bytes(value: str) -> str:
    try:
        return base64.b64encode(base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)).decode()
    except (binascii.Error, ValueError):
        raise GoTypeError(f"illegal base64 data at input byte {_bad_base64_offset(value)}") from None


def _bad_base64_offset(value: str) -> int:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    for i, ch in enumerate(value):
        if ch not in alphabet and ch not in "\r\n":
            return i
    return len(value) - len(value) % 4


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "null"


# --- the walk ------------------------------------------------------------------------------------------------
#
# Each struct is compiled once into a plan (its fields with their checks and zero values), so a body's walk
# does per field only what that field's kind needs. The path of the value being read is a stack kept by the
# walk and turned into text only for an error or a strict-decoding report.

_SCALAR_KINDS = frozenset({"string", "bool", "int32", "int64", "uint32", "uint64"})
_EMPTY_KINDS = frozenset({"list", "map", "wrapper", "bytes", "string"})
_NEVER_EMPTY = frozenset({"struct", "time", "microtime", "duration", "quantity", "intorstring", "raw"})
_NULLABLE_ELEMS = frozenset({"list", "map", "any", "raw"})


class _FieldPlan:
    """What the walk needs of one field, computed once."""

    __slots__ = ("empty", "fast", "field", "go_type", "hi", "key", "kind", "lo", "null_aware", "sub", "type", "zero")

    def __init__(self, f: Field) -> None:
        self.field = f
        self.key = f.json
        self.type = f.type
        self.kind = f.type.kind
        self.go_type = f.go_type
        self.null_aware = f.type.kind in _NULL_AWARE and not f.pointer
        # The omitempty test as a code: 0 never empty, 1 empty when None, 2 when None or len 0, 3 falsy scalar.
        if not f.omitempty:
            self.empty = 0
        elif f.pointer:
            self.empty = 1
        elif self.kind in _NEVER_EMPTY:
            self.empty = 0
        elif self.kind in _EMPTY_KINDS:
            self.empty = 2
        else:
            self.empty = 3
        self.zero = zero_json(f)
        # Scalars of the right Python type (ints within range) are taken as they are, without a call.
        self.fast: type | None = {"string": str, "bool": bool}.get(self.kind)
        self.lo, self.hi = _INT_RANGES.get(self.kind, (0, 0))
        if self.kind in _INT_RANGES:
            self.fast = int
        # A struct field's own plan, found on first use (plans are built lazily, so recursive types end).
        self.sub: _StructPlan | None = None


class _StructPlan:
    __slots__ = ("decode", "fields", "go", "index", "normalize", "struct", "walks", "zeros")

    def __init__(self, st: Struct) -> None:
        self.struct = st
        self.go = st.go
        self.fields = {key: _FieldPlan(f) for key, f in st.json_fields.items()}
        self.index = {key: i for i, key in enumerate(self.fields)}  # Go's field order
        # The fields written even when absent (not omitempty): most structs have few.
        self.zeros = tuple((key, fp.zero) for key, fp in self.fields.items() if fp.zero is not OMIT)
        # The struct's walk for decode (reporting unknown fields) and for normalize: interpreted from this
        # plan until the struct has been walked often enough to be worth compiling (compiling costs about
        # as much as a hundred walks, and most structs of most kinds are seldom written).
        self.walks = [0, 0]
        self.decode: _StructWalk = functools.partial(_warm_up, self, True)
        self.normalize: _StructWalk = functools.partial(_warm_up, self, False)


_PLANS: dict[int, _StructPlan] = {}  # id(Struct) -> plan; structs live as long as the schema cache


def _plan(st: Struct) -> _StructPlan:
    plan = _PLANS.get(id(st))
    if plan is None:
        plan = _PLANS[id(st)] = _StructPlan(st)
    return plan


def _same_json(body_value: Any, stored: Any) -> bool:
    """Whether a body's value, already found ``==`` to a stored one, is the same JSON: Python's equality
    takes ``true`` for ``1`` and ``1.0`` for ``1``, which Go's decoder would reject."""
    if type(body_value) is not type(stored):
        return False
    return not isinstance(body_value, dict | list) or orjson.dumps(body_value) == orjson.dumps(stored)


def _is_empty(code: int, value: Any) -> bool:
    if code == 1:
        return value is None
    if code == 2:
        return value is None or len(value) == 0
    return value is None or value is False or (value == 0 and value is not True)


FastDecode = Callable[[dict[str, Any], Struct], "dict[str, Any] | None"]
"""A struct's decode that answers only when it reads a value exactly as the walk would with nothing to
report, else None (see :mod:`gostructs`)."""


class _Walk:
    """One body's walk: the path being read (for errors), the innermost struct, and the strict errors."""

    __slots__ = ("_seen", "fast", "path", "report", "strict", "struct_name")

    def __init__(self, report: bool, fast: FastDecode | None = None) -> None:
        self.report = report        # collect unknown/duplicate fields (decode) or drop them silently (normalize)
        # Tried first on each struct value not equal to its stored version (decode only): its answer shares
        # nothing with the stored version, which costs less than walking the value to share its equal parts.
        self.fast = fast
        self.strict: list[str] = []
        self._seen: set[str] = set()
        # Segments: a struct field's key (str), a list index (int) or a map key (1-tuple).
        self.path: list[str | int | tuple[str]] = []
        self.struct_name = ""

    def spath(self, *extra: str | int | tuple[str]) -> str:
        """The path as upstream's strict errors write it: ``spec.containers[0].image``, map keys dotted."""
        parts: list[str] = []
        for seg in (*self.path, *extra):
            if isinstance(seg, int):
                parts.append(f"[{seg}]")
            else:
                key = seg if isinstance(seg, str) else seg[0]
                parts.append(f".{key}" if parts else key)
        return "".join(parts)

    def strict_error(self, kind: str, *extra: str | tuple[str]) -> None:
        if not self.report:
            return
        message = f"{kind} {json.dumps(self.spath(*extra))}"
        if message not in self._seen and len(self.strict) < _MAX_STRICT_ERRORS:
            self._seen.add(message)
            self.strict.append(message)

    def type_error(self, value: Any, go_type: str, struct: str | None = None) -> GoTypeError:
        """encoding/json's UnmarshalTypeError: the innermost struct and the path of struct fields from the top."""
        kind = _json_kind(value)
        if kind == "number" and go_type.lstrip("*") in ("int32", "int64", "uint32", "uint64"):
            kind = f"number {value}"
        name = self.struct_name if struct is None else struct
        fields = ".".join(seg for seg in self.path if isinstance(seg, str))
        where = f"Go struct field {name}.{fields}" if name else "Go value"
        return GoTypeError(f"json: cannot unmarshal {kind} into {where} of type {go_type}")

    def struct(self, value: Any, st: Struct, go_type: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
        """``old``: the same struct as already written; a field equal to its old value is taken from it
        without a walk, which keeps updates that change a small part of an object cheap."""
        if not isinstance(value, dict):
            raise self.type_error(value, go_type)
        return self._struct(value, _plan(st), old)

    def _struct(self, value: dict[str, Any], plan: _StructPlan, old: dict[str, Any] | None,
                like: dict[str, Any] | None = None) -> dict[str, Any]:
        """``like`` (normalize only): another version already written, e.g. the request body as decoded,
        consulted after ``old``. The walk itself is the struct's compiled one (see :func:`_compile`)."""
        return (plan.decode if self.report else plan.normalize)(self, value, old, like)

    def interpret(self, value: dict[str, Any], plan: _StructPlan, old: dict[str, Any] | None,
                  like: dict[str, Any] | None) -> dict[str, Any]:
        """A struct's walk read from its plan, field by field: what its compiled walk does (see
        :func:`_compile`), for the structs walked too seldom to be worth compiling."""
        fields = plan.fields
        if isinstance(value, _DuplicateKeys):
            for key in value.duplicates:
                if key in fields:
                    self.strict_error("duplicate field", key)
        decoded: dict[str, Any] = {}
        path = self.path
        for key, item in value.items():
            fp = fields.get(key)
            if fp is None:
                self.strict_error("unknown field", key)
                continue
            before: Any = None
            if old is not None:
                before = old.get(key, OMIT)
                if item is before or (item == before and (not self.report or _same_json(item, before))):
                    decoded[key] = before
                    continue
            other: Any = None
            if like is not None:
                other = like.get(key, OMIT)
                if item is other or item == other:
                    decoded[key] = other
                    continue
            if item is None and not fp.null_aware:
                continue  # null leaves the field at its zero value
            fast = fp.fast
            if fp.kind == "struct" and type(item) is dict:
                sub = fp.sub
                if sub is None:
                    sub = fp.sub = _plan(fp.type.struct)
                converter = self.fast
                done = None if converter is None else converter(item, sub.struct)
                if done is not None:
                    decoded[key] = done  # (a struct is never empty to omitempty)
                    continue
                path.append(key)
                self.struct_name = plan.go
                item = self._struct(item, sub, before if isinstance(before, dict) else None,
                                    other if isinstance(other, dict) else None)
                path.pop()
            elif fast is None or type(item) is not fast or (fast is int and not fp.lo <= item <= fp.hi):  # type: ignore[operator]
                path.append(key)
                self.struct_name = plan.go
                item = self.value(item, fp.type, fp.go_type, before if isinstance(before, dict | list) else None)
                path.pop()
            if not (fp.empty and _is_empty(fp.empty, item)):
                decoded[key] = item
        for key, zero in plan.zeros:
            if key not in decoded:
                decoded[key] = zero  # shared by every object written: stored objects are never mutated
        keys = list(decoded)
        ordered = sorted(keys, key=plan.index.__getitem__)
        return decoded if ordered == keys else {key: decoded[key] for key in ordered}

    def value(self, value: Any, t: Type, go_type: str, old: Any = None) -> Any:
        kind = t.kind
        if kind == "string":
            if not isinstance(value, str):
                raise self.type_error(value, go_type)
            return value
        if kind in _INT_RANGES:
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float):
                    raise GoTypeError(f"json: cannot unmarshal number {value!r} into Go struct field "
                                      f"{self._field_name()} of type {go_type.lstrip('*')}")
                raise self.type_error(value, go_type.lstrip("*"))
            lo, hi = _INT_RANGES[kind]
            if not lo <= value <= hi:
                raise GoTypeError(f"json: cannot unmarshal number {value} into Go struct field "
                                  f"{self._field_name()} of type {go_type.lstrip('*')}")
            return value
        if kind == "bool":
            if not isinstance(value, bool):
                raise self.type_error(value, go_type.lstrip("*"))
            return value
        if kind == "struct":
            return self.struct(value, t.struct, go_type.lstrip("*"), old if isinstance(old, dict) else None)
        if kind == "list" or kind == "wrapper":
            if value is None:
                return None
            if not isinstance(value, list):
                raise self.type_error(value, go_type)
            return self._list(value, t, go_type, old if isinstance(old, list) else None)
        if kind == "map":
            if value is None:
                return None
            if not isinstance(value, dict):
                raise self.type_error(value, go_type)
            return self._map(value, t, go_type)
        custom = _CUSTOM.get(kind)
        if custom is not None:
            return custom(value)
        if kind == "bytes":
            if not isinstance(value, str):
                raise self.type_error(value, "[]uint8")
            return _bytes(value)
        if kind in ("any", "raw", "fieldsv1"):
            return value
        if kind == "float64":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise self.type_error(value, go_type)
            return float(value) if type(value) is JSONNumber else value
        raise AssertionError(f"unhandled type kind {kind}")

    def _field_name(self) -> str:
        return f"{self.struct_name}.{'.'.join(seg for seg in self.path if isinstance(seg, str))}"

    def _list(self, value: list[Any], t: Type, go_type: str, old: list[Any] | None) -> list[Any]:
        elem = t.elem
        assert elem is not None
        nullable = t.elem_pointer or elem.kind in _NULLABLE_ELEMS
        if elem.kind == "string" and type(value) is list and all(type(item) is str for item in value):
            return value
        elem_go = _elem_go_type(go_type, elem)
        struct_name = self.struct_name
        path = self.path
        sub = _plan(elem.struct) if elem.kind == "struct" else None  # items read straight by its walk
        out: list[Any] = []
        for i, item in enumerate(value):
            if item is None and nullable:
                out.append(None)
                continue
            before = old[i] if old is not None and i < len(old) else None
            if before is not None and (item is before or (item == before and (not self.report
                                                                               or _same_json(item, before)))):
                out.append(before)
                continue
            if sub is not None and type(item) is dict and self.fast is not None:
                done = self.fast(item, sub.struct)
                if done is not None:
                    out.append(done)
                    continue
            path.append(i)
            self.struct_name = struct_name
            if sub is not None and type(item) is dict:
                out.append((sub.decode if self.report else sub.normalize)(
                    self, item, before if isinstance(before, dict) else None, None))
            else:
                out.append(self.value(_null_to_zero(item, elem), elem, elem_go, before))
            path.pop()
        return out

    def _map(self, value: dict[str, Any], t: Type, go_type: str) -> dict[str, Any]:
        elem = t.elem
        assert elem is not None
        if isinstance(value, _DuplicateKeys):
            for key in value.duplicates:
                self.strict_error("duplicate field", (key,))
        if elem.kind == "string" and type(value) is dict and all(type(item) is str for item in value.values()):
            return value
        nullable = t.elem_pointer or elem.kind in _NULLABLE_ELEMS
        elem_go = _elem_go_type(go_type, elem)
        struct_name = self.struct_name
        path = self.path
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None and nullable:
                out[key] = None
                continue
            path.append((key,))
            self.struct_name = struct_name
            out[key] = self.value(_null_to_zero(item, elem), elem, elem_go)
            path.pop()
        return out


_MISSING = object()

# Custom types whose UnmarshalJSON sees a JSON null (a non-pointer one decodes it to its zero value).
_NULL_AWARE = frozenset({"time", "microtime", "quantity", "intorstring", "raw", "fieldsv1", "schemaorbool",
                         "schemaorarray", "schemaorstringarray"})
@functools.lru_cache(maxsize=4096)
def _time_text(value: str, micro: bool) -> str | None:
    return _time(value, micro)  # the same few timestamps recur in every object written within a second


_CUSTOM: dict[str, Callable[[Any], Any]] = {
    "time": lambda v: _time_text(v, False) if type(v) is str else _time(v, micro=False),
    "microtime": lambda v: _time_text(v, True) if type(v) is str else _time(v, micro=True),
    "duration": _duration,
    "quantity": _quantity,
    "intorstring": _int_or_string,
}


# --- apiextensions' JSON schema "or" types ----------------------------------------------------------------

_SCHEMA_PROPS = schema.APIEXTENSIONS + "JSONSchemaProps"


def _schema_props(value: Any) -> dict[str, Any]:
    """A nested JSONSchemaProps as the "or" types' UnmarshalJSON reads it: its own json.Unmarshal call
    (type errors name the value from its top; unknown fields are dropped, not reported)."""
    return _Walk(report=False).struct(value, schema.struct(_SCHEMA_PROPS), "v1.JSONSchemaProps")


def _schema_or_bool(value: Any) -> dict[str, Any] | bool:
    if isinstance(value, dict):
        return _schema_props(value)
    if isinstance(value, bool):
        return value
    raise GoTypeError("boolean or JSON schema expected")


def _schema_or_array(value: Any) -> dict[str, Any] | list[dict[str, Any]] | None:
    # Anything but an object or a non-empty array is the zero value, which is written as null.
    if isinstance(value, dict):
        return _schema_props(value)
    if isinstance(value, list) and value:
        return [_schema_props({} if item is None else item) for item in value]
    return None


def _schema_or_string_array(value: Any) -> dict[str, Any] | list[str] | None:
    if isinstance(value, dict):
        return _schema_props(value)
    if isinstance(value, list) and value:
        for item in value:
            if not isinstance(item, str) and item is not None:
                raise GoTypeError(f"json: cannot unmarshal {_json_kind(item)} into Go value of type string")
        return ["" if item is None else item for item in value]
    return None


_CUSTOM.update(schemaorbool=_schema_or_bool, schemaorarray=_schema_or_array,
               schemaorstringarray=_schema_or_string_array)


def _null_to_zero(item: Any, elem: Type) -> Any:
    """A null list element or map value of a value type decodes to that type's zero value."""
    if item is not None or elem.kind in _NULL_AWARE:
        return item
    if elem.kind == "struct":
        return {}
    return {"string": "", "bool": False, "bytes": ""}.get(elem.kind, 0)


_ELEM_GO_TYPES: dict[tuple[str, int], tuple[Type, str]] = {}  # (go type, id(elem)) -> (elem, its Go type)


def _elem_go_type(go_type: str, elem: Type) -> str:
    hit = _ELEM_GO_TYPES.get((go_type, id(elem)))
    if hit is not None and hit[0] is elem:
        return hit[1]
    named = _elem_go_type_of(go_type, elem)
    if len(_ELEM_GO_TYPES) >= 8192:  # (custom resources' types come and go)
        _ELEM_GO_TYPES.clear()
    _ELEM_GO_TYPES[(go_type, id(elem))] = (elem, named)
    return named


def _elem_go_type_of(go_type: str, elem: Type) -> str:
    if go_type.startswith("[]"):
        return go_type[2:]
    if go_type.startswith("map["):
        depth = 0
        for i, ch in enumerate(go_type):
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    return go_type[i + 1:]
    # A named slice or map (v1.ResourceList): name the element by its own type.
    if elem.kind == "struct":
        parts = elem.name.rsplit(".", 2)
        return f"{parts[-2]}.{parts[-1]}"
    return {"quantity": "resource.Quantity", "bytes": "[]uint8"}.get(elem.kind, elem.kind)


# --- the compiled walk of a struct ------------------------------------------------------------------------
#
# A struct's walk is Python source generated from its plan once (per mode: decode reports unknown and
# duplicate fields, normalize drops them), so a body's walk runs straight-line code per field: the field's own
# type check, empty test and zero value are constants in it, where a generic loop would look them up and
# branch on the field's kind for every value. What is not the common case of a field (a value of an
# unexpected type, a list, a map of non-strings, a custom type) goes to :meth:`_Walk.value`, with the path
# kept exactly as a generic walk keeps it, so errors and strict reports read the same.

_StructWalk = Callable[["_Walk", dict[str, Any], "dict[str, Any] | None", "dict[str, Any] | None"], dict[str, Any]]

# Custom kinds whose conversion needs no path (their errors name no field): called directly.
_DIRECT_CUSTOM = frozenset({"time", "microtime", "duration", "quantity", "intorstring"})
_PASS_THROUGH = frozenset({"any", "raw", "fieldsv1"})


_COMPILE_AFTER = 32  # walks of a struct in one mode


def _warm_up(plan: _StructPlan, report: bool, walk: _Walk, value: dict[str, Any], old: dict[str, Any] | None,
             like: dict[str, Any] | None) -> dict[str, Any]:
    """A struct's walk before it is compiled: interpreted, counted, and compiled once walked often."""
    plan.walks[report] += 1
    if plan.walks[report] < _COMPILE_AFTER:
        return walk.interpret(value, plan, old, like)
    compiled = _compile(plan, report)
    if report:
        plan.decode = compiled
    else:
        plan.normalize = compiled
    return compiled(walk, value, old, like)


def _compile(plan: _StructPlan, report: bool) -> _StructWalk:
    consts: dict[str, Any] = {"OMIT": OMIT, "DUPLICATES": _DuplicateKeys, "same_json": _same_json,
                              "INDEX": plan.index, "GO": plan.go}

    def const(value: Any) -> str:
        name = f"c{len(consts)}"
        consts[name] = value
        return name

    lines = ["def walk(w, value, old, like):"]
    emit = lines.append
    if report:
        emit("    if type(value) is not dict and isinstance(value, DUPLICATES):")
        emit("        for key in value.duplicates:")
        emit("            if key in INDEX:")
        emit('                w.strict_error("duplicate field", key)')
    emit("    decoded = {}")
    emit("    path = w.path")
    fields = list(plan.fields.values())
    emit("    compared = old is not None or like is not None")
    emit("    before = other = None")
    emit("    for key, item in value.items():")
    emit("        i = INDEX.get(key)")
    emit("        if i is None:")
    emit('            w.strict_error("unknown field", key)' if report else "            pass")
    emit("            continue")
    emit("        if compared:")  # (not a create's body, nor a list item)
    emit("            before = None")
    emit("            if old is not None:")
    emit("                before = old.get(key, OMIT)")
    same = "(item == before and same_json(item, before))" if report else "item == before"
    emit(f"                if item is before or {same}:")
    emit("                    decoded[key] = before")
    emit("                    continue")
    emit("            other = None")
    emit("            if like is not None:")
    emit("                other = like.get(key, OMIT)")
    emit("                if item is other or item == other:")
    emit("                    decoded[key] = other")
    emit("                    continue")
    if fields:
        _emit_dispatch(fields, 0, len(fields), "        ", emit, const, report)
    for key, zero in plan.zeros:
        emit(f"    if {key!r} not in decoded:")
        emit(f"        decoded[{key!r}] = {const(zero)}")  # shared: stored objects are never mutated
    emit("    keys = list(decoded)")
    emit("    ordered = sorted(keys, key=INDEX.__getitem__)")
    emit("    return decoded if ordered == keys else {key: decoded[key] for key in ordered}")
    namespace = dict(consts)
    exec(compile("\n".join(lines), f"<gojson walk of {plan.go}>", "exec"), namespace)
    walker: _StructWalk = namespace["walk"]
    return walker


def _emit_dispatch(fields: list[_FieldPlan], lo: int, hi: int, indent: str, emit: Callable[[str], None],
                   const: Callable[[Any], str], report: bool) -> None:
    """Branch on the field's index (a binary tree of comparisons) to each field's own code."""
    if hi - lo == 1:
        _emit_field(fields[lo], indent, emit, const, report)
        return
    mid = (lo + hi) // 2
    emit(f"{indent}if i < {mid}:")
    _emit_dispatch(fields, lo, mid, indent + "    ", emit, const, report)
    emit(f"{indent}else:")
    _emit_dispatch(fields, mid, hi, indent + "    ", emit, const, report)


def _emit_field(fp: _FieldPlan, indent: str, emit: Callable[[str], None], const: Callable[[Any], str],
                report: bool) -> None:
    """One field's code: ``item`` (the body's value, not equal to ``old``'s or ``like``'s) into ``decoded``."""
    key = repr(fp.key)
    kind = fp.kind
    if not fp.null_aware:
        emit(f"{indent}if item is None:")
        emit(f"{indent}    continue")  # null leaves the field at its zero value
    generic = (f"path.append({key}); w.struct_name = GO; "
               f"item = w.value(item, {const(fp.type)}, {const(fp.go_type)}, "
               "before if isinstance(before, (dict, list)) else None); path.pop()")
    if kind == "struct":
        sub = const(_plan(fp.type.struct))  # (a plan compiles on its first walk: recursive types end)
        walk = "decode" if report else "normalize"
        emit(f"{indent}if type(item) is dict:")
        if report:
            emit(f"{indent}    done = None if w.fast is None else "
                 f"w.fast(item, {sub}.struct)")
            emit(f"{indent}    if done is not None:")
            emit(f"{indent}        decoded[{key}] = done")
            emit(f"{indent}        continue")
        emit(f"{indent}    path.append({key}); w.struct_name = GO")
        emit(f"{indent}    item = {sub}.{walk}(w, item, before if isinstance(before, dict) else None, "
             "other if isinstance(other, dict) else None)")
        emit(f"{indent}    path.pop()")
        emit(f"{indent}else:")
        emit(f"{indent}    {generic}")
    elif kind in ("string", "bool"):
        emit(f"{indent}if type(item) is not {kind if kind == 'bool' else 'str'}:")
        emit(f"{indent}    {generic}")
    elif kind in _INT_RANGES:
        emit(f"{indent}if type(item) is not int or not {fp.lo} <= item <= {fp.hi}:")
        emit(f"{indent}    {generic}")
    elif kind == "map" and fp.type.elem is not None and fp.type.elem.kind == "string":
        emit(f"{indent}if type(item) is not dict or not all(type(v) is str for v in item.values()):")
        emit(f"{indent}    {generic}")
    elif kind in _DIRECT_CUSTOM:
        emit(f"{indent}item = {const(_CUSTOM[kind])}(item)")
    elif kind in _PASS_THROUGH:
        pass
    else:
        emit(f"{indent}{generic}")
    if fp.empty == 0:
        emit(f"{indent}decoded[{key}] = item")
    elif fp.empty == 1:
        emit(f"{indent}if item is not None:")
        emit(f"{indent}    decoded[{key}] = item")
    elif fp.empty == 2 or kind in _INT_RANGES or kind in ("bool", "float64"):
        # Never None here (null was skipped above): a string, list, map or number, empty when falsy.
        emit(f"{indent}if item:")
        emit(f"{indent}    decoded[{key}] = item")
    else:
        emit(f"{indent}if not (item is None or item is False or (item == 0 and item is not True)):")
        emit(f"{indent}    decoded[{key}] = item")


def decode(body: Any, st: Struct, go_name: str, old: dict[str, Any] | None = None,
           fast: FastDecode | None = None) -> tuple[dict[str, Any], list[str]]:
    """A parsed request body as the server's typed decode sees it: (the object in Go's JSON form, the strict
    errors). ``go_name`` is how Go names the kind's type (``v1.Deployment``). ``old``, the stored object an
    update replaces, lets parts equal to it be taken without a walk (they hold no unknown fields, being
    equal to what was written). ``fast`` is tried on the body (when there is no ``old``), and on each struct
    value of it not equal to its stored version, before the walk; only for a body whose every part is plain
    (no repeated keys anywhere).
    Raises :class:`GoTypeError`."""
    if fast is not None and old is None and type(body) is dict:
        done = fast(body, st)
        if done is not None:
            return done, []
    walk = _Walk(report=True, fast=fast)
    if not isinstance(body, dict):
        raise GoTypeError(f"json: cannot unmarshal {_json_kind(body)} into Go value of type {go_name}")
    result = walk.struct(body, st, go_name, None if isinstance(body, _DuplicateKeys) else old)
    return result, walk.strict


def normalize(obj: dict[str, Any], st: Struct, old: dict[str, Any] | None = None,
              like: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` as a Go server writes it back (see the module docstring). Fields the type lacks are dropped;
    a value of the wrong type raises :class:`GoTypeError` (the server built something invalid). ``old``, the
    object as stored before, and ``like``, another version already in this form (the request body as
    :func:`decode` returned it), let parts equal to theirs be taken as they are."""
    if not isinstance(obj, dict):
        raise GoTypeError(f"json: cannot unmarshal {_json_kind(obj)} into Go value of type {st.go}")
    return _Walk(report=False)._struct(obj, _plan(st), old, like)


def field_of(st: Struct, key: str) -> Field | None:
    return st.json_fields.get(key)
