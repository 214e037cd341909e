"""Kubernetes protobuf (``application/vnd.kubernetes.protobuf``) for every kind of the schema, in pure Python.

The wire form is what k8s.io/api's generated (gogo, proto2) marshalers write, derived from the Go types in
:mod:`schema` (the field numbers come from the ``protobuf`` struct tags; the wire type, repetition and presence
from the Go type, as the generator derives them):

- ``int32``/``int64``/``bool`` are varints (a negative ``int32`` sign-extended to ten bytes), strings and
  ``[]byte`` length-delimited, structs nested messages. ``[]T`` is a repeated field, never packed (proto2);
  ``map[string]V`` is a repeated entry message ``{key = 1, value = 2}`` in key order.
- A non-pointer field is always written, zero or not (gogo's non-nullable fields); a nil pointer, slice or map
  and a nil ``[]byte`` are left out.
- The custom types: ``metav1.Time``/``MicroTime`` are ``{seconds = 1, nanos = 2}`` (empty for a zero time),
  ``Duration`` ``{duration = 1}`` in nanoseconds, ``Quantity`` ``{string = 1}``, ``IntOrString``
  ``{type = 1, intVal = 2, strVal = 3}``, ``RawExtension`` and ``FieldsV1`` ``{raw = 1}`` holding JSON, a named
  slice (``ExtraValue``) ``{items = 1}``. apiextensions' ``JSON`` is ``{raw = 1}``, its JSON-schema "or" types
  their generated messages (``JSONSchemaPropsOrBool`` ``{allows = 1, schema = 2}``, ``...OrArray`` ``{schema = 1,
  jSONSchemas = 2}``, ``...OrStringArray`` ``{schema = 1, property = 2}``) for the one JSON value they stand
  for; a ``float64`` is a ``double`` (fixed 64 bits), which Go's JSON writes without a ``.0`` when integral.
- A top-level object travels in an envelope: ``k8s\\0`` then a ``runtime.Unknown`` ``{typeMeta = 1 {apiVersion =
  1, kind = 2}, raw = 2, contentEncoding = 3, contentType = 4}``.

Objects on this side are the JSON-shaped dicts the rest of kube-sim holds. :func:`encode_message` takes one in
Go's JSON form (what :func:`gojson.normalize` writes); :func:`decode_message` returns what Go's JSON encoder
would write for the decoded struct, before ``omitempty`` and zero filling (run it through the usual
normalization). Every malformed input raises :class:`ProtobufError` with the message Go's unmarshalers give.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import functools
import math
import struct
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from controller_manager.sim.apiserver import gojson, schema

__all__ = ["MAGIC", "ProtobufError", "decode_message", "decode_object", "encode_list", "encode_message",
           "encode_object", "envelope", "meta_struct", "struct_for", "watch_frame"]

MAGIC = b"k8s\x00"
_MASK64 = (1 << 64) - 1
_EPOCH_ZERO = -62135596800  # Go's zero time, 0001-01-01T00:00:00Z, in Unix seconds

# Value codes of the per-field tables.
_STRING, _INT, _BOOL, _BYTES, _STRUCT, _TIME, _MICROTIME, _DURATION, _QUANTITY, _INTORSTR, _RAW, _FIELDSV1, \
    _WRAPPER, _INLINE, _ANY, _INT32, _DOUBLE, _SCHEMA_OR = range(18)
_SINGLE, _LIST, _MAP = range(3)
_CODES = {"string": _STRING, "int32": _INT, "int64": _INT, "uint32": _INT, "uint64": _INT, "bool": _BOOL,
          "bytes": _BYTES, "struct": _STRUCT, "time": _TIME, "microtime": _MICROTIME, "duration": _DURATION,
          "quantity": _QUANTITY, "intorstring": _INTORSTR, "raw": _RAW, "fieldsv1": _FIELDSV1,
          "wrapper": _WRAPPER, "any": _ANY, "float64": _DOUBLE, "schemaorbool": _SCHEMA_OR,
          "schemaorarray": _SCHEMA_OR, "schemaorstringarray": _SCHEMA_OR}
_VARINT_CODES = frozenset({_INT, _INT32, _BOOL})
# Messages whose JSON null is a zero value still written (as an empty message) in a list or map.
_NULLABLE_MESSAGES = frozenset({_TIME, _MICROTIME, _RAW, _SCHEMA_OR})
_ZERO_INTORSTR = b"\x08\x00\x10\x00\x1a\x00"
# The bytes after the tag of a non-pointer field holding its zero value (JSON null or absent).
_ZERO_FIELDS = {_STRING: b"\x00", _INT: b"\x00", _BOOL: b"\x00", _TIME: b"\x00",
                _MICROTIME: b"\x00", _RAW: b"\x00", _INTORSTR: b"\x06" + _ZERO_INTORSTR,
                _QUANTITY: b"\x03\x0a\x010", _DURATION: b"\x02\x08\x00"}

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# meta/v1 kinds every group version knows (the schema's kinds cover k8s.io/api only).
_META_KINDS = {"Status", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions",
               "ListOptions", "WatchEvent", "PartialObjectMetadata", "PartialObjectMetadataList", "APIGroup",
               "APIGroupList", "APIResourceList", "APIVersions"}


class ProtobufError(ValueError):
    """A body that is not valid protobuf for its type; the message is the one Go's unmarshaler gives."""


