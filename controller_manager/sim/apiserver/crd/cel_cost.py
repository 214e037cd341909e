"""The worst-case cost of a CRD validation rule, estimated as cel-go's cost estimator does (``checker/cost.go``)
with the sizes apiextensions-apiserver derives from the schema, and the CRD-write refusal of a rule over budget.

The estimate walks the checked syntax (:class:`..cel_checker.Checked`): one unit per variable, field selection
(from a map or object) and call, ten per list literal and thirty per map literal, string operations by length
(a tenth of a unit per character; ``matches``, ``find`` and ``findAll`` the string's times a quarter of the
pattern's), ``in`` a list by its size, and a comprehension's condition and step once per element of its range.
Sizes come from literals, from the schema (``maxItems``, ``maxProperties``, ``maxLength`` times 4, a string enum's
longest value; otherwise as many as fit in a 3 MiB request given the elements' smallest JSON form) and from what
a function returns (``lowerAscii`` keeps its string's size...); an unknown size is unbounded.

The rule's cost is its estimate times how often the rule may run in one object: the product of its list and map
ancestors' ``maxItems``/``maxProperties``, or, with one unbounded, how many of its node's smallest JSON form fit
in 3 MiB (a messageExpression's cost is taken once). Over 10,000,000 upstream refuses the rule with ``Forbidden:
estimated rule cost exceeds budget by factor of <f>`` (``more than 100x``; ``2.5x``; ``1.363149x`` under 1.5).
The estimate follows cel-go's rules (upstream's TestCostEstimation figures are met exactly), but some library
functions' own estimates are approximated here (``join``, ``split``, ``replace``, ``format``, a string's
``indexOf``, ``url``, ``quantity``, ``ip``, ``cidr``, ``semver``...): a rule using one is refused only past 100x,
where the approximation cannot matter. An unknown size (a conversion's result) is unbounded, as in cel-go. The
schema's total (every rule's cost times its cardinality, and every messageExpression's) is limited to 100,000,000
in the same way (``x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget
by factor of <f>``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from controller_manager.sim.apiserver import cel_checker
from controller_manager.sim.apiserver.cel_checker import (
    Call,
    Comprehension,
    CreateList,
    CreateMap,
    Ident,
    Literal,
    Node,
    Select,
)
from controller_manager.sim.apiserver.crd import cel_types
from controller_manager.sim.apiserver.recursion import room_for_depth

__all__ = ["COST_LIMIT", "CRD_COST_LIMIT", "Estimate", "max_cardinality", "refusal", "rule_cost"]

Obj = dict[str, Any]

COST_LIMIT = 10_000_000  # apiextensions' StaticEstimatedCostLimit: per rule
CRD_COST_LIMIT = 100_000_000  # StaticEstimatedCRDCostLimit: all of a schema's rules
_MAX_REQUEST = 3 * 1024 * 1024  # apiserver's DefaultMaxRequestSizeBytes
_UNBOUNDED = 2 ** 64 - 1
_STRING_FACTOR = 0.1  # StringTraversalCostFactor
_REGEX_FACTOR = 0.25  # RegexStringLengthCostFactor
_MIN_SIZES = {"integer": 1, "number": 1, "boolean": 4}  # MinNumberSize, MinBoolSize
_FORMAT_MIN_SIZES = {"duration": 3, "date": 12, "date-time": 21}
_FORMAT_MAX_SIZES = {"duration": 32, "date": 12, "date-time": 32}


def _add(a: int, b: int) -> int:
    return min(a + b, _UNBOUNDED)


def _mul(a: int, b: int) -> int:
    return min(a * b, _UNBOUNDED)


def _factor(a: int, factor: float) -> int:
    return min(math.ceil(a * factor), _UNBOUNDED)


# --- sizes from the schema -------------------------------------------------------------------------------------


def _obj(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def min_size(schema: Obj) -> int:
    """The smallest JSON form of a value of ``schema`` (apiserver's MinSerializedSize)."""
    if schema.get("x-kubernetes-int-or-string"):
        return 1
    kind = schema.get("type")
    if kind == "string":
        return _FORMAT_MIN_SIZES.get(str(schema.get("format") or ""), 2)
    if kind == "object" and not isinstance(schema.get("additionalProperties"), dict):
        required = set(schema.get("required") or [])
        size = 2
        for name, prop in _obj(schema.get("properties")).items():
            if name in required and isinstance(prop, dict) and "default" not in prop:
                size += len(name) + min_size(prop) + 4
        return size
    if kind in ("array", "object"):
        return 2
    return _MIN_SIZES.get(str(kind), 1)


def _max_elements(schema: Obj) -> int:
    """apiserver's DeclType.MaxElements: the most characters, bytes, items or entries a value may have."""
    if schema.get("x-kubernetes-int-or-string"):
        limit = schema.get("maxLength")
        return int(limit) * 4 if isinstance(limit, int) else _MAX_REQUEST - 2
    kind = schema.get("type")
    if kind == "array":
        items = _obj(schema.get("items"))
        limit = schema.get("maxItems")
        return max(int(limit), 0) if isinstance(limit, int) else (_MAX_REQUEST - 2) // (min_size(items) + 1)
    if kind == "object":
        values = schema.get("additionalProperties")
        limit = schema.get("maxProperties")
        if isinstance(limit, int):
            return max(limit, 0)
        return (_MAX_REQUEST - 2) // (min_size(values) + 6) if isinstance(values, dict) else 0
    if kind == "string":
        fmt = str(schema.get("format") or "")
        limit = schema.get("maxLength")
        if fmt == "byte":
            return max(int(limit), 0) if isinstance(limit, int) else _MAX_REQUEST - 2
        if fmt in _FORMAT_MAX_SIZES:
            return _FORMAT_MAX_SIZES[fmt]
        if isinstance(limit, int):
            return max(limit, 0) * 4
        enum = [v for v in schema.get("enum") or [] if isinstance(v, str)]
        return max((len(v) for v in enum), default=0) if enum else _MAX_REQUEST - 2
    return 0


def _schema_at(schema: Obj, root: bool, path: tuple[str, ...]) -> Obj | None:
    """The schema node a path from ``self`` leads to (field names as CEL spells them, ``@items``, ``@values``)."""
    current = cel_types.with_type_and_object_meta(schema) if root else schema
    for step in path:
        if step == "@items":
            current = _obj(current.get("items"))
        elif step == "@values":
            current = _obj(current.get("additionalProperties"))
        elif step in ("@keys", "@indices"):
            return {}  # a map's key type carries no size (MaxElements 0)
        else:
            props = _obj(current.get("properties"))
            found = next((p for name, p in props.items() if step in (name, cel_types.escape(name))), None)
            if not isinstance(found, dict):
                return None
            current = found
            if current.get("x-kubernetes-embedded-resource"):
                current = cel_types.with_type_and_object_meta(current)
    return current


# --- the estimate ----------------------------------------------------------------------------------------------


@dataclass
class _Local:
    path: tuple[str, ...] | None
    size: int | None


_SCALARS = frozenset({"bool", "int", "uint", "double", "timestamp", "duration"})
_ORDERING = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
_STRING_RESULT = frozenset({"lowerAscii", "upperAscii", "substring", "trim"})
_LIST_TRAVERSAL = frozenset({"isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"})
# cel-go's O(1) functions (one unit each), and the optional library's
_CONSTANT = frozenset({
    "!_", "-_", "_+_", "_-_", "_*_", "_/_", "_%_", "_<_", "_<=_", "_>_", "_>=_", "@not_strictly_false", "@in", "size",
    "int", "uint", "double", "bool", "string", "bytes", "duration", "timestamp", "type", "getFullYear", "getMonth",
    "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours", "getMinutes", "getSeconds",
    "getMilliseconds", "optional.of", "optional.none", "optional.ofNonZeroValue", "hasValue", "value", "orValue",
    "or", "cel.@mapInsert"})
_STRING_TRAVERSAL = frozenset({"url", "isURL", "quantity", "isQuantity", "ip", "isIP", "cidr", "isCIDR", "semver",
                               "isSemver"})


def _library_type(t: cel_checker.Type | None) -> bool:
    """A value type of Kubernetes' libraries (``net.IP``, ``kubernetes.Quantity``...), which has no size."""
    return t is not None and ((t.kind == "struct" and "." in t.name and not t.name.startswith("selfType"))
                              or t.kind == "opaque")


class _Coster:
    def __init__(self, schema: Obj, root: bool) -> None:
        self.schema = schema
        self.root = root
        self.paths: dict[int, tuple[str, ...]] = {}
        self.sizes: dict[int, int] = {}
        self.entries: dict[int, int] = {}  # a literal's or computed list's largest element size
        self.locals: dict[str, list[_Local]] = {}
        # whether a function whose own estimate this module approximates was costed
        self.approximate = False

    def path(self, node: Node) -> tuple[str, ...] | None:
        if isinstance(node, Ident) and self.locals.get(node.name):
            return self.locals[node.name][-1].path
        return self.paths.get(id(node))

    def size(self, node: Node) -> int:
        """cel-go's sizeOrUnknown: the most elements (or characters) ``node``'s value may have."""
        if id(node) in self.sizes:
            return self.sizes[id(node)]
        if isinstance(node, Literal):
            return len(cel_checker.string_value(node.token) or "") if node.value_type == cel_checker.STRING \
                else 1
        if isinstance(node, CreateList):
            return len(node.elements)
        if isinstance(node, CreateMap):
            return len(node.entries)
        path = self.path(node)
        if path:  # Kubernetes' estimator walks any path from the rule's node, past its first name (self or not)
            found = _schema_at(self.schema, self.root, path[1:])
            if found is not None:
                return _max_elements(found)
        t = node.type
        if t is not None and (t.kind in _SCALARS or (t.kind == "opaque" and t.name == "optional_type" and t.params
                                                     and t.params[0].kind in _SCALARS)):
            return 1
        if isinstance(node, Ident) and self.locals.get(node.name):
            local = self.locals[node.name][-1]
            if local.size is not None:
                return local.size
        return _UNBOUNDED

    def cost(self, node: Node) -> int:
        if isinstance(node, Literal):
            return 0
        if isinstance(node, Ident):
            locals_ = self.locals.get(node.name)
            if not locals_:
                self.paths[id(node)] = (node.name,)
            return 1
        if isinstance(node, Select):
            assert node.operand is not None
            total = self.cost(node.operand)
            if node.test_only:
                return total  # has(): PresenceTestHasCost(false)
            operand = node.operand.type
            if node.optional or (operand is not None and operand.kind in ("map", "struct", "param")):
                total = _add(total, 1)
            base = self.path(node.operand)
            if base is not None:
                self.paths[id(node)] = (*base, node.field_name)
            return total
        if isinstance(node, CreateList):
            total, largest = 10, 0
            for element in node.elements:
                total = _add(total, self.cost(element))
                largest = max(largest, self.size(element))
            self.entries[id(node)] = largest
            return total
        if isinstance(node, CreateMap):
            total = 30
            for key, value in node.entries:
                total = _add(_add(total, self.cost(key)), self.cost(value))
            return total
        if isinstance(node, Comprehension):
            return self.comprehension(node)
        assert isinstance(node, Call)
        return self.call(node)

    def comprehension(self, node: Comprehension) -> int:
        assert node.iter_range is not None
        assert node.accu_init is not None
        assert node.condition is not None
        assert node.step is not None
        assert node.result is not None
        total = _add(self.cost(node.iter_range), self.cost(node.accu_init))
        self.locals.setdefault(node.accu_var, []).append(_Local(None, self.size(node.accu_init)))
        if node.iter_var == "#unused":  # cel.bind: its value once, then the result
            total = _add(total, self.cost(node.result))
            self.locals[node.accu_var].pop()
            return total
        range_type = node.iter_range.type
        base = self.path(node.iter_range)
        is_list = range_type is not None and range_type.kind == "list"
        element = self.entries.get(id(node.iter_range)) if is_list else None
        pushed = [node.iter_var] + ([node.iter_var2] if node.iter_var2 else [])
        if node.iter_var2:
            self.locals.setdefault(node.iter_var, []).append(_Local(None, 1 if is_list else None))
            self.locals.setdefault(node.iter_var2, []).append(
                _Local((*base, "@items" if is_list else "@values") if base else None, element))
        else:
            self.locals.setdefault(node.iter_var, []).append(
                _Local((*base, "@items" if is_list else "@keys") if base else None, element))
        per_element = _add(self.cost(node.condition), self.cost(node.step))
        for name in pushed:
            self.locals[name].pop()
        total = _add(total, self.cost(node.result))
        self.locals[node.accu_var].pop()
        count = self.size(node.iter_range)
        if isinstance(node.accu_init, CreateList | CreateMap):
            self.sizes[id(node)] = count
        return _add(total, _mul(count, per_element))

    def call(self, node: Call) -> int:
        name = node.function
        args = node.args
        costs = [self.cost(arg) for arg in args]
        total = self.cost(node.target) if node.target is not None else 0
        for cost in costs:
            total = _add(total, cost)
        if name == "dyn" and args:
            self.sizes[id(node)] = self.size(args[0])
            return _add(1, costs[0])
        if name in ("_&&_", "_||_"):
            return total
        if name == "_?_:_":
            self.sizes[id(node)] = max(self.size(args[1]), self.size(args[2]))
            return _add(costs[0], max(costs[1], costs[2]))
        if name in ("_[_]", "_[?_]") and args:
            base = self.path(args[0])
            container = args[0].type
            if base is not None and container is not None:
                step = "@items" if container.kind == "list" else "@values"
                self.paths[id(node)] = (*base, step)
            if id(args[0]) in self.entries:
                self.sizes[id(node)] = self.entries[id(args[0])]
            return _add(total, 1)
        types = [a.type.kind if a.type is not None else "dyn" for a in args]
        if name == "_+_" and len(args) == 2 and types[0] in ("string", "bytes", "list"):
            size = _add(self.size(args[0]), self.size(args[1]))
            self.sizes[id(node)] = size
            return _add(total, 1 if types[0] == "list" else _factor(size, _STRING_FACTOR))
        if name in ("_==_", "_!=_") and any(_library_type(a.type) for a in args):
            self.approximate = True  # Kubernetes' estimator prices its own types' equality
            return _add(total, 1)
        if name in ("_==_", "_!=_") or (name in _ORDERING and types[0] in ("string", "bytes")):
            smallest = min(self.size(args[0]), self.size(args[1]))
            return _add(total, _factor(smallest, _STRING_FACTOR))
        if name == "@in" and len(args) == 2 and types[1] == "list":
            return _add(total, self.size(args[1]))
        if node.target is not None:
            return _add(total, self.method(node, name, args))
        if name == "matches" and len(args) == 2:
            return _add(total, self.regex(args[0], args[1]))
        if name in _STRING_TRAVERSAL and args:
            self.approximate = True
            return _add(total, _factor(self.size(args[0]), _STRING_FACTOR))
        if name in ("string", "bytes") and args and types[0] in ("string", "bytes"):
            self.sizes[id(node)] = self.size(args[0])
            return _add(total, _factor(self.size(args[0]), _STRING_FACTOR))
        if name not in _CONSTANT:
            self.approximate = True
        return _add(total, 1)

    def regex(self, text: Node, pattern: Node) -> int:
        return _mul(_factor(_add(self.size(text), 1), _STRING_FACTOR), _factor(self.size(pattern), _REGEX_FACTOR))

    def method(self, node: Call, name: str, args: list[Node]) -> int:
        """A member call's own cost (cel-go's and the Kubernetes library's estimates)."""
        assert node.target is not None
        target = node.target
        kind = target.type.kind if target.type is not None else "dyn"
        if name in ("matches", "find", "findAll") and len(args) >= 1:
            if name != "matches":
                self.sizes[id(node)] = self.size(target)
            return self.regex(target, args[0])
        if name == "contains" and args:
            return _mul(_factor(self.size(target), _STRING_FACTOR), _factor(self.size(args[0]), _STRING_FACTOR))
        if name in ("startsWith", "endsWith") and args:
            return _factor(self.size(args[0]), _STRING_FACTOR)
        if name in _STRING_RESULT and kind == "string":
            self.sizes[id(node)] = self.size(target)
            return _factor(self.size(target), _STRING_FACTOR)
        if name == "join" and kind == "list":
            self.approximate = True
            return _mul(self.size(target), _factor(self.element_size(target), _STRING_FACTOR))
        if name in ("format", "split", "replace") or (name in ("indexOf", "lastIndexOf") and kind == "string"):
            self.approximate = True
            return _factor(self.size(target), _STRING_FACTOR)
        if name in _LIST_TRAVERSAL and kind == "list":
            element_cost = 1
            element = target.type.params[0] if target.type is not None and target.type.params else None
            if element is not None and element.kind in ("string", "bytes"):
                element_cost = _add(1, _factor(self.element_size(target), _STRING_FACTOR))
            return _mul(self.size(target), element_cost)
        if name not in _CONSTANT:
            self.approximate = True
        return 1

    def element_size(self, node: Node) -> int:
        """The largest element of a list ``node`` (a literal's, or the schema's items')."""
        if id(node) in self.entries:
            return self.entries[id(node)]
        base = self.path(node)
        if base:
            found = _schema_at(self.schema, self.root, (*base[1:], "@items"))
            if found is not None:
                return _max_elements(found)
        return _UNBOUNDED


@dataclass(frozen=True)
class Estimate:
    """A rule's estimated worst-case cost per evaluation (an unknown size taken as unbounded, as cel-go takes it: a
    string conversion concatenated is over budget), and whether it is cel-go's figure (no function whose estimate
    is approximated here)."""

    cost: int | None
    exact: bool


def rule_cost(checked: cel_checker.Checked, schema: Obj, *, root: bool) -> Estimate:
    """The estimated worst-case cost of one evaluation of a checked rule on ``schema``'s node."""
    coster = _Coster(schema, root)
    with room_for_depth(sum(1 for _ in cel_checker.walk(checked.root))):  # a long chain of && nests deep
        cost = coster.cost(checked.root)
    return Estimate(cost, not coster.approximate)


def max_cardinality(schema: Obj, ancestors_bound: int | None) -> int:
    """How often a rule of ``schema``'s node may run in one object: ``ancestors_bound`` (the product of the list and
    map ancestors' maxItems/maxProperties), or with an unbounded one (None) as many of the node's smallest JSON form
    as fit in a request."""
    if ancestors_bound is not None:
        return ancestors_bound
    return _MAX_REQUEST // (min_size(schema) + 1)


def refusal(estimate: Estimate, what: str, cardinality: int = 1, *, limit: int = COST_LIMIT) -> str | None:
    """Upstream's refusal of a rule (``what``: "estimated rule cost" or "estimated messageExpression cost") whose
    cost, times how often it may run, is over the budget, or None: the factor as upstream writes it (``more than
    100x``, ``2.5x``, ``1.200000x`` under 1.5) where this estimate is cel-go's, only ``more than 100x`` where it is
    approximated (a factor that large is past the budget whatever the approximation)."""
    if estimate.cost is None:
        return None
    cost = min(estimate.cost * cardinality, _UNBOUNDED)
    factor = cost / limit
    if factor > 100:
        shown = "more than 100x"
    elif not estimate.exact or cost <= limit:
        return None
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (f"{what} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, "
            "maxProperties, and maxLength where arrays, maps, and strings are declared)")
