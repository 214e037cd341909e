"""A checked CEL expression made runnable on cel-python, which lacks some of what cel-go runs: optional values and
their syntax, calls by qualified name, and the macros of the extensions Kubernetes loads.

:func:`runnable` rewrites cel-python's parse tree (a copy: parse trees are cached and shared) where the type
checker (:mod:`..cel_checker`) says cel-go would do something else:
- optional selections and indexes (an explicit ``x.?f``/``x[?i]``, or a selection or index from a value that is
  itself optional, which cel-go makes optional too) and list or map literals with ``[?e]``/``{?k: v}`` entries
  become calls of :data:`FUNCTIONS` with cel-go's semantics (a missing field, key or index gives
  ``optional.none()``; an absent optional entry is left out of its literal); :class:`Optional` is the value;
- qualified calls (``optional.of(x)``, which cel-python would read as a method of a variable ``optional``;
  likewise ``ip.isCanonical``, ``sets.*``, ``strings.quote`` and ``format.*``, whose functions the caller
  supplies) become
  plain calls of that name;
- ``cel.bind(v, init, body)`` becomes ``[init].map(v, body)[0]``, ``optMap``/``optFlatMap`` a conditional, and
  the two-variable comprehensions (``all(i, v, p)``, ``exists``, ``existsOne``, ``transformList``,
  ``transformMap``, ``transformMapEntry``) one-variable macros over the target's [key, value] entries, each
  variable a reference into the entry (an inner macro binding the same name shadows it).
"""


from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import lark
from celpy import celtypes

from controller_manager.sim.apiserver import cel_checker

__all__ = ["FUNCTIONS", "NONE", "Optional", "OptionalError", "runnable"]

# the library functions called by a qualified name, which the rewrite turns into plain calls of that name
_QUALIFIED = {"optional": frozenset({"of", "none", "ofNonZeroValue"}), "ip": frozenset({"isCanonical"}),
              "sets": frozenset({"contains", "equivalent", "intersects"}), "strings": frozenset({"quote"}),
              "format": frozenset({"named", "dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName",
                                   "dns1123LabelPrefix", "dns1123SubdomainPrefix", "dns1035LabelPrefix",
                                   "labelValue", "uri", "uuid", "byte", "date", "datetime"})}
_SELECT, _INDEX, _ENTRY, _LIST, _MAP = "@optSelect", "@optIndex", "@optEntry", "@optList", "@optMap"
_ENTRIES, _PAIRS_TO_MAP, _MERGE_MAPS = "@entries", "@pairsToMap", "@mergeMaps"


@dataclass(frozen=True)
class Optional:
    """An optional value: ``optional.none()`` (not ``present``) or ``optional.of(value)``."""

    value: Any = None
    present: bool = False


@dataclass(frozen=True)
class _Entry:
    """An optional literal entry's value, until its literal drops it (none) or unwraps it."""

    optional: Any


NONE = Optional()


class OptionalError(ValueError):
    """``value()`` of an empty optional."""


def _unwrap(value: Any) -> tuple[Any, bool]:
    """The value an optional holds (or the value itself), and whether there is one."""
    if isinstance(value, Optional):
        return value.value, value.present
    return value, True


def _select(target: Any, name: Any) -> Any:
    value, present = _unwrap(target)
    if not present:
        return NONE
    if isinstance(value, Mapping):
        key = celtypes.StringType(name)
        return Optional(value[key], True) if key in value else NONE
    raise TypeError("no such overload")


def _index(target: Any, index: Any) -> Any:
    value, present = _unwrap(target)
    if not present:
        return NONE
    if isinstance(value, list):
        if isinstance(index, bool) or not isinstance(index, int | float) or int(index) != index:
            raise TypeError("no such overload")
        i = int(index)
        return Optional(value[i], True) if 0 <= i < len(value) else NONE
    if isinstance(value, Mapping):
        return Optional(value[index], True) if index in value else NONE
    raise TypeError("no such overload")


def _entry(value: Any) -> _Entry:
    if not isinstance(value, Optional):
        raise TypeError("no such overload")
    return _Entry(value)


def _list(items: Any) -> Any:
    out = []
    for item in items:
        if isinstance(item, _Entry):
            if item.optional.present:
                out.append(item.optional.value)
        else:
            out.append(item)
    return celtypes.ListType(out)


