"""Generate the descriptions kube-sim's OpenAPI documents carry, from upstream's Go doc comments.

kube-apiserver's OpenAPI documents describe each type and each field with the doc comment of its Go
declaration, as k8s.io/kube-openapi's openapi-gen turns comments into text: the comment group that ends on
the line just above the declaration (Go's ``CommentGroup.Text()``: comment markers and one leading space
removed, directives dropped, trailing blanks trimmed, blank-line runs collapsed), then read line by line:
nothing after a ``---`` line, ``TODO`` and ``+marker`` lines skipped, an empty line starts a paragraph, an
indented line stands on a line of its own, other lines are joined with spaces. A field of a ``+enum`` string
type (or a pointer to one) gets its values appended, one per line, each with its constant's comment.

This writes ``controller_manager/sim/apiserver/schema/descriptions.json.gz``: for every struct of
``types.json`` (and the hand-written types Time, Quantity, IntOrString...), ``{"": type description,
"<json name>": field description}`` for the fields the struct declares itself (promoted fields are found
in the struct that declares them). The text is upstream's API documentation as the API server serves it,
kept as data. ``tools/gen_schema.py`` runs this after writing ``types.json``; alone:

    python tools/gen_openapi_docs.py --api /path/to/kubernetes/api.git \
        --apimachinery /path/to/apimachinery.git --apiextensions /path/to/apiextensions-apiserver.git \
        --aggregator /path/to/kube-aggregator.git \
        [--rev HEAD] [--apiextensions-rev HEAD] [--aggregator-rev HEAD]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__:
    from tools import gen_schema
else:  # run as a script from tools/
    import gen_schema  # type: ignore[no-redef,import-not-found]

OUT = gen_schema.OUT.with_name("descriptions.json.gz")

_DIRECTIVE = re.compile(r"^(line |extern |export |[a-z0-9]+:[a-z0-9])")
_WHITESPACE = re.compile(r"\s+")
_ENUM_HEADER = "Possible enum values:"


@dataclass
class Line:
    kind: str            # "comment" (only a // comment), "code", "blank", "block" (inside /* */)
    text: str            # the line as written
    comment: str | None  # a // comment's text after the slashes (a code line's trailing one too)


def _trailing_comment(code: str) -> str | None:
    """The text after ``//`` on a code line, outside string and rune literals."""
    quote = ""
    i = 0
    while i < len(code):
        ch = code[i]
        if quote:
            if ch == "\\" and quote != "`":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif code.startswith("//", i):
            return code[i + 2:]
        i += 1
    return None


def classify(src: str) -> list[Line]:
    out: list[Line] = []
    in_block = False
    for raw in src.splitlines():
        stripped = raw.strip()
        if in_block:
            out.append(Line("block", raw, None))
            in_block = "*/" not in stripped
        elif stripped.startswith("/*"):
            out.append(Line("block", raw, None))
            in_block = "*/" not in stripped[2:]
        elif stripped.startswith("//"):
            out.append(Line("comment", raw, stripped[2:]))
        elif not stripped:
            out.append(Line("blank", raw, None))
        else:
            out.append(Line("code", raw, _trailing_comment(raw)))
    return out


def comment_lines(lines: list[Line], i: int) -> list[str]:
    """The lines of the comment group ending on the line above line ``i`` (gengo's CommentLines for a
    declaration there): a code line's trailing comment is a group of its own."""
    j = i - 1
    if j < 0:
        return []
    trailing = lines[j].comment
    if lines[j].kind == "code":
        raw = [trailing] if trailing is not None else []
    elif lines[j].kind == "comment":
        k = j
        while k > 0 and lines[k - 1].kind == "comment":
            k -= 1
        raw = [line.comment or "" for line in lines[k:j + 1]]
    else:
        return []
    return go_comment_text(raw)


