"""The CEL types of a CRD's schema node, as the type checker sees ``self`` and ``oldSelf`` in a rule
(apiserver's ``SchemaDeclType`` with apiextensions-apiserver's names for the object types).

- ``integer`` is ``int``, ``number`` ``double``, ``boolean`` ``bool``; a ``string`` is ``string``, or ``bytes``
  (format ``byte``), ``duration`` (``duration``), ``google.protobuf.Timestamp`` (``date`` and ``date-time``);
  ``x-kubernetes-int-or-string`` is ``dyn``.
- An array is ``list(<items>)``; an object with an ``additionalProperties`` schema is ``map(string, <value>)``;
  any other object is an object type whose fields are its properties (a name CEL cannot spell escaped as
  :func:`escape` does, one it cannot escape left out; a CEL keyword is reachable both escaped, ``__namespace__``,
  and as it is, ``namespace``, as the type provider's RecognizeKeywordAsFieldName allows). Unknown fields
  (``x-kubernetes-preserve-unknown-fields``) are not exposed: selecting them is ``undefined field``.
- The root of a resource (and an ``x-kubernetes-embedded-resource`` object) always has ``apiVersion``, ``kind``
  and ``metadata`` with ``name`` and ``generateName`` only.
- A node CEL cannot type (an array without ``items``, a schema with no type) is not exposed: as a field it is
  absent, as ``self`` it is ``dyn``.
- Object types are named as upstream names them: the rule's scope ``selfType<n>`` (``n`` changing per CRD write,
  so no rule can depend on it), a field's object ``<parent>.<field>``, a list's element ``<parent>.@idx``, a map's
  value ``<parent>.@elem`` (the names a type error shows).
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from typing import Any

from controller_manager.sim.apiserver import cel_checker
from controller_manager.sim.apiserver.cel_checker import Type

__all__ = ["RESERVED", "RuleTypes", "escape", "rule_types"]

Obj = dict[str, Any]

# CEL's reserved words, escaped as ``__<word>__`` when a property is named so.
RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                       "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_ESCAPABLE = re.compile(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*")
_ESCAPES = (("__", "__underscores__"), (".", "__dot__"), ("-", "__dash__"), ("/", "__slash__"))
_FORMATS = {"byte": cel_checker.BYTES, "duration": Type("duration"), "date": Type("timestamp"),
            "date-time": Type("timestamp")}
_SCALARS = {"integer": cel_checker.INT, "number": cel_checker.DOUBLE, "boolean": cel_checker.BOOL}


@functools.lru_cache(maxsize=4096)
def escape(name: str) -> str | None:
    """A property's name as a CEL field name (None: not expressible; cached: every object a rule sees is keyed by
    its schema's few names)."""
    if name in RESERVED:
        return f"__{name}__"
    if not _ESCAPABLE.fullmatch(name):
        return None
    out = []
    i = 0
    while i < len(name):
        for raw, escaped in _ESCAPES:
            if name.startswith(raw, i):
                out.append(escaped)
                i += len(raw)
                break
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _obj(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def with_type_and_object_meta(schema: Obj) -> Obj:
    """A resource root's schema with ``apiVersion``, ``kind`` and ``metadata.name``/``generateName`` (metadata
    reduced to those two)."""
    props = dict(_obj(schema.get("properties")))
    props["apiVersion"] = {"type": "string"}
    props["kind"] = {"type": "string"}
    props["metadata"] = {"type": "object", "properties": {"name": {"type": "string"},
                                                          "generateName": {"type": "string"}}}
    return {**schema, "properties": props}


@dataclass(frozen=True)
class RuleTypes:
    """``self``'s type and the object types it reaches (field name -> type, per object type's name)."""

    self_type: Type
    structs: dict[str, dict[str, Type]]

    def environment(self, library: dict[str, list[str]], *, optional_old_self: bool) -> cel_checker.Environment:
        old = Type("opaque", "optional_type", (self.self_type,)) if optional_old_self else self.self_type
        return cel_checker.Environment({"self": self.self_type, "oldSelf": old}, self.structs, library)


def rule_types(schema: Obj, *, root: bool) -> RuleTypes:
    """The types of a schema node's rules (``root``: the node is a resource's root)."""
    structs: dict[str, dict[str, Type]] = {}
    declared = _declare(schema, f"selfType{time.time_ns() % 1_000_000_000}", root, structs)
    return RuleTypes(declared or cel_checker.DYN, structs)


def _declare(schema: Obj, name: str, resource: bool, structs: dict[str, dict[str, Type]]) -> Type | None:
    if schema.get("x-kubernetes-int-or-string"):
        return cel_checker.DYN
    if resource:
        schema = with_type_and_object_meta(schema)
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            return None
        element = _declare(items, f"{name}.@idx", bool(items.get("x-kubernetes-embedded-resource")), structs)
        return cel_checker.list_of(element) if element is not None else None
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value = _declare(extra, f"{name}.@elem", bool(extra.get("x-kubernetes-embedded-resource")), structs)
            return cel_checker.map_of(cel_checker.STRING, value) if value is not None else None
        fields: dict[str, Type] = {}
        for prop, sub in _obj(schema.get("properties")).items():
            field_name = escape(prop)
            if field_name is None or not isinstance(sub, dict):
                continue
            declared = _declare(sub, f"{name}.{field_name}", bool(sub.get("x-kubernetes-embedded-resource")),
                                structs)
            if declared is not None:
                fields[field_name] = declared
                if prop in RESERVED:  # the type provider finds a keyword field by its plain name too
                    fields[prop] = declared
        structs[name] = fields
        return Type("struct", name)
    if kind == "string":
        return _FORMATS.get(str(schema.get("format") or ""), cel_checker.STRING)
    return _SCALARS.get(str(kind))
