"""Objects walked with their schema, as structured-merge-diff's ``typed`` package walks them.

An :class:`Atom` says what a value may be: a scalar, a list (atomic, or associative: keyed by the schema's
``listMapKeys``/``patchMergeKey``, or a set of scalars) and/or a map (a struct with named fields, or a map
of one element type; separable or atomic). The untyped atom (``UNTYPED``, for RawExtension and the
``deduced`` schema) is all three: maps granular, lists atomic. :func:`kind_atom` builds atoms from kube-sim's
schema (``schema/types.json``), lazily, so recursive types cost nothing until walked; :func:`crd_atom` builds a
custom resource's from its version's structural schema.

The walks, each a port of SMD's walker of the same job:
- :func:`to_field_set` (``ToFieldSet``): every leaf, list item and empty/null map value of a value;
- :func:`compare` (``Compare``): what ``rhs`` added, modified and removed relative to ``lhs`` (equal subtrees
  are skipped in C through ``==``, so an update costs what it changed, not the object's size);
- :func:`merge` (``Merge``): ``rhs`` laid over ``lhs`` (apply), associative lists merged by key in SMD's order;
- :func:`remove_items` (``RemoveItems``) and :func:`ensure_named_fields` (``EnsureNamedFieldsAreMembers``).
Values are JSON values as decoded (dict, list, str, int, float, bool, None); :data:`MISSING` marks an absent
one (Go's nil ``value.Value``), which is not the same as JSON ``null``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any

from controller_manager.sim.apiserver import schema
from controller_manager.sim.apiserver.fieldmanager.fieldpath import (
    EMPTY,
    Path,
    PathElement,
    Set,
    key_element,
    single_key_element,
    value_element,
)

__all__ = ["MISSING", "UNTYPED", "Atom", "Comparison", "ListType", "MapType", "TypedError", "compare", "crd_atom",
           "ensure_named_fields", "kind_atom", "merge", "remove_items", "to_field_set"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class TypedError(ValueError):
    """A value the schema cannot index (an associative list item without its keys, duplicate keys)."""


@dataclass(eq=False)
class ListType:
    elem: Callable[[], Atom]
    associative: bool = False
    keys: tuple[str, ...] = ()
    key_defaults: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class MapType:
    elem: Callable[[], Atom] | None = None              # a map's element type (None: a struct)
    fields: Callable[[str], Atom | None] | None = None   # a struct's named fields
    atomic: bool = False

    def has_field(self, name: str) -> bool:
        return self.fields is not None and self.fields(name) is not None

    def child(self, name: str) -> Atom:
        if self.fields is not None:
            found = self.fields(name)
            if found is not None:
                return found
        return self.elem() if self.elem is not None else NONE


class Atom:
    """A scalar and/or list and/or map; :meth:`deduce` picks the one a value is."""

    __slots__ = ("_as_list", "_as_map", "_as_scalar", "list", "map", "scalar")

    def __init__(self, scalar: bool = False, list: ListType | None = None, map: MapType | None = None) -> None:
        self.scalar = scalar
        self.list = list
        self.map = map
        self._as_scalar: Atom | None = None
        self._as_list: Atom | None = None
        self._as_map: Atom | None = None

    def deduce(self, value: Any) -> Atom:
        if value is MISSING or value is None:
            return self
        if isinstance(value, dict):
            if self.map is not None and (self.list is not None or self.scalar):
                if self._as_map is None:
                    self._as_map = Atom(map=self.map)
                return self._as_map
            return self
        if isinstance(value, list):
            if self.list is not None and (self.map is not None or self.scalar):
                if self._as_list is None:
                    self._as_list = Atom(list=self.list)
                return self._as_list
            return self
        if self.scalar and (self.map is not None or self.list is not None):
            if self._as_scalar is None:
                self._as_scalar = Atom(scalar=True)
            return self._as_scalar
        return self


SCALAR = Atom(scalar=True)
NONE = Atom()
UNTYPED = Atom(scalar=True)
UNTYPED.list = ListType(elem=lambda: UNTYPED)
UNTYPED.map = MapType(elem=lambda: UNTYPED)


# --- atoms from kube-sim's schema -------------------------------------------------------------------------

# +default values of list-map key fields (SMD fills a missing key from its default): the ports' protocol.
_KEY_DEFAULTS: dict[str, dict[str, Any]] = {
    "io.k8s.api.core.v1.ContainerPort": {"protocol": "TCP"},
    "io.k8s.api.core.v1.ServicePort": {"protocol": "TCP"},
    "io.k8s.api.core.v1.EndpointPort": {"protocol": "TCP"},
    "io.k8s.api.discovery.v1.EndpointPort": {"protocol": "TCP"},
}
_SCALAR_KINDS = frozenset({"string", "bool", "int32", "int64", "uint32", "uint64", "float64", "bytes", "time",
                           "microtime", "duration", "quantity", "intorstring"})


@functools.cache
def struct_atom(name: str) -> Atom:
    st = schema.struct(name)
    cache: dict[str, Atom | None] = {}

    def fields(json_name: str) -> Atom | None:
        if json_name not in cache:
            f = st.json_fields.get(json_name)
            cache[json_name] = field_atom(f) if f is not None else None
        return cache[json_name]

    return Atom(map=MapType(fields=fields, atomic=st.atomic))


def field_atom(f: schema.Field) -> Atom:
    """A field's atom: its type, with the field's list and map semantics (``x-kubernetes-list-type``,
    else a merge patch strategy with or without a merge key, else atomic; ``+mapType=atomic``)."""
    t = f.type
    if t.kind in ("list", "wrapper"):
        assert t.elem is not None
        elem = t.elem
        if f.list_type == "map":
            return _list_atom(elem, True, f.list_map_keys)
        if f.list_type == "set":
            return _list_atom(elem, True, ())
        if f.list_type == "atomic":
            return _list_atom(elem, False, ())
        if "merge" in f.patch_strategy.split(","):
            return _list_atom(elem, True, (f.merge_key,) if f.merge_key else ())
        return _list_atom(elem, False, ())
    if t.kind == "map":
        assert t.elem is not None
        return _map_atom(t.elem, f.map_type == "atomic")
    return type_atom(t)


def type_atom(t: schema.Type) -> Atom:
    if t.kind == "struct":
        return struct_atom(t.name)
    if t.kind in ("list", "wrapper"):
        assert t.elem is not None
        return _list_atom(t.elem, False, ())
    if t.kind == "map":
        assert t.elem is not None
        return _map_atom(t.elem, False)
    if t.kind in _SCALAR_KINDS:
        return SCALAR
    return UNTYPED  # RawExtension, interface{}, FieldsV1


def _list_atom(elem: schema.Type, associative: bool, keys: tuple[str, ...]) -> Atom:
    defaults = _KEY_DEFAULTS.get(elem.name, {}) if keys else {}
    return Atom(list=ListType(elem=functools.cache(lambda: type_atom(elem)), associative=associative,
                              keys=keys, key_defaults={k: v for k, v in defaults.items() if k in keys}))


def _map_atom(elem: schema.Type, atomic: bool) -> Atom:
    return Atom(map=MapType(elem=functools.cache(lambda: type_atom(elem)), atomic=atomic))


def kind_atom(api_version: str, kind: str) -> Atom:
    """The atom of a top-level kind (UNTYPED when the schema does not know it)."""
    st = schema.kind(api_version, kind)
    return struct_atom(st.name) if st is not None else UNTYPED


# --- list items ---------------------------------------------------------------------------------------------

def item_element(lt: ListType, item: Any) -> PathElement:
    """listItemToPathElement: an associative item's key element, or a set item's value element."""
    if not lt.associative:
        raise TypedError("invalid indexing of non-associative list")
    if lt.keys:
        if item is None:
            raise TypedError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise TypedError("associative list with keys may not have non-map elements")
        if len(lt.keys) == 1 and lt.keys[0] in item:  # the usual list map: one key field, given (name, type)
            return single_key_element(lt.keys[0], item[lt.keys[0]])
        keys = []
        for k in lt.keys:
            if k in item:
                keys.append((k, item[k]))
            elif k in lt.key_defaults:
                keys.append((k, lt.key_defaults[k]))
        if not keys:
            raise TypedError(f"associative list with keys has an element that omits all key fields "
                             f"{_go_quoted_list(lt.keys)} (and doesn't have default values for any key fields)")
        return key_element(keys)
    if isinstance(item, dict):
        raise TypedError("associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise TypedError("not supported: associative list with lists as elements")
    if item is None:
        raise TypedError("associative list without keys has an element that's an explicit null")
    return value_element(item)


def _go_quoted_list(items: tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{i}"' for i in items) + "]"


# --- ToFieldSet -------------------------------------------------------------------------------------------

class _Builder:
    """A mutable set under construction (frozen into a :class:`Set` at the end). ``sets``: subtrees already
    built as sets (an added value's, see :func:`added_set`), taken as they are when frozen."""

    __slots__ = ("children", "members", "sets")

    def __init__(self) -> None:
        self.members: set[PathElement] = set()
        self.children: dict[PathElement, _Builder] = {}
        self.sets: dict[PathElement, Set] | None = None

    def insert(self, path: Path) -> None:
        if not path:
            return
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = _Builder()
            node = child
        node.members.add(path[-1])

    def node(self, path: Path) -> _Builder:
        """The builder of the set under ``path`` (made as needed)."""
        node = self
        for pe in path:
            node = node.child(pe)
        return node

    def child(self, pe: PathElement) -> _Builder:
        found = self.children.get(pe)
        if found is None:
            found = self.children[pe] = _Builder()
        return found

    def put(self, pe: PathElement, s: Set) -> None:
        """Add the (non-empty) set ``s`` under ``pe``."""
        if self.sets is None:
            self.sets = {pe: s}
        else:
            held = self.sets.get(pe)
            self.sets[pe] = s if held is None else held.union(s)

    def freeze(self) -> Set:
        children = {}
        for pe, child in self.children.items():
            frozen = child.freeze()
            if frozen:
                children[pe] = frozen
        if self.sets is not None:
            for pe, s in self.sets.items():
                held = children.get(pe)
                children[pe] = s if held is None else held.union(s)
        if not self.members and not children:
            return EMPTY
        return Set(frozenset(self.members), children)


def to_field_set(value: Any, atom: Atom) -> Set:
    out = _Builder()
    _fields(value, atom, (), out)
    return out.freeze()


def _fields(value: Any, atom: Atom, path: Path, out: _Builder) -> None:
    a = atom.deduce(value)
    if a.map is not None:
        if a.map.atomic:
            out.insert(path)
            return
        if not isinstance(value, dict):
            return
        m = a.map
        for key, val in value.items():
            child_path = (*path, ("f", key))
            _fields(val, m.child(key), child_path, out)
            if val is None or (isinstance(val, dict) and not val) or not m.has_field(key):
                out.insert(child_path)
        return
    if a.scalar:
        out.insert(path)
        return
    if a.list is not None:
        lt = a.list
        if not lt.associative:
            out.insert(path)
            return
        if not isinstance(value, list):
            return
        pes: list[PathElement | None] = []
        seen: set[PathElement] = set()
        duplicates: set[PathElement] = set()
        for item in value:
            try:
                pe = item_element(lt, item)
            except TypedError:
                pes.append(None)
                continue
            if pe in seen:
                if pe not in duplicates:
                    out.insert((*path, pe))
                    duplicates.add(pe)
            else:
                seen.add(pe)
            pes.append(pe)
        elem = lt.elem()
        for item, item_pe in zip(value, pes, strict=True):
            if item_pe is None or item_pe in duplicates:
                continue
            item_path = (*path, item_pe)
            _fields(item, elem, item_path, out)
            out.insert(item_path)


# --- Compare ----------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    removed: Set
    modified: Set
    added: Set
    # changed(), made once: an update asks for it once for itself and once per other manager.
    _changed: Set | None = field(default=None, init=False, repr=False, compare=False)

    def is_same(self) -> bool:
        return self.removed.empty() and self.modified.empty() and self.added.empty()

    def changed(self) -> Set:
        """Modified and added: what another owner loses (a conflict in apply)."""
        if self._changed is None:
            self._changed = self.modified.union(self.added)
        return self._changed

    def excluding(self, ignored: Set | None) -> Comparison:
        """The comparison without anything at or under ``ignored`` (SMD's reset-fields filter)."""
        if ignored is None or ignored.empty():
            return self
        return Comparison(recursive_difference(self.removed, ignored),
                          recursive_difference(self.modified, ignored),
                          recursive_difference(self.added, ignored))


def recursive_difference(s: Set, other: Set) -> Set:
    """``s`` without every path of ``other`` and everything under it."""
    if s.empty() or other.empty():
        return s
    # ``s`` itself when nothing of it is under ``other`` (the usual case: a write rarely touches what its
    # endpoint resets), so that nodes, and the FieldsV1 they have written, are kept rather than copied.
    children = s.children
    for pe, child in s.children.items():
        if pe in other.members:
            rest = EMPTY
        else:
            theirs = other.children.get(pe)
            rest = child if theirs is None else recursive_difference(child, theirs)
            if rest is child and child:
                continue
        if children is s.children:
            children = dict(children)
        if rest:
            children[pe] = rest
        else:
            del children[pe]
    members = s.members if s.members.isdisjoint(other.members) else s.members - other.members
    if children is s.children and members is s.members:
        return s
    return Set(members, children)


class _Compare:
    __slots__ = ("added", "modified", "removed")

    def __init__(self) -> None:
        self.removed = _Builder()
        self.modified = _Builder()
        self.added = _Builder()

    def walk(self, lhs: Any, rhs: Any, atom: Atom, path: Path) -> None:
        if lhs is MISSING and rhs is not MISSING:
            self.added_tree(rhs, atom, path)
            return
        if lhs is not MISSING and rhs is not MISSING and equal(lhs, rhs):
            return
        self.differ(lhs, rhs, atom, path)

    def differ(self, lhs: Any, rhs: Any, atom: Atom, path: Path) -> None:
        """:meth:`walk` of values known not to be equal (or one of them MISSING, the other not): called
        where the caller has just compared them, so that no subtree is compared twice at one level."""
        alhs = atom.deduce(lhs)
        arhs = atom.deduce(rhs)
        if rhs is MISSING:
            in_leaf = self.handle(alhs, lhs, rhs, path)
        elif lhs is MISSING or alhs is arhs:
            in_leaf = self.handle(arhs, lhs, rhs, path)
        else:
            self.handle(alhs, lhs, rhs, path)
            in_leaf = self.handle(arhs, lhs, rhs, path)
        if not in_leaf:
            if lhs is MISSING:
                self.added.insert(path)
            elif rhs is MISSING:
                self.removed.insert(path)

    def added_tree(self, value: Any, atom: Atom, path: Path) -> None:
        """walk(MISSING, value): the path and every path under it are added (the common case of a create, and
        of a status written for the first time)."""
        under = added_set(value, atom) if isinstance(value, dict | list) else EMPTY
        if not path:
            self.added.members.update(under.members)
            for pe, child in under.children.items():
                self.added.put(pe, child)
            return
        node = self.added.node(path[:-1])
        node.members.add(path[-1])
        if under is not EMPTY:
            node.put(path[-1], under)

    def same_order(self, lt: ListType, lhs: list[Any], rhs: list[Any], path: Path) -> bool:
        """The usual update of a keyed list: the same items in the same order, some of them changed. Then only
        the changed ones are walked (False, having walked nothing, when that is not the case). Keys are
        compared as plain values here; path elements are built for the changed items only."""
        if not lt.keys:
            return False
        keys = lt.keys
        defaults = lt.key_defaults
        seen: set[tuple[Any, ...]] = set()
        changed: list[tuple[Any, Any]] = []
        try:
            for left, right in zip(lhs, rhs, strict=True):
                if not isinstance(left, dict) or not isinstance(right, dict):
                    return False
                key = tuple(left.get(k, defaults.get(k, MISSING)) for k in keys)
                if key in seen:
                    return False
                seen.add(key)
                if left is right or equal(left, right):
                    continue
                if tuple(right.get(k, defaults.get(k, MISSING)) for k in keys) != key:
                    return False
                changed.append((left, right))
            elem = lt.elem()
            walks = [(item_element(lt, left), left, right) for left, right in changed]
        except (TypedError, TypeError):  # an item the full walk reports, a key value that is not hashable
            return False
        for pe, left, right in walks:
            self.differ(left, right, elem, (*path, pe))
        return True

    def leaf(self, lhs: Any, rhs: Any, path: Path) -> bool:
        if lhs is MISSING:
            self.added.insert(path)
        elif rhs is MISSING:
            self.removed.insert(path)
        elif not equal(lhs, rhs):
            self.modified.insert(path)
        return True

    def handle(self, atom: Atom, lhs: Any, rhs: Any, path: Path) -> bool:
        if atom.map is not None:
            lm = lhs if isinstance(lhs, dict) else None
            rm = rhs if isinstance(rhs, dict) else None
            if atom.map.atomic or (not lm and not rm):
                return self.leaf(lhs, rhs, path)
            m = atom.map
            lm = lm or {}
            rm = rm or {}
            added: _Builder | None = None
            for key, right in rm.items():
                left = lm.get(key, MISSING)
                if left is not MISSING:
                    # equal(), inline: most fields of an update are unchanged, and are passed over here
                    # without a call (or their schema looked up).
                    if left == right and (type(left) is type(right)
                                          or (type(left) is not bool and type(right) is not bool)):
                        continue
                    self.differ(left, right, m.child(key), (*path, ("f", key)))
                    continue
                # A field the old value lacks: added whole, into this map's node of the added set.
                if added is None:
                    added = self.added.node(path)
                pe = ("f", key)
                added.members.add(pe)
                if isinstance(right, dict | list):
                    under = added_set(right, m.child(key))
                    if under is not EMPTY:
                        added.put(pe, under)
            for key, left in lm.items():
                if key not in rm:
                    self.walk(left, MISSING, m.child(key), (*path, ("f", key)))
            return False
        if atom.scalar:
            return self.leaf(lhs, rhs, path)
        if atom.list is not None:
            ll = lhs if isinstance(lhs, list) else None
            rl = rhs if isinstance(rhs, list) else None
            lt = atom.list
            if not lt.associative or (not ll and not rl):
                return self.leaf(lhs, rhs, path)
            self.items(lt, ll or [], rl or [], path)
            return False
        return self.leaf(lhs, rhs, path)

    def items(self, lt: ListType, lhs: list[Any], rhs: list[Any], path: Path) -> None:
        if len(lhs) == len(rhs) and self.same_order(lt, lhs, rhs, path):
            return
        order: list[PathElement] = []
        lvalues: dict[PathElement, list[Any]] = {}
        rvalues: dict[PathElement, list[Any]] = {}
        for values, items in ((lvalues, lhs), (rvalues, rhs)):
            for item in items:
                try:
                    pe = item_element(lt, item)
                except TypedError:
                    continue
                if pe in values:
                    values[pe].append(item)
                else:
                    values[pe] = [item]
                    if values is lvalues or pe not in lvalues:
                        order.append(pe)
        elem = lt.elem()
        for pe in order:
            lv = lvalues.get(pe, [])
            rv = rvalues.get(pe, [])
            item_path = (*path, pe)
            if len(lv) <= 1 and len(rv) <= 1:
                self.walk(lv[0] if lv else MISSING, rv[0] if rv else MISSING, elem, item_path)
            elif len(lv) >= 2 and len(rv) >= 2:
                if not (len(lv) == len(rv) and all(equal(a, b) for a, b in zip(lv, rv, strict=True))):
                    self.modified.insert(item_path)
            elif len(lv) >= 2:
                if rv:
                    self.walk(MISSING, rv[0], elem, item_path)
                self.removed.insert(item_path)
            else:
                if lv:
                    self.walk(lv[0], MISSING, elem, item_path)
                self.added.insert(item_path)


_REPEATED: Any = object()  # (an associative list's key given to more than one item)
_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})  # (exact types: a subclass takes the long way)