def go_comment_text(raw: list[str]) -> list[str]:
    """Go's ``CommentGroup.Text()`` split into lines: one space after ``//`` removed, directives dropped,
    trailing whitespace trimmed, leading and trailing blank lines removed, blank-line runs collapsed."""
    lines: list[str] = []
    for text in raw:
        if text.startswith(" "):
            text = text[1:]
        elif _DIRECTIVE.match(text):
            continue
        lines.append(text.rstrip(" \t\r\n"))
    out: list[str] = []
    for text in lines:
        if text or (out and out[-1]):
            out.append(text)
    while out and not out[-1]:
        out.pop()
    return out


def description(lines: list[str]) -> str:
    """openapi-gen's description of a comment's lines."""
    buf = ""
    for line in lines:
        if line == "---":
            break
        line = line.rstrip(" ")
        leading = line.lstrip(" ")
        if not line:  # a paragraph break replaces the space (or newline) written last
            buf = buf[:-1] + "\n\n"
        elif leading.startswith("TODO") or leading.startswith("+"):
            continue
        elif line.startswith((" ", "\t")):  # an indented line (an example) stands alone
            buf = buf[:-1] + "\n" + line + "\n"
        else:
            buf += line + " "
    return buf.strip()


def _go_quote(value: str) -> str:
    """Go's ``%q`` of a plain string (the enum values are printable ASCII)."""
    return json.dumps(value, ensure_ascii=False)


def enum_lines(values: dict[str, tuple[str, str]]) -> list[str]:
    """The lines openapi-gen appends to an enum field's comment: value -> (constant name, its comment)."""
    if not values:
        return []
    items = []
    for value, (name, comment) in values.items():
        text = comment.strip().removeprefix(name).strip()
        items.append(f" - `{_go_quote(value)}` {_WHITESPACE.sub(' ', text)}")
    return ["", _ENUM_HEADER, *sorted(items)]


@dataclass
class FieldDoc:
    json: str
    type_expr: str
    lines: list[str]


@dataclass
class TypeDoc:
    lines: list[str]
    fields: list[FieldDoc] = field(default_factory=list)


def parse_docs(src: str, package: str) -> tuple[dict[str, TypeDoc], dict[str, list[str]]]:
    """The comments of one Go file's type declarations and of their struct fields, and of its constants
    (by qualified name)."""
    lines = classify(src)
    types: dict[str, TypeDoc] = {}
    consts: dict[str, list[str]] = {}
    in_type_block = in_const_block = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.text.strip()
        if line.kind != "code":
            i += 1
            continue
        if stripped == "type (":
            in_type_block = True
        elif stripped == "const (":
            in_const_block = True
        elif stripped == ")" and (in_type_block or in_const_block):
            in_type_block = in_const_block = False
        elif in_const_block or line.text.startswith("const "):
            m = re.match(r"^(?:const\s+)?(\w+)", stripped)
            if m:
                consts[f"{package}.{m.group(1)}"] = comment_lines(lines, i)
        elif in_type_block or line.text.startswith("type "):
            m = re.match(r"^(?:type\s+)?(\w+)\s+(.*)$", stripped)
            if m:
                doc = TypeDoc(comment_lines(lines, i))
                types[f"{package}.{m.group(1)}"] = doc
                if m.group(2).strip() == "struct {":
                    i = _parse_fields(lines, i + 1, doc)
                    continue
        i += 1
    return types, consts


def _parse_fields(lines: list[Line], i: int, doc: TypeDoc) -> int:
    """Read a struct body's fields from line ``i``; the index after its closing brace."""
    while i < len(lines) and lines[i].text.strip() != "}":
        line = lines[i]
        if line.kind == "code":
            code, _, rest = line.text.strip().partition("`")
            tags = dict(gen_schema._TAG.findall(rest.rpartition("`")[0]))
            tokens = code.split("//")[0].split()
            json_tag = tags.get("json")
            if tokens and len(tokens) <= 2 and json_tag != "-":
                json_name, _, opts = (json_tag or "").partition(",")
                embedded = len(tokens) == 1
                if not (embedded and (not json_name or "inline" in opts.split(","))):
                    doc.fields.append(FieldDoc(json_name or tokens[0], tokens[-1], comment_lines(lines, i)))
        i += 1
    return i + 1


