"""Generate kube-sim's API schema from upstream's Go type definitions.

Reads the ``types.go`` files of k8s.io/api, of the parts of k8s.io/apimachinery the API types use
(meta/v1, runtime, intstr, resource), of k8s.io/apiextensions-apiserver's apiextensions/v1 (the
CustomResourceDefinition kind) and of k8s.io/kube-aggregator's apiregistration/v1 (APIService) from git
directories, and writes
``controller_manager/sim/apiserver/schema/types.json``: for every struct, its fields in declaration
order with JSON name, ``omitempty``, Go type (pointer, slice, map, named struct), inline embedding,
protobuf field number and wire type, patch strategy and merge key, the ``+listType``/``+listMapKey``/
``+mapType``/``+structType``/``+optional``/``+required``/``+default`` markers and the ``+enum`` type a field holds;
for every struct its ``+union``; for every ``+enum`` string type its constants' values; and for every top-level
kind, its group, version and struct; then, beside it, the types' OpenAPI descriptions
(``descriptions.json.gz``, by ``tools/gen_openapi_docs.py``). A new Kubernetes release is one run:

    python tools/gen_schema.py --api /path/to/kubernetes/api.git --apimachinery /path/to/apimachinery.git \
        --apiextensions /path/to/apiextensions-apiserver.git --aggregator /path/to/kube-aggregator.git \
        --version v1.37.0 [--rev HEAD] [--apiextensions-rev HEAD] [--aggregator-rev HEAD]

(apiextensions-apiserver and kube-aggregator are separate repositories: their revisions are the ones of the same
release branch.)

Only facts are extracted (names, numbers, tags, markers); no upstream text or code is kept.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "controller_manager" / "sim" / "apiserver" / "schema" / "types.json"

# apimachinery packages the API types reference, by import path.
APIMACHINERY_PACKAGES = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": "pkg/apis/meta/v1",
    "k8s.io/apimachinery/pkg/runtime": "pkg/runtime",
    "k8s.io/apimachinery/pkg/util/intstr": "pkg/util/intstr",
    "k8s.io/apimachinery/pkg/api/resource": "pkg/api/resource",
    "k8s.io/apimachinery/pkg/version": "pkg/version",  # version.Info, the /version document
}
# Types whose JSON and protobuf forms are written by hand upstream (custom Marshal methods); the codec
# knows each by name, so their Go fields are not described.
CUSTOM = {
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Duration",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1",
    "k8s.io/apimachinery/pkg/api/resource.Quantity",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString",
    "k8s.io/apimachinery/pkg/runtime.RawExtension",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSON",  # raw JSON, {raw = 1} in protobuf
}
# The API packages of apiextensions-apiserver, by import path (the CustomResourceDefinition kind).
APIEXTENSIONS_PACKAGES = {
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1": "pkg/apis/apiextensions/v1",
}
# The API packages of kube-aggregator, by import path (the APIService kind of apiregistration.k8s.io).
AGGREGATOR_PACKAGES = {
    "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1": "pkg/apis/apiregistration/v1",
}
# Types whose JSON form is written by hand upstream (a schema or a bool, a schema or a list) but whose
# protobuf form is generated: their fields (protobuf numbers, no JSON names) are described; the codec
# knows each by name for JSON.
CUSTOM_JSON = {
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrArray",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrBool",
    "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaPropsOrStringArray",
}
PRIMITIVES = {"string", "bool", "int", "int32", "int64", "uint32", "uint64", "float32", "float64", "byte"}
# Go named types from outside the API packages that are plain strings on the wire.
EXTERNAL_STRINGS = {"k8s.io/apimachinery/pkg/types.UID", "k8s.io/apimachinery/pkg/types.NodeName"}

_TYPE_DECL = re.compile(r"^type\s+(\w+)\s+(.*)$")
_TAG = re.compile(r'(\w+):"([^"]*)"')
_MARKER = re.compile(r"^//\s*\+([\w.:/-]+)(?:=(.*))?$")
# A string constant: ``Name Type = "value"``, ``Name = Type("value")`` or ``Name Type = OtherConstant``.
_CONST = re.compile(r'^(?:const\s+)?(\w+)(?:\s+([\w.]+))?\s*=\s*(?:([\w.]+)\()?("(?:[^"\\]|\\.)*"|`[^`]*`|[\w.]+)\)?\s*(?://.*)?$')


def is_api_package(import_path: str) -> bool:
    """Whether a package holds API types (every struct described, kinds found), not machinery."""
    return (import_path.startswith("k8s.io/api/") or import_path in APIEXTENSIONS_PACKAGES
            or import_path in AGGREGATOR_PACKAGES)


def openapi_name(import_path: str) -> str:
    """k8s.io/api/apps/v1 -> io.k8s.api.apps.v1 (the prefix OpenAPI definitions use)."""
    host, _, rest = import_path.partition("/")
    return ".".join([*reversed(host.split(".")), *rest.split("/")])


@dataclass
class GoField:
    name: str            # Go field name ("" for an embedded type)
    type_expr: str       # Go type expression as written, package aliases resolved later
    tags: dict[str, str]
    markers: dict[str, str]
    embedded: bool


@dataclass
class GoType:
    package: str         # import path
    name: str
    underlying: str      # "struct" or a Go type expression
    fields: list[GoField] = field(default_factory=list)
    markers: dict[str, str] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)


def git_files(repo: str, rev: str, directory: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", f"{rev}:{directory}"], check=True,
                         capture_output=True, text=True).stdout.split()
    return [f"{directory}/{f}" for f in out if f.endswith(".go") and not f.endswith("_test.go")
            and not f.startswith("zz_generated") and f not in ("generated.pb.go", "types_swagger_doc_generated.go")]


def git_show(repo: str, rev: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{rev}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def parse_imports(src: str, package: str) -> dict[str, str]:
    imports: dict[str, str] = {}
    block = re.search(r"^import\s*\((.*?)^\)", src, re.S | re.M)
    lines = block.group(1).splitlines() if block else re.findall(r"^import\s+(.*)$", src, re.M)
    for line in lines:
        m = re.match(r'\s*(\w+)?\s*"([^"]+)"', line)
        if m:
            path = m.group(2)
            imports[m.group(1) or path.rsplit("/", 1)[-1]] = path
    return imports


def parse_markers(comments: list[str]) -> dict[str, str]:
    markers: dict[str, str] = {}
    for c in comments:
        m = _MARKER.match(c.strip())
        if m:
            key, value = m.group(1), (m.group(2) or "").strip()
            if key in markers and key == "listMapKey":
                markers[key] += "," + value
            else:
                markers[key] = value
    return markers


def parse_go(src: str, package: str) -> list[GoType]:
    """Type declarations of one Go file: structs with their fields, and named non-struct types."""
    imports = parse_imports(src, package)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)  # block comments carry no markers
    types: list[GoType] = []
    lines = src.splitlines()
    comments: list[str] = []
    i = 0
    in_type_block = False
    while i < len(lines):
        line = lines[i].rstrip()
        stripped = line.strip()
        if stripped.startswith("//"):
            comments.append(stripped)
            i += 1
            continue
        if stripped == "type (":
            in_type_block = True
            comments = []
            i += 1
            continue
        if in_type_block and stripped == ")":
            in_type_block = False
            i += 1
            continue
        decl = stripped if in_type_block else line
        m = _TYPE_DECL.match(decl) if not in_type_block else re.match(r"^(\w+)\s+(.*)$", stripped)
        if m and (in_type_block or line.startswith("type ")):
            name, rest = m.group(1), m.group(2).strip()
            markers = parse_markers(comments)
            comments = []
            if rest.startswith("struct {") or rest == "struct{}":
                t = GoType(package, name, "struct", markers=markers, imports=imports)
                if rest.endswith("}") and rest != "struct {":
                    types.append(t)
                    i += 1
                    continue
                i += 1
                field_comments: list[str] = []
                while i < len(lines) and lines[i].strip() != "}":
                    fl = lines[i].strip()
                    i += 1
                    if not fl:
                        field_comments = []
                        continue
                    if fl.startswith("//"):
                        field_comments.append(fl)
                        continue
                    code, _, rest = fl.partition("`")
                    tag = rest.rpartition("`")[0]
                    tokens = code.split("//")[0].split()
                    if not tokens or len(tokens) > 2:
                        # Not an API type (a func-typed field, say): dropped; a reference to it fails later.
                        t.underlying = "unparsed"
                        continue
                    tags = dict(_TAG.findall(tag))
                    if len(tokens) == 1:  # an embedded type: its fields are promoted unless the tag names it
                        t.fields.append(GoField("", tokens[0], tags, parse_markers(field_comments), True))
                    else:
                        t.fields.append(GoField(tokens[0], tokens[1], tags, parse_markers(field_comments), False))
                    field_comments = []
                if t.underlying == "struct":
                    types.append(t)
                i += 1
                continue
            if rest.startswith("interface"):
                i += 1
                continue
            underlying = rest.split("//")[0].strip()
            if underlying.startswith("="):
                underlying = underlying[1:].strip()
            types.append(GoType(package, name, underlying, markers=markers, imports=imports))
            i += 1
            continue
        if stripped and not stripped.startswith("//"):
            comments = []
        i += 1
    return types


@dataclass
class GoConst:
    package: str
    name: str
    type_expr: str       # "" when untyped
    value: str           # the string value, or the name of another constant (``ref``)
    ref: bool
    imports: dict[str, str]


def parse_consts(src: str, package: str) -> list[GoConst]:
    """String constants of one Go file (the values of ``+enum`` types and ``+default=ref(...)`` targets)."""
    imports = parse_imports(src, package)
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    consts: list[GoConst] = []
    in_block = False
    for line in src.splitlines():
        stripped = line.strip()
        if stripped == "const (":
            in_block = True
            continue
        if in_block and stripped == ")":
            in_block = False
            continue
        if not (in_block or line.startswith("const ")):
            continue
        m = _CONST.match(stripped)
        if not m:
            continue
        name, type_expr, conversion, value = m.groups()
        type_expr = type_expr or conversion or ""
        if value[0] in '"`':
            text = json.loads(value) if value[0] == '"' else value[1:-1]
            consts.append(GoConst(package, name, type_expr, text, False, imports))
        elif not value[0].isdigit():
            consts.append(GoConst(package, name, type_expr, value, True, imports))
    return consts


class Resolver:
    """Turns Go type expressions into the schema's type strings."""

    def __init__(self, types: dict[str, GoType], consts: dict[str, GoConst] | None = None) -> None:
        self.types = types  # "importpath.Name" -> GoType
        self.consts = consts or {}  # "importpath.Name" -> GoConst

    def const_value(self, qualified: str) -> str | None:
        """A string constant's value, following ``X = Y`` references."""
        for _ in range(10):
            c = self.consts.get(qualified)
            if c is None:
                return None
            if not c.ref:
                return c.value
            alias, dot, name = c.value.partition(".")
            qualified = f"{c.imports.get(alias, alias)}.{name}" if dot else f"{c.package}.{c.value}"
        return None

    def const_type(self, c: GoConst) -> str | None:
        """The qualified named type of a constant (an untyped one referring to a typed one takes its type)."""
        for _ in range(10):
            if c.type_expr:
                alias, dot, name = c.type_expr.partition(".")
                return f"{c.imports.get(alias, alias)}.{name}" if dot else f"{c.package}.{c.type_expr}"
            if not c.ref:
                return None
            alias, dot, name = c.value.partition(".")
            nxt = self.consts.get(f"{c.imports.get(alias, alias)}.{name}" if dot else f"{c.package}.{c.value}")
            if nxt is None:
                return None
            c = nxt
        return None

    def named(self, expr: str, owner: GoType) -> GoType | None:
        """The named API type an expression denotes (pointers stripped), if it is one."""
        expr = expr.strip().lstrip("*")
        if expr.startswith("[]") or expr.startswith("map[") or expr in PRIMITIVES or "{" in expr or expr == "any":
            return None
        return self.types.get(self.qualify(expr, owner))

    def enum_of(self, expr: str, owner: GoType) -> str | None:
        """The ``+enum`` type whose values a field (or a list's or map's elements) holds, as OpenAPI names it:
        the field's own type, else its slice's or map's element type (one pointer stripped at each step)."""
        expr = expr.strip().lstrip("*")
        t = self.named(expr, owner)
        if t is not None and "enum" in t.markers and t.underlying == "string":
            return openapi_name(f"{t.package}.{t.name}")
        if t is not None and t.underlying != "struct":
            expr, owner = t.underlying, t
        if expr.startswith("[]"):
            inner = self.named(expr[2:], owner)
        elif expr.startswith("map["):
            inner = self.named(expr[expr.index("]") + 1:], owner)
        else:
            return None
        if inner is not None and "enum" in inner.markers and inner.underlying == "string":
            return openapi_name(f"{inner.package}.{inner.name}")
        return None

    def default(self, f: GoField, owner: GoType) -> tuple[bool, Any]:
        """openapi-gen's ``+default=``: the field's marker, else its named type's (through pointers and named
        non-struct types): (found, the JSON value; a ``ref(Const)`` resolved to the constant's value)."""
        markers, where = f.markers, owner
        t = self.named(f.type_expr, owner)
        for _ in range(10):
            if "default" in markers:
                return True, self._default_value(markers["default"], where, owner)
            if t is None:
                return False, None
            markers, where = t.markers, t
            t = self.named(t.underlying, t) if t.underlying != "struct" else None
        return False, None

    def _default_value(self, raw: str, where: GoType, owner: GoType) -> Any:
        ref = re.fullmatch(r"ref\(([^)]+)\)", raw)
        if ref is None:
            return json.loads(raw)
        package, _, name = ref.group(1).rpartition(".")
        qualified = f"{where.imports.get(package, package)}.{name}" if package else f"{where.package}.{name}"
        value = self.const_value(qualified)
        if value is None:
            raise ValueError(f"unresolved default {raw} in {owner.package}.{owner.name}")
        return value

    def qualify(self, expr: str, owner: GoType) -> str:
        if "." in expr:
            alias, _, name = expr.partition(".")
            return f"{owner.imports.get(alias, alias)}.{name}"
        return f"{owner.package}.{expr}"

    def resolve(self, expr: str, owner: GoType) -> str:
        """Schema type string: primitives, "bytes", "*T", "[]T", "map[]T", or an OpenAPI-style struct name."""
        expr = expr.strip()
        if expr.startswith("*"):
            return "*" + self.resolve(expr[1:], owner)
        if expr == "[]byte":
            return "bytes"
        if expr.startswith("[]"):
            return "[]" + self.resolve(expr[2:], owner)
        if expr.startswith("map["):
            depth, j = 0, 3
            for j in range(3, len(expr)):
                if expr[j] == "[":
                    depth += 1
                elif expr[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
            key = self.resolve(expr[4:j], owner)
            if key != "string":
                raise ValueError(f"map key {expr} in {owner.package}.{owner.name} is not a string")
            return "map[]" + self.resolve(expr[j + 1:], owner)
        if expr in ("interface{}", "any"):
            return "any"
        if expr in PRIMITIVES:
            return {"int": "int64", "float32": "float64", "byte": "int32"}.get(expr, expr)
        qualified = self.qualify(expr, owner)
        if qualified in CUSTOM:
            return openapi_name(qualified)
        if qualified in EXTERNAL_STRINGS:
            return "string"
        t = self.types.get(qualified)
        if t is None:
            raise ValueError(f"unknown type {expr} ({qualified}) in {owner.package}.{owner.name}")
        if t.underlying == "struct":
            return openapi_name(qualified)
        resolved = self.resolve(t.underlying, t)
        if resolved.startswith("[]") and resolved != "bytes":
            return "named:" + openapi_name(qualified)  # a named slice: a message of its own in protobuf
        return resolved


def go_display(expr: str, owner: GoType) -> str:
    """How Go's reflect names a type in error messages: ``[]v1.Container``, ``map[string]string``, ``int32``."""
    expr = expr.strip()
    for prefix in ("*", "[]"):
        if expr.startswith(prefix):
            inner = go_display(expr[len(prefix):], owner)
            return prefix + ("uint8" if inner == "byte" else inner)
    if expr.startswith("map["):
        key, _, value = expr[4:].partition("]")
        return f"map[{go_display(key, owner)}]{go_display(value, owner)}"
    if expr in PRIMITIVES or expr in ("interface{}", "any"):
        return "interface {}" if expr in ("interface{}", "any") else expr
    alias, dot, name = expr.partition(".")
    path = owner.imports.get(alias, alias) if dot else owner.package
    return f"{path.rsplit('/', 1)[-1]}.{name if dot else expr}"


def field_record(f: GoField, owner: GoType, resolver: Resolver) -> dict[str, Any] | None:
    json_tag = f.tags.get("json")
    if json_tag == "-":
        return None
    json_name, _, opts = (json_tag or "").partition(",")
    options = set(opts.split(",")) if opts else set()
    inline = f.embedded and (not json_name or "inline" in options)
    type_str = resolver.resolve(f.type_expr, owner)
    proto = f.tags.get("protobuf")
    if type_str.lstrip("*").startswith("named:") and proto and proto.split(",")[2] == "rep":
        # A named slice tagged as a repeated field (apiextensions' ValidationRules): its elements repeat in
        # place in protobuf, with no wrapper message.
        named = resolver.named(f.type_expr, owner)
        assert named is not None
        type_str = resolver.resolve(named.underlying, named)
    rec: dict[str, Any] = {"go": f.name or f.type_expr.rsplit(".", 1)[-1].lstrip("*"), "type": type_str,
                           "goType": go_display(f.type_expr.lstrip("*"), owner)}
    if inline:
        rec["inline"] = True
    else:
        rec["json"] = json_name or f.name
    if "omitempty" in options:
        rec["omitempty"] = True
    if proto:
        parts = proto.split(",")
        rec["proto"] = [int(parts[1]), parts[0], parts[2] == "rep"]
    for key in ("patchStrategy", "patchMergeKey"):
        if key in f.tags:
            rec[key] = f.tags[key]
    markers = f.markers
    for key in ("listType", "mapType", "structType"):
        if key in markers:
            rec[key] = markers[key]
    if "listMapKey" in markers:
        rec["listMapKeys"] = markers["listMapKey"].split(",")
    # openapi-gen's reading: only ``+optional`` and ``+required`` count (not the ``+k8s:`` validation tags).
    if "optional" in markers:
        rec["optional"] = True
    if "required" in markers:
        rec["required"] = True
    if "string" in options:
        rec["jsonString"] = True  # encoding/json's ",string": the value is quoted on the wire
    found, default = resolver.default(f, owner)
    if found:
        rec["default"] = default
    enum = resolver.enum_of(f.type_expr, owner)
    if enum:
        rec["enum"] = enum
    if "unionDiscriminator" in markers:
        rec["unionDiscriminator"] = True
    return rec


def packages(api: str, apimachinery: str, rev: str, apiextensions: str | None = None,
             apiextensions_rev: str = "HEAD", aggregator: str | None = None,
             aggregator_rev: str = "HEAD") -> list[tuple[str, str, str, str]]:
    """The Go packages read: (repository, revision, directory, import path)."""
    packages: list[tuple[str, str, str, str]] = []
    for import_path, directory in APIMACHINERY_PACKAGES.items():
        packages.append((apimachinery, rev, directory, import_path))
    tree = subprocess.run(["git", "-C", api, "ls-tree", "-r", "--name-only", rev], check=True, capture_output=True,
                          text=True).stdout.split()
    for path in sorted({p.rsplit("/", 1)[0] for p in tree if p.endswith("/types.go")}):
        packages.append((api, rev, path, f"k8s.io/api/{path}"))
    if apiextensions is not None:
        for import_path, directory in APIEXTENSIONS_PACKAGES.items():
            packages.append((apiextensions, apiextensions_rev, directory, import_path))
    if aggregator is not None:
        for import_path, directory in AGGREGATOR_PACKAGES.items():
            packages.append((aggregator, aggregator_rev, directory, import_path))
    return packages


def load(api: str, apimachinery: str, rev: str, apiextensions: str | None = None, apiextensions_rev: str = "HEAD",
         aggregator: str | None = None, aggregator_rev: str = "HEAD",
         ) -> tuple[dict[str, GoType], dict[str, str], dict[str, GoConst]]:
    types: dict[str, GoType] = {}
    consts: dict[str, GoConst] = {}
    groups: dict[str, str] = {}  # import path -> API group
    for repo, repo_rev, directory, import_path in packages(api, apimachinery, rev, apiextensions, apiextensions_rev,
                                                           aggregator, aggregator_rev):
        for path in git_files(repo, repo_rev, directory):
            src = git_show(repo, repo_rev, path)
            for t in parse_go(src, import_path):
                types[f"{import_path}.{t.name}"] = t
            for c in parse_consts(src, import_path):
                consts.setdefault(f"{import_path}.{c.name}", c)
            m = re.search(r'^const GroupName = "([^"]*)"', src, re.M)
            if m:
                groups[import_path] = m.group(1)
    return types, groups, consts


def generate(api: str, apimachinery: str, rev: str, apiextensions: str | None = None,
             apiextensions_rev: str = "HEAD", aggregator: str | None = None,
             aggregator_rev: str = "HEAD") -> dict[str, Any]:
    types, groups, consts = load(api, apimachinery, rev, apiextensions, apiextensions_rev, aggregator,
                                 aggregator_rev)
    resolver = Resolver(types, consts)
    out_types: dict[str, Any] = {}
    kinds: dict[str, Any] = {}
    wrappers: set[str] = set()
    # Every struct of k8s.io/api, and the meta/v1 and runtime structs, with whatever they reference.
    pending = [q for q, t in types.items() if t.underlying == "struct" and q not in CUSTOM and (
        is_api_package(t.package) or t.package in ("k8s.io/apimachinery/pkg/apis/meta/v1",
                                                             "k8s.io/apimachinery/pkg/runtime")
        or q == "k8s.io/apimachinery/pkg/version.Info")]
    pending = [q for q in pending if q.rsplit(".", 1)[-1][0].isupper()]
    done: set[str] = set()
    while pending:
        qualified = pending.pop()
        if qualified in done:
            continue
        done.add(qualified)
        t = types[qualified]
        if not is_api_package(t.package) and not all("json" in f.tags for f in t.fields):
            continue  # machinery, not an API type (a Scheme, a serializer's options)
        fields = []
        for f in t.fields:
            rec = field_record(f, t, resolver)
            if rec is None:
                continue
            base = rec["type"].lstrip("*").removeprefix("[]").removeprefix("map[]").lstrip("*")
            if base.startswith("named:"):
                wrappers.add(base[len("named:"):])
            elif base.startswith("io.k8s."):
                ref = next((q for q in types if openapi_name(q) == base), None)
                if ref is not None and ref not in CUSTOM:
                    pending.append(ref)
            fields.append(rec)
        entry: dict[str, Any] = {"go": t.name, "fields": fields}
        if "structType" in t.markers:
            entry["structType"] = t.markers["structType"]
        if "union" in t.markers:
            entry["union"] = True
        name = openapi_name(qualified)
        out_types[name] = entry
        embeds_type_meta = any(f.embedded and f.type_expr.endswith("TypeMeta") for f in t.fields)
        has_meta = any(f.tags.get("json", "").startswith("metadata") for f in t.fields)
        if embeds_type_meta and has_meta and is_api_package(t.package) and t.package in groups:
            version = t.package.rsplit("/", 1)[-1]
            group = groups[t.package]
            api_version = f"{group}/{version}" if group else version
            kinds[f"{api_version}/{t.name}"] = name
    enums: dict[str, list[str]] = {}
    for q, t in types.items():
        if "enum" in t.markers and t.underlying == "string":
            enums[openapi_name(q)] = []
    for c in consts.values():
        named = resolver.const_type(c)
        value = resolver.const_value(f"{c.package}.{c.name}")
        if named is not None and value is not None and openapi_name(named) in enums:
            values = enums[openapi_name(named)]
            if value not in values:
                values.append(value)
    used = {f["enum"] for entry in out_types.values() for f in entry.get("fields", ()) if "enum" in f}
    for name in sorted(wrappers):
        qualified = next(q for q in types if openapi_name(q) == name)
        t = types[qualified]
        out_types[name] = {"go": t.name, "items": resolver.resolve(t.underlying, t)}
    # openapi-gen lists an enum's values sorted as Go's %q writes them.
    enum_values = {name: sorted(enums[name], key=lambda v: json.dumps(v)) for name in sorted(used)}
    return {"types": dict(sorted(out_types.items())), "kinds": dict(sorted(kinds.items())), "enums": enum_values}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", required=True, help="git directory of kubernetes/api")
    parser.add_argument("--apimachinery", required=True, help="git directory of kubernetes/apimachinery")
    parser.add_argument("--apiextensions", required=True, help="git directory of kubernetes/apiextensions-apiserver")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--apiextensions-rev", default="HEAD",
                        help="the apiextensions-apiserver revision of the same release (its own repository)")
    parser.add_argument("--aggregator", required=True, help="git directory of kubernetes/kube-aggregator")
    parser.add_argument("--aggregator-rev", default="HEAD",
                        help="the kube-aggregator revision of the same release (its own repository)")
    parser.add_argument("--version", required=True, help="the Kubernetes release the revision is, e.g. v1.37.0")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    doc = generate(args.api, args.apimachinery, args.rev, args.apiextensions, args.apiextensions_rev,
                   args.aggregator, args.aggregator_rev)
    commits = {name: subprocess.run(["git", "-C", repo, "rev-parse", rev], check=True, capture_output=True,
                                    text=True).stdout.strip()
               for name, repo, rev in (("kubernetes/api", args.api, args.rev),
                                       ("kubernetes/apimachinery", args.apimachinery, args.rev),
                                       ("kubernetes/apiextensions-apiserver", args.apiextensions,
                                        args.apiextensions_rev),
                                       ("kubernetes/kube-aggregator", args.aggregator, args.aggregator_rev))}
    doc = {"source": {"kubernetes": args.version, "commits": commits}, **doc}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=None, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"{len(doc['types'])} types, {len(doc['kinds'])} kinds -> {args.out}", file=sys.stderr)
    # The OpenAPI descriptions of the same types, from the same commits (tools/gen_openapi_docs.py).
    if __package__:
        from tools import gen_openapi_docs
    else:  # run as a script from tools/
        import gen_openapi_docs  # type: ignore[no-redef,import-not-found]
    wanted = set(doc["types"]) | {openapi_name(q) for q in CUSTOM}
    docs = gen_openapi_docs.generate(args.api, args.apimachinery, args.rev, args.apiextensions,
                                     args.apiextensions_rev, wanted, args.aggregator, args.aggregator_rev)
    docs_out = args.out.with_name(gen_openapi_docs.OUT.name)
    size = gen_openapi_docs.write(docs, doc["source"], docs_out)
    print(f"descriptions of {len(docs)} types, {size} bytes -> {docs_out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