_EOF = "unexpected EOF"
_NEGATIVE_LENGTH = "proto: negative length found during unmarshaling"
_OVERFLOW = "proto: integer overflow"


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes([i]) for i in range(0x80)]


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


# --- per-struct tables -----------------------------------------------------------------------------------------


class _Table:
    """One struct's fields for the encoder (in tag order) and the decoder (by whole tag)."""

    __slots__ = ("enc", "encode", "fast", "fixed64", "go_names", "name", "nonpointer_tags")

    def __init__(self, name: str) -> None:
        self.name = name
        # (json name, tag bytes, value code, single/list/map, the bytes of a zero value or None when nothing
        # is written for it, sub: _Table | (value code, sub) | None)
        self.encode: list[tuple[str, bytes, int, int, bytes | None, Any]] = []
        self.nonpointer_tags: set[bytes] = set()  # non-pointer struct fields: written even when absent
        self.go_names: dict[int, str] = {}  # field number -> Go field name (for Go's wrong-wire-type error)
        # whole tag (number << 3 | wire type) -> (json name, what to do (_D_*), sub-table or (code, sub))
        self.fast: dict[int, tuple[str, int, Any]] = {}
        # whole tag -> (json name, repeated) of the double fields (wire type 1: read off the fast path)
        self.fixed64: dict[int, tuple[str, bool]] = {}
        self.enc: Callable[[dict[str, Any]], bytearray] = self._first_encode  # compiled on first use

    def _first_encode(self, obj: dict[str, Any]) -> bytearray:
        self.enc = _compile_encoder(self)
        return self.enc(obj)


@functools.cache
def _table(name: str) -> _Table:
    table = _Table(name)
    _TABLES_BUILDING[name] = table
    try:
        _fill(table, schema.struct(name))
    finally:
        del _TABLES_BUILDING[name]
    return table


_TABLES_BUILDING: dict[str, _Table] = {}


def _table_ref(name: str) -> _Table:
    # A struct that (indirectly) contains itself refers to the table being built.
    return _TABLES_BUILDING.get(name) or _table(name)


def _elem_sub(t: schema.Type) -> Any:
    if t.kind == "struct":
        return _table_ref(t.name)
    if t.kind == "wrapper":
        assert t.elem is not None
        return _value_spec(t.elem)
    if t.kind.startswith("schemaor"):
        return t.kind, _table_ref(t.name)  # the JSON value's kind, the message's table
    return None


def _value_spec(t: schema.Type) -> tuple[int, Any]:
    return _CODES[t.kind], _elem_sub(t)


def _fill(table: _Table, st: schema.Struct) -> None:
    fields = sorted((f for f in st.fields if f.proto), key=lambda f: f.proto)
    for f in fields:
        t = f.type
        if f.inline:
            code, shape, sub = _INLINE, _SINGLE, _table_ref(t.name)
        elif t.kind == "list":
            assert t.elem is not None
            (code, sub), shape = _value_spec(t.elem), _LIST
        elif t.kind == "map":
            assert t.elem is not None
            (code, sub), shape = _value_spec(t.elem), _MAP
        else:
            (code, sub), shape = _value_spec(t), _SINGLE
        wire = 0 if code in _VARINT_CODES and shape != _MAP else 2
        if code == _DOUBLE and shape != _MAP:
            wire = 1
        tag = _tag(f.proto, wire)
        # The decoder reads an int32 as Go does, keeping the varint's low 32 bits.
        decode_code = _INT32 if code == _INT and _scalar_kind(t) == "int32" else code
        zero = None
        if shape == _SINGLE and not f.pointer:
            zero_value = _ZERO_FIELDS.get(code)
            zero = tag + zero_value if zero_value is not None else None
            if code == _STRUCT:
                table.nonpointer_tags.add(tag)
        table.encode.append((f.json, tag, code, shape, zero, sub))
        table.go_names[f.proto] = f.go
        if wire == 1:
            table.fixed64[f.proto << 3 | wire] = (f.json, shape == _LIST)
            continue
        kind = _decode_kind(decode_code, shape)
        fast_sub = sub if kind in (_D_STRUCT, _D_LIST_STRUCT, _D_INLINE) else (
            decode_code if kind == _D_LIST_VARINT else (decode_code, sub))
        table.fast[f.proto << 3 | wire] = (f.json, kind, fast_sub)


def _scalar_kind(t: schema.Type) -> str:
    return t.elem.kind if t.kind in ("list", "map") and t.elem is not None else t.kind


def struct_for(api_version: str, kind: str) -> str | None:
    """The schema struct name of a top-level kind, meta/v1's shared kinds included; None if not protobuf."""
    found = _kind_structs().get(f"{api_version}/{kind}") or meta_struct(kind)
    if found is None and kind:
        # A group with no kinds of its own in the schema (admission.k8s.io): its package by naming convention.
        group, _, version = api_version.rpartition("/")
        candidate = f"io.k8s.api.{group.split('.')[0] or 'core'}.{version}.{kind}"
        if schema.struct_names(candidate) and _has_type_meta(candidate):
            found = candidate
    return found


