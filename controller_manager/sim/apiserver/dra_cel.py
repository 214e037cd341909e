"""CEL device selectors of dynamic resource allocation (``spec.selectors[].cel.expression`` of a DeviceClass, a
claim's or a template's requests), compiled at validation as ``k8s.io/dynamic-resource-allocation/cel`` and
``pkg/apis/resource/validation`` (validateCELSelector) compile them.

Parsing is :mod:`.crd.cel`'s (cel-python's grammar); type checking is :mod:`.cel_checker`'s (cel-go's checker,
in the environment this module declares: the ``device`` variable of a 1.37 server, DRAConsumableCapacity on,
DRAListTypeAttributes off, over Kubernetes' base CEL libraries).

Guarantees, each error at ``<path>.cel.expression``:
- Longer than 10 KiB: ``Too long: may not be more than 10240 bytes`` (not compiled).
- An expression that does not compile: ``Invalid value: "<expression>": compilation failed: ERROR: <input>:L:C:
  ...`` with cel-go's source line and caret: a syntax error; an undeclared name or function (``includes`` only
  in an expression already stored, the environment that has every feature's declarations); a field ``device``
  does not have (``undefined field 'foo'``); a call no overload accepts (``found no matching overload for '_==_'
  applied to '(string, int)'``, e.g. ``device.driver == 1``, a quantity compared with ``>``, a map indexed by a
  bool); an operand of ``&&``/``||`` or a macro's predicate that is not bool; a macro over an attribute's value
  (``any`` is no comprehension range); a list or map literal mixing types; nesting past cel-go's parser limit
  (``expression recursion limit exceeded: 250``, at no position). ``device`` has ``driver`` (string),
  ``allowMultipleAllocations`` (bool), ``attributes`` (``map(string, map(string, any))``: an attribute's value
  compares, indexes and calls as dyn) and ``capacity`` (``map(string, map(string, kubernetes.Quantity))``).
- A result neither bool nor ``any`` (an attribute's value): ``must evaluate to bool or the unknown type, not
  <type>`` (cel-go's type name: ``int``, ``dyn``, ``map(string, google.protobuf.Any)``...).
- A worst-case cost over 1,000,000 (cel-go's estimate, approximated: each comprehension costs its range's
  largest size times its body; a list literal's size is its length, an attribute map's 32 entries, anything
  else of a device 64): ``Forbidden: too complex, exceeds cost limit``.

Not done: cel-go's exact syntax-error texts beyond the common shapes :mod:`.cel_syntax` knows (otherwise
cel-python's position and ``Syntax error: mismatched input``); the checker's own gaps (see :mod:`.cel_checker`).
Selectors are not evaluated: kube-sim's scheduler allocates no devices.
"""

from __future__ import annotations

import functools
from typing import Any

import lark

from controller_manager.sim.apiserver import cel_checker
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
_SIZE = "x-max-size"  # the most entries a map taken from a device has (this module's own schema key)


def _map(value: Obj) -> Obj:
    return {"type": "object", _SIZE: _MAX_MAP_ENTRIES, "additionalProperties": value}


# ``device``'s shape, for the sizes the cost estimate assumes.
_DEVICE_SHAPE: Obj = {"type": "object", "properties": {
    "driver": {"type": "string"}, "allowMultipleAllocations": {"type": "boolean"},
    "attributes": _map(_map({})), "capacity": _map(_map({}))}}
_QUANTITY = "kubernetes.Quantity"

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})

# The type checker's view of ``device``. An attribute's value is ``any`` (cel-go's google.protobuf.Any: the checker
# treats it as dyn, except as a comprehension's range, which DRAListTypeAttributes' dyn would allow); the
# environment for stored expressions has every feature's declarations: DRAListTypeAttributes' ``includes``.
_DEVICE_TYPE = "kubernetes.DRADevice"
_DEVICE_FIELDS = {"driver": cel_checker.STRING, "allowMultipleAllocations": cel_checker.BOOL,
                  "attributes": cel_checker.parse_type("map(string, map(string, any))"),
                  "capacity": cel_checker.parse_type(f"map(string, map(string, {_QUANTITY}))")}
_LIBRARY = cel_checker.library(cel_checker.STANDARD, cel_checker.KUBERNETES)
_NEW_ENV = cel_checker.Environment({DEVICE: cel_checker.Type("struct", _DEVICE_TYPE)},
                                   {_DEVICE_TYPE: _DEVICE_FIELDS}, _LIBRARY)
_STORED_ENV = cel_checker.Environment({DEVICE: cel_checker.Type("struct", _DEVICE_TYPE)},
                                      {_DEVICE_TYPE: _DEVICE_FIELDS},
                                      cel_checker.library(_LIBRARY, {"includes": ["dyn.(dyn) -> bool"]}))


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
        tree = cel.parse_expression(expression)
        output = cel_checker.check(tree, expression, _STORED_ENV if stored else _NEW_ENV)
    except cel.CELCompileError as e:
        return fe.invalid("", expression, f"compilation failed: {e}")
    except cel_checker.CheckError as e:
        return fe.invalid("", expression, f"compilation failed: {cel_checker.issues_text(expression, e.issues)}")
    if output.kind not in ("bool", "any"):
        return fe.invalid("", expression, f"must evaluate to bool or the unknown type, not {output.declared()}")
    with cel_checker.room_for(tree):  # a long chain of && nests deep
        cost = _cost(tree)
    if cost > MAX_COST:
        return fe.forbidden("", "too complex, exceeds cost limit")
    return None


# --- sizes ------------------------------------------------------------------------------------------------------


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
        return _DEVICE_SHAPE if str(node.children[0]) == DEVICE else None
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

