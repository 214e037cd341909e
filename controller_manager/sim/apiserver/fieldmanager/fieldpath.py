"""Sets of field paths, as structured-merge-diff's ``fieldpath`` holds them, and their FieldsV1 encoding.

A path is a tuple of path elements; an element is a hashable tuple:
``("f", name)`` a struct or map field, ``("k", json)`` an associative list item by its key fields (the JSON
object of the keys, sorted by name, as written after ``k:``), ``("v", json)`` a set item by its value,
``("i", n)`` a list item by position. Element values are kept as their compact JSON text, so equal values
are equal elements and encoding them is free.

A :class:`Set` has ``members`` (paths that end here) and ``children`` (non-empty sets under an element);
``a.b`` owned and ``a`` not is ``children={a: members={b}}``. FieldsV1 writes a member as ``"f:b":{}``, a
child as an object, and an element that is both with a ``".":{}`` entry first, keys in SMD's element order.

Guarantees: set operations return new sets and never share mutable state with their inputs except
unchanged subtrees, which are never mutated after construction (every operation builds new nodes).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import orjson

PathElement = tuple[str, Any]
Path = tuple[PathElement, ...]

__all__ = ["EMPTY", "FieldsError", "Path", "PathElement", "Set", "element_sort_key", "field", "from_fields_v1",
           "key_element", "path_string", "single_key_element", "value_element"]


class FieldsError(ValueError):
    """A FieldsV1 document that does not decode into a set."""


def field(name: str) -> PathElement:
    return ("f", name)


def _json(value: Any) -> str:
    # Go writes a whole float64 without a fraction ("2", not "2.0").
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return orjson.dumps(value).decode()


def key_element(keys: list[tuple[str, Any]]) -> PathElement:
    """An associative list item's element from its key fields (sorted here, as SMD sorts them)."""
    # The type is part of the cache key: True and 1 hash alike but are written differently.
    frozen = tuple((k, v.__class__, v) for k, v in keys)
    try:
        return _key_element(frozen)
    except TypeError:  # a key value that is a list or map
        return _build_key_element(frozen)


@functools.lru_cache(maxsize=65536)  # the same keys (container names, condition types) recur in every object
def _key_element(keys: tuple[tuple[str, type, Any], ...]) -> PathElement:
    return _build_key_element(keys)


def _build_key_element(keys: tuple[tuple[str, type, Any], ...]) -> PathElement:
    return ("k", "{" + ",".join(f"{_json(k)}:{_json(v)}" for k, _, v in sorted(keys, key=lambda kv: kv[0])) + "}")


def single_key_element(key: str, value: Any) -> PathElement:
    """``key_element([(key, value)])``, the usual associative list item (one key field)."""
    try:
        return _single_key_element(key, value.__class__, value)
    except TypeError:  # a key value that is a list or map
        return _build_key_element(((key, value.__class__, value),))


@functools.lru_cache(maxsize=65536)
def _single_key_element(key: str, kind: type, value: Any) -> PathElement:
    return _build_key_element(((key, kind, value),))


def value_element(value: Any) -> PathElement:
    return ("v", _json(value))


_KIND_RANK = {"f": 0, "k": 1, "v": 2, "i": 3}


def _value_sort_key(value: Any) -> tuple[Any, ...]:
    """value.Compare's order: numbers, strings, booleans, lists, maps, null."""
    if isinstance(value, bool):
        return (2, value)
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, list):
        return (3, tuple(_value_sort_key(v) for v in value))
    if isinstance(value, dict):
        return (4, tuple((k, _value_sort_key(v)) for k, v in sorted(value.items())))
    return (5,)


@functools.lru_cache(maxsize=65536)
def element_sort_key(pe: PathElement) -> tuple[Any, ...]:
    kind, payload = pe
    if kind == "f":
        return (0, payload)
    if kind == "k":
        return (1, tuple((k, _value_sort_key(v)) for k, v in json.loads(payload).items()))
    if kind == "v":
        return (2, _value_sort_key(json.loads(payload)))
    return (3, payload)


def element_string(pe: PathElement) -> str:
    """PathElement.String(): ``.name``, ``[name="nginx"]``, ``[="a"]``, ``[3]``."""
    kind, payload = pe
    if kind == "f":
        return "." + str(payload)
    if kind == "k":
        return "[" + ",".join(f"{k}={_value_string(v)}" for k, v in json.loads(payload).items()) + "]"
    if kind == "v":
        return f"[={_value_string(json.loads(payload))}]"
    return f"[{payload}]"