def added_set(value: Any, atom: Atom) -> Set:
    """Every path under ``value`` as ToFieldSet would list them, as Compare reports a value added whole: each
    map key and associative list item a member, with the set under it where it has one. Built straight
    into sets (nothing under an added value is merged with anything else), EMPTY when nothing is under it."""
    a = atom.deduce(value)
    m = a.map
    if m is not None:
        if m.atomic or not isinstance(value, dict) or not value:
            return EMPTY
        if _PLAIN_SCALARS.issuperset(map(type, value.values())):
            # Nothing under any field (a condition, most list items): told in C, without a loop here.
            return _shared(_field_members(tuple(value)), {})
        children: dict[PathElement, Set] = {}
        named, elem = m.fields, m.elem
        for key, val in value.items():
            t = type(val)
            # (only a non-empty map or list has anything under it; plain strings, the most values, go first)
            if (t is not dict and t is not list and (t is str or not isinstance(val, dict | list))) or not val:
                continue
            found = named(key) if named is not None else None
            under = added_set(val, found if found is not None else elem() if elem is not None else NONE)
            if under is not EMPTY:
                children[("f", key)] = under
        return _shared(_field_members(tuple(value)), children)
    lt = a.list
    if a.scalar or lt is None or not lt.associative or not isinstance(value, list):
        return EMPTY
    if len(lt.keys) == 1 and value:
        shape = _flat_shape(lt, value)
        if shape is not None:
            hit = _FLAT_LISTS.get(shape)
            if hit is not None and hit[0] is lt:
                return hit[1]
            if len(_FLAT_LISTS) >= _SHARED_SIZE:
                _FLAT_LISTS.clear()
            built = _added_items(lt, value)
            _FLAT_LISTS[shape] = (lt, built)
            return built
    return _added_items(lt, value)


