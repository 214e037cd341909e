"""cel-go's static type checker for the expressions kube-apiserver compiles in an environment of its own (the DRA
device selectors' today), over cel-python's parse tree.

The parse tree is first turned into cel-go's abstract syntax: operators become calls (``_==_``, ``_[_]``,
``@in``...), each node placed where cel-go places it (an operator at its symbol, a call at its "(", a selection
at its "."), and the macros (``has``, ``all``/``exists``/``exists_one``/``map``/``filter``, their two-variable
forms, ``transformList``/``transformMap``/``transformMapEntry`` and ``cel.bind``) expanded into comprehensions as
cel-go expands them, so the checker meets what cel-go's meets. A macro misused is cel-go's parse error (``argument
must be a simple name``...).

The checker then types every node as cel-go's does: identifiers from the scopes and the environment's variables,
field selection (a struct's declared fields; a map's value type; ``dyn`` from ``dyn``/``any``), overload
resolution with type parameters unified as cel-go unifies them (``dyn`` and ``any`` match anything; several
matching overloads with different results give ``dyn``), comprehension ranges, the logical operators' operands.
Errors carry cel-go's texts: ``undeclared reference to 'x' (in container '')``, ``undefined field 'x'``, ``found
no matching overload for 'f' applied to '(t1, t2)'`` (``'t.(args)'`` for a method), ``expected type 'bool' but
found 't'``, ``type 't' does not support field selection``, ``expression of type 't' cannot be range of a
comprehension (must be list, map, or dynamic)``; then, when the check passes, the base environment's validator of
homogeneous aggregate literals. Nesting past cel-go's parser limit (250 levels of one grammar rule, counted as
ANTLR counts rule entries, approximately for mixed shapes) is ``expression recursion limit exceeded: 250`` at no
position, and a text over the parser's 100,000 code points ``expression code point size exceeds limit: size: N,
limit 100000``. :func:`check` returns the output type, :func:`check_expression` also the variables referred to,
the optional selections and literal entries (for running the expression) and the typed syntax (for its cost);
:func:`issues_text` is cel-go's ``issues.String()`` (sorted by position, with the source line and a caret).

Optional syntax (cel.OptionalTypes, in Kubernetes' base environment since 1.28) is checked as cel-go checks it:
``x.?f`` (``optional_type`` of the field's type), ``x[?i]`` (``_[?_]``), a selection or index from an optional
value (optional in turn), ``[?e]`` and ``{?k: v}`` entries (``e``/``v`` must be optional: ``expected type
'optional_type(int)' but found 'int'``). cel-python's grammar has no ``?`` there: :mod:`.cel_syntax` finds those
marks and blanks them out before parsing, and the builder reads them back by offset; a stray one is ANTLR's
``extraneous input '?'``.

The function table (:data:`STANDARD`, :data:`KUBERNETES`) holds CEL's standard library, the extensions
Kubernetes' base environment loads (strings v2, sets, optional types, two-variable comprehensions) and
Kubernetes' libraries (lists, regex, URLs, quantity, semver, IP, CIDR, authz, format, image), one line per
overload.

The literal validators check ``duration()``/``timestamp()`` literals as Go parses them and ``matches()`` patterns
with RE2 (:mod:`.cel_regex`: lookaround, backreferences, ``\\Z`` refused as Go refuses them). Not done: struct
literals (no environment here declares a message type).
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lark

from controller_manager.sim.apiserver import cel_regex, cel_syntax
from controller_manager.sim.apiserver.cel_syntax import OPERAND_START as _OPERAND_START
from controller_manager.sim.apiserver.recursion import room_for_depth

__all__ = ["Call", "CheckError", "Checked", "Comprehension", "CreateList", "CreateMap", "Environment", "Ident",
           "Literal", "Node", "Select", "Type", "check", "check_expression", "issues_text", "parse_type", "room_for",
           "string_value", "walk"]

# --- types -----------------------------------------------------------------------------------------------------

_PRIMITIVES = frozenset({"bool", "int", "uint", "double", "string", "bytes"})


@dataclass(frozen=True, slots=True)
class Type:
    """A CEL type. ``kind`` is one of the primitives, ``null``, ``dyn``, ``any``, ``error``, ``timestamp``,
    ``duration``, ``list``, ``map``, ``type``, ``struct`` (an object type, by ``name``), ``opaque`` (a
    parameterised library type such as ``optional_type``) or ``param`` (a type parameter, by ``name``)."""

    kind: str
    name: str = ""
    params: tuple[Type, ...] = ()

    def __str__(self) -> str:
        """cel-go's FormatCELType (the checker's messages)."""
        simple = {"any": "any", "null": "null", "error": "!error!", "timestamp": "timestamp",
                  "duration": "duration", "dyn": "dyn"}
        if self.kind in simple:
            return simple[self.kind]
        if self.kind in _PRIMITIVES:
            return self.kind
        if self.kind in ("param", "struct"):
            return self.name
        if self.kind == "type" and not self.params:
            return "type"
        return f"{self.name or self.kind}({', '.join(str(p) for p in self.params)})"

    def declared(self) -> str:
        """cel-go's Type.String() (what compile.go prints of an output type)."""
        names = {"any": "google.protobuf.Any", "null": "null_type", "error": "error",
                 "timestamp": "google.protobuf.Timestamp", "duration": "google.protobuf.Duration"}
        if self.kind == "param":
            return f"<{self.name}>"
        base = names.get(self.kind) or self.name or self.kind
        return f"{base}({', '.join(p.declared() for p in self.params)})" if self.params else base


BOOL, INT, UINT, DOUBLE, STRING, BYTES = (Type(k) for k in ("bool", "int", "uint", "double", "string", "bytes"))
NULL, DYN, ANY, ERROR = Type("null"), Type("dyn"), Type("any"), Type("error")


def list_of(elem: Type) -> Type:
    return Type("list", "list", (elem,))


def map_of(key: Type, value: Type) -> Type:
    return Type("map", "map", (key, value))


def optional_of(value: Type) -> Type:
    return Type("opaque", "optional_type", (value,))


_TYPE_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.@]*|[(),])")


def parse_type(text: str) -> Type:
    """A type written as cel-go formats it: ``int``, ``list(A)``, ``map(string, V)``, ``kubernetes.Quantity``,
    ``optional_type(A)``; a single capital letter is a type parameter."""
    tokens = [m.group(1) for m in _TYPE_TOKEN.finditer(text)]
    position = 0

    def one() -> Type:
        nonlocal position
        name = tokens[position]
        position += 1
        params: list[Type] = []
        if position < len(tokens) and tokens[position] == "(":
            position += 1
            while tokens[position] != ")":
                params.append(one())
                if tokens[position] == ",":
                    position += 1
            position += 1
        if len(name) == 1 and name.isupper():
            return Type("param", name)
        if name in _PRIMITIVES or name in ("dyn", "any", "null", "timestamp", "duration", "error"):
            return Type(name)
        if name in ("list", "map", "type"):
            return Type(name, name, tuple(params))
        return Type("opaque", name, tuple(params)) if params else Type("struct", name)

    parsed = one()
    if position != len(tokens):
        raise ValueError(f"trailing text in type {text!r}")
    return parsed


# --- declarations ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Overload:
    member: bool
    args: tuple[Type, ...]  # the receiver first for a member overload
    result: Type