def _map(entries: Any) -> Any:
    out = {}
    for key, item in entries.items():
        if isinstance(item, _Entry):
            if item.optional.present:
                out[key] = item.optional.value
        else:
            out[key] = item
    return celtypes.MapType(out)


def _is_zero(value: Any) -> bool:
    """CEL's zero values (``optional.ofNonZeroValue``): false, 0, 0u, 0.0, "", b"", [], {}, null, a zero duration
    and the epoch."""
    if value is None:
        return True
    if isinstance(value, datetime.timedelta):
        return value == datetime.timedelta(0)
    if isinstance(value, datetime.datetime):
        return value.timestamp() == 0
    if isinstance(value, bool | int | float | str | bytes | list | dict):
        return not value
    return False


def _optional(value: Any) -> Optional:
    if not isinstance(value, Optional):
        raise TypeError("no such overload")
    return value


def _value(value: Any) -> Any:
    held = _optional(value)
    if not held.present:
        raise OptionalError("optional.none() dereference")
    return held.value


def _entries(value: Any) -> Any:
    """A list's [index, element] or a map's [key, value] pairs."""
    if isinstance(value, Mapping):
        pairs = [celtypes.ListType([k, v]) for k, v in value.items()]
    elif isinstance(value, list):
        pairs = [celtypes.ListType([celtypes.IntType(i), v]) for i, v in enumerate(value)]
    else:
        raise TypeError("no such overload")
    return celtypes.ListType(pairs)


def _merge_maps(maps: Any) -> Any:
    merged: dict[Any, Any] = {}
    for entry in maps:
        merged.update(entry)
    return celtypes.MapType(merged)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    _ENTRIES: _entries, _PAIRS_TO_MAP: lambda pairs: celtypes.MapType({k: v for k, v in pairs}),
    _MERGE_MAPS: _merge_maps,
    _SELECT: _select, _INDEX: _index, _ENTRY: _entry, _LIST: _list, _MAP: _map,
    "optional.of": lambda value: Optional(value, True),
    "optional.none": lambda: NONE,
    "optional.ofNonZeroValue": lambda value: NONE if _is_zero(value) else Optional(value, True),
    "hasValue": lambda value: celtypes.BoolType(_optional(value).present),
    "value": _value,
    "orValue": lambda value, default: _optional(value).value if _optional(value).present else default,
    "or": lambda value, other: value if _optional(value).present else _optional(other),
}


# --- the rewrite ----------------------------------------------------------------------------------------------


def _string_literal(text: str) -> lark.Tree[Any]:
    return lark.Tree("literal", [lark.Token("STRING_LIT", '"' + text.replace("\\", "\\\\").replace('"', '\\"')
                                            + '"')])


_PRIMARIES = frozenset({"literal", "list_lit", "map_lit", "ident_arg"})


def _primary(tree: lark.Tree[Any]) -> lark.Tree[Any]:
    """A call or literal where cel-python's evaluator meets one: inside a ``primary``."""
    return lark.Tree("primary", [tree]) if tree.data in _PRIMARIES else tree


def _call(name: str, *args: Any) -> lark.Tree[Any]:
    """A call of a function of :data:`FUNCTIONS`, in place of a ``member`` child (a selection, an index, a method
    call) or of a ``primary`` (its literal argument)."""
    return lark.Tree("primary", [lark.Tree("ident_arg", [lark.Token("IDENT", name),
                                                         lark.Tree("exprlist", [_primary(a) for a in args])])])


def _qualified_call(tree: lark.Tree[Any]) -> lark.Tree[Any] | None:
    """``optional.of(x)`` as a call of the function ``optional.of`` (None: not such a call)."""
    target, name = tree.children[0], str(tree.children[1])
    while isinstance(target, lark.Tree) and target.data in ("member", "primary") and len(target.children) == 1:
        target = target.children[0]
    if not (isinstance(target, lark.Tree) and target.data == "ident"):
        return None
    if name not in _QUALIFIED.get(str(target.children[0]), frozenset()):
        return None
    args = tree.children[2:] if len(tree.children) > 2 else []
    return lark.Tree("primary", [lark.Tree("ident_arg", [lark.Token("IDENT", f"{target.children[0]}.{name}"),
                                                         *args])])