def _added_items(lt: ListType, value: list[Any]) -> Set:
    items: dict[PathElement, Any] = {}
    for item in value:
        try:
            pe = item_element(lt, item)
        except TypedError:
            continue
        items[pe] = item if pe not in items else _REPEATED
    if not items:
        return EMPTY
    item_atom = lt.elem()
    children = {}
    for pe, item in items.items():
        if item is not _REPEATED and isinstance(item, dict | list) and item:
            under = added_set(item, item_atom)
            if under is not EMPTY:
                children[pe] = under
    return _shared(frozenset(items), children)


# The sets of added keyed lists of flat items, by their shape (see _flat_shape), each with its list type
# (whose id the shape holds).
_FLAT_LISTS: dict[tuple[Any, ...], tuple[ListType, Set]] = {}


def _flat_shape(lt: ListType, value: list[Any]) -> tuple[Any, ...] | None:
    """What the set of ``value``, a list keyed by one field whose items are maps of plain scalars (a pod's
    conditions, most keyed lists), depends on: each item's fields and its key's value and type. Read in C,
    where a walk would visit each item and field. None for any other list (the walk takes it)."""
    try:
        if not _PLAIN_SCALARS.issuperset(map(type, chain.from_iterable(map(dict.values, value)))):
            return None
        keys = tuple(map(itemgetter(lt.keys[0]), value))
    except (TypeError, KeyError):  # an item that is not a map, or that lacks the key (the walk reports it)
        return None
    return id(lt), tuple(map(tuple, value)), keys, tuple(map(type, keys))