def _has_type_meta(name: str) -> bool:
    return any(f.inline and f.type.name == _META + "TypeMeta" for f in schema.struct(name).fields)


@functools.cache
def _kind_structs() -> dict[str, str]:
    """``apiVersion/Kind`` -> struct: the schema's kinds, and the option kinds of the same packages that carry
    no metadata (``PodLogOptions``, ``AdmissionReview``), which protobuf bodies may name too."""
    kinds = schema.kinds()
    result = dict(kinds)
    packages = {key.rsplit("/", 1)[0]: name.rsplit(".", 1)[0] for key, name in kinds.items()}
    for api_version, package in packages.items():
        for name in schema.struct_names(package + "."):
            if name.count(".") == package.count(".") + 1 and _has_type_meta(name):
                result.setdefault(f"{api_version}/{name.rsplit('.', 1)[-1]}", name)
    return result


def meta_struct(kind: str) -> str | None:
    return _META + kind if kind in _META_KINDS else None


# --- encoding --------------------------------------------------------------------------------------------------


def _len_delimited(out: bytearray, tag: bytes, payload: bytes | bytearray) -> None:
    out += tag
    n = len(payload)
    out += _SMALL[n] if n < 0x80 else _varint(n)
    out += payload


@functools.lru_cache(maxsize=4096)
def _time_payload(text: str, micro: bool) -> bytes:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    seconds = calendar.timegm(moment.utctimetuple())
    nanos = moment.microsecond * 1000 if micro else 0
    if seconds == _EPOCH_ZERO and not nanos:
        return b""  # Go's zero time (what null decodes to) marshals to an empty message
    return b"\x08" + _varint(seconds & _MASK64) + b"\x10" + _varint(nanos)


def _encode_value(out: bytearray, tag: bytes, code: int, value: Any, sub: Any) -> None:
    """Append one field (tag and value) of a non-nil value."""
    if code == _STRING:
        data = value.encode()
        _len_delimited(out, tag, data)
    elif code == _STRUCT:
        _len_delimited(out, tag, _encode_struct(value, sub))
    elif code == _INT:
        out += tag
        out += _SMALL[value] if 0 <= value < 0x80 else _varint(value & _MASK64)
    elif code == _BOOL:
        out += tag
        out += b"\x01" if value else b"\x00"
    elif code in (_TIME, _MICROTIME):
        _len_delimited(out, tag, _time_payload(value, code == _MICROTIME) if value else b"")
    elif code == _QUANTITY:
        text = str(value).encode()
        _len_delimited(out, tag, b"\x0a" + _varint(len(text)) + text)
    elif code == _INTORSTR:
        if isinstance(value, str):
            text = value.encode()
            payload = b"\x08\x01\x10\x00\x1a" + _varint(len(text)) + text
        else:
            payload = b"\x08\x00\x10" + _varint(value & _MASK64) + b"\x1a\x00"
        _len_delimited(out, tag, payload)
    elif code == _BYTES:
        _len_delimited(out, tag, base64.b64decode(value))
    elif code == _DURATION:
        _len_delimited(out, tag, b"\x08" + _varint(gojson.parse_duration(value) & _MASK64))
    elif code in (_RAW, _FIELDSV1):
        _len_delimited(out, tag, b"" if value is None else b"\x0a" + _length_prefixed(orjson.dumps(value)))
    elif code == _DOUBLE:
        out += tag
        out += struct.pack("<d", value)
    elif code == _SCHEMA_OR:
        kind, table = sub
        _len_delimited(out, tag, _encode_struct(_schema_or_message(kind, value), table))
    elif code == _WRAPPER:
        item_code, item_sub = sub
        inner = bytearray()
        for item in value:
            _encode_value(inner, b"\x0a", item_code, item, item_sub)
        _len_delimited(out, tag, inner)
    else:
        raise ProtobufError(f"a value of {value!r} has no protobuf form")


def _schema_or_message(kind: str, value: Any) -> dict[str, Any]:
    """The generated message's fields of an apiextensions "or" value in its JSON form."""
    if isinstance(value, dict):
        return {"Allows": True, "Schema": value} if kind == "schemaorbool" else {"Schema": value}
    if kind == "schemaorbool":
        return {"Allows": bool(value)}
    if isinstance(value, list) and value:
        return {"JSONSchemas": value} if kind == "schemaorarray" else {"Property": value}
    return {}


def _schema_or_value(kind: str, message: dict[str, Any]) -> Any:
    """An apiextensions "or" value in its JSON form, from its message's fields (as its MarshalJSON writes it)."""
    schema_ = message.get("Schema")
    if kind == "schemaorbool":
        return schema_ if schema_ is not None else bool(message.get("Allows"))
    listed = message.get("JSONSchemas" if kind == "schemaorarray" else "Property")
    if listed:
        return listed
    return schema_