def _overload(signature: str) -> Overload:
    """``(int, int) -> int`` or, for a method, ``string.(string) -> bool``."""
    head, result = signature.rsplit("->", 1)
    head = head.strip()
    depth, split = 0, -1
    for i, char in enumerate(head):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "." and depth == 0 and head[i + 1:i + 2] == "(":
            split = i
    receiver = [parse_type(head[:split])] if split >= 0 else []
    inner = head[split + 2:-1] if split >= 0 else head[1:-1]
    args, depth, start = [], 0, 0
    for i, char in enumerate(inner + ","):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            if inner[start:i].strip():
                args.append(parse_type(inner[start:i]))
            start = i + 1
    return Overload(split >= 0, tuple(receiver + args), parse_type(result))


_COMPARABLE = ("bool", "int", "uint", "double", "string", "bytes", "timestamp", "duration")
_NUMBERS = ("int", "uint", "double")
_TIME_GETTERS = ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek")


def _relational() -> list[str]:
    same = [f"({t}, {t}) -> bool" for t in _COMPARABLE]
    cross = [f"({a}, {b}) -> bool" for a in _NUMBERS for b in _NUMBERS if a != b]  # CrossTypeNumericComparisons
    return same + cross


# CEL's standard declarations (cel-go common/stdlib) and the extensions Kubernetes' base environment loads.
STANDARD: dict[str, list[str]] = {
    "_?_:_": ["(bool, A, A) -> A"],
    "_&&_": ["(bool, bool) -> bool"],
    "_||_": ["(bool, bool) -> bool"],
    "!_": ["(bool) -> bool"],
    "@not_strictly_false": ["(bool) -> bool"],
    "_==_": ["(A, A) -> bool"],
    "_!=_": ["(A, A) -> bool"],
    "_+_": ["(bytes, bytes) -> bytes", "(double, double) -> double", "(duration, duration) -> duration",
            "(duration, timestamp) -> timestamp", "(timestamp, duration) -> timestamp", "(int, int) -> int",
            "(list(A), list(A)) -> list(A)", "(string, string) -> string", "(uint, uint) -> uint"],
    "_-_": ["(double, double) -> double", "(duration, duration) -> duration", "(int, int) -> int",
            "(timestamp, duration) -> timestamp", "(timestamp, timestamp) -> duration", "(uint, uint) -> uint"],
    "_*_": ["(double, double) -> double", "(int, int) -> int", "(uint, uint) -> uint"],
    "_/_": ["(double, double) -> double", "(int, int) -> int", "(uint, uint) -> uint"],
    "_%_": ["(int, int) -> int", "(uint, uint) -> uint"],
    "-_": ["(double) -> double", "(int) -> int"],
    "_<_": _relational(), "_<=_": _relational(), "_>_": _relational(), "_>=_": _relational(),
    "_[_]": ["(list(A), int) -> A", "(map(A, B), A) -> B",
             # cel.OptionalTypes: indexing an optional aggregate
             "(optional_type(list(V)), int) -> optional_type(V)",
             "(optional_type(map(K, V)), K) -> optional_type(V)"],
    # cel.OptionalTypes: optional indexing (``x[?i]``)
    "_[?_]": ["(list(V), int) -> optional_type(V)", "(map(K, V), K) -> optional_type(V)",
              "(optional_type(list(V)), int) -> optional_type(V)",
              "(optional_type(map(K, V)), K) -> optional_type(V)"],
    "@in": ["(A, list(A)) -> bool", "(A, map(A, B)) -> bool"],
    "size": ["(bytes) -> int", "bytes.() -> int", "(list(A)) -> int", "list(A).() -> int", "(map(A, B)) -> int",
             "map(A, B).() -> int", "(string) -> int", "string.() -> int"],
    "type": ["(A) -> type(A)"],
    "bool": ["(bool) -> bool", "(string) -> bool"],
    "bytes": ["(bytes) -> bytes", "(string) -> bytes"],
    "double": ["(double) -> double", "(int) -> double", "(string) -> double", "(uint) -> double"],
    "duration": ["(duration) -> duration", "(string) -> duration"],
    "dyn": ["(A) -> dyn"],
    "int": ["(int) -> int", "(double) -> int", "(duration) -> int", "(string) -> int", "(timestamp) -> int",
            "(uint) -> int"],
    "string": ["(string) -> string", "(bool) -> string", "(bytes) -> string", "(double) -> string",
               "(duration) -> string", "(int) -> string", "(timestamp) -> string", "(uint) -> string"],
    "timestamp": ["(timestamp) -> timestamp", "(int) -> timestamp", "(string) -> timestamp"],
    "uint": ["(uint) -> uint", "(double) -> uint", "(int) -> uint", "(string) -> uint"],
    "contains": ["string.(string) -> bool"],
    "endsWith": ["string.(string) -> bool"],
    "startsWith": ["string.(string) -> bool"],
    "matches": ["(string, string) -> bool", "string.(string) -> bool"],
    **{name: ["timestamp.() -> int", "timestamp.(string) -> int"] for name in _TIME_GETTERS},
    **{name: ["timestamp.() -> int", "timestamp.(string) -> int", "duration.() -> int"]
       for name in ("getHours", "getMinutes", "getSeconds", "getMilliseconds")},
    # ext.Strings (version 2)
    "charAt": ["string.(int) -> string"],
    "indexOf": ["string.(string) -> int", "string.(string, int) -> int"],
    "lastIndexOf": ["string.(string) -> int", "string.(string, int) -> int"],
    "lowerAscii": ["string.() -> string"],
    "upperAscii": ["string.() -> string"],
    "replace": ["string.(string, string) -> string", "string.(string, string, int) -> string"],
    "split": ["string.(string) -> list(string)", "string.(string, int) -> list(string)"],
    "substring": ["string.(int) -> string", "string.(int, int) -> string"],
    "trim": ["string.() -> string"],
    "join": ["list(string).() -> string", "list(string).(string) -> string"],
    "format": ["string.(list(dyn)) -> string"],
    "strings.quote": ["(string) -> string"],
    # ext.Sets
    "sets.contains": ["(list(A), list(A)) -> bool"],
    "sets.equivalent": ["(list(A), list(A)) -> bool"],
    "sets.intersects": ["(list(A), list(A)) -> bool"],
    # cel.OptionalTypes
    "optional.of": ["(A) -> optional_type(A)"],
    "optional.ofNonZeroValue": ["(A) -> optional_type(A)"],
    "optional.none": ["() -> optional_type(T)"],
    "hasValue": ["optional_type(A).() -> bool"],
    "value": ["optional_type(A).() -> A"],
    "or": ["optional_type(A).(optional_type(A)) -> optional_type(A)"],
    "orValue": ["optional_type(A).(A) -> A"],
    # ext.TwoVarComprehensions' map building
    "cel.@mapInsert": ["(map(K, V), K, V) -> map(K, V)", "(map(K, V), map(K, V)) -> map(K, V)"],
}

_Q, _S, _URL = "kubernetes.Quantity", "kubernetes.Semver", "kubernetes.URL"
_IP, _CIDR = "net.IP", "net.CIDR"
_AUTHZ = "kubernetes.authorization"