_FIELD_MEMBERS: dict[tuple[str, ...], frozenset[PathElement]] = {}


def _field_members(keys: tuple[str, ...]) -> frozenset[PathElement]:
    """The field elements of a map with these keys, shared by every map of that shape (objects of one kind
    repeat a few: each condition, each container status)."""
    found = _FIELD_MEMBERS.get(keys)
    if found is None:
        if len(_FIELD_MEMBERS) >= 4096:
            _FIELD_MEMBERS.clear()
        found = _FIELD_MEMBERS[keys] = frozenset([("f", key) for key in keys])
    return found


_SHARED_SIZE = 4096
# Set nodes of added values by their members and (already shared) children: objects of one kind add the
# same shapes over and over (a pod's conditions, its container statuses), and a shared node keeps the
# FieldsV1 it was once written as, so the entry of every later owner of that shape is mostly copied, not
# written again. A key names children by identity: they are held here (as parts of the nodes above them
# are) for as long as the key, so no other node can take their id meanwhile.
_SHARED: dict[tuple[frozenset[PathElement], tuple[tuple[PathElement, int], ...]], Set] = {}


def _shared(members: frozenset[PathElement], children: dict[PathElement, Set]) -> Set:
    """``Set(members, children)``, the very node an earlier added value of that shape got when there is one
    (sets are never changed once built, so sharing one is safe)."""
    key = (members, tuple([(pe, id(child)) for pe, child in children.items()]) if children else ())
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_SIZE:
            _SHARED.clear()
        found = _SHARED[key] = Set(members, children)
    return found


