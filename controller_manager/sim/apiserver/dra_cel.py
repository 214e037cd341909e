"""CEL device selectors of dynamic resource allocation (``spec.selectors[].cel.expression`` of a DeviceClass, a
claim's or a template's requests), compiled at validation as ``k8s.io/dynamic-resource-allocation/cel`` and
``pkg/apis/resource/validation`` (validateCELSelector) compile them.

Parsing and name checks are :mod:`.crd.cel`'s (cel-python's grammar); this module declares the ``device``
variable of a 1.37 server (DRAConsumableCapacity on, DRAListTypeAttributes off) and adds DRA's own checks.

Guarantees, each error at ``<path>.cel.expression``:
- Longer than 10 KiB: ``Too long: may not be more than 10240 bytes`` (not compiled).
- A syntax error, an undeclared name or function (``includes`` only in an expression already stored, the
  environment that has every feature), or a field ``device`` does not have (``undefined field 'foo'``): ``Invalid
  value: "<expression>": compilation failed: ERROR: <input>:L:C: ...`` with cel-go's source line and caret.
  ``device`` has ``driver`` (string), ``allowMultipleAllocations`` (bool), ``attributes``
  (``map(string, map(string, any))``) and ``capacity`` (``map(string, map(string, kubernetes.Quantity))``);
  a key of either map that is evidently not a string is ``found no matching overload for '_[_]' applied to
  '(<map>, <key>)'``. The Kubernetes libraries' ``quantity``/``semver``/``isSemver`` and ``cel.bind`` are
  declared.
- A result evidently neither bool nor an attribute's value: ``must evaluate to bool or the unknown type, not
  <type>``.
- A worst-case cost over 1,000,000 (cel-go's estimate, approximated: each comprehension costs its range's
  largest size times its body; a list literal's size is its length, an attribute map's 32 entries, anything
  else of a device 64): ``Forbidden: too complex, exceeds cost limit``.

Not done: cel-go's full type checker (overloads other than a map key, e.g. ``device.driver == 1``); cel-go's exact
syntax-error texts (cel-python's parser is used, the text is ``Syntax error: mismatched input``). Selectors are
not evaluated: kube-sim's scheduler allocates no devices.
"""

from __future__ import annotations

import functools
from typing import Any

import lark

from controller_manager.sim.apiserver import validation_errors as fe
from controller_manager.sim.apiserver.crd import cel
from controller_manager.sim.apiserver.validation_errors import FieldError

Obj = dict[str, Any]

# resource.CELSelectorExpressionMaxLength, resource.CELSelectorExpressionMaxCost
MAX_LENGTH = 10 * 1024
MAX_COST = 1_000_000
# resource.ResourceSliceMaxAttributesAndCapacitiesPerDevice: entries of an attributes or capacity map
_MAX_MAP_ENTRIES = 32
# resource.DeviceAttributeMaxValueLength: the size assumed for any other value taken from a device
_DEFAULT_SIZE = 64

DEVICE = "device"
_ANY = "any"
_TYPE = "x-cel-type"  # the cel-go type name of a schema node (this module's own key)
_SIZE = "x-max-size"


def _map(value: Obj, name: str) -> Obj:
    return {"type": "object", _TYPE: name, _SIZE: _MAX_MAP_ENTRIES, "additionalProperties": value}


_ATTRIBUTES = _map(_map({_TYPE: _ANY}, "map(string, any)"), "map(string, map(string, any))")
_QUANTITY = "kubernetes.Quantity"
_CAPACITY = _map(_map({_TYPE: _QUANTITY}, f"map(string, {_QUANTITY})"), f"map(string, map(string, {_QUANTITY}))")
DEVICE_SCHEMA: Obj = {"type": "object", _TYPE: "kubernetes.DRADevice", "properties": {
    "driver": {"type": "string"}, "allowMultipleAllocations": {"type": "boolean"},
    "attributes": _ATTRIBUTES, "capacity": _CAPACITY}}

_FUNCTIONS = frozenset({"semver", "isSemver", "cel.bind"})
_METHODS = frozenset({"major", "minor", "patch", "isGreaterThan", "isLessThan", "compareTo"})
# The environment for expressions already stored has every feature's declarations (DRAListTypeAttributes').
_STORED_METHODS = _METHODS | {"includes"}
_SCALAR_NAMES = {"bool": "bool", "int": "int", "uint": "uint", "double": "double", "string": "string",
                 "bytes": "bytes", "null_type": "null_type", "list": "list(dyn)", "map": "map(dyn, dyn)"}
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


def _declarations(stored: bool) -> cel.Declarations:
    return cel.Declarations({DEVICE: DEVICE_SCHEMA}, functions=_FUNCTIONS,
                            methods=_STORED_METHODS if stored else _METHODS)


def selector_errors(expression: str, path: str, *, stored: bool = False) -> list[FieldError]:
    """validateCELSelector for ``<path>.cel`` (see the module docstring). ``stored``: the expression is already
    in the stored object an update replaces."""
    epath = f"{path}.expression"
    if len(expression.encode()) > MAX_LENGTH:
        return [FieldError(fe.TOO_LONG, epath, f"may not be more than {MAX_LENGTH} bytes", fe.OMIT)]
    error = _compile(expression, stored)
    return [] if error is None else [FieldError(error.type, epath, error.detail, error.bad_value)]