def _double_json(value: float) -> float | int:
    """A double as Go's JSON writes it: an integral value without a fraction (but a negative zero stays the float
    it is, not the integer 0, so that it keeps its sign bit when encoded again)."""
    if value == 0 and math.copysign(1.0, value) < 0:
        return value
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


def _length_prefixed(data: bytes) -> bytes:
    return _varint(len(data)) + data


def _encode_struct(obj: dict[str, Any], table: _Table) -> bytearray:
    return table.enc(obj)


def _compile_encoder(table: _Table) -> Callable[[dict[str, Any]], bytearray]:
    """Python source for one struct's encoder, straight-line, one block per field (the hot path: a pod is
    ~200 fields in ~20 structs, and a generic per-field loop costs twice as much as this)."""
    env: dict[str, Any] = {"small": _SMALL, "varint": _varint, "MASK": _MASK64, "encode_value": _encode_value,
                           "encode_list": _encode_list, "encode_map": _encode_map, "zero_struct": _zero_struct_field,
                           "EMPTY": _EMPTY}
    lines = ["def encode(obj):", "    out = bytearray()", "    get = obj.get"]
    put = ["        n = len(d)", "        out += T{i}", "        out += small[n] if n < 128 else varint(n)",
           "        out += d"]
    for i, (name, tag, code, shape, zero, sub) in enumerate(table.encode):
        env[f"T{i}"], env[f"Z{i}"], env[f"S{i}"], env[f"C{i}"] = tag, zero, sub, code
        put_i = [line.format(i=i) for line in put]
        block: list[str]
        if code == _INLINE:
            lines += [f"    d = S{i}.enc(obj)", *(line[4:] for line in put_i)]
            continue
        lines.append(f"    v = get({name!r})")
        absent: list[str] = []
        if shape == _SINGLE:
            if zero is not None:
                absent = [f"        out += Z{i}"]
            elif code == _STRUCT and tag in table.nonpointer_tags:
                absent = [f"        out += zero_struct(T{i}, S{i})"]
            if code == _STRING:
                block = ["        d = v.encode()", *put_i]
            elif code == _STRUCT:
                block = [f"        d = S{i}.enc(v)", *put_i]
            elif code == _INT:
                block = [f"        out += T{i}", "        out += small[v] if 0 <= v < 128 else varint(v & MASK)"]
            elif code == _BOOL:
                env[f"T{i}t"], env[f"T{i}f"] = tag + b"\x01", tag + b"\x00"
                block = [f"        out += T{i}t if v else T{i}f"]
            else:
                block = [f"        encode_value(out, T{i}, C{i}, v, S{i})"]
        elif shape == _LIST:
            each = ["    " + line for line in put_i]  # the loop body: one level deeper
            if code == _STRING:
                block = ["        for s in v:", "            d = s.encode()", *each]
            elif code == _STRUCT:
                block = ["        for s in v:", f"            d = S{i}.enc(s if s is not None else EMPTY)", *each]
            else:
                block = [f"        if v: encode_list(out, T{i}, C{i}, v, S{i})"]
        else:
            block = [f"        if v: encode_map(out, T{i}, C{i}, v, S{i})"]
        lines += ["    if v is None:", *(absent or ["        pass"]), "    else:", *block]
    lines.append("    return out")
    source = "\n".join(lines)
    exec(compile(source, f"<protobuf encoder {table.name}>", "exec"), env)  # source built above from the schema
    encode: Callable[[dict[str, Any]], bytearray] = env["encode"]
    return encode


def _encode_list(out: bytearray, tag: bytes, code: int, value: list[Any], sub: Any) -> None:
    for item in value:
        if item is None:
            item = _zero_item(code)
        if item is not None or code in _NULLABLE_MESSAGES:
            _encode_value(out, tag, code, item, sub)


def _encode_map(out: bytearray, tag: bytes, code: int, value: dict[str, Any], sub: Any) -> None:
    value_tag = b"\x10" if code in _VARINT_CODES else b"\x12"
    for key in sorted(value):
        key_data = key.encode()
        entry = bytearray(b"\x0a")
        entry += _varint(len(key_data))
        entry += key_data
        item = value[key]
        if code == _STRING and item is not None:
            data = item.encode()
            entry += b"\x12"
            entry += _varint(len(data))
            entry += data
        else:
            if item is None:
                item = _zero_item(code)
            if item is not None or code in _NULLABLE_MESSAGES:
                _encode_value(entry, value_tag, code, item, sub)
        n = len(entry)
        out += tag
        out += _SMALL[n] if n < 0x80 else _varint(n)
        out += entry


_EMPTY: dict[str, Any] = {}


@functools.cache
def _zero_struct_field(tag: bytes, sub: _Table) -> bytes:
    """A non-pointer struct field holding its zero value: the struct's zero fields are all written."""
    data = _encode_struct(_EMPTY, sub)
    return tag + _varint(len(data)) + bytes(data)


def _zero_item(code: int) -> Any:
    """A null list element or map value decodes to its type's zero value."""
    return {_STRING: "", _INT: 0, _BOOL: False, _STRUCT: {}, _QUANTITY: "0", _INTORSTR: 0,
            _DURATION: "0s", _WRAPPER: []}.get(code)