def equal(a: Any, b: Any) -> bool:
    # Python's == treats True as 1; value.Equals does not.
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    return bool(a == b)


def compare(lhs: Any, rhs: Any, atom: Atom) -> Comparison:
    walker = _Compare()
    walker.walk(lhs, rhs, atom, ())
    return Comparison(walker.removed.freeze(), walker.modified.freeze(), walker.added.freeze())


# --- Merge ------------------------------------------------------------------------------------------------

def merge(lhs: Any, rhs: Any, atom: Atom) -> Any:
    """``rhs`` (an applied configuration) merged over ``lhs`` (the live object): rhs wins on leaves and atomic
    values, maps merge by key, associative lists by item key. Raises TypedError for a duplicate key in rhs."""
    out = _merge(lhs, rhs, atom)
    return None if out is MISSING else out


def _merge(lhs: Any, rhs: Any, atom: Atom) -> Any:
    alhs = atom.deduce(lhs)
    arhs = atom.deduce(rhs)
    if rhs is MISSING:
        return _merge_atom(alhs, lhs, rhs)
    return _merge_atom(arhs, lhs, rhs)


def _keep_rhs(lhs: Any, rhs: Any) -> Any:
    return rhs if rhs is not MISSING else lhs


def _merge_atom(atom: Atom, lhs: Any, rhs: Any) -> Any:
    if atom.map is not None:
        lm = lhs if isinstance(lhs, dict) else None
        rm = rhs if isinstance(rhs, dict) else None
        if atom.map.atomic or (not lm and not rm):
            return _keep_rhs(lhs, rhs)
        m = atom.map
        out: dict[str, Any] = {}
        lm = lm or {}
        rm = rm or {}
        for key in (*lm, *(k for k in rm if k not in lm)):
            merged = _merge(lm.get(key, MISSING), rm.get(key, MISSING), m.child(key))
            if merged is not MISSING:
                out[key] = merged
        return out if out else MISSING
    if atom.scalar:
        return _keep_rhs(lhs, rhs)
    if atom.list is not None:
        ll = lhs if isinstance(lhs, list) else None
        rl = rhs if isinstance(rhs, list) else None
        lt = atom.list
        if not lt.associative or (not ll and not rl):
            return _keep_rhs(lhs, rhs)
        items = _merge_items(lt, ll or [], rl or [])
        return items if items else MISSING
    return _keep_rhs(lhs, rhs)