# Kubernetes' libraries (k8s.io/apiserver/pkg/cel/library), as the base environment of 1.37 loads them.
KUBERNETES: dict[str, list[str]] = {
    # lists
    "isSorted": [f"list({t}).() -> bool" for t in _COMPARABLE],
    "sum": [f"list({t}).() -> {t}" for t in ("int", "uint", "double", "duration")],
    "min": [f"list({t}).() -> {t}" for t in _COMPARABLE],
    "max": [f"list({t}).() -> {t}" for t in _COMPARABLE],
    "indexOf": ["list(A).(A) -> int"],
    "lastIndexOf": ["list(A).(A) -> int"],
    # regex
    "find": ["string.(string) -> string"],
    "findAll": ["string.(string) -> list(string)", "string.(string, int) -> list(string)"],
    # urls
    "url": [f"(string) -> {_URL}"],
    "isURL": ["(string) -> bool"],
    **{name: [f"{_URL}.() -> string"] for name in ("getScheme", "getHost", "getHostname", "getPort",
                                                  "getEscapedPath")},
    "getQuery": [f"{_URL}.() -> map(string, list(string))"],
    # quantity
    "quantity": [f"(string) -> {_Q}"],
    "isQuantity": ["(string) -> bool"],
    "sign": [f"{_Q}.() -> int"],
    "isInteger": [f"{_Q}.() -> bool"],
    "asInteger": [f"{_Q}.() -> int"],
    "asApproximateFloat": [f"{_Q}.() -> double"],
    "add": [f"{_Q}.({_Q}) -> {_Q}", f"{_Q}.(int) -> {_Q}"],
    "sub": [f"{_Q}.({_Q}) -> {_Q}", f"{_Q}.(int) -> {_Q}"],
    "isGreaterThan": [f"{_Q}.({_Q}) -> bool", f"{_S}.({_S}) -> bool"],
    "isLessThan": [f"{_Q}.({_Q}) -> bool", f"{_S}.({_S}) -> bool"],
    "compareTo": [f"{_Q}.({_Q}) -> int", f"{_S}.({_S}) -> int"],
    # semver (version 1: normalisation)
    "semver": [f"(string) -> {_S}", f"(string, bool) -> {_S}"],
    "isSemver": ["(string) -> bool", "(string, bool) -> bool"],
    "major": [f"{_S}.() -> int"],
    "minor": [f"{_S}.() -> int"],
    "patch": [f"{_S}.() -> int"],
    # ip and cidr
    "ip": [f"(string) -> {_IP}", f"{_CIDR}.() -> {_IP}"],
    "isIP": ["(string) -> bool"],
    "ip.isCanonical": ["(string) -> bool"],
    "family": [f"{_IP}.() -> int"],
    **{name: [f"{_IP}.() -> bool"] for name in ("isUnspecified", "isLoopback", "isLinkLocalMulticast",
                                                "isLinkLocalUnicast", "isGlobalUnicast")},
    "cidr": [f"(string) -> {_CIDR}"],
    "isCIDR": ["(string) -> bool"],
    "containsIP": [f"{_CIDR}.(string) -> bool", f"{_CIDR}.({_IP}) -> bool"],
    "containsCIDR": [f"{_CIDR}.(string) -> bool", f"{_CIDR}.({_CIDR}) -> bool"],
    "masked": [f"{_CIDR}.() -> {_CIDR}"],
    "prefixLength": [f"{_CIDR}.() -> int"],
    "string": [f"({_IP}) -> string", f"({_CIDR}) -> string"],
    # format
    "format.named": ["(string) -> optional_type(kubernetes.NamedFormat)"],
    "validate": ["kubernetes.NamedFormat.(string) -> optional_type(list(string))"],
    **{f"format.{name}": ["() -> kubernetes.NamedFormat"] for name in (
        "dns1123Label", "dns1123Subdomain", "dns1035Label", "qualifiedName", "dns1123LabelPrefix",
        "dns1123SubdomainPrefix", "dns1035LabelPrefix", "labelValue", "uri", "uuid", "byte", "date", "datetime")},
    # image
    "image": ["(string) -> kubernetes.Image", "(string, bool) -> kubernetes.Image"],
    "isImage": ["(string) -> bool"],
    "containsDigest": ["kubernetes.Image.() -> bool"],
    **{name: ["kubernetes.Image.() -> string"] for name in ("registry", "repository", "identifier", "tag", "digest")},
    # authz (its receivers are the authorizer variable's types, which a selector has not)
    "path": [f"{_AUTHZ}.Authorizer.(string) -> {_AUTHZ}.PathCheck"],
    "group": [f"{_AUTHZ}.Authorizer.(string) -> {_AUTHZ}.GroupCheck"],
    "serviceAccount": [f"{_AUTHZ}.Authorizer.(string, string) -> {_AUTHZ}.Authorizer"],
    "resource": [f"{_AUTHZ}.GroupCheck.(string) -> {_AUTHZ}.ResourceCheck"],
    **{name: [f"{_AUTHZ}.ResourceCheck.(string) -> {_AUTHZ}.ResourceCheck"]
       for name in ("subresource", "namespace", "name", "fieldSelector", "labelSelector")},
    "check": [f"{_AUTHZ}.PathCheck.(string) -> {_AUTHZ}.Decision",
              f"{_AUTHZ}.ResourceCheck.(string) -> {_AUTHZ}.Decision"],
    "allowed": [f"{_AUTHZ}.Decision.() -> bool"],
    "reason": [f"{_AUTHZ}.Decision.() -> string"],
    "errored": [f"{_AUTHZ}.Decision.() -> bool"],
    "error": [f"{_AUTHZ}.Decision.() -> string"],
}

# The type names every environment declares as identifiers (``type(x) == int``).
_TYPE_IDENTS = {name: Type("type", "type", (parse_type(text),)) for name, text in {
    "bool": "bool", "bytes": "bytes", "double": "double", "google.protobuf.Duration": "duration", "int": "int",
    "list": "list(A)", "map": "map(A, B)", "null_type": "null", "string": "string",
    "google.protobuf.Timestamp": "timestamp", "type": "type", "uint": "uint"}.items()}


@dataclass(frozen=True)
class Environment:
    """What an expression may name: its variables (by type), the fields of the struct types they use, and the
    functions (each name's overloads, in :func:`_overload`'s notation)."""

    variables: Mapping[str, Type]
    structs: Mapping[str, Mapping[str, Type]]
    functions: Mapping[str, Sequence[str]]
    _overloads: dict[str, tuple[Overload, ...]] = field(default_factory=dict, compare=False, repr=False)

    def overloads(self, name: str) -> tuple[Overload, ...] | None:
        if name not in self.functions:
            return None
        cached = self._overloads.get(name)
        if cached is None:
            cached = self._overloads[name] = tuple(_overload(s) for s in self.functions[name])
        return cached