@functools.lru_cache(maxsize=1024)
def _compile(expression: str, stored: bool) -> FieldError | None:
    """One expression's verdict, the error given at an empty path (cached: claims repeat their classes'
    selectors)."""
    try:
        checked = cel.check_expression(expression, _declarations(stored))
        _check_map_keys(checked.tree, expression)
    except cel.CELCompileError as e:
        return fe.invalid("", expression, f"compilation failed: {e}")
    result = _type_name(checked.tree) or (_SCALAR_NAMES.get(checked.result_type or "") if checked.result_type
                                          else None)
    if result is not None and result not in ("bool", _ANY):
        return fe.invalid("", expression, f"must evaluate to bool or the unknown type, not {result}")
    if _cost(checked.tree) > MAX_COST:
        return fe.forbidden("", "too complex, exceeds cost limit")
    return None


# --- types ------------------------------------------------------------------------------------------------------


def _unwrap(node: Any) -> Any:
    while isinstance(node, lark.Tree) and len(node.children) == 1 and node.data in (
            "expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member",
            "primary", "paren_expr"):
        node = node.children[0]
    return node


def _schema_of(node: Any) -> Obj | None:
    """The schema node of what a selection from ``device`` gives (fields and map indexes), or None."""
    node = _unwrap(node)
    if not isinstance(node, lark.Tree):
        return None
    if node.data == "ident":
        return DEVICE_SCHEMA if str(node.children[0]) == DEVICE else None
    if node.data in ("member_dot", "member_index"):
        parent = _schema_of(node.children[0])
        if parent is None:
            return None
        if node.data == "member_dot" and str(node.children[1]) in parent.get("properties", {}):
            sub: Obj = parent["properties"][str(node.children[1])]
            return sub
        extra = parent.get("additionalProperties")
        return extra if isinstance(extra, dict) else None
    return None


def _type_name(node: Any) -> str | None:
    schema = _schema_of(node)
    if schema is None:
        return None
    name = schema.get(_TYPE)
    if name is None:
        return _SCALAR_NAMES.get({"string": "string", "boolean": "bool"}.get(str(schema.get("type")), ""))
    return str(name)


def _literal_type(node: Any) -> str | None:
    node = _unwrap(node)
    if isinstance(node, lark.Tree) and node.data == "literal":
        token = node.children[0]
        kinds = {"BOOL_LIT": "bool", "INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double",
                 "NULL_LIT": "null_type", "BYTES_LIT": "bytes", "STRING_LIT": "string", "MLSTRING_LIT": "string"}
        return kinds.get(getattr(token, "type", ""))
    return None


def _last_token(node: Any) -> lark.Token | None:
    tokens = [t for t in (node.scan_values(lambda v: isinstance(v, lark.Token)) if isinstance(node, lark.Tree)
                          else [node]) if isinstance(t, lark.Token) and t.end_column is not None]
    return max(tokens, key=lambda t: (t.end_line or 0, t.end_column or 0), default=None)


def _check_map_keys(tree: Any, text: str) -> None:
    """cel-go's overload check of ``_[_]`` on the device's maps: their keys are strings."""
    for node in tree.iter_subtrees_topdown():
        if node.data != "member_index":
            continue
        target, key = node.children
        map_type = _type_name(target)
        key_type = _literal_type(key)
        if map_type is None or not map_type.startswith("map(") or key_type in (None, "string"):
            continue
        last = _last_token(target)
        line, column = (last.end_line or 1, (last.end_column or 1)) if last is not None else (1, 1)
        source = text.splitlines()[line - 1] if text.splitlines() else ""
        raise cel.CELCompileError(
            f"ERROR: <input>:{line}:{column}: found no matching overload for '_[_]' applied to "
            f"'({map_type}, {key_type})'\n | {source}\n | {'.' * (column - 1)}^")


# --- cost ------------------------------------------------------------------------------------------------------


def _size(node: Any) -> int:
    """The most elements a comprehension's range can have."""
    node = _unwrap(node)
    if isinstance(node, lark.Tree) and node.data == "list_lit":
        return len(node.children[0].children) if node.children and isinstance(node.children[0], lark.Tree) else 0
    if isinstance(node, lark.Tree) and node.data == "map_lit":
        return len(node.children[0].children) // 2 if node.children and isinstance(node.children[0], lark.Tree) \
            else 0
    schema = _schema_of(node)
    return int(schema.get(_SIZE, _DEFAULT_SIZE)) if schema is not None else _DEFAULT_SIZE


def _cost(node: Any) -> int:
    """A worst-case cost in cel-go's units, near enough to tell a selector over the limit from one under it:
    one per variable, selection, index, operator and call, ten per list literal and thirty per map literal,
    and a comprehension's body (plus its loop bookkeeping) once per element of its range."""
    node = _unwrap(node)
    if not isinstance(node, lark.Tree):
        return 0
    data, children = node.data, node.children
    if data == "literal":
        return 0
    if data == "ident":
        return 1
    if data == "member_dot_arg" and str(children[1]) in _MACROS:
        args = children[2].children if len(children) > 2 and isinstance(children[2], lark.Tree) else []
        body = sum(_cost(arg) for arg in args[1:])
        return _cost(children[0]) + _size(children[0]) * (body + 3)
    own = {"list_lit": 10, "map_lit": 30, "exprlist": 0, "mapinits": 0}.get(data, 1)
    return own + sum(_cost(child) for child in children)


def is_stored(expression: str, old_selectors: Any) -> bool:
    """Whether ``expression`` is one of an old object's selectors (an update validates it as stored)."""
    return expression in _expressions(old_selectors)


def _expressions(selectors: Any) -> frozenset[str]:
    out = set()
    for selector in selectors if isinstance(selectors, list) else []:
        expr = (selector.get("cel") or {}).get("expression") if isinstance(selector, dict) else None
        if isinstance(expr, str):
            out.add(expr)
    return frozenset(out)