def _index_items(lt: ListType, items: list[Any],
                 allow_duplicates: bool) -> tuple[list[PathElement], dict[PathElement, Any]]:
    pes: list[PathElement] = []
    observed: dict[PathElement, Any] = {}
    for i, item in enumerate(items):
        try:
            pe = item_element(lt, item)
        except TypedError as e:
            raise TypedError(f"element {i}: {e}") from None
        if pe in observed:
            if not allow_duplicates:
                raise TypedError(f"duplicate entries for key {pe_string(pe)}")
            observed[pe] = None
        else:
            observed[pe] = item
        pes.append(pe)
    return pes, observed


def pe_string(pe: PathElement) -> str:
    from controller_manager.sim.apiserver.fieldmanager.fieldpath import element_string

    return element_string(pe)


def _merge_items(lt: ListType, lhs: list[Any], rhs: list[Any]) -> list[Any]:
    """visitListItems: rhs order wins for the items both sides share; lhs-only items stay where they were
    relative to them, rhs-only items follow their rhs neighbours."""
    rpes, robserved = _index_items(lt, rhs, False)
    lpes, lobserved = _index_items(lt, lhs, True)
    elem = lt.elem()
    shared = [pe for pe in rpes if pe in lobserved]
    shared_pos = 0
    next_shared = shared[0] if shared else None
    merged_rhs: set[PathElement] = set()
    out: list[Any] = []

    def emit(pe: PathElement, lchild: Any, rchild: Any) -> None:
        value = _merge(lchild, rchild, elem)
        if value is not MISSING:
            out.append(value)

    li = ri = 0
    while li < len(lpes) or ri < len(rpes):
        if li < len(lpes) and ri < len(rpes):
            pe = lpes[li]
            if pe == rpes[ri]:
                merged_rhs.add(pe)
                emit(pe, lobserved.get(pe, MISSING), robserved.get(pe, MISSING))
                li += 1
                ri += 1
                shared_pos += 1
                next_shared = shared[shared_pos] if shared_pos < len(shared) else None
                continue
            if pe in robserved and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lpes):
            pe = lpes[li]
            if pe not in robserved:
                emit(pe, lhs[li], MISSING)
                li += 1
                continue
            if pe in merged_rhs:
                li += 1
        if ri < len(rpes):
            pe = rpes[ri]
            merged_rhs.add(pe)
            emit(pe, lobserved.get(pe, MISSING), robserved.get(pe, MISSING))
            ri += 1
            if next_shared is not None and next_shared == pe:
                shared_pos += 1
                next_shared = shared[shared_pos] if shared_pos < len(shared) else None
    return out