def library(*tables: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Function tables merged (a name in several libraries has all their overloads)."""
    merged: dict[str, list[str]] = {}
    for table in tables:
        for name, overloads in table.items():
            merged.setdefault(name, []).extend(overloads)
    return merged


# --- cel-go's abstract syntax ----------------------------------------------------------------------------------


@dataclass(eq=False)
class Node:
    offset: int  # where cel-go places the node (its location), as an index into the source
    type: Type | None = field(default=None, init=False)


@dataclass(eq=False)
class Literal(Node):
    value_type: Type = DYN
    token: str = ""  # the literal as written


@dataclass(eq=False)
class Ident(Node):
    name: str = ""


@dataclass(eq=False)
class Select(Node):
    operand: Node | None = None
    field_name: str = ""
    test_only: bool = False  # has()
    optional: bool = False  # ``.?field`` (cel-go's ``_?._`` call)


@dataclass(eq=False)
class Call(Node):
    function: str = ""
    target: Node | None = None
    args: list[Node] = field(default_factory=list)


@dataclass(eq=False)
class CreateList(Node):
    elements: list[Node] = field(default_factory=list)
    optional: frozenset[int] = frozenset()  # the indexes of ``[?x]`` elements


@dataclass(eq=False)
class CreateMap(Node):
    entries: list[tuple[Node, Node]] = field(default_factory=list)
    optional: frozenset[int] = frozenset()  # the indexes of ``{?k: v}`` entries


@dataclass(eq=False)
class Comprehension(Node):
    iter_range: Node | None = None
    iter_var: str = ""
    iter_var2: str = ""
    accu_var: str = ""
    accu_init: Node | None = None
    condition: Node | None = None
    step: Node | None = None
    result: Node | None = None


def _children(node: Node) -> Iterator[Node]:
    if isinstance(node, Select) and node.operand is not None:
        yield node.operand
    elif isinstance(node, Call):
        if node.target is not None:
            yield node.target
        yield from node.args
    elif isinstance(node, CreateList):
        yield from node.elements
    elif isinstance(node, CreateMap):
        for key, value in node.entries:
            yield key
            yield value
    elif isinstance(node, Comprehension):
        for part in (node.iter_range, node.accu_init, node.condition, node.step, node.result):
            if part is not None:
                yield part


def walk(node: Node) -> Iterator[Node]:
    """Every node, parents before children (iteratively: a long chain of operators nests deep)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(_children(current))))


def _tokens(tree: Any) -> list[lark.Token]:
    """A parse tree's tokens in source order (iteratively, as :func:`_walk`)."""
    out: list[lark.Token] = []
    stack = [tree]
    while stack:
        current = stack.pop()
        if isinstance(current, lark.Tree):
            stack.extend(reversed(current.children))
        elif isinstance(current, lark.Token):
            out.append(current)
    return out


class CheckError(Exception):
    """Issues found while building the syntax (cel-go's parse errors: misused macros) or checking it; each is
    (source offset, message), the offset -1 for none."""

    def __init__(self, issues: tuple[tuple[int, str], ...]) -> None:
        super().__init__(issues)
        self.issues = issues


_ACCU = "@result"
_OPERATORS = {"relation_lt": "_<_", "relation_le": "_<=_", "relation_gt": "_>_", "relation_ge": "_>=_",
              "relation_eq": "_==_", "relation_ne": "_!=_", "relation_in": "@in", "addition_add": "_+_",
              "addition_sub": "_-_", "multiplication_mul": "_*_", "multiplication_div": "_/_",
              "multiplication_mod": "_%_"}
_LITERALS = {"BOOL_LIT": BOOL, "INT_LIT": INT, "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "NULL_LIT": NULL,
             "BYTES_LIT": BYTES, "STRING_LIT": STRING, "MLSTRING_LIT": STRING}
_RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let", "loop",
                       "package", "namespace", "return", "var", "void", "while"})
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                       "member", "primary", "paren_expr"})
_SKIPPED = re.compile(r"(?:\s+|//[^\n]*|\))*")
_BLANKS = re.compile(r"(?:\s+|//[^\n]*)*")