def encode_message(obj: dict[str, Any], struct_name: str) -> bytes:
    """The protobuf message of ``obj`` (Go's JSON form of struct ``struct_name``), without an envelope."""
    return bytes(_encode_struct(obj, _table(struct_name)))


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    av, k = api_version.encode(), kind.encode()
    type_meta = b"\x0a" + _length_prefixed(av) + b"\x12" + _length_prefixed(k)
    return MAGIC + b"\x0a" + _length_prefixed(type_meta) + b"\x12" + _length_prefixed(raw) + b"\x1a\x00\x22\x00"


def envelope(api_version: str, kind: str, message: bytes) -> bytes:
    """A bare message of ``apiVersion``/``kind`` in its envelope (``k8s\\0`` + ``runtime.Unknown``)."""
    return _envelope(api_version, kind, message)


def encode_list(api_version: str, kind: str, list_struct: str, meta: dict[str, Any], items: list[bytes]) -> bytes:
    """An enveloped ``XxxList`` from its ListMeta and its items' messages, already encoded: every list kind has
    ``items`` as its last field, so the items follow the rest of the message as repeated fields."""
    table = _table(list_struct)
    name, tag = table.encode[-1][:2]
    if name != "items":
        raise ProtobufError(f"{list_struct} is not a list")
    out = _encode_struct({"metadata": meta}, table)
    for item in items:
        _len_delimited(out, tag, item)
    return _envelope(api_version, kind, bytes(out))


def encode_object(obj: dict[str, Any], struct_name: str | None = None) -> bytes:
    """``obj`` in its envelope, as the server writes a response body. ``struct_name`` defaults to the struct of
    the object's own ``apiVersion``/``kind``; raises :class:`ProtobufError` when it has no protobuf form."""
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    name = struct_name or struct_for(api_version, kind)
    if name is None:
        raise ProtobufError(f"{api_version}, Kind={kind} has no protobuf form")
    return _envelope(api_version, kind, encode_message(obj, name))


def watch_frame(event_type: str, obj_envelope: bytes) -> bytes:
    """One frame of a protobuf watch stream: a big-endian 32-bit length, then a bare ``metav1.WatchEvent``
    ``{type = 1, object = 2 {raw = 1}}`` whose raw is the object's envelope."""
    type_bytes = event_type.encode()
    raw_ext = b"\x0a" + _length_prefixed(obj_envelope)
    event = b"\x0a" + _length_prefixed(type_bytes) + b"\x12" + _length_prefixed(raw_ext)
    return len(event).to_bytes(4, "big") + event


# --- decoding --------------------------------------------------------------------------------------------------


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if shift >= 64:
            raise ProtobufError(_OVERFLOW)
        if pos >= end:
            raise ProtobufError(_EOF)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _MASK64, pos
        shift += 7


