"""Hypothesis strategies for any struct of kube-sim's schema: objects of valid Go types in JSON form.

:func:`objects` draws a dict for a struct: each field present or not, of the field's Go type (int32 in range,
bytes as base64, times at the type's precision, canonical quantities and durations, IntOrString as int or
string, RawExtension and FieldsV1 as small JSON objects). Nesting stops at ``depth`` (deeper structs are
empty). Lists and maps are never empty and hold no nulls: Go's protobuf form cannot tell an empty slice from a
nil one, so a round trip would (rightly) turn ``[]`` into ``null``.
"""

from __future__ import annotations

import base64
import functools
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from controller_manager.sim.apiserver import gojson, schema

_TEXT = st.text(max_size=8)
_KEYS = st.text(min_size=1, max_size=6)
_TIMES = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1))
_QUANTITIES = st.sampled_from(["0", "1", "100m", "250m", "1Gi", "128Mi", "2k", "1500", "3.5"])
_JSON_OBJECTS = st.dictionaries(_KEYS, st.one_of(st.integers(-1000, 1000), _TEXT, st.booleans()), max_size=3)


def _time(micro: bool) -> st.SearchStrategy[str]:
    def text(moment: datetime) -> str:
        moment = moment.replace(tzinfo=UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if micro else moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    return _TIMES.map(text)


_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "string": _TEXT,
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "bool": st.booleans(),
    "bytes": st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode()),
    "time": _time(micro=False),
    "microtime": _time(micro=True),
    "duration": st.integers(-(10**12), 10**12).map(gojson.format_duration),
    "quantity": _QUANTITIES,
    "intorstring": st.one_of(st.integers(-(2**31), 2**31 - 1), st.text(min_size=1, max_size=6)),
    "raw": _JSON_OBJECTS,
    "fieldsv1": _JSON_OBJECTS,
    "float64": st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False)),
}
_SCHEMA_PROPS = schema.APIEXTENSIONS + "JSONSchemaProps"


def _value(t: schema.Type, depth: int) -> st.SearchStrategy[Any]:
    if t.kind == "struct":
        return objects(t.name, depth - 1)
    if t.kind in ("list", "wrapper"):
        assert t.elem is not None
        return st.lists(_value(t.elem, depth), min_size=1, max_size=2)
    if t.kind == "map":
        assert t.elem is not None
        return st.dictionaries(_KEYS, _value(t.elem, depth), min_size=1, max_size=2)
    # apiextensions' JSON-schema "or" types: a schema, or a bool / a list of schemas / a list of strings.
    if t.kind == "schemaorbool":
        return st.one_of(st.booleans(), objects(_SCHEMA_PROPS, depth - 1))
    if t.kind == "schemaorarray":
        return st.one_of(objects(_SCHEMA_PROPS, depth - 1),
                         st.lists(objects(_SCHEMA_PROPS, depth - 1), min_size=1, max_size=2))
    if t.kind == "schemaorstringarray":
        return st.one_of(objects(_SCHEMA_PROPS, depth - 1), st.lists(_TEXT, min_size=1, max_size=2))
    return _SCALARS[t.kind]


def _deferred(t: schema.Type, depth: int) -> st.SearchStrategy[Any]:
    # Deferred: a struct's strategy is built when first drawn from, so recursive types terminate.
    return st.deferred(lambda: _value(t, depth))


@functools.cache
def objects(struct_name: str, depth: int = 3) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts of struct ``struct_name`` (its protobuf fields, inline embeddings' promoted), ``depth`` structs deep."""
    if depth <= 0:
        return st.just({})
    st_ = schema.struct(struct_name)
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for json_name, f in st_.json_fields.items():
        path = st_.inline_path.get(json_name, ())
        if not f.proto or any(not outer.proto for outer in path):
            continue  # not on the protobuf wire (TypeMeta: the envelope carries it)
        optional[json_name] = _deferred(f.type, depth)
    return st.fixed_dictionaries({}, optional=optional)


def struct_with_two_objects(names: list[str], depth: int = 4) -> st.SearchStrategy[tuple[str, dict[str, Any],
                                                                                   dict[str, Any]]]:
    """A struct name from ``names`` and two independent objects of it (a body and a stored version)."""
    return st.sampled_from(names).flatmap(
        lambda name: st.tuples(st.just(name), objects(name, depth), objects(name, depth)))