def _value_string(v: Any) -> str:
    """value.ToString: strings quoted as Go's %q, everything else as %v."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(_value_string(x) for x in v) + "]"
    if isinstance(v, dict):
        return "".join(f"{k}={_value_string(x)}" for k, x in v.items())
    return str(v)


def path_string(path: Path) -> str:
    return "".join(element_string(pe) for pe in path)


def element_text(pe: PathElement) -> str:
    """The element as a FieldsV1 key (``f:name``, ``k:{...}``, ``v:...``, ``i:3``)."""
    kind, payload = pe
    return f"{kind}:{payload}"


def parse_element(text: str) -> PathElement:
    kind, sep, rest = text.partition(":")
    if not sep:
        raise FieldsError(f"missing colon: {text}")
    if kind == "f":
        return ("f", rest)
    if kind == "i":
        try:
            return ("i", int(rest))
        except ValueError:
            raise FieldsError(f"invalid index: {rest}") from None
    try:
        value = json.loads(rest)
    except ValueError as e:
        raise FieldsError(str(e)) from None
    if kind == "v":
        return ("v", _json(value))
    if kind == "k":
        if not isinstance(value, dict):
            raise FieldsError(f"key element is not an object: {rest}")
        return key_element(list(value.items()))
    raise FieldsError(f"unknown path element kind: {kind}")


class Set:
    __slots__ = ("_fields_v1", "children", "members")

    def __init__(self, members: frozenset[PathElement] | set[PathElement] = frozenset(),
                 children: dict[PathElement, Set] | None = None) -> None:
        self.members: frozenset[PathElement] = frozenset(members)
        self.children: dict[PathElement, Set] = children or {}
        # Sets never change once built, and unchanged subtrees are shared between a manager's old and new
        # set, so each node's FieldsV1 is written once (callers must not mutate what to_fields_v1 returns).
        self._fields_v1: dict[str, Any] | None = None

    @classmethod
    def of(cls, *paths: Path) -> Set:
        out = cls()
        for p in paths:
            out = out.with_path(p)
        return out

    def empty(self) -> bool:
        return not self.members and not self.children

    def __bool__(self) -> bool:
        return not self.empty()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Set) and self.members == other.members and self.children == other.children

    def __hash__(self) -> int:  # pragma: no cover - sets are not used as keys
        raise TypeError("Set is not hashable")

    def __repr__(self) -> str:
        return f"Set({sorted(path_string(p) for p in self.paths())})"

    def has(self, path: Path) -> bool:
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                return False
            node = child
        return bool(path) and path[-1] in node.members

    def with_prefix(self, pe: PathElement) -> Set:
        return self.children.get(pe) or EMPTY

    def with_path(self, path: Path) -> Set:
        """This set with ``path`` inserted as a member."""
        if not path:
            return self
        head = path[0]
        if len(path) == 1:
            if head in self.members:
                return self
            return Set(self.members | {head}, self.children)
        children = dict(self.children)
        children[head] = (children.get(head) or EMPTY).with_path(path[1:])
        return Set(self.members, children)

    def union(self, other: Set) -> Set:
        """Both sets' paths; ``self`` itself when ``other`` adds nothing (so an owner re-writing fields it
        already owns keeps the very same set, and its encoded entry)."""
        if other.empty() or other is self:
            return self
        if self.empty():
            return other
        children = self.children
        for pe, child in other.children.items():
            mine = self.children.get(pe)
            merged = child if mine is None else mine.union(child)
            if merged is not mine:
                if children is self.children:
                    children = dict(children)
                children[pe] = merged
        members = self.members if other.members <= self.members else self.members | other.members
        if children is self.children and members is self.members:
            return self
        return Set(members, children)

    def intersection(self, other: Set) -> Set:
        if self.empty() or other.empty():
            return EMPTY
        small, large = (self, other) if len(self.children) <= len(other.children) else (other, self)
        children = {}
        for pe, child in small.children.items():
            theirs = large.children.get(pe)
            if theirs is not None:
                both = child.intersection(theirs)
                if both:
                    children[pe] = both
        members = self.members & other.members
        if not members and not children:
            return EMPTY
        return Set(members, children)

    def difference(self, other: Set) -> Set:
        """Leaves of ``self`` not in ``other``: a parent minus a child is the parent, a child minus its parent
        is the child (only exact members cancel)."""
        if self.empty() or other.empty():
            return self
        children = self.children
        for pe, theirs in other.children.items():
            child = self.children.get(pe)
            if child is None:
                continue
            rest = child.difference(theirs)
            if rest is child:
                continue
            if children is self.children:
                children = dict(children)
            if rest:
                children[pe] = rest
            else:
                del children[pe]
        members = self.members - other.members if not self.members.isdisjoint(other.members) else self.members
        if children is self.children and members is self.members:
            return self  # unchanged: the same node, so its FieldsV1 and its entry are reused
        if not members and not children:
            return EMPTY
        return Set(members, children)

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """Every member path: this level's members in element order, then each child's (Set.Iterate)."""
        for pe in sorted(self.members, key=element_sort_key):
            yield (*prefix, pe)
        for pe in sorted(self.children, key=element_sort_key):
            yield from self.children[pe].paths((*prefix, pe))

    def size(self) -> int:
        return len(self.members) + sum(c.size() for c in self.children.values())

    # --- FieldsV1 ----------------------------------------------------------------------------------

    def to_fields_v1(self) -> dict[str, Any]:
        if self._fields_v1 is None:
            out: dict[str, Any] = {}
            children = self.children
            if not children:
                for _, text in _in_order(self.members):
                    out[text] = {}
            else:
                members = self.members
                for pe, text in _in_order(members.union(children)):
                    child = children.get(pe)
                    if child is None:
                        out[text] = {}
                    elif pe in members:
                        out[text] = {".": {}, **child.to_fields_v1()}
                    else:
                        out[text] = child.to_fields_v1()
            self._fields_v1 = out
        return self._fields_v1


@functools.lru_cache(maxsize=16384)  # (the same field names and item keys make up every object of a kind)
def _in_order(elements: frozenset[PathElement]) -> tuple[tuple[PathElement, str], ...]:
    """A node's elements in SMD's order, each with its FieldsV1 key."""
    return tuple((pe, element_text(pe)) for pe in sorted(elements, key=element_sort_key))


EMPTY = Set()


def from_fields_v1(doc: Any) -> Set:
    """A FieldsV1 document (the decoded JSON object) as a Set; :class:`FieldsError` if malformed."""
    if not isinstance(doc, dict):
        raise FieldsError("FieldsV1 must be an object")
    members: set[PathElement] = set()
    children: dict[PathElement, Set] = {}
    for key, value in doc.items():
        if key == ".":
            continue
        pe = parse_element(key)
        if not isinstance(value, dict):
            raise FieldsError(f"expected an object for {key}")
        if "." in value or not value:
            members.add(pe)
        child = from_fields_v1(value)
        if child:
            children[pe] = child
    return Set(frozenset(members), children)