def _bind(tree: lark.Tree[Any]) -> lark.Tree[Any] | None:
    """``cel.bind(v, init, body)`` as ``[init].map(v, body)[0]``: ``init`` evaluated once, ``v`` bound to it in
    ``body`` (None: not such a call)."""
    target, name = tree.children[0], str(tree.children[1])
    while isinstance(target, lark.Tree) and target.data in ("member", "primary") and len(target.children) == 1:
        target = target.children[0]
    args = tree.children[2].children if len(tree.children) > 2 and isinstance(tree.children[2], lark.Tree) else []
    if not (name == "bind" and len(args) == 3 and isinstance(target, lark.Tree) and target.data == "ident"
            and str(target.children[0]) == "cel"):
        return None
    variable, init, body = args
    listed = lark.Tree("primary", [lark.Tree("list_lit", [lark.Tree("exprlist", [init])])])
    mapped = lark.Tree("member_dot_arg", [lark.Tree("member", [listed]), lark.Token("IDENT", "map"),
                                          lark.Tree("exprlist", [variable, body])])
    return lark.Tree("member_index", [lark.Tree("member", [mapped]),
                                      lark.Tree("literal", [lark.Token("INT_LIT", "0")])])


def _opt_map(tree: lark.Tree[Any]) -> lark.Tree[Any] | None:
    """``o.optMap(v, e)`` as ``o.hasValue() ? optional.of([o.value()].map(v, e)[0]) : optional.none()``
    (``optFlatMap``: without ``optional.of``), as cel-go expands the macros (None: not such a call)."""
    name = str(tree.children[1])
    args = tree.children[2].children if len(tree.children) > 2 and isinstance(tree.children[2], lark.Tree) else []
    if name not in ("optMap", "optFlatMap") or len(args) != 2:
        return None
    target, (variable, body) = tree.children[0], args
    value = lark.Tree("member_dot_arg", [target, lark.Token("IDENT", "value")])
    listed = lark.Tree("primary", [lark.Tree("list_lit", [lark.Tree("exprlist", [lark.Tree("member", [value])])])])
    mapped = lark.Tree("member_dot_arg", [lark.Tree("member", [listed]), lark.Token("IDENT", "map"),
                                          lark.Tree("exprlist", [variable, body])])
    result: lark.Tree[Any] = lark.Tree("member_index", [lark.Tree("member", [mapped]),
                                                         lark.Tree("literal", [lark.Token("INT_LIT", "0")])])
    if name == "optMap":
        result = _call("optional.of", lark.Tree("member", [result]))
    has_value = lark.Tree("member_dot_arg", [target, lark.Token("IDENT", "hasValue")])
    return lark.Tree("expr", [lark.Tree("member", [has_value]), lark.Tree("member", [result]),
                              _call("optional.none")])


_QUANTIFIERS = {"all": "all", "exists": "exists", "existsOne": "exists_one", "exists_one": "exists_one"}
_TRANSFORMS = frozenset({"transformList", "transformMap", "transformMapEntry"})


def _ident(name: str) -> lark.Tree[Any]:
    return lark.Tree("ident", [lark.Token("IDENT", name)])


def _simple_name(tree: Any) -> str | None:
    idents = list(tree.find_data("ident")) if isinstance(tree, lark.Tree) else []
    return str(idents[0].children[0]) if len(idents) == 1 else None


def _substitute(tree: Any, names: dict[str, lark.Tree[Any]]) -> Any:
    """``tree`` with each free reference to a name of ``names`` replaced by its expression."""
    if not isinstance(tree, lark.Tree) or not names:
        return tree
    if tree.data == "primary" and len(tree.children) == 1 and isinstance(tree.children[0], lark.Tree) \
            and tree.children[0].data == "ident" and str(tree.children[0].children[0]) in names:
        return lark.Tree("primary", [lark.Tree("paren_expr", [names[str(tree.children[0].children[0])]])])
    if tree.data == "member_dot_arg" and len(tree.children) > 2 and isinstance(tree.children[2], lark.Tree):
        # a macro binding one of the names shadows it in its other arguments
        args = tree.children[2].children
        bound = {_simple_name(arg) for arg in args[:-1]} if len(args) >= 2 else set()
        inner = {name: expr for name, expr in names.items() if name not in bound}
        return lark.Tree(tree.data, [_substitute(tree.children[0], names), tree.children[1],
                                     lark.Tree(tree.children[2].data, [_substitute(arg, inner) for arg in args])],
                         tree.meta)
    return lark.Tree(tree.data, [_substitute(child, names) for child in tree.children], tree.meta)