class _Builder:
    """cel-python's parse tree to cel-go's syntax, macros expanded."""

    def __init__(self, text: str, tree: Any, marks: frozenset[int] = frozenset()) -> None:
        self.text = text
        self.issues: list[tuple[int, str]] = []
        # the offsets of optional syntax's "?" (blanked out of the text cel-python parsed), each consumed by the
        # selection, index or literal entry it marks
        self.marks = set(marks)
        # the parse tree's selections and indexes, literals with optional entries, and what each became
        self.origins: list[tuple[Any, Node]] = []
        # Each token's (start, end) offsets. cel-python re-creates ``true``/``false`` tokens without a position:
        # they are found in the text, after the token before them.
        self.spans: dict[int, tuple[int, int]] = {}
        cursor = 0
        for token in _tokens(tree):
            if token.start_pos is None:
                found = re.compile(rf"\b{re.escape(str(token))}\b").search(text, cursor)
                start = found.start() if found else cursor
                self.spans[id(token)] = (start, start + len(token))
            else:
                self.spans[id(token)] = (token.start_pos, token.end_pos or token.start_pos + len(token))
            cursor = self.spans[id(token)][1]

    def start(self, token: lark.Token) -> int:
        return self.spans.get(id(token), (0, 0))[0]

    def after(self, node: Any) -> int:
        """The offset of the first symbol after ``node`` (skipping blanks, comments and closing parentheses)."""
        end = node.meta.end_pos if isinstance(node, lark.Tree) else None
        if end is None:
            last = _tokens(node)
            end = self.spans.get(id(last[-1]), (0, 0))[1] if last else 0
        return _SKIPPED.match(self.text, end).end()  # type: ignore[union-attr]

    def build(self, node: Any) -> Node:
        data = str(node.data)  # a lark Token: plain text compares much faster
        children = node.children
        while len(children) == 1 and isinstance(children[0], lark.Tree) and data in _WRAPPERS:
            node = children[0]
            data, children = str(node.data), node.children
        if data == "expr" and len(children) == 3:
            condition = self.build(children[0])
            return Call(self.after(children[0]), "_?_:_", None,
                        [condition, self.build(children[1]), self.build(children[2])])
        if data in ("conditionalor", "conditionaland") and len(children) == 2:
            return Call(self.after(children[0]), "_||_" if data == "conditionalor" else "_&&_", None,
                        [self.build(children[0]), self.build(children[1])])
        if data in ("relation", "addition", "multiplication") and len(children) == 2:
            operator = children[0]
            function = _OPERATORS[str(operator.data)]
            left = operator.children[0]
            return Call(self.after(left), function, None, [self.build(left), self.build(children[1])])
        if data == "unary" and len(children) == 2:
            return self.unary(node)
        if data == "paren_expr":
            return self.build(children[0])
        if data == "literal":
            token = children[0]
            return Literal(self.start(token), _LITERALS.get(token.type, DYN), str(token))
        if data in ("ident", "dot_ident"):
            self.not_reserved(children[0])
            return Ident(self.start(children[0]), str(children[0]))
        if data == "member_dot":
            dot = self.after(children[0])
            select = Select(dot, self.build(children[0]), str(children[1]), optional=self.marked(dot + 1))
            self.origins.append((node, select))
            return select
        if data == "member_index":
            bracket = self.after(children[0])
            function = "_[?_]" if self.marked(bracket + 1) else "_[_]"
            index = Call(bracket, function, None, [self.build(children[0]), self.build(children[1])])
            self.origins.append((node, index))
            return index
        if data == "member_dot_arg":
            return self.member_call(node)
        if data in ("ident_arg", "dot_ident_arg"):
            name_token = children[0]
            self.not_reserved(name_token)
            args = self.args(children[1] if len(children) > 1 else None)
            open_paren = self.after(name_token)
            if name_token == "has" and data == "ident_arg" and len(args) == 1:
                return self.has(open_paren, args[0])
            return Call(open_paren, str(name_token), None, args)
        if data == "list_lit":
            items = children[0].children if children and isinstance(children[0], lark.Tree) else []
            optional = frozenset(i for i, item in enumerate(items) if self.marked_before(item))
            created: Node = CreateList(node.meta.start_pos, [self.build(item) for item in items], optional)
            if optional:
                self.origins.append((node, created))
            return created
        if data == "map_lit":
            inits = children[0].children if children and isinstance(children[0], lark.Tree) else []
            optional = frozenset(i // 2 for i, key in enumerate(inits) if i % 2 == 0 and self.marked_before(key))
            built = [self.build(child) for child in inits]
            created = CreateMap(node.meta.start_pos, list(zip(built[::2], built[1::2], strict=True)), optional)
            if optional:
                self.origins.append((node, created))
            return created
        if data == "member_object":
            # a struct literal: no environment here declares a message type
            target = children[0]
            name = ".".join(str(t) for t in target.scan_values(lambda v: isinstance(v, lark.Token)))
            self.issues.append((self.after(target), f"undeclared reference to '{name}' (in container '')"))
            return Literal(self.after(target), ERROR)
        raise ValueError(f"unexpected CEL syntax {data}")

    def marked(self, offset: int) -> bool:
        """Whether the first symbol at or after ``offset`` is an optional-syntax "?" (consumed)."""
        at = _BLANKS.match(self.text, offset).end()  # type: ignore[union-attr]
        if at in self.marks:
            self.marks.discard(at)
            return True
        return False

    def marked_before(self, tree: Any) -> bool:
        """Whether the last symbol before ``tree`` is an optional-syntax "?" (consumed)."""
        tokens = _tokens(tree)
        start = self.start(tokens[0]) if tokens else 0
        at = len(self.text[:start].rstrip()) - 1
        if at in self.marks:
            self.marks.discard(at)
            return True
        return False

    def not_reserved(self, token: lark.Token) -> None:
        """cel-go's parser refuses CEL's reserved words as names (not as fields)."""
        if str(token) in _RESERVED:
            self.issues.append((self.start(token), f"reserved identifier: {token}"))

    def args(self, exprlist: Any) -> list[Node]:
        return [self.build(child) for child in exprlist.children] if isinstance(exprlist, lark.Tree) else []

    def unary(self, node: Any) -> Node:
        """A run of ``!`` (or ``-``): cel-go keeps one operator for an odd run, none for an even one, placed at
        the run's first symbol."""
        operator = str(node.children[0].data)
        run, inner = 0, node
        while (isinstance(inner, lark.Tree) and str(inner.data) == "unary" and len(inner.children) == 2
               and str(inner.children[0].data) == operator):
            run += 1
            inner = inner.children[1]
        operand = self.build(inner)
        if run % 2 == 0:
            return operand
        return Call(node.meta.start_pos, "!_" if operator == "unary_not" else "-_", None, [operand])

    def member_call(self, node: Any) -> Node:
        target_tree, name_token = node.children[0], node.children[1]
        name = str(name_token)
        args = self.args(node.children[2] if len(node.children) > 2 else None)
        open_paren = self.after(name_token)
        target = self.build(target_tree)
        expanded = self.macro(open_paren, name, target, args)
        return expanded if expanded is not None else Call(open_paren, name, target, args)

    def has(self, offset: int, arg: Node) -> Node:
        if not isinstance(arg, Select):
            self.issues.append((arg.offset, "invalid argument to has() macro"))
            return Literal(offset, ERROR)
        # the presence test is a node of the macro's, placed at its "("
        return Select(offset, arg.operand, arg.field_name, test_only=True)

    def simple_name(self, arg: Node, message: str) -> str | None:
        if isinstance(arg, Ident):
            return arg.name
        self.issues.append((arg.offset, message))
        return None

    def macro(self, at: int, name: str, target: Node, args: list[Node]) -> Node | None:
        """The comprehension cel-go expands a receiver macro into, or None for a plain call."""
        count = len(args)
        if name == "bind" and count == 3 and isinstance(target, Ident) and target.name == "cel":
            var = self.simple_name(args[0], "cel.bind() variable names must be simple identifiers")
            return Comprehension(at, CreateList(at), "#unused", "", var or "", args[1], Literal(at, BOOL),
                                 Ident(at, var or ""), args[2])
        if name in ("optMap", "optFlatMap") and count == 2:
            # target.hasValue() ? optional.of(cel.bind(var, target.value(), expr)) : optional.none() (optFlatMap:
            # the bind's result unwrapped)
            var = self.simple_name(args[0], f"{name}() variable name must be a simple identifier")
            bound: Node = Comprehension(at, CreateList(at), "#unused", "", var or "", Call(at, "value", target, []),
                                        Literal(at, BOOL), Ident(at, var or ""), args[1])
            if name == "optMap":
                bound = Call(at, "optional.of", None, [bound])
            return Call(at, "_?_:_", None, [Call(at, "hasValue", target, []), bound,
                                            Call(at, "optional.none", None, [])])
        quantifiers = {"all": 2, "exists": 2, "exists_one": 2}
        if quantifiers.get(name) == count or (name in ("all", "exists", "exists_one", "existsOne") and count == 3):
            return self.quantifier(at, name, target, args)
        if (name == "map" and count in (2, 3)) or (name == "filter" and count == 2):
            var = self.simple_name(args[0], "argument is not an identifier")
            accu = Ident(at, _ACCU)
            element: Node
            condition: Node | None
            if name == "filter":
                element, condition = Ident(at, var or ""), args[1]
            else:
                element, condition = args[-1], (args[1] if count == 3 else None)
            step: Node = Call(at, "_+_", None, [accu, CreateList(at, [element])])
            if condition is not None:
                step = Call(at, "_?_:_", None, [condition, step, Ident(at, _ACCU)])
            return Comprehension(at, target, var or "", "", _ACCU, CreateList(at), Literal(at, BOOL), step,
                                 Ident(at, _ACCU))
        if name in ("transformList", "transformMap", "transformMapEntry") and count in (3, 4):
            first = self.simple_name(args[0], "argument must be a simple name")
            second = self.simple_name(args[1], "argument must be a simple name")
            accu = Ident(at, _ACCU)
            transform = args[-1]
            condition = args[2] if count == 4 else None
            if name == "transformList":
                step = Call(at, "_+_", None, [accu, CreateList(at, [transform])])
                init: Node = CreateList(at)
            elif name == "transformMap":
                step = Call(at, "cel.@mapInsert", None, [accu, Ident(at, first or ""), transform])
                init = CreateMap(at)
            else:
                step = Call(at, "cel.@mapInsert", None, [accu, transform])
                init = CreateMap(at)
            if condition is not None:
                step = Call(at, "_?_:_", None, [condition, step, Ident(at, _ACCU)])
            return Comprehension(at, target, first or "", second or "", _ACCU, init, Literal(at, BOOL), step,
                                 Ident(at, _ACCU))
        return None

    def quantifier(self, at: int, name: str, target: Node, args: list[Node]) -> Node:
        two = len(args) == 3
        first = self.simple_name(args[0], "argument must be a simple name")
        second = self.simple_name(args[1], "argument must be a simple name") if two else ""
        predicate = args[-1]
        accu = Ident(at, _ACCU)
        result: Node = Ident(at, _ACCU)
        if name == "all":
            init: Node = Literal(at, BOOL)
            condition: Node = Call(at, "@not_strictly_false", None, [accu])
            step: Node = Call(at, "_&&_", None, [Ident(at, _ACCU), predicate])
        elif name == "exists":
            init = Literal(at, BOOL)
            condition = Call(at, "@not_strictly_false", None, [Call(at, "!_", None, [accu])])
            step = Call(at, "_||_", None, [Ident(at, _ACCU), predicate])
        else:
            init = Literal(at, INT)
            condition = Literal(at, BOOL)
            step = Call(at, "_?_:_", None, [predicate, Call(at, "_+_", None, [Ident(at, _ACCU), Literal(at, INT)]),
                                            Ident(at, _ACCU)])
            result = Call(at, "_==_", None, [accu, Literal(at, INT)])
        return Comprehension(at, target, first or "", second or "", _ACCU, init, condition, step, result)


# --- the checker -----------------------------------------------------------------------------------------------

Substitutions = dict[Type, Type]


def _is_dyn(t: Type) -> bool:
    return t.kind in ("dyn", "any")


def _is_dyn_or_error(t: Type) -> bool:
    return t.kind in ("dyn", "any", "error")


def _substitute(subs: Substitutions, t: Type, to_dyn: bool) -> Type:
    if t.kind == "param":  # only type parameters are bound
        bound = subs.get(t)
        if bound is not None:
            return _substitute(subs, bound, to_dyn)
        return DYN if to_dyn else t
    if t.params:
        return Type(t.kind, t.name, tuple(_substitute(subs, p, to_dyn) for p in t.params))
    return t


def _less_specific(t1: Type, t2: Type) -> bool:
    """Whether ``t1`` is as or less specific than ``t2`` (matches it by way of dyn)."""
    if _is_dyn(t1) or t1.kind == "param":
        return True
    if _is_dyn(t2) or t2.kind == "param" or t1.kind != t2.kind:
        return False
    if t1.kind in ("opaque", "list", "map"):
        return t1.name == t2.name and len(t1.params) == len(t2.params) and all(
            _less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
    if t1.kind == "type":
        return True
    return t1 == t2


def _most_general(t1: Type, t2: Type) -> Type:
    return t1 if _less_specific(t1, t2) else t2


def _not_referenced_in(subs: Substitutions, t: Type, within: Type) -> bool:
    """The unifier's occurs check."""
    if t == within:
        return False
    if within.kind == "param":
        return within not in subs or _not_referenced_in(subs, t, subs[within])
    return all(_not_referenced_in(subs, t, p) for p in within.params)


def _valid_substitution(subs: Substitutions, t1: Type, t2: Type) -> tuple[bool, bool]:
    """Whether the type parameter ``t2`` (or what it already stands for) may stand for ``t1``, and whether it
    already stood for something."""
    if t1 == t2:
        return True, True
    if t2 in subs:
        bound = subs[t2]
        if t1 == bound:
            return True, True
        if _assignable(subs, t1, bound):
            general = _most_general(t1, bound)
            if _not_referenced_in(subs, t2, general):
                subs[t2] = general
            return True, True
        return False, True
    if _not_referenced_in(subs, t2, t1):
        subs[t2] = t1
        return True, False
    return False, False


def _nullable(t: Type) -> bool:
    return t.kind in ("opaque", "struct", "any", "duration", "timestamp", "null")


def _assignable(subs: Substitutions, t1: Type, t2: Type) -> bool:
    """Whether a value of ``t1`` is assignable to ``t2``, binding type parameters in ``subs`` as it goes."""
    if t2.kind == "param":
        valid, bound = _valid_substitution(subs, t1, t2)
        if valid:
            return True
        if bound:
            return False
    if t1.kind == "param":
        return _valid_substitution(subs, t2, t1)[0]
    if _is_dyn_or_error(t1) or _is_dyn_or_error(t2):
        return True
    if t1.kind == "null":
        return _nullable(t2)
    if t2.kind == "null":
        return _nullable(t1)
    if t1.kind == "type":
        return t2.kind == "type"
    if t1.kind in ("opaque", "list", "map"):
        return t1.kind == t2.kind and t1.name == t2.name and len(t1.params) == len(t2.params) and all(
            _assignable(subs, a, b) for a, b in zip(t1.params, t2.params, strict=True))
    return t1.kind == t2.kind and t1.name == t2.name


class _Checker:
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.subs: Substitutions = {}
        self.scopes: list[dict[str, Type]] = []
        self.issues: list[tuple[int, str]] = []
        self.fresh = itertools.count()
        self.nodes: list[Node] = []
        self.references: set[str] = set()  # the environment's variables the expression refers to

    def error(self, node: Node, message: str) -> None:
        self.issues.append((node.offset, message))

    def type_var(self) -> Type:
        return Type("param", f"_var{next(self.fresh)}")

    def try_assign(self, t1: Type, t2: Type) -> bool:
        trial = dict(self.subs)
        if _assignable(trial, t1, t2):
            self.subs = trial
            return True
        return False

    def set(self, node: Node, t: Type) -> Type:
        node.type = t
        self.nodes.append(node)
        return t

    def check(self, node: Node) -> Type:
        if isinstance(node, Literal):
            return self.set(node, node.value_type)
        if isinstance(node, Ident):
            return self.set(node, self.ident(node))
        if isinstance(node, Select):
            return self.set(node, self.select(node))
        if isinstance(node, Call):
            return self.set(node, self.call(node))
        if isinstance(node, CreateList):
            elem: Type | None = None
            for i, element in enumerate(node.elements):
                checked = self.check(element)
                if i in node.optional:
                    checked = self.unwrap_optional(element, checked)
                elem = self.join(elem, checked)
            return self.set(node, list_of(elem or self.type_var()))
        if isinstance(node, CreateMap):
            key: Type | None = None
            value: Type | None = None
            for i, (k, v) in enumerate(node.entries):
                key = self.join(key, self.check(k))
                checked = self.check(v)
                if i in node.optional:
                    checked = self.unwrap_optional(v, checked)
                value = self.join(value, checked)
            return self.set(node, map_of(key or self.type_var(), value or self.type_var()))
        assert isinstance(node, Comprehension)
        return self.set(node, self.comprehension(node))

    def unwrap_optional(self, node: Node, t: Type) -> Type:
        """What an optional literal entry holds (``[?x]``, ``{?k: x}``): ``x`` must be optional (or dyn)."""
        t = _substitute(self.subs, t, False)
        if t.kind == "opaque" and t.name == "optional_type" and len(t.params) == 1:
            return t.params[0]
        if not _is_dyn(t):
            self.error(node, f"expected type '{optional_of(t)}' but found '{t}'")
        return t

    def join(self, previous: Type | None, current: Type) -> Type:
        """An aggregate literal's element type (mixed types are dyn here; the validator refuses them later)."""
        if previous is None:
            return current
        if self.try_assign(previous, current):
            return _most_general(previous, current)
        return DYN

    def ident(self, node: Ident) -> Type:
        for scope in reversed(self.scopes):
            if node.name in scope:
                return scope[node.name]
        name = node.name.removeprefix(".")
        if name in self.env.variables:
            self.references.add(name)
            return self.env.variables[name]
        if name in _TYPE_IDENTS:
            return _TYPE_IDENTS[name]
        self.error(node, f"undeclared reference to '{name}' (in container '')")
        return ERROR

    def select(self, node: Select) -> Type:
        assert node.operand is not None
        qualified = None if node.test_only else _qualified_name(node)
        if qualified is not None and (qualified in self.env.variables or qualified in _TYPE_IDENTS):
            return self.env.variables.get(qualified) or _TYPE_IDENTS[qualified]  # a dotted name, declared whole
        self.check(node.operand)
        target = _substitute(self.subs, node.operand.type or DYN, False)
        # a selection from an optional value selects from what it holds, and is optional in turn
        wrapped = target.kind == "opaque" and target.name == "optional_type" and len(target.params) == 1
        if wrapped:
            target = target.params[0]
        result = ERROR
        if target.kind == "map":
            result = target.params[1]
        elif target.kind == "struct":
            fields = self.env.structs.get(target.name, {})
            if node.field_name in fields:
                result = fields[node.field_name]
            else:
                self.error(node, f"undefined field '{node.field_name}'")
        elif target.kind == "param":
            self.try_assign(DYN, target)
            result = DYN
        else:
            if not _is_dyn_or_error(target):
                self.error(node, f"type '{target}' does not support field selection")
            result = DYN
        if node.test_only:
            return BOOL
        if wrapped or node.optional:
            result = optional_of(result)
        return _substitute(self.subs, result, False)

    def call(self, node: Call) -> Type:
        for arg in node.args:
            self.check(arg)
        if node.target is None:
            overloads = self.env.overloads(node.function)
            if overloads is None:
                self.error(node, f"undeclared reference to '{node.function}' (in container '')")
                return ERROR
            return self.resolve(node, overloads, None)
        qualified = _qualified_name(node.target)
        if qualified is not None:
            overloads = self.env.overloads(f"{qualified}.{node.function}")
            if overloads is not None:
                node.function = f"{qualified}.{node.function}"
                node.target = None
                return self.resolve(node, overloads, None)
        self.check(node.target)
        overloads = self.env.overloads(node.function)
        if overloads is None:
            self.error(node, f"undeclared reference to '{node.function}' (in container '')")
            return ERROR
        return self.resolve(node, overloads, node.target)

    def resolve(self, node: Call, overloads: tuple[Overload, ...], target: Node | None) -> Type:
        arg_types = [a.type or DYN for a in ([target] if target is not None else []) + node.args]
        if node.function in ("_&&_", "_||_"):
            failed = False
            for arg, arg_type in zip(node.args, arg_types, strict=True):
                if not self.try_assign(arg_type, BOOL):
                    self.error(arg, f"expected type 'bool' but found '{arg_type}'")
                    failed = True
            return ERROR if failed else BOOL
        result: Type | None = None
        for overload in overloads:
            if overload.member != (target is not None) or len(overload.args) != len(arg_types):
                continue
            fresh: Substitutions = {}
            for param in _params(overload):
                fresh[param] = self.type_var()
            params = [_substitute(fresh, t, False) for t in overload.args]
            trial = dict(self.subs)
            if all(_assignable(trial, a, p) for a, p in zip(arg_types, params, strict=True)):
                self.subs = trial
                returned = _substitute(self.subs, _substitute(fresh, overload.result, False), False)
                if result is None:
                    result = returned
                elif not _is_dyn(result) and returned != result:
                    result = DYN
        if result is None:
            shown = [str(_substitute(self.subs, t, True)) for t in arg_types]
            signature = (f"{shown[0]}.({', '.join(shown[1:])})" if target is not None
                         else f"({', '.join(shown)})")
            self.error(node, f"found no matching overload for '{node.function}' applied to '{signature}'")
            return ERROR
        return result

    def comprehension(self, node: Comprehension) -> Type:
        assert node.iter_range is not None
        assert node.accu_init is not None
        assert node.condition is not None
        assert node.step is not None
        assert node.result is not None
        self.check(node.iter_range)
        accu_type = self.check(node.accu_init)
        range_type = _substitute(self.subs, node.iter_range.type or DYN, False)
        self.scopes.append({node.accu_var: accu_type})
        var2: Type | None = None
        if range_type.kind == "list":
            var = range_type.params[0]
            if node.iter_var2:
                var, var2 = INT, var
        elif range_type.kind == "map":
            var = range_type.params[0]
            var2 = range_type.params[1] if node.iter_var2 else None
        elif range_type.kind in ("dyn", "error", "param"):
            self.try_assign(DYN, range_type)
            var = var2 = DYN
        else:
            self.error(node.iter_range, f"expression of type '{range_type}' cannot be range of a comprehension "
                                        "(must be list, map, or dynamic)")
            var = var2 = ERROR
        loop = {node.iter_var: var}
        if node.iter_var2 and var2 is not None:
            loop[node.iter_var2] = var2
        self.scopes.append(loop)
        self.assert_type(node.condition, BOOL)
        self.assert_type(node.step, accu_type)
        self.scopes.pop()
        self.check(node.result)
        self.scopes.pop()
        return _substitute(self.subs, node.result.type or DYN, False)

    def assert_type(self, node: Node, expected: Type) -> None:
        actual = self.check(node)
        if not self.try_assign(expected, actual):
            self.error(node, f"expected type '{expected}' but found '{actual}'")


def _params(overload: Overload) -> set[Type]:
    found: set[Type] = set()

    def visit(t: Type) -> None:
        if t.kind == "param":
            found.add(t)
        for p in t.params:
            visit(p)

    for t in (*overload.args, overload.result):
        visit(t)
    return found


def _qualified_name(node: Node) -> str | None:
    if isinstance(node, Ident):
        return node.name.removeprefix(".")
    if isinstance(node, Select) and not node.test_only and node.operand is not None:
        prefix = _qualified_name(node.operand)
        return f"{prefix}.{node.field_name}" if prefix is not None else None
    return None


def _walk_outside(root: Node, exempt: str) -> Iterator[Node]:
    """Every node that does not lie within a call of ``exempt``."""
    stack = [root]
    while stack:
        current = stack.pop()
        yield current
        if not (isinstance(current, Call) and current.function == exempt):
            stack.extend(reversed(list(_children(current))))


def _entry_type(t: Type | None, optional: bool) -> Type | None:
    """A literal entry's type as the literal holds it (an optional entry's value unwrapped)."""
    if optional and t is not None and t.kind == "opaque" and t.name == "optional_type" and t.params:
        return t.params[0]
    return t


def _homogeneous(root: Node) -> list[tuple[int, str]]:
    """cel-go's validator of homogeneous aggregate literals over the checked types: each list's first mismatch
    and each map entry's, except within ``format()`` (whose argument list mixes types by design)."""
    issues: list[tuple[int, str]] = []
    nodes = list(_walk_outside(root, "format"))
    for node in nodes:
        if isinstance(node, CreateList) and node.elements:
            types = [_entry_type(e.type, i in node.optional) for i, e in enumerate(node.elements)]
            for element, element_type in zip(node.elements[1:], types[1:], strict=True):
                if element_type != types[0]:
                    issues.append((element.offset, f"expected type '{types[0]}' but found '{element_type}'"))
                    break
    for node in nodes:
        if isinstance(node, CreateMap) and node.entries:
            key_type = node.entries[0][0].type
            value_type = _entry_type(node.entries[0][1].type, 0 in node.optional)
            for i, (key, value) in enumerate(node.entries[1:], 1):
                if key.type != key_type:
                    issues.append((key.offset, f"expected type '{key_type}' but found '{key.type}'"))
                if _entry_type(value.type, i in node.optional) != value_type:
                    shown = _entry_type(value.type, i in node.optional)
                    issues.append((value.offset, f"expected type '{value_type}' but found '{shown}'"))
    return issues


# Go's time.ParseDuration and time.RFC3339, which cel-go's duration() and timestamp() parse literals with.
_GO_DURATION = re.compile(r"[-+]?(?:0|(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)")
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))")