# --- validation of an applied configuration -------------------------------------------------------------------

def validate(value: Any, atom: Atom) -> list[str]:
    """What SMD refuses when it reads an applied configuration: fields a struct does not declare, list items
    without their keys, duplicate keys (``.spec.foo: field not declared in schema``)."""
    out: list[str] = []
    _validate(value, atom, (), out)
    return out


def _validate(value: Any, atom: Atom, path: Path, out: list[str]) -> None:
    a = atom.deduce(value)
    if a.map is not None and isinstance(value, dict):
        m = a.map
        for key, val in value.items():
            child_path = (*path, ("f", key))
            if m.elem is None and not m.has_field(key):
                out.append(f"{_path_text(child_path)}: field not declared in schema")
                continue
            _validate(val, m.child(key), child_path, out)
    elif a.list is not None and isinstance(value, list) and a.list.associative:
        seen: set[PathElement] = set()
        elem = a.list.elem()
        for i, item in enumerate(value):
            try:
                pe = item_element(a.list, item)
            except TypedError as e:
                out.append(f"{_path_text(path)}: element {i}: {e}")
                continue
            if pe in seen:
                out.append(f"{_path_text(path)}: duplicate entries for key {pe_string(pe)}")
                continue
            seen.add(pe)
            _validate(item, elem, (*path, pe), out)


def _path_text(path: Path) -> str:
    from controller_manager.sim.apiserver.fieldmanager.fieldpath import path_string

    return path_string(path)


# --- RemoveItems ------------------------------------------------------------------------------------------