def _read_length(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    b = buf[pos] if pos < end else -1
    if 0 <= b < 0x80:
        n, pos = b, pos + 1
    else:
        n, pos = _read_varint(buf, pos, end)
        if n >= 1 << 63:
            raise ProtobufError(_NEGATIVE_LENGTH)
    if pos + n > end:
        raise ProtobufError(_EOF)
    return n, pos


def _skip(buf: bytes, pos: int, end: int, wire: int, message: str, number: int) -> int:
    if wire == 0:
        return _read_varint(buf, pos, end)[1]
    if wire == 1:
        if pos + 8 > end:
            raise ProtobufError(_EOF)
        return pos + 8
    if wire == 2:
        n, pos = _read_length(buf, pos, end)
        return pos + n
    if wire == 5:
        if pos + 4 > end:
            raise ProtobufError(_EOF)
        return pos + 4
    if wire == 4:
        raise ProtobufError(f"proto: {message}: wiretype end group for non-group")
    if wire == 3:
        raise ProtobufError("proto: unexpected end of group")
    raise ProtobufError(f"proto: illegal wireType {wire}")


def _signed(n: int, code: int) -> int:
    if code == _INT32:
        return _int32(n)
    return n - (1 << 64) if n >= 1 << 63 else n


# What the decoder does with a field, by its full tag (number and wire type), most frequent first.
_D_STRING, _D_STRUCT, _D_INT64, _D_INT32, _D_BOOL, _D_LIST_STRING, _D_LIST_STRUCT, _D_MAP, _D_INLINE, _D_OTHER, \
    _D_LIST_OTHER, _D_LIST_VARINT = range(12)


def _decode_kind(code: int, shape: int) -> int:
    if shape == _MAP:
        return _D_MAP
    if code == _INLINE:
        return _D_INLINE
    varint = {_INT: _D_INT64, _INT32: _D_INT32, _BOOL: _D_BOOL}.get(code)
    if shape == _LIST:
        if varint is not None:
            return _D_LIST_VARINT
        return {_STRING: _D_LIST_STRING, _STRUCT: _D_LIST_STRUCT}.get(code, _D_LIST_OTHER)
    if varint is not None:
        return varint
    return {_STRING: _D_STRING, _STRUCT: _D_STRUCT}.get(code, _D_OTHER)


def _decode_struct(buf: bytes, pos: int, end: int, table: _Table, out: dict[str, Any]) -> dict[str, Any]:
    # The hot path: one- and two-byte tags and lengths, strings, ints and nested structs are read inline, and a
    # field is found by its whole tag, so a wire type other than the expected one is simply not found.
    # Reading past the end raises IndexError, which decode_message reports as Go does ("unexpected EOF").
    fields = table.fast
    while pos < end:
        key = buf[pos]
        pos += 1
        if key >= 0x80:
            b = buf[pos]
            if b < 0x80:
                key = (key & 0x7F) | b << 7
                pos += 1
            else:
                key, pos = _read_varint(buf, pos - 1, end)
        spec = fields.get(key)
        if spec is None:
            pos = _unexpected_field(buf, pos, end, table, key, out)
            continue
        name, kind, sub = spec
        n = buf[pos]
        pos += 1
        if n >= 0x80:
            b = buf[pos]
            if b < 0x80:
                n = (n & 0x7F) | b << 7
                pos += 1
            else:
                n, pos = _read_varint(buf, pos - 1, end)
                if n >= 1 << 63 and key & 7 == 2:
                    raise ProtobufError(_NEGATIVE_LENGTH)
        if kind == _D_STRING:
            stop = pos + n
            if stop > end:
                raise ProtobufError(_EOF)
            try:
                out[name] = buf[pos:stop].decode()
            except UnicodeDecodeError:
                out[name] = _text(buf, pos, stop)
            pos = stop
        elif kind == _D_STRUCT:
            stop = pos + n
            if stop > end:
                raise ProtobufError(_EOF)
            out[name] = _decode_struct(buf, pos, stop, sub, {})
            pos = stop
        elif kind == _D_INT64:
            out[name] = n - (1 << 64) if n >= 1 << 63 else n
        elif kind == _D_INT32:
            out[name] = _int32(n) if n > 0x7FFFFFFF else n
        elif kind == _D_BOOL:
            out[name] = n != 0
        elif kind <= _D_LIST_STRUCT:
            stop = pos + n
            if stop > end:
                raise ProtobufError(_EOF)
            if kind == _D_LIST_STRING:
                try:
                    value: Any = buf[pos:stop].decode()
                except UnicodeDecodeError:
                    value = _text(buf, pos, stop)
            else:
                value = _decode_struct(buf, pos, stop, sub, {})
            pos = stop
            items = out.get(name)
            if items is None:
                out[name] = [value]
            else:
                items.append(value)
        elif kind == _D_LIST_VARINT:
            value = n != 0 if sub == _BOOL else _signed(n, sub)
            items = out.get(name)
            if items is None:
                out[name] = [value]
            else:
                items.append(value)
        else:
            stop = pos + n
            if stop > end:
                raise ProtobufError(_EOF)
            if kind == _D_MAP:
                key_text, value = _decode_entry(buf, pos, stop, *sub)
                mapping = out.get(name)
                if mapping is None:
                    out[name] = {key_text: value}
                else:
                    mapping[key_text] = value
            elif kind == _D_INLINE:
                _decode_struct(buf, pos, stop, sub, out)
            else:
                value = _decode_payload(buf, pos, stop, *sub)
                if kind == _D_OTHER:
                    out[name] = value
                else:
                    items = out.get(name)
                    if items is None:
                        out[name] = [value]
                    else:
                        items.append(value)
            pos = stop
    if pos > end:
        raise ProtobufError(_EOF)
    return out


def _unexpected_field(buf: bytes, pos: int, end: int, table: _Table, key: int, out: dict[str, Any]) -> int:
    """A field the fast table does not have: a double (read into ``out``), an error for a known field of the
    wrong wire type (or a malformed tag), else skipped as Go skips unknown fields. Returns where the next
    field starts."""
    double = table.fixed64.get(key)
    if double is not None:
        if pos + 8 > end:
            raise ProtobufError(_EOF)
        value = _double_json(struct.unpack_from("<d", buf, pos)[0])
        name, repeated = double
        if repeated:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
        return pos + 8
    number, wire = key >> 3, key & 7
    if number <= 0:
        raise ProtobufError(f"proto: {_go_name(table)}: illegal tag {number} (wire type {wire})")
    if wire == 4:
        raise ProtobufError(f"proto: {_go_name(table)}: wiretype end group for non-group")
    if number in table.go_names:
        raise ProtobufError(f"proto: wrong wireType = {wire} for field {table.go_names[number]}")
    return _skip(buf, pos, end, wire, _go_name(table), number)


def _go_name(table: _Table) -> str:
    return table.name.rsplit(".", 1)[-1]


def _decode_entry(buf: bytes, pos: int, end: int, code: int, sub: Any) -> tuple[str, Any]:
    if code == _STRING and end - pos >= 4 and buf[pos] == 0x0A and buf[pos + 1] < 0x80:
        # The common entry (labels, annotations, data): key and value strings with one-byte lengths.
        key_end = pos + 2 + buf[pos + 1]
        if key_end + 2 <= end and buf[key_end] == 0x12 and buf[key_end + 1] < 0x80 \
                and key_end + 2 + buf[key_end + 1] == end:
            try:
                return buf[pos + 2:key_end].decode(), buf[key_end + 2:end].decode()
            except UnicodeDecodeError:
                pass  # the general path below replaces what is not UTF-8
    key = ""
    value: Any = None
    value_wire = 0 if code in _VARINT_CODES else 2
    while pos < end:
        tag, pos = _read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 1 and wire == 2:
            n, pos = _read_length(buf, pos, end)
            key = _text(buf, pos, pos + n)
            pos += n
        elif number == 2 and wire == value_wire:
            if wire == 0:
                n, pos = _read_varint(buf, pos, end)
                value = n != 0 if code == _BOOL else _signed(n, code)
            else:
                n, pos = _read_length(buf, pos, end)
                value = _decode_payload(buf, pos, pos + n, code, sub)
                pos += n
        elif number in (1, 2):
            raise ProtobufError(f"proto: wrong wireType = {wire} for field {'key' if number == 1 else 'value'}")
        else:
            pos = _skip(buf, pos, end, wire, "entry", number)
    if value is None:
        value = _zero_decoded(code)
    return key, value


def _zero_decoded(code: int) -> Any:
    """What an entry without a value holds: the type's zero value, as Go's JSON writes it."""
    return {_STRING: "", _INT: 0, _INT32: 0, _BOOL: False, _STRUCT: {}, _QUANTITY: "0", _INTORSTR: 0, _DURATION: "0s",
            _BYTES: "", _TIME: None, _MICROTIME: None, _RAW: None, _FIELDSV1: None}.get(code)


def _text(buf: bytes, pos: int, end: int) -> str:
    try:
        return buf[pos:end].decode()
    except UnicodeDecodeError:
        # Go keeps the bytes; its JSON encoder then writes U+FFFD for each invalid byte.
        return buf[pos:end].decode(errors="replace")


def _decode_payload(buf: bytes, pos: int, end: int, code: int, sub: Any) -> Any:
    if code == _STRING:
        return _text(buf, pos, end)
    if code == _STRUCT:
        return _decode_struct(buf, pos, end, sub, {})
    if code in (_TIME, _MICROTIME):
        return _decode_time(buf, pos, end, code == _MICROTIME)
    if code == _QUANTITY:
        fields = _scalar_fields(buf, pos, end, "Quantity")
        return _bytes_text(fields.get(1, b"")) or "0"
    if code == _INTORSTR:
        fields = _scalar_fields(buf, pos, end, "IntOrString")
        if fields.get(1, 0) == 1:
            return _bytes_text(fields.get(3, b""))
        return _int32(_signed(fields.get(2, 0), _INT))
    if code == _BYTES:
        return base64.b64encode(buf[pos:end]).decode()
    if code == _DURATION:
        fields = _scalar_fields(buf, pos, end, "Duration")
        return gojson.format_duration(_signed(fields.get(1, 0), _INT))
    if code in (_RAW, _FIELDSV1):
        fields = _scalar_fields(buf, pos, end, "RawExtension" if code == _RAW else "FieldsV1")
        raw = fields.get(1)
        if raw is None:
            return None
        try:
            return orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError as e:
            raise ProtobufError(f"json: error calling MarshalJSON: {e}") from None
    if code == _SCHEMA_OR:
        kind, table = sub
        return _schema_or_value(kind, _decode_struct(buf, pos, end, table, {}))
    if code == _WRAPPER:
        item_code, item_sub = sub
        items: list[Any] = []
        while pos < end:
            tag, pos = _read_varint(buf, pos, end)
            if tag >> 3 == 1 and tag & 7 == 2:
                n, pos = _read_length(buf, pos, end)
                items.append(_decode_payload(buf, pos, pos + n, item_code, item_sub))
                pos += n
            else:
                pos = _skip(buf, pos, end, tag & 7, "Items", tag >> 3)
        return items
    raise ProtobufError("proto: a field of this type has no protobuf form")


def _int32(n: int) -> int:
    # Go truncates a varint into an int32 field.
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def _bytes_text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else ""


# The small well-known messages: each field's number -> (its wire type, its Go name).
_SMALL_MESSAGES: dict[str, dict[int, tuple[int, str]]] = {
    "Timestamp": {1: (0, "Seconds"), 2: (0, "Nanos")},
    "Quantity": {1: (2, "String_")},
    "IntOrString": {1: (0, "Type"), 2: (0, "IntVal"), 3: (2, "StrVal")},
    "Duration": {1: (0, "Duration")},
    "RawExtension": {1: (2, "Raw")},
    "FieldsV1": {1: (2, "Raw")},
}


def _scalar_fields(buf: bytes, pos: int, end: int, message: str) -> dict[int, Any]:
    """A small message of varints and byte strings, by field number (last one wins, as in Go). A known field
    sent with another wire type is the error Go's generated unmarshaler gives."""
    fields: dict[int, Any] = {}
    known = _SMALL_MESSAGES[message]
    while pos < end:
        tag, pos = _read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number <= 0:
            raise ProtobufError(f"proto: {message}: illegal tag {number} (wire type {wire})")
        expected = known.get(number)
        if expected is not None and expected[0] != wire:
            raise ProtobufError(f"proto: wrong wireType = {wire} for field {expected[1]}")
        if wire == 0:
            fields[number], pos = _read_varint(buf, pos, end)
        elif wire == 2:
            n, pos = _read_length(buf, pos, end)
            fields[number] = buf[pos:pos + n]
            pos += n
        else:
            pos = _skip(buf, pos, end, wire, message, number)
    return fields


def _decode_time(buf: bytes, pos: int, end: int, micro: bool) -> str | None:
    if pos == end:
        return None
    return _time_text(buf[pos:end], micro)


@functools.lru_cache(maxsize=4096)
def _time_text(payload: bytes, micro: bool) -> str | None:
    # Objects repeat a handful of timestamps (creation, conditions, starts): each payload is read once.
    fields = _scalar_fields(payload, 0, len(payload), "Timestamp")
    seconds = _signed(fields.get(1, 0), _INT)
    nanos = _int32(fields.get(2, 0))
    return _format_time(seconds, nanos // 1000 if micro else -1)




@functools.lru_cache(maxsize=4096)
def _format_time(seconds: int, micros: int) -> str | None:
    if seconds == _EPOCH_ZERO and micros <= 0:
        return None  # the zero time: Go's JSON writes null
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"proto: Timestamp: seconds {seconds} out of range") from None
    if micros < 0:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros:06d}Z"


