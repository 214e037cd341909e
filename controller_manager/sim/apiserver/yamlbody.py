"""YAML bodies, read and written as the real server's YAML serializer does (sigs.k8s.io/yaml over go-yaml v2).

Guarantees:
- :func:`yaml_to_json_value` is ``YAMLToJSON`` followed by the server's JSON read: the first document only,
  scalars typed by go-yaml v2's rules (:mod:`yamlresolve`: ``yes``/``y``/``on`` booleans, ``0777`` octal,
  ``1e3`` a float, timestamps kept as text, ``!!binary`` decoded), merge keys (``<<``) applied in document
  order as go-yaml v2 does (a later key overrides a merged one and the other way round), repeated keys won
  by the last. Map keys become JSON strings as sigs.k8s.io/yaml writes them (floats as float32 ``'g'``,
  booleans ``true``/``false``); a null or uint64 key, ``.nan``/``.inf`` values and the like fail with the
  Go message. Numbers come out as the JSON the server would read: whole floats below 1e21 as integers.
- Alias expansion is limited exactly as go-yaml v2 limits it (``yaml: document contains excessive
  aliasing``, counted while decoding, nothing expanded before), an alias inside its own anchor fails
  (``yaml: anchor 'a' value contains itself``), nesting deeper than 10,000 levels fails (``yaml: exceeded
  max depth of 10000``), and syntax errors carry go-yaml's ``yaml: line N: <problem>`` text and line rule.
  Every failure is a :class:`YAMLError` (a ``ValueError``).
- :func:`decode` also gives what ``YAMLToJSONStrict`` adds for ``fieldValidation=Strict``: each repeated
  key, as one ``yaml: unmarshal errors:\\n  line N: key "a" already set in map`` error.
- :func:`json_value_to_yaml` writes a JSON value as the server answers ``Accept: application/yaml``
  (``JSONToYAML``: go-yaml v2's encoder and emitter, see :mod:`yamlemit`).
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from controller_manager.sim.apiserver import yamlemit
from controller_manager.sim.apiserver.recursion import room_for_depth
from controller_manager.sim.apiserver.yamlresolve import (
    BINARY,
    MERGE,
    TIMESTAMP,
    ResolveError,
    Uint64,
    format_g,
    json_float_text,
    resolve,
)

__all__ = ["YAMLError", "decode", "json_value_to_yaml", "yaml_to_json_value"]

try:
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # PyYAML built without libyaml
    _Loader = yaml.SafeLoader

_MAX_DEPTH = 10_000
_SCALAR, _MAPPING, _SEQUENCE, _ALIAS = range(4)


class YAMLError(ValueError):
    """A YAML body the server refuses; the message is what it answers."""


@dataclass(eq=False, slots=True)
class _Node:
    """A node as go-yaml's parser builds it: aliases stay nodes pointing at their anchor's node."""

    kind: int
    line: int  # 0-based, as go-yaml's marks
    tag: str = ""
    value: str = ""
    implicit: bool = False
    children: list[_Node] = field(default_factory=list)
    alias: _Node | None = None


def _fail(message: str) -> YAMLError:
    return YAMLError(f"yaml: {message}")


def _syntax_error(e: yaml.YAMLError) -> YAMLError:
    """go-yaml's parser.fail(): the problem's line (one more for scanner errors, as go-yaml counts them),
    else the context's, and no line at all where both are the first."""
    if isinstance(e, yaml.reader.ReaderError):
        return _fail(e.reason)
    problem = getattr(e, "problem", None) or "unknown problem parsing YAML content"
    problem_mark, context_mark = getattr(e, "problem_mark", None), getattr(e, "context_mark", None)
    line = 0
    if problem_mark is not None and problem_mark.line != 0:
        line = problem_mark.line + (1 if isinstance(e, yaml.scanner.ScannerError) else 0)
    elif context_mark is not None and context_mark.line != 0:
        line = context_mark.line
    return _fail(f"line {line}: {problem}" if line else problem)


def _compose(raw: bytes | str) -> tuple[_Node | None, int]:
    """The first document's root node (None when there is none) and its nesting depth."""
    return _compose_with(raw, _Loader)


