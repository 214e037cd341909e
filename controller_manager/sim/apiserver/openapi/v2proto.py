"""The swagger 2.0 document in gnostic's protobuf form (openapi.v2.Document), which kubectl's OpenAPI v2
client asks for (``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``) and no other.

Field numbers are those of gnostic-models' ``openapiv2/OpenAPIv2.proto``. Values gnostic keeps as YAML text
(vendor extensions, ``default``, ``enum``) are written as JSON, which YAML readers take as it is. Scalar
fields holding their zero value are left out, as proto3 does.
"""

from __future__ import annotations

from typing import Any

import orjson

Obj = dict[str, Any]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _str(field: int, value: str) -> bytes:
    return _bytes(field, value.encode()) if value else b""


def _bool(field: int, value: bool) -> bytes:
    return _varint(field << 3) + b"\x01" if value else b""


def _strings(field: int, values: list[str]) -> bytes:
    return b"".join(_bytes(field, v.encode()) for v in values)


def _any(value: Any) -> bytes:
    """openapi.v2.Any: the value as YAML text (field 2)."""
    return _str(2, orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode())


def _extensions(field: int, obj: Obj) -> bytes:
    """NamedAny entries for the ``x-`` keys, sorted by name."""
    return b"".join(_bytes(field, _str(1, key) + _bytes(2, _any(obj[key])))
                    for key in sorted(obj) if key.startswith("x-"))


def schema(s: Obj) -> bytes:
    """openapi.v2.Schema."""
    out = _str(1, s.get("$ref", "")) + _str(2, s.get("format", "")) + _str(4, s.get("description", ""))
    if "default" in s:
        out += _bytes(5, _any(s["default"]))
    out += _bool(16, bool(s.get("uniqueItems")))
    out += _strings(19, s.get("required", []))
    out += b"".join(_bytes(20, _any(v)) for v in s.get("enum", []))
    if isinstance(s.get("additionalProperties"), dict):
        out += _bytes(21, _bytes(1, schema(s["additionalProperties"])))
    if "type" in s:
        out += _bytes(22, _strings(1, [s["type"]]))
    if "items" in s:
        out += _bytes(23, _bytes(1, schema(s["items"])))
    out += b"".join(_bytes(24, schema(sub)) for sub in s.get("allOf", []))
    if "properties" in s:
        props = b"".join(_bytes(1, _str(1, name) + _bytes(2, schema(p))) for name, p in sorted(s["properties"].items()))
        out += _bytes(25, props)
    return out + _extensions(31, s)


def _parameter(p: Obj) -> bytes:
    """openapi.v2.ParametersItem holding a Parameter (body, query or path)."""
    if p["in"] == "body":
        body = _str(2, p["name"]) + _str(3, "body") + _bool(4, bool(p.get("required"))) + _bytes(5, schema(p["schema"]))
        param = _bytes(1, body)
    else:
        required = _bool(1, bool(p.get("required")))
        if p["in"] == "path":  # PathParameterSubSchema
            sub = (required + _str(2, "path") + _str(3, p.get("description", "")) + _str(4, p["name"])
                   + _str(5, p.get("type", "")) + _bool(19, True))
            param = _bytes(2, _bytes(4, sub))
        else:  # QueryParameterSubSchema
            sub = (required + _str(2, "query") + _str(3, p.get("description", "")) + _str(4, p["name"])
                   + _str(6, p.get("type", "")) + _bool(20, True))
            param = _bytes(2, _bytes(3, sub))
    return _bytes(1, param)


def _operation(op: Obj) -> bytes:
    out = _strings(1, op.get("tags", [])) + _str(3, op.get("description", "")) + _str(5, op.get("operationId", ""))
    out += _strings(6, op.get("produces", [])) + _strings(7, op.get("consumes", []))
    out += b"".join(_bytes(8, _parameter(p)) for p in op.get("parameters", []))
    codes = b""
    for code, resp in op.get("responses", {}).items():
        response = _str(1, resp.get("description", ""))
        if "schema" in resp:
            response += _bytes(2, _bytes(1, schema(resp["schema"])))
        codes += _bytes(1, _str(1, code) + _bytes(2, _bytes(1, response)))
    out += _bytes(9, codes)
    out += _strings(10, op.get("schemes", []))
    return out + _extensions(13, op)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item(item: Obj) -> bytes:
    out = b"".join(_bytes(_METHODS[m], _operation(item[m])) for m in _METHODS if m in item)
    return out + b"".join(_bytes(9, _parameter(p)) for p in item.get("parameters", []))


def document(doc: Obj) -> bytes:
    """openapi.v2.Document of a swagger 2.0 document (as :mod:`controller_manager.sim.apiserver.openapi`
    builds it)."""
    out = _str(1, doc["swagger"])
    info = doc.get("info", {})
    out += _bytes(2, _str(1, info.get("title", "")) + _str(2, info.get("version", "")))
    paths = b"".join(_bytes(2, _str(1, name) + _bytes(2, _path_item(item))) for name, item in doc["paths"].items())
    out += _bytes(8, paths)
    definitions = b"".join(_bytes(1, _str(1, name) + _bytes(2, schema(s))) for name, s in doc["definitions"].items())
    out += _bytes(9, definitions)
    for requirement in doc.get("security", []):
        entries = b"".join(_bytes(1, _str(1, name) + _bytes(2, _strings(1, scopes)))
                           for name, scopes in requirement.items())
        out += _bytes(12, entries)
    security = b""
    for name, d in doc.get("securityDefinitions", {}).items():
        api_key = _str(1, d.get("type", "")) + _str(2, d.get("name", "")) + _str(3, d.get("in", ""))
        security += _bytes(1, _str(1, name) + _bytes(2, _bytes(2, api_key)))
    if security:
        out += _bytes(13, security)
    return out