def decode_message(data: bytes, struct_name: str) -> dict[str, Any]:
    """A bare protobuf message of struct ``struct_name`` as a JSON-shaped dict (see the module docstring)."""
    try:
        return _decode_struct(data, 0, len(data), _table(struct_name), {})
    except IndexError:
        raise ProtobufError(_EOF) from None


def decode_envelope(data: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw message) of an enveloped body. Raises :class:`ProtobufError` with the messages of
    upstream's protobuf serializer."""
    if not data:
        raise ProtobufError("empty data")
    if data[:4] != MAGIC:
        raise ProtobufError("provided data does not appear to be a protobuf message, expected prefix "
                            "[107 56 115 0]")
    if len(data) == 4:
        raise ProtobufError("empty body")
    fields: dict[int, Any] = {}
    type_meta: dict[int, Any] = {}
    try:
        fields = _unknown_fields(data, 4, len(data), "Unknown", {1: "TypeMeta", 2: "Raw", 3: "ContentEncoding",
                                                                 4: "ContentType"})
        if 1 in fields:
            tm = fields[1]
            type_meta = _unknown_fields(tm, 0, len(tm), "TypeMeta", {1: "APIVersion", 2: "Kind"})
    except IndexError:
        raise ProtobufError(_EOF) from None
    return _bytes_text(type_meta.get(1, b"")), _bytes_text(type_meta.get(2, b"")), bytes(fields.get(2, b""))


