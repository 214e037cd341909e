"""A typed decode in C: msgspec Structs generated from the schema, for the common request body and new object.

:func:`gojson.decode` reads a body field by field in Python, about 3 K instructions per object it makes. For
a body that needs none of its error wording (no field of the wrong type, no unknown or repeated field, no
null where Go would leave a zero, no empty value that ``omitempty`` drops), msgspec converts it into Structs
built from the same schema and back into dicts (``msgspec.convert``, then ``to_builtins``), with Go's field
order, zero values and omissions: :func:`convert` returns that object, or ``None`` when the body needs more
than this, and then the Python walk, which words every error and strict report, reads it as before.
:func:`normalized` is the same for :func:`gojson.normalize` (fields the type lacks dropped, not declined).
Hypothesis tests hold both to the walk's bytes; anything a Struct cannot express exactly declines.

How Go's rules are expressed:
- a field Go leaves out when unset (``omitempty``, a nil pointer) defaults to ``UNSET``, which msgspec does
  not write; one Go always writes defaults to its zero value (a struct's is that struct's own zero);
- an ``omitempty`` string, list or map must be non-empty and an ``omitempty`` integer positive (otherwise
  decline: an empty value Go would drop, or a negative one, are left to the walk);
- a null is taken where Go writes null for it again (a pointer, slice or map written as ``null``, a zero
  ``Time`` or ``MicroTime``, raw JSON) or where a custom type's UnmarshalJSON reads it (converted as the walk
  converts it); where Go leaves the field's zero value, it declines;
- a ``metav1.Time`` spelled as Go writes it (UTC, whole seconds) is checked by a pattern in C; any other
  spelling declines. The other custom types (quantities, durations, IntOrString, bytes, floats, microtimes,
  raw JSON) are converted by the walk's own functions, called from msgspec's ``dec_hook``; integers are
  range-checked in C and never taken from a bool or a float (msgspec's strict mode).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

import msgspec

from controller_manager.sim.apiserver import gojson
from controller_manager.sim.apiserver.schema import OMIT, Field, Struct, Type, zero_json

__all__ = ["convert", "normalized", "struct_type"]

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1),
               "uint64": (0, 2**64 - 1)}
_NULL_AWARE = frozenset({"time", "microtime", "quantity", "intorstring", "raw", "fieldsv1"})
_NULLABLE_ELEMS = frozenset({"list", "map", "any", "raw"})
_NEVER_EMPTY = frozenset({"struct", "time", "microtime", "duration", "quantity", "intorstring", "raw"})
_EMPTY_KINDS = frozenset({"list", "map", "wrapper", "bytes", "string"})


class _Decline(Exception):
    """Raised by a converter: the value needs the Python walk (an error to word, or a rule not expressed)."""


class _Custom:
    """A custom type's value inside a Struct: msgspec keeps only instances of the type a field names, so the
    converted value travels in one of these (one class per custom kind and null rule) until
    :func:`msgspec.to_builtins` hands it to :func:`_enc_hook`."""

    __slots__ = ("value",)
    convert: Callable[[Any], Any]

    value: Any


def _dec_hook(cls: type[_Custom], value: Any) -> _Custom:
    held = cls.__new__(cls)
    held.value = cls.convert(value)
    return held


def _enc_hook(held: _Custom) -> Any:
    return held.value


def _float64(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Decline
    return float(value) if type(value) is gojson.JSONNumber else value


def _bytes(value: Any) -> str:
    if not isinstance(value, str):
        raise _Decline
    return gojson._bytes(value)


def _same(value: Any) -> Any:
    return value


def _true(value: Any) -> bool:
    if value is not True:
        raise _Decline  # false is what omitempty drops; anything else is the walk's error to word
    return True


@functools.cache
def _custom(kind: str, accepts_null: bool, empty: int) -> type:
    """The holder type of a custom kind: ``accepts_null``, a null is the custom type's own to read (else
    it declines); ``empty``, the walk's omitempty code (a value it would drop declines)."""
    if kind == "float64":
        base: Callable[[Any], Any] = _float64
    elif kind == "bytes":
        base = _bytes
    elif kind in ("any", "raw", "fieldsv1"):
        base = _same
    elif kind == "bool_true":
        base = _true
    else:
        base = gojson._CUSTOM[kind]

    def convert(value: Any) -> Any:
        if value is None and not accepts_null:
            raise _Decline
        try:
            result = base(value)
        except gojson.GoTypeError:
            raise _Decline from None
        if empty and gojson._is_empty(empty, result):
            raise _Decline
        return result

    return type(f"_Custom_{kind}", (_Custom,), {"__slots__": (), "convert": staticmethod(convert)})


class _Unsupported(Exception):
    """A type this module does not express (the struct then has no Struct type: always the walk)."""