def _two_variable(tree: lark.Tree[Any]) -> lark.Tree[Any] | None:
    """ext.TwoVarComprehensions (``all(i, v, p)``, ``exists``, ``existsOne``, ``transformList``,
    ``transformMap``, ``transformMapEntry``) as one-variable macros over the target's [key, value] entries, each
    variable a reference into the entry (None: not such a call)."""
    name = str(tree.children[1])
    args = tree.children[2].children if len(tree.children) > 2 and isinstance(tree.children[2], lark.Tree) else []
    quantifier = _QUANTIFIERS.get(name) if len(args) == 3 else None
    if quantifier is None and not (name in _TRANSFORMS and len(args) in (3, 4)):
        return None
    first, second = _simple_name(args[0]), _simple_name(args[1])
    if first is None or second is None:
        return None
    entry = f"__entry{id(tree)}"  # (an identifier cel-python accepts; no rule names a variable so)
    names = {variable: lark.Tree("member_index", [lark.Tree("member", [lark.Tree("primary", [_ident(entry)])]),
                                                  lark.Tree("literal", [lark.Token("INT_LIT", str(i))])])
             for i, variable in enumerate((first, second))}
    entries: lark.Tree[Any] = lark.Tree("member", [_call(_ENTRIES, tree.children[0])])

    def macro(target: lark.Tree[Any], macro_name: str, body: Any) -> lark.Tree[Any]:
        return lark.Tree("member", [lark.Tree("member_dot_arg", [
            target, lark.Token("IDENT", macro_name),
            lark.Tree("exprlist", [_ident(entry), _substitute(body, names)])])])

    if quantifier is not None:
        return macro(entries, quantifier, args[2]).children[0]
    if len(args) == 4:
        entries = macro(entries, "filter", args[2])
    if name == "transformList":
        return macro(entries, "map", args[-1]).children[0]
    if name == "transformMap":
        pair = lark.Tree("primary", [lark.Tree("list_lit", [lark.Tree("exprlist", [
            lark.Tree("member", [lark.Tree("primary", [lark.Tree("paren_expr", [names[first]])])]), args[-1]])])])
        return _call(_PAIRS_TO_MAP, macro(entries, "map", pair))
    return _call(_MERGE_MAPS, macro(entries, "map", args[-1]))


def runnable(tree: Any, checked: cel_checker.Checked) -> Any:
    """``tree`` with its optional constructs as calls cel-python can run (the tree itself when it has none; a
    rewritten copy otherwise: parse trees are cached and shared)."""
    with cel_checker.room_for(tree):
        return _rewrite(tree, checked)


def _rewrite(tree: Any, checked: cel_checker.Checked) -> Any:
    if not isinstance(tree, lark.Tree):
        return tree
    children = [_rewrite(child, checked) for child in tree.children]
    data = str(tree.data)
    if id(tree) in checked.optional_selections:
        if data == "member_dot":
            return _call(_SELECT, children[0], _string_literal(str(children[1])))
        return _call(_INDEX, children[0], children[1])
    literal = tree.children[0] if data == "primary" and tree.children else None
    entries = checked.optional_entries.get(id(literal))
    if entries:  # a literal with optional entries, as the primary holding it
        built = children[0]
        items = list(built.children[0].children)
        if built.data == "list_lit":
            items = [_call(_ENTRY, item) if i in entries else item for i, item in enumerate(items)]
            return _call(_LIST, lark.Tree(built.data, [lark.Tree("exprlist", items)], built.meta))
        items = [_call(_ENTRY, item) if i % 2 and i // 2 in entries else item for i, item in enumerate(items)]
        return _call(_MAP, lark.Tree(built.data, [lark.Tree(built.children[0].data, items)], built.meta))
    if data == "member_dot_arg":
        rebuilt = lark.Tree(tree.data, children, tree.meta)
        call = _qualified_call(rebuilt) or _bind(rebuilt) or _opt_map(rebuilt) or _two_variable(rebuilt)
        if call is not None:
            return call
    if all(new is old for new, old in zip(children, tree.children, strict=True)):
        return tree
    return lark.Tree(tree.data, children, tree.meta)