def _unknown_fields(buf: bytes, pos: int, end: int, message: str, names: dict[int, str]) -> dict[int, bytes]:
    fields: dict[int, bytes] = {}
    while pos < end:
        tag, pos = _read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if wire == 4:
            raise ProtobufError(f"proto: {message}: wiretype end group for non-group")
        if number <= 0:
            raise ProtobufError(f"proto: {message}: illegal tag {number} (wire type {wire})")
        if number in names:
            if wire != 2:
                raise ProtobufError(f"proto: wrong wireType = {wire} for field {names[number]}")
            n, pos = _read_length(buf, pos, end)
            fields[number] = buf[pos:pos + n]
            pos += n
        else:
            pos = _skip(buf, pos, end, wire, message, number)
    return fields


def decode_object(data: bytes, default_api_version: str = "", default_kind: str = "") -> dict[str, Any]:
    """An enveloped object as a JSON-shaped dict with its ``apiVersion`` and ``kind``; an envelope without them
    takes the defaults (the resource the request is for), as upstream's decoder does."""
    api_version, kind, raw = decode_envelope(data)
    api_version = api_version or default_api_version
    kind = kind or default_kind
    name = struct_for(api_version, kind)
    if name is None:
        raise UnknownKindError(api_version, kind)
    obj = decode_message(raw, name)
    return {"kind": kind, "apiVersion": api_version, **obj}


class UnknownKindError(ProtobufError):
    """An envelope naming a kind the server has no protobuf type for."""

    def __init__(self, api_version: str, kind: str) -> None:
        version = api_version.rsplit("/", 1)[-1]
        super().__init__(f'no kind "{kind}" is registered for version "{api_version}" in scheme '
                         f'"pkg/api/legacyscheme/scheme.go:30"')
        self.api_version = api_version
        self.version = version
        self.kind = kind


def summarize(data: bytes, limit: int = 30) -> str:
    """How upstream quotes a body it could not read: JSON-looking text as is, anything else in hex."""
    if not data:
        return "<empty>"
    if data[:1] == b"{":
        return data[:limit].decode(errors="replace") + (" ..." if len(data) > limit else "")
    return binascii.hexlify(data[:limit]).decode() + (" ..." if len(data) > limit else "")