def remove_items(value: Any, to_remove: Set, atom: Atom) -> Any:
    """``value`` without the members of ``to_remove`` (a removed path takes its subtree with it); a map or
    list left empty by the removal becomes null, as SMD leaves it."""
    a = atom.deduce(value)
    if a.map is not None:
        if not isinstance(value, dict) or not value or a.map.atomic:
            return None
        m = a.map
        out: dict[str, Any] = {}
        for key, val in value.items():
            pe = ("f", key)
            if pe in to_remove.members:
                continue
            sub = to_remove.children.get(pe)
            out[key] = remove_items(val, sub, m.child(key)) if sub is not None else val
        return out or None
    if a.scalar:
        return value
    if a.list is not None:
        if not isinstance(value, list) or not value or not a.list.associative:
            return None
        elem = a.list.elem()
        items = []
        for item in value:
            try:
                pe = item_element(a.list, item)
            except TypedError:
                items.append(item)
                continue
            if pe in to_remove.members:
                continue
            sub = to_remove.children.get(pe)
            items.append(remove_items(item, sub, elem) if sub is not None else item)
        return items or None
    return value


def ensure_named_fields(s: Set, atom: Atom) -> Set:
    """``s`` plus, as members, every struct field it has children under (SMD owns a named field whose
    content is owned; a map key or list item is not made a member)."""
    if s.empty():
        return s
    members = set(s.members)
    children = {}
    for pe, child in s.children.items():
        kind = pe[0]
        if kind == "f" and atom.map is not None:
            if atom.map.has_field(pe[1]):
                members.add(pe)
            child_atom = atom.map.child(pe[1])
        elif kind == "k" and atom.list is not None:
            child_atom = atom.list.elem()
        else:
            child_atom = NONE
        children[pe] = ensure_named_fields(child, child_atom)
    return Set(frozenset(members), children)


# --- atoms from a CustomResourceDefinition's structural schema ------------------------------------------------

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_crd_atoms: dict[int, tuple[Any, Atom]] = {}


def crd_atom(openapi: dict[str, Any]) -> Atom:
    """The atom of a custom resource whose version has the structural schema ``openapi`` (the CRD's
    ``openAPIV3Schema``), as kube-openapi's schemaconv makes SMD's schema of the published OpenAPI: objects
    with properties are structs (granular unless ``x-kubernetes-map-type: atomic``), ``additionalProperties``
    maps, ``x-kubernetes-preserve-unknown-fields`` objects take unknown fields untyped, arrays follow
    ``x-kubernetes-list-type`` (atomic by default), ``apiVersion``/``kind`` are scalars and ``metadata``
    ObjectMeta (at the top and in embedded resources)."""
    hit = _crd_atoms.get(id(openapi))
    if hit is not None and hit[0] is openapi:
        return hit[1]
    atom = _schema_node_atom(openapi, top=True)
    _crd_atoms[id(openapi)] = (openapi, atom)
    return atom


def _schema_node_atom(node: Any, top: bool = False) -> Atom:
    if not isinstance(node, dict):
        return UNTYPED
    if node.get("x-kubernetes-int-or-string"):
        return UNTYPED
    kind = node.get("type")
    if kind == "array":
        items = node.get("items")
        item_atom = functools.cache(lambda: _schema_node_atom(items))
        list_type = node.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = tuple(str(k) for k in node.get("x-kubernetes-list-map-keys") or ())
            props = items.get("properties") if isinstance(items, dict) else None
            defaults = {k: props[k]["default"] for k in keys
                        if isinstance(props, dict) and isinstance(props.get(k), dict) and "default" in props[k]}
            return Atom(list=ListType(elem=item_atom, associative=True, keys=keys, key_defaults=defaults))
        return Atom(list=ListType(elem=item_atom, associative=list_type == "set"))
    if kind in ("string", "integer", "number", "boolean"):
        return SCALAR
    if kind != "object":
        return UNTYPED  # no type: anything (x-kubernetes-preserve-unknown-fields alone)
    props = node.get("properties")
    extra = node.get("additionalProperties")
    atomic = node.get("x-kubernetes-map-type") == "atomic"
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if isinstance(extra, dict) and not props:
        return Atom(map=MapType(elem=functools.cache(lambda: _schema_node_atom(extra)), atomic=atomic))
    named = dict(props) if isinstance(props, dict) else {}
    embedded = bool(node.get("x-kubernetes-embedded-resource"))
    cache: dict[str, Atom | None] = {}

    def fields(name: str) -> Atom | None:
        if name not in cache:
            if (top or embedded) and name in ("apiVersion", "kind"):
                cache[name] = SCALAR
            elif (top or embedded) and name == "metadata":
                cache[name] = struct_atom(_OBJECT_META)
            elif name in named:
                cache[name] = _schema_node_atom(named[name])
            else:
                cache[name] = None
        return cache[name]

    if not named and not top and not embedded and preserve:
        return Atom(map=MapType(elem=lambda: UNTYPED, atomic=atomic))
    return Atom(map=MapType(fields=fields, elem=(lambda: UNTYPED) if preserve else None, atomic=atomic))