def _valid_duration(text: str) -> bool:
    return _GO_DURATION.fullmatch(text) is not None


def _valid_timestamp(text: str) -> bool:
    match = _RFC3339.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    offset = [int(g) for g in match.groups()[6:] if g is not None]
    try:
        datetime.datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        return False
    return second < 60 and all(o < limit for o, limit in zip(offset, (24, 60), strict=False))


def _valid_regex(text: str) -> bool:
    try:
        cel_regex.compile_pattern(text)
    except cel_regex.PatternError:
        return False
    return True


_LITERAL_CHECKS = {"duration": _valid_duration, "timestamp": _valid_timestamp, "matches": _valid_regex}


def _literal_arguments(root: Node) -> list[tuple[int, str]]:
    """cel-go's literal validators (``ValidateDurationLiterals``, ``ValidateTimestampLiterals``,
    ``ValidateRegexLiterals``): a string literal as the first argument of ``duration()``, ``timestamp()`` or
    ``matches()`` that does not parse."""
    issues: list[tuple[int, str]] = []
    for node in walk(root):
        valid = _LITERAL_CHECKS.get(node.function) if isinstance(node, Call) else None
        if valid is None or not isinstance(node, Call) or not node.args:
            continue
        literal = node.args[0]
        if isinstance(literal, Literal) and literal.value_type == STRING:
            value = string_value(literal.token)
            if value is not None and not valid(value):
                issues.append((literal.offset, f"invalid {node.function} argument"))
    return issues