def _compose_with(raw: bytes | str, loader: type[yaml.SafeLoader]) -> tuple[_Node | None, int]:
    anchors: dict[str, _Node] = {}
    stack: list[_Node] = []
    root: _Node | None = None
    flow_depth = block_depth = depth = 0
    kinds: list[bool] = []  # per open collection: flow style?
    try:
        for event in yaml.parse(raw, Loader=loader):
            if isinstance(event, yaml.DocumentEndEvent | yaml.StreamEndEvent):
                break
            if isinstance(event, yaml.CollectionEndEvent):
                stack.pop()
                if kinds.pop():
                    flow_depth -= 1
                else:
                    block_depth -= 1
                continue
            line = event.start_mark.line if event.start_mark is not None else 0
            if isinstance(event, yaml.AliasEvent):
                name = event.anchor or ""
                target = anchors.get(name)
                if target is None:
                    raise _fail(f"unknown anchor '{name}' referenced")
                node = _Node(_ALIAS, line, value=name, alias=target)
            elif isinstance(event, yaml.ScalarEvent):
                node = _Node(_SCALAR, line, tag=event.tag or "", value=event.value, implicit=event.implicit[0])
            elif isinstance(event, yaml.CollectionStartEvent):
                node = _Node(_MAPPING if isinstance(event, yaml.MappingStartEvent) else _SEQUENCE, line,
                             tag=event.tag or "")
            else:
                continue  # stream and document starts
            if isinstance(event, yaml.NodeEvent) and event.anchor is not None \
                    and not isinstance(event, yaml.AliasEvent):
                anchors[event.anchor] = node  # before the children: an alias inside may point back here
            if stack:
                stack[-1].children.append(node)
            else:
                root = node
            if isinstance(event, yaml.CollectionStartEvent):
                flow = bool(event.flow_style)
                kinds.append(flow)
                if flow:
                    flow_depth += 1
                else:
                    block_depth += 1
                if flow_depth > _MAX_DEPTH or block_depth > _MAX_DEPTH:
                    where = f"line {line + 1}: " if line else ""
                    raise _fail(f"{where}exceeded max depth of {_MAX_DEPTH}")
                depth = max(depth, len(stack) + 1)
                stack.append(node)
    except yaml.YAMLError as e:
        if getattr(e, "problem", None) == "exceeded maximum nesting depth":
            # libyaml's own limit (1,000 levels) comes before go-yaml's (10,000): answer go-yaml's words.
            e.problem = f"exceeded max depth of {_MAX_DEPTH}"  # type: ignore[attr-defined]
        raise _syntax_error(e) from None
    return root, depth


def _allowed_alias_ratio(decoded: int) -> float:
    # go-yaml v2: small documents may alias freely, large ones less and less.
    if decoded <= 400_000:
        return 0.99
    if decoded >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * (decoded - 400_000) / 3_600_000


# Keys of a decoded map: the value with its Go type, since Go keeps 1, 1.0 and true apart.
_Key = tuple[str, Any]


def _key_of(value: Any) -> _Key:
    kind = "bool" if isinstance(value, bool) else "uint64" if isinstance(value, Uint64) else \
        "int" if isinstance(value, int) else "float64" if isinstance(value, float) else \
        "<nil>" if value is None else "string"
    return kind, value


class _Decoder:
    """go-yaml v2's decoder into ``interface{}``, counting decoded nodes and alias expansions as it does."""

    def __init__(self) -> None:
        self.decoded = 0
        self.aliased = 0
        self.alias_depth = 0
        self.expanding: set[int] = set()
        self.duplicates: list[str] = []

    def unmarshal(self, node: _Node, into: dict[_Key, Any] | None = None) -> Any:
        self.decoded += 1
        if self.alias_depth:
            self.aliased += 1
        if self.aliased > 100 and self.decoded > 1000 \
                and self.aliased / self.decoded > _allowed_alias_ratio(self.decoded):
            raise _fail("document contains excessive aliasing")
        if node.kind == _ALIAS:
            return self.alias(node, into)
        if node.kind == _SCALAR:
            return self.scalar(node)
        if node.kind == _MAPPING:
            return self.mapping(node, into)
        return [self.unmarshal(child) for child in node.children]

    def alias(self, node: _Node, into: dict[_Key, Any] | None) -> Any:
        if id(node) in self.expanding:
            raise _fail(f"anchor '{node.value}' value contains itself")
        assert node.alias is not None
        self.expanding.add(id(node))
        self.alias_depth += 1
        try:
            return self.unmarshal(node.alias, into)
        finally:
            self.alias_depth -= 1
            self.expanding.discard(id(node))

    def scalar(self, node: _Node) -> Any:
        if not node.tag and not node.implicit:
            return node.value  # quoted: a string whatever it reads like
        try:
            tag, value = resolve(node.tag, node.value)
        except ResolveError as e:
            raise _fail(str(e)) from None
        if tag == BINARY:
            try:
                data = base64.b64decode(node.value.replace("\r", "").replace("\n", ""), validate=True)
            except (binascii.Error, ValueError):
                raise _fail("!!binary value contains invalid base64 data") from None
            return data.decode("utf-8", errors="replace")  # encoding/json's stand-in for bad UTF-8
        if tag == TIMESTAMP:
            return node.value
        return value

    def mapping(self, node: _Node, into: dict[_Key, Any] | None) -> dict[_Key, Any]:
        out: dict[_Key, Any] = {} if into is None else into
        children = node.children
        for i in range(0, len(children) - 1, 2):
            key_node, value_node = children[i], children[i + 1]
            if key_node.kind == _SCALAR and key_node.value == "<<" and (key_node.implicit or key_node.tag == MERGE):
                self.merge(value_node, out)
                continue
            key = self.unmarshal(key_node)
            if isinstance(key, dict | list):
                raise _fail(f"invalid map key: {_go_syntax(key)}")
            value = self.unmarshal(value_node)
            k = _key_of(key)
            if k in out:
                self.duplicates.append(f"line {value_node.line + 1}: key {_go_syntax(key)} already set in map")
            out[k] = value
        return out

    def merge(self, node: _Node, out: dict[_Key, Any]) -> None:
        def is_map(n: _Node) -> bool:
            return n.kind == _MAPPING or (n.kind == _ALIAS and n.alias is not None and n.alias.kind == _MAPPING)

        if node.kind in (_MAPPING, _ALIAS):
            if not is_map(node):
                raise _fail("map merge requires map or sequence of maps as the value")
            self.unmarshal(node, out)
        elif node.kind == _SEQUENCE:
            for item in reversed(node.children):
                if not is_map(item):
                    raise _fail("map merge requires map or sequence of maps as the value")
                self.unmarshal(item, out)
        else:
            raise _fail("map merge requires map or sequence of maps as the value")


