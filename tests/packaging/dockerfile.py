"""A small Dockerfile reader for the tests: instructions (continuations joined, comments dropped) and stages.

It follows the Dockerfile reference's lexical rules for what the project's Dockerfile uses: parser
directives, ``#`` comment lines (also inside continuations), ``\\`` line continuations, JSON (exec) form.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

KNOWN = frozenset({
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL", "MAINTAINER",
    "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
})
_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$")


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON array form's items, or None for the shell form."""
        try:
            value = json.loads(self.args)
        except ValueError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None

    def flags(self) -> dict[str, str]:
        """Leading ``--name=value`` flags (``COPY --from=builder``, ``RUN --mount=...``)."""
        out = {}
        for word in self.args.split():
            if not word.startswith("--"):
                break
            name, _, value = word[2:].partition("=")
            out[name] = value
        return out


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Dockerfile:
    directives: dict[str, str]
    global_args: list[Instruction]
    stages: list[Stage]

    def all(self) -> list[Instruction]:
        return [*self.global_args, *(i for s in self.stages for i in s.instructions)]


def parse(text: str) -> Dockerfile:
    lines = text.splitlines()
    directives: dict[str, str] = {}
    start = 0
    for start, line in enumerate(lines):  # noqa: B007 - the index is used after the loop
        match = _DIRECTIVE.match(line)
        if not match:
            break
        directives[match.group(1).lower()] = match.group(2)
    instructions: list[Instruction] = []
    buffer: list[str] = []
    first = 0
    for number, raw in enumerate(lines[start:], start + 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buffer):
            continue
        if not buffer:
            first = number
        if stripped.endswith("\\"):
            buffer.append(stripped[:-1].strip())
            continue
        buffer.append(stripped)
        whole = " ".join(part for part in buffer if part)
        buffer = []
        keyword, _, args = whole.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), first))
    if buffer:
        raise ValueError("the last instruction ends with a line continuation")
    global_args: list[Instruction] = []
    stages: list[Stage] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.args.split()
            words = [w for w in words if not w.startswith("--")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            if len(words) not in (1, 3) or (len(words) == 3 and name is None):
                raise ValueError(f"line {ins.line}: cannot read FROM {ins.args!r}")
            stages.append(Stage(words[0], name))
        elif not stages:
            if ins.keyword != "ARG":
                raise ValueError(f"line {ins.line}: {ins.keyword} before the first FROM")
            global_args.append(ins)
        else:
            stages[-1].instructions.append(ins)
    return Dockerfile(directives, global_args, stages)