def string_value(token: str) -> str | None:
    """The value of a string literal token (None when its escapes do not decode)."""
    raw = token[:1] in "rR"
    body = token[1:] if raw else token
    quote = 3 if body[:3] in ("'''", '"""') else 1
    body = body[quote:-quote]
    if raw or "\\" not in body:
        return body
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return None


MAX_RECURSION = 250  # cel-go's parser default (maxRecursionDepth)
_CHAINS = {"relation": "relation", "addition": "calc", "multiplication": "calc", "member_dot": "member",
           "member_dot_arg": "member", "member_index": "member"}


def recursion_depth(tree: Any) -> tuple[int, int]:
    """The deepest nesting of one grammar rule, as cel-go's parser counts it (each rule entered once per nested
    expression, once more per operator of a left-recursive chain, and once more for a binary operator's right
    operand: an approximation of ANTLR's count, exact for nested brackets and long operator chains), and the
    parse tree's height (how deep walking it recurses here)."""
    deepest = height = 0
    # (node, expressions nested, operators per chained rule, the largest of those, the node's level)
    stack: list[tuple[Any, int, dict[str, int], int, int]] = [(tree, 0, {}, 0, 1)]
    while stack:
        node, levels, chains, longest, below = stack.pop()
        height = max(height, below)
        data = str(node.data)
        if data == "expr":
            levels += 1
        children = node.children
        rule = _CHAINS.get(data) if len(children) >= 2 else None
        if rule is not None:
            chains = {**chains, rule: chains.get(rule, 0) + 1}
            longest = max(longest, chains[rule])
        deepest = max(deepest, levels + longest)
        for i, child in enumerate(children):
            if not isinstance(child, lark.Tree):
                continue
            if rule is not None and i == 1 and data in ("relation", "addition", "multiplication"):
                # a binary operator's right operand: the rule entered once more
                right = {**chains, rule: chains[rule] + 1}
                stack.append((child, levels, right, max(longest, right[rule]), below + 1))
            else:
                stack.append((child, levels, chains, longest, below + 1))
    return deepest, height