# A metav1.Time as Go writes it (UTC, whole seconds): the walk takes that text as it is, and so do the Structs,
# checked in C; any other spelling of a time declines (it is rare: Go clients send this form).
_GO_TIME = Annotated[str, msgspec.Meta(pattern=r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\Z")]


def _value_type(t: Type, empty: int, strict: bool) -> Any:
    """The msgspec type of a non-null value of ``t``; ``empty``, the walk's omitempty code for it."""
    kind = t.kind
    if kind == "string":
        return Annotated[str, msgspec.Meta(min_length=1)] if empty == 2 else str
    if kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        return Annotated[int, msgspec.Meta(ge=max(lo, 1) if empty == 3 else lo, le=hi)]
    if kind == "bool":
        return _custom("bool_true", False, 0) if empty == 3 else bool
    if kind == "struct":
        st = struct_type(t.struct, strict)
        if st is None:
            raise _Unsupported(t.name)
        return st
    if kind in ("list", "wrapper", "map"):
        elem = t.elem
        assert elem is not None
        item = _value_type(elem, 0, strict)
        if t.elem_pointer or elem.kind in _NULLABLE_ELEMS:
            item = item | None
        container = dict[str, item] if kind == "map" else list[item]  # type: ignore[valid-type]
        return Annotated[container, msgspec.Meta(min_length=1)] if empty == 2 else container
    if kind == "time":
        return _GO_TIME
    if kind in ("microtime", "duration", "quantity", "intorstring", "bytes", "float64", "any", "raw",
                "fieldsv1"):
        return _custom(kind, False, empty)
    raise _Unsupported(kind)


def _field(i: int, f: Field, strict: bool) -> tuple[str, Any, Any]:
    """(attribute name, type, msgspec field) of the ``i``-th JSON field (JSON names need not be identifiers)."""
    t = f.type
    kind = t.kind
    if f.json_string:
        raise _Unsupported("json_string")
    if not f.omitempty:
        empty = 0
    elif f.pointer:
        empty = 1
    elif kind in _NEVER_EMPTY:
        empty = 0
    elif kind in _EMPTY_KINDS:
        empty = 2
    else:
        empty = 3
    zero = zero_json(f)
    null_aware = kind in _NULL_AWARE and not f.pointer
    if null_aware and kind == "time":
        typ: Any = _GO_TIME | None  # (the null a Time's UnmarshalJSON reads is the zero time, written as null)
    elif null_aware and kind in ("microtime", "raw") and empty == 0:
        typ = _custom(kind, False, 0) | None  # (their null is null again: read in C, not by a hook)
    elif null_aware:
        # A null reaches the custom type's UnmarshalJSON: its converter reads it (a Time's is null again).
        typ = _custom(kind, True, empty)
    else:
        typ = _value_type(t, empty, strict)
        if zero is None:
            typ = typ | None  # a null Go leaves as its zero value, which it writes as null
    if zero is OMIT:
        spec = msgspec.field(default=msgspec.UNSET, name=f.json)
    elif isinstance(zero, dict):
        sub = struct_type(t.struct, strict) if kind == "struct" else None
        if sub is None:
            raise _Unsupported(f.json)
        spec = msgspec.field(default_factory=sub, name=f.json)
    elif isinstance(zero, list):
        raise _Unsupported(f.json)
    else:
        spec = msgspec.field(default=zero, name=f.json)
    return f"f{i}", typ, spec


_TYPES: dict[tuple[int, bool], type | None] = {}  # (id(Struct), strict) -> its Struct type (None: not expressible)
_BUILDING: set[tuple[int, bool]] = set()


def struct_type(st: Struct, strict: bool = True) -> type | None:
    """The msgspec Struct type of ``st`` (built once), or None where one cannot express it exactly.
    ``strict``: unknown fields decline (a decode reports them); else they are dropped (as normalize does)."""
    key = (id(st), strict)
    if key in _TYPES:
        return _TYPES[key]
    if key in _BUILDING:
        return None  # a recursive type: left to the walk
    _BUILDING.add(key)
    try:
        fields = [_field(i, f, strict) for i, f in enumerate(st.json_fields.values())]
        # (gc=False: a Struct holds only what JSON holds, never a cycle, and lives for one conversion)
        built: type | None = msgspec.defstruct(f"{st.go}Struct", fields, forbid_unknown_fields=strict, gc=False)
    except _Unsupported:
        built = None
    finally:
        _BUILDING.discard(key)
    _TYPES[key] = built
    return built


def convert(body: dict[str, Any], st: Struct) -> dict[str, Any] | None:
    """``body`` decoded into ``st`` as :func:`gojson.decode` would return it with no strict errors, or None
    when the walk must read it (see the module docstring). ``body`` must be a plain dict from a JSON body
    with no repeated keys."""
    return _converted(body, st, True)


def normalized(obj: dict[str, Any], st: Struct) -> dict[str, Any] | None:
    """``obj`` as :func:`gojson.normalize` writes it (fields ``st`` lacks dropped), or None when the walk
    must (see the module docstring)."""
    return _converted(obj, st, False)


def _converted(value: dict[str, Any], st: Struct, strict: bool) -> dict[str, Any] | None:
    cls = struct_type(st, strict)
    if cls is None:
        return None
    try:
        typed: Any = msgspec.convert(value, cls, dec_hook=_dec_hook)
        result: dict[str, Any] = msgspec.to_builtins(typed, enc_hook=_enc_hook)
    except (msgspec.ValidationError, _Decline, TypeError, AttributeError):
        # (TypeError, AttributeError: raw JSON holding what JSON cannot, such as a number kept with its text)
        return None
    return result
