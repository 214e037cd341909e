"""YAML bodies, read and written as the real server's YAML serializer does (sigs.k8s.io/yaml over go-yaml v2).

Guarantees:
- :func:`yaml_to_json_value` reads the first document of a YAML body into the JSON value YAMLToJSON makes
  of it: YAML 1.1 scalars (``yes``/``no``/``on``/``off`` are booleans), map keys as strings (``1`` -> "1",
  ``true`` -> "true"), whole floats as integers (Go writes ``1.0`` as ``1``), timestamps as RFC 3339 text.
- Aliases are not expanded beyond what go-yaml allows: a document whose alias expansions dominate its
  decoded nodes is refused with go-yaml's ``yaml: document contains excessive aliasing``, before anything
  large is built (billion laughs). Nesting deeper than 10,000 levels is refused too. Every failure is a
  :class:`YAMLError` (a ``ValueError``) whose text the server returns.
- :func:`json_value_to_yaml` writes a JSON value as the server answers ``Accept: application/yaml``: block
  style, keys sorted, sequences in maps not indented, strings quoted where YAML would read them otherwise.
"""

from __future__ import annotations

import datetime
from typing import Any

import yaml

__all__ = ["YAMLError", "json_value_to_yaml", "yaml_to_json_value"]

try:
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
    _Dumper: type[yaml.SafeDumper] = yaml.CSafeDumper  # type: ignore[assignment]
except AttributeError:  # PyYAML built without libyaml
    _Loader = yaml.SafeLoader
    _Dumper = yaml.SafeDumper

_MAX_DEPTH = 10_000


class YAMLError(ValueError):
    """A YAML body the server refuses; the message is what it answers."""


def _allowed_alias_ratio(decoded: int) -> float:
    # go-yaml v2's rule: small documents may alias freely, large ones less and less.
    if decoded <= 400_000:
        return 0.99
    if decoded >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * (decoded - 400_000) / 3_600_000


class _Converter:
    """Walks the loaded document (aliases are shared Python objects) into a fresh JSON value, counting
    decoded nodes and alias expansions as go-yaml does."""

    def __init__(self) -> None:
        self.decoded = 0
        self.aliases = 0
        self.anchored: set[int] = set()

    def value(self, node: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise YAMLError("yaml: exceeded max depth of 10000")
        self.decoded += 1
        if isinstance(node, dict | list):
            if id(node) in self.anchored:
                self.aliases += 1
                if (self.aliases > 100 and self.decoded > 1000
                        and self.aliases / self.decoded > _allowed_alias_ratio(self.decoded)):
                    raise YAMLError("yaml: document contains excessive aliasing")
            self.anchored.add(id(node))
            if isinstance(node, dict):
                return {_key(k): self.value(v, depth + 1) for k, v in node.items()}
            return [self.value(v, depth + 1) for v in node]
        return _scalar(node)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    scalar = _scalar(key)
    if isinstance(scalar, bool):
        return "true" if scalar else "false"
    return str(scalar)


def _scalar(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
        return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime.date):
        return value.strftime("%Y-%m-%dT00:00:00Z")
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def yaml_to_json_value(raw: bytes | str) -> Any:
    """The JSON value of a YAML body's first document (None for an empty one); raises :class:`YAMLError`."""
    try:
        # The first document only, as go-yaml's Unmarshal reads it.
        document = next(yaml.load_all(raw, Loader=_Loader), None)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise YAMLError(f"yaml: {where}{problem}") from None
    except RecursionError:
        raise YAMLError("yaml: exceeded max depth of 10000") from None
    try:
        return _Converter().value(document, 0)
    except RecursionError:
        raise YAMLError("yaml: exceeded max depth of 10000") from None


def json_value_to_yaml(value: Any) -> bytes:
    """A JSON value as the server writes it for ``Accept: application/yaml``."""
    text: str = yaml.dump(value, Dumper=_Dumper, default_flow_style=False, sort_keys=True, allow_unicode=True,
                          width=1 << 30)
    return text.encode()