def room_for(tree: Any, height: int | None = None) -> contextlib.AbstractContextManager[None]:
    """Frames for walking ``tree`` recursively (its ``height`` measured when not given)."""
    return room_for_depth(recursion_depth(tree)[1] if height is None else height, margin=1000)


MAX_CODE_POINTS = 100_000  # cel-go's parser default (expressionSizeCodePointLimit)


@dataclass(frozen=True)
class Checked:
    """A checked expression: its output type, the environment's variables it refers to, and the parse tree's
    nodes that select, index or build optionally (``x.?f``, ``x[?i]``, a selection or index from an optional
    value; a list or map literal with optional entries: by id, with the entries' indexes), and the typed syntax
    itself (for a cost estimate)."""

    type: Type
    references: frozenset[str]
    optional_selections: frozenset[int]
    optional_entries: Mapping[int, frozenset[int]]
    root: Node


def check(tree: Any, text: str, env: Environment) -> Type:
    """The output type of ``text`` (parsed by cel-python into ``tree``) in ``env``; :class:`CheckError` with
    cel-go's issues when the expression misuses a macro, does not type-check or mixes types in a literal."""
    return check_expression(tree, text, env).type


def check_expression(tree: Any, text: str, env: Environment) -> Checked:
    """:func:`check`, with what else the caller needs to run the expression. ``tree`` is cel-python's parse of
    ``text`` with optional syntax's "?" blanked out (:func:`.cel_syntax.optional_marks`)."""
    if len(text) > MAX_CODE_POINTS:
        raise CheckError(((-1, f"expression code point size exceeds limit: size: {len(text)}, "
                                f"limit {MAX_CODE_POINTS}"),))
    depth, height = recursion_depth(tree)
    if depth > MAX_RECURSION:
        raise CheckError(((-1, f"expression recursion limit exceeded: {MAX_RECURSION}"),))
    builder = _Builder(text, tree, cel_syntax.optional_marks(text))
    checker = _Checker(env)
    with room_for(tree, height):
        root = builder.build(tree)
        for stray in builder.marks:  # a "?" that marks nothing optional: ANTLR drops it
            builder.issues.append((stray, f"Syntax error: extraneous input '?' expecting {_OPERAND_START}"))
        if builder.issues:
            raise CheckError(tuple(sorted(builder.issues)))
        checker.check(root)
    if checker.issues:
        raise CheckError(tuple(checker.issues))
    for node in checker.nodes:
        node.type = _substitute(checker.subs, node.type or DYN, True)
    issues = _homogeneous(root) + _literal_arguments(root)
    if issues:
        raise CheckError(tuple(issues))
    selections: set[int] = set()
    entries: dict[int, frozenset[int]] = {}
    for origin, node in builder.origins:
        if isinstance(node, CreateList | CreateMap):
            entries[id(origin)] = node.optional
        elif _selects_optionally(node):
            selections.add(id(origin))
    return Checked(root.type or DYN, frozenset(checker.references), frozenset(selections), entries, root)


def _selects_optionally(node: Node) -> bool:
    """Whether a selection or index gives an optional (``.?``, ``[?]``, or from an optional value)."""
    if isinstance(node, Select):
        return node.optional or _is_optional(node.operand)
    return isinstance(node, Call) and (node.function == "_[?_]" or _is_optional(node.args[0]))


def _is_optional(node: Node | None) -> bool:
    t = node.type if node is not None else None
    return t is not None and t.kind == "opaque" and t.name == "optional_type"


def issues_text(text: str, issues: Sequence[tuple[int, str]]) -> str:
    """cel-go's ``issues.String()``: each issue ``ERROR: <input>:L:C: message``, the source line and a caret
    under the column (a wide dot for each non-ASCII character before it), sorted by position."""
    lines = text.split("\n")
    out = []
    for offset, message in sorted(issues, key=lambda issue: _line_column(text, issue[0])):
        if offset < 0:  # cel-go's NoLocation: no source line shown
            out.append(f"ERROR: <input>:-1:0: {message}")
            continue
        line, column = _line_column(text, offset)
        source = lines[line - 1].replace("\t", " ") if line - 1 < len(lines) else ""
        dots = "".join("\uff0e" if len(char.encode()) > 1 else "." for char in source[:column])
        caret = "\uff3e" if column < len(source) and len(source[column].encode()) > 1 else "^"
        out.append(f"ERROR: <input>:{line}:{column + 1}: {message}\n | {source}\n | {dots}{caret}")
    return "\n".join(out)


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and 0-based column of ``offset`` (-1, -1 for none)."""
    if offset < 0:
        return -1, -1
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)