def generate(api: str, apimachinery: str, rev: str, apiextensions: str | None = None,
             apiextensions_rev: str = "HEAD", wanted: set[str] | None = None, aggregator: str | None = None,
             aggregator_rev: str = "HEAD") -> dict[str, dict[str, str]]:
    """OpenAPI type name -> {"": its description, json name: each declared field's description}, for the
    types in ``wanted`` (every documented struct when None)."""
    types, _groups, consts = gen_schema.load(api, apimachinery, rev, apiextensions, apiextensions_rev, aggregator,
                                             aggregator_rev)
    resolver = gen_schema.Resolver(types, consts)
    docs: dict[str, TypeDoc] = {}
    const_docs: dict[str, list[str]] = {}
    for repo, repo_rev, directory, import_path in gen_schema.packages(api, apimachinery, rev, apiextensions,
                                                                       apiextensions_rev, aggregator, aggregator_rev):
        for path in gen_schema.git_files(repo, repo_rev, directory):
            found, found_consts = parse_docs(gen_schema.git_show(repo, repo_rev, path), import_path)
            docs.update(found)
            const_docs.update(found_consts)
    # +enum type -> value -> (constant, comment); of constants with one value, the longer comment wins
    enums: dict[str, dict[str, tuple[str, str]]] = {}
    for qualified, c in sorted(consts.items()):
        enum_type = resolver.const_type(c)
        if enum_type is None or enum_type not in types or "enum" not in types[enum_type].markers:
            continue
        value = resolver.const_value(qualified)
        if value is None:
            continue
        comment = " ".join(const_docs.get(qualified, []))
        values = enums.setdefault(enum_type, {})
        old = values.get(value)
        if old is None or len(old[1]) < len(comment) or (len(old[1]) == len(comment) and old[1] > comment):
            values[value] = (c.name, comment)
    out: dict[str, dict[str, str]] = {}
    for qualified, doc in docs.items():
        name = gen_schema.openapi_name(qualified)
        t = types.get(qualified)
        if t is None or (wanted is not None and name not in wanted):
            continue
        entry = {"": description(doc.lines)}
        for f in doc.fields:
            extra: list[str] = []
            named = resolver.named(f.type_expr.removeprefix("*"), t)
            if (named is not None and not f.type_expr.lstrip("*").startswith(("[]", "map["))
                    and "enum" in named.markers and named.underlying == "string"):
                extra = enum_lines(enums.get(f"{named.package}.{named.name}", {}))
            text = description(f.lines + extra)
            if text:
                entry[f.json] = text
        out[name] = {k: v for k, v in entry.items() if v}
    return dict(sorted(out.items()))


def write(doc: dict[str, dict[str, str]], source: dict[str, Any], out: Path = OUT) -> int:
    """Write the descriptions gzip'd (reproducibly: no timestamp); the bytes written."""
    body = json.dumps({"source": source, "types": doc}, separators=(",", ":"), ensure_ascii=False).encode()
    data = gzip.compress(body, compresslevel=9, mtime=0)
    out.write_bytes(data)
    return len(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", required=True, help="git directory of kubernetes/api")
    parser.add_argument("--apimachinery", required=True, help="git directory of kubernetes/apimachinery")
    parser.add_argument("--apiextensions", required=True, help="git directory of kubernetes/apiextensions-apiserver")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--apiextensions-rev", default="HEAD")
    parser.add_argument("--aggregator", required=True, help="git directory of kubernetes/kube-aggregator")
    parser.add_argument("--aggregator-rev", default="HEAD")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    schema = json.loads(gen_schema.OUT.read_text())
    wanted = set(schema["types"]) | {gen_schema.openapi_name(q) for q in gen_schema.CUSTOM}
    doc = generate(args.api, args.apimachinery, args.rev, args.apiextensions, args.apiextensions_rev, wanted,
                   args.aggregator, args.aggregator_rev)
    size = write(doc, schema["source"], args.out)
    print(f"descriptions of {len(doc)} types, {size} bytes -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