def _go_quote(text: str) -> str:
    """strconv.Quote, as %#v writes a string."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(ch)])
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out) + '"'


def _go_syntax(value: Any) -> str:
    """Go's ``%#v`` for a decoded value (go-yaml's and sigs.k8s.io/yaml's messages use it)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Uint64):
        return hex(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_g(value)
    if isinstance(value, str):
        return _go_quote(value)
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_syntax(v) for v in value) + "}"
    items = sorted(((_go_syntax(k[1]), _go_syntax(v)) for k, v in value.items()))
    return "map[interface {}]interface {}{" + ", ".join(f"{k}:{v}" for k, v in items) + "}"


class _JSONConverter:
    """sigs.k8s.io/yaml's convertToJSONableObject then json.Marshal and the server's JSON read."""

    def __init__(self) -> None:
        self.unsupported: str | None = None  # json.Marshal's error, raised once the keys are all converted

    def value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.key(k, v): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, float) and not isinstance(value, bool):
            if not math.isfinite(value):
                self.unsupported = self.unsupported or f"json: unsupported value: {format_g(value)}"
                return None
            text = json_float_text(value)
            return int(text) if text.lstrip("-").isdigit() else value  # read back as the JSON number it is
        return value

    def key(self, key: _Key, value: Any) -> str:
        kind, k = key
        if kind == "string":
            return str(k)
        if kind == "bool":
            return "true" if k else "false"
        if kind == "int":
            return str(k)
        if kind == "float64":
            text = format_g(k, 32)
            return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text)
        shown = "<nil>" if k is None else _go_syntax(k)
        raise YAMLError(f"unsupported map key of type: {kind}, key: {shown}, value: {_go_syntax(value)}")


def _decode(raw: bytes | str) -> tuple[Any, list[str]]:
    root, depth = _compose(raw)
    if root is None:
        return None, []
    decoder = _Decoder()
    decoder.decoded = 1  # go-yaml counts the document node too
    converter = _JSONConverter()
    with room_for_depth(depth):
        result = converter.value(decoder.unmarshal(root))
    if converter.unsupported:
        raise YAMLError(converter.unsupported)
    return result, decoder.duplicates


def yaml_to_json_value(raw: bytes | str) -> Any:
    """The JSON value of a YAML body's first document (None for an empty one); raises :class:`YAMLError`."""
    return _decode(raw)[0]


def decode(raw: bytes | str) -> tuple[Any, list[str]]:
    """:func:`yaml_to_json_value` and what YAMLToJSONStrict adds for ``fieldValidation=Strict``: repeated keys,
    as one ``yaml: unmarshal errors:`` error listing them all (an empty list when there are none)."""
    value, duplicates = _decode(raw)
    return value, ["yaml: unmarshal errors:\n  " + "\n  ".join(duplicates)] if duplicates else []


def json_value_to_yaml(value: Any) -> bytes:
    """A JSON value as the server writes it for ``Accept: application/yaml``."""
    return yamlemit.dump(value).encode()
