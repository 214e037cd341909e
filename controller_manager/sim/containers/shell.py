"""How a simulated container runs a command: a busybox-like ``sh`` and the runtime's exec rules.

:func:`run` starts a process as runc would: ``argv[0]`` is looked up on ``$PATH`` (or as given when it holds a
``/``) in the container's tree; a missing or non-executable file is a start failure (:class:`StartError`,
runc's wording), not an exit code. The executables are the :data:`COMMANDS` installed in ``/bin``, plus any
file starting with ``#!`` (run by the simulated ``sh``).

``sh -c SCRIPT`` and ``sh`` reading stdin (an interactive prompt with a TTY) understand simple commands with
quotes, ``$VAR``/``${VAR}``/``$?`` expansion, ``VAR=value`` assignments, ``;``, ``&&``, ``||``, newlines,
pipes and ``<``, ``>``, ``>>``, ``2>``, ``2>&1`` redirections; ``cd``, ``export``, ``exit`` are shell builtins.
An unknown command inside the shell is busybox's ``sh: foo: not found`` with status 127, a file that cannot
be executed 126. Not simulated: globbing, functions, control flow (``if``/``for``/``while``), subshells,
background jobs, signals, job control, command substitution.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from controller_manager.sim.containers.commands import COMMANDS
from controller_manager.sim.containers.filesystem import Directory, File, FsError
from controller_manager.sim.containers.process import Input, Process, StartError, Writer

__all__ = ["INSTALLED", "Input", "Process", "StartError", "Writer", "run"]


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


SHELLS = ("sh", "ash")
INSTALLED = (*COMMANDS, *SHELLS)  # what the simulated image has in /bin


def _resolve(p: Process, name: str) -> str | None:
    """The file ``name`` runs, looked up on $PATH when it has no slash; None when there is none."""
    if "/" in name:
        return p.path(name) if p.tree.exists(p.path(name)) else None
    for directory in p.env.get("PATH", "").split(":"):
        candidate = posixpath.join(directory or ".", name)
        if p.tree.exists(candidate) and isinstance(p.tree.lookup(candidate), File):
            return candidate
    return None


def _program(p: Process, path: str) -> tuple[str, bytes] | None:
    """("builtin", b"") for an installed command, ("script", text) for a ``#!`` file, else None."""
    node = p.tree.lookup(path)
    if not isinstance(node, File) or not node.mode & 0o111:
        return None
    name = posixpath.basename(path)
    if posixpath.dirname(path) in ("/bin", "/usr/bin", "/sbin", "/usr/sbin", "/usr/local/bin") and \
            (name in COMMANDS or name in SHELLS) and not node.data:
        return name, b""
    if node.data.startswith(b"#!"):
        return "script", node.data
    return None


async def run(p: Process, argv: list[str]) -> int:
    """Start ``argv`` as the container runtime does (raises :class:`StartError`), and wait for its status."""
    name = argv[0]
    path = _resolve(p, name)
    if path is None:
        if "/" in name:
            raise StartError(f'exec: "{name}": stat {name}: no such file or directory')
        raise StartError(f'exec: "{name}": executable file not found in $PATH')
    program = _program(p, path)
    if program is None:
        raise StartError(f'exec: "{name}": permission denied')
    return await _start(p, program, argv)


async def _start(p: Process, program: tuple[str, bytes], argv: list[str]) -> int:
    kind, text = program
    if kind == "script":
        return await Shell(p, argv[0], argv[1:]).run_script(text.decode(errors="replace"))
    if kind in SHELLS:
        return await _sh(p, argv)
    return await COMMANDS[kind](p, argv[1:])


async def _sh(p: Process, argv: list[str]) -> int:
    args = argv[1:]
    if args and args[0] == "-c":
        if len(args) < 2:
            await p.err(b"sh: -c requires an argument\n")
            return 2
        return await Shell(p, args[2] if len(args) > 2 else argv[0], args[3:]).run_script(args[1])
    if args and not args[0].startswith("-"):
        try:
            script = p.tree.read(p.path(args[0])).decode(errors="replace")
        except FsError as e:
            await p.err(f"sh: can't open '{args[0]}': {e.reason}\n".encode())
            return 2
        return await Shell(p, args[0], args[1:]).run_script(script)
    return await Shell(p, argv[0], []).interactive()


# --- the shell ---------------------------------------------------------------------------------------------

_OPERATORS = ("2>&1", ">&2", "2>>", "&&", "||", ">>", "2>", ";", "|", ">", "<", "&", "\n")
Word = list[tuple[str, str]]  # parts: ("lit", text), ("var", name) unquoted, ("qvar", name) quoted


class ShellSyntaxError(Exception):
    pass


def tokenize(script: str) -> list[Word | str]:
    """Words (lists of parts) and operator strings."""
    tokens: list[Word | str] = []
    word: Word = []
    in_word = False
    i = 0
    n = len(script)

    def flush() -> None:
        nonlocal word, in_word
        if in_word:
            merged: Word = []
            for kind, text in word:  # adjacent literal characters make one part
                if kind == "lit" and merged and merged[-1][0] == "lit":
                    merged[-1] = ("lit", merged[-1][1] + text)
                else:
                    merged.append((kind, text))
            tokens.append(merged)
        word, in_word = [], False

    def variable(start: int, quoted: bool) -> int:
        kind = "qvar" if quoted else "var"
        if start < n and script[start] == "{":
            end = script.find("}", start)
            if end < 0:
                raise ShellSyntaxError("bad substitution")
            word.append((kind, script[start + 1:end]))
            return end + 1
        if start < n and script[start] in "?$#@*0123456789":
            word.append((kind, script[start]))
            return start + 1
        end = start
        while end < n and (script[end].isalnum() or script[end] == "_"):
            end += 1
        if end == start:
            word.append(("lit", "$"))
            return start
        word.append((kind, script[start:end]))
        return end

    while i < n:
        c = script[i]
        if c == "#" and not in_word:
            while i < n and script[i] != "\n":
                i += 1
            continue
        op = next((o for o in _OPERATORS if script.startswith(o, i)), None)
        if op is not None and op[0] == "2" and in_word:
            op = None  # "a2>x" is the word "a2", then ">"
        if op is not None:
            flush()
            tokens.append(op)
            i += len(op)
            continue
        if c in " \t":
            flush()
            i += 1
            continue
        in_word = True
        if c == "'":
            end = script.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated quoted string")
            word.append(("lit", script[i + 1:end]))
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and script[i] != '"':
                if script[i] == "\\" and i + 1 < n and script[i + 1] in '"\\$`':
                    word.append(("lit", script[i + 1]))
                    i += 2
                elif script[i] == "$":
                    i = variable(i + 1, True)
                else:
                    word.append(("lit", script[i]))
                    i += 1
            if i >= n:
                raise ShellSyntaxError("unterminated quoted string")
            i += 1
        elif c == "\\" and i + 1 < n:
            if script[i + 1] != "\n":
                word.append(("lit", script[i + 1]))
            i += 2
        elif c == "$":
            i = variable(i + 1, False)
        else:
            word.append(("lit", c))
            i += 1
    flush()
    return tokens


@dataclass
class _Simple:
    words: list[Word]
    redirects: list[tuple[str, Word | None]]


class Shell:
    """One ``sh`` process: its variables, and the scripts or lines it runs."""

    def __init__(self, p: Process, name: str, positional: list[str]) -> None:
        self.p = p.child()
        self.p.env = dict(p.env)
        self.name = name
        self.p.positional = positional

    def _value(self, name: str) -> str:
        p = self.p
        if name == "?":
            return str(p.last_status)
        if name == "$":
            return "1"
        if name == "#":
            return str(len(p.positional))
        if name in ("@", "*"):
            return " ".join(p.positional)
        if name.isdigit():
            index = int(name)
            return self.name if index == 0 else (p.positional[index - 1] if index <= len(p.positional) else "")
        if name == "PWD":
            return p.cwd
        return p.env.get(name, "")

    def expand(self, word: Word) -> list[str]:
        """A word's fields: unquoted variables split on blanks, quoted text kept whole."""
        fields: list[str] = []
        current = ""
        has = False
        for kind, text in word:
            if kind == "var":
                pieces = self._value(text).split()
                value = self._value(text)
                if pieces and value[:1].isspace() and has:
                    fields.append(current)
                    current, has = "", False
                for j, piece in enumerate(pieces):
                    if j:
                        fields.append(current)
                        current = ""
                    current += piece
                    has = True
                if pieces and value[-1:].isspace():
                    fields.append(current)
                    current, has = "", False
            else:
                current += self._value(text) if kind == "qvar" else text
                has = True
        if has:
            fields.append(current)
        return fields

    def _parse(self, tokens: list[Word | str]) -> list[tuple[list[_Simple], str]]:
        """Pipelines with the operator that follows each (``;``, ``&&``, ``||``, newline)."""
        out: list[tuple[list[_Simple], str]] = []
        pipeline: list[_Simple] = []
        current = _Simple([], [])
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if isinstance(tok, list):
                current.words.append(tok)
            elif tok in (">", ">>", "<", "2>", "2>>"):
                target = tokens[i + 1] if i + 1 < len(tokens) else None
                if not isinstance(target, list):
                    raise ShellSyntaxError(f"syntax error: unexpected {_describe(target)}")
                current.redirects.append((tok, target))
                i += 1
            elif tok in ("2>&1", ">&2"):
                current.redirects.append((tok, None))
            elif tok == "|":
                if not current.words:
                    raise ShellSyntaxError("syntax error: unexpected \"|\"")
                pipeline.append(current)
                current = _Simple([], [])
            else:
                if current.words or current.redirects:
                    pipeline.append(current)
                elif pipeline or tok in ("&&", "||"):
                    raise ShellSyntaxError(f"syntax error: unexpected \"{tok}\"")
                if pipeline:
                    out.append((pipeline, tok))
                pipeline, current = [], _Simple([], [])
            i += 1
        if current.words or current.redirects:
            pipeline.append(current)
        elif pipeline:
            raise ShellSyntaxError("syntax error: unexpected end of file")
        if pipeline:
            out.append((pipeline, ";"))
        return out

    async def run_script(self, script: str) -> int:
        try:
            return await self._run_text(script)
        except _Exit as e:
            return e.status

    async def _run_text(self, script: str) -> int:
        try:
            parsed = self._parse(tokenize(script))
        except ShellSyntaxError as e:
            await self.p.err(f"sh: {e}\n".encode())
            self.p.last_status = 2
            return 2
        skip = False
        for pipeline, op in parsed:
            if not skip:
                self.p.last_status = await self._pipeline(pipeline)
            if op == "&&":
                skip = self.p.last_status != 0
            elif op == "||":
                skip = self.p.last_status == 0
            else:
                skip = False
        return self.p.last_status

    async def interactive(self) -> int:
        """Lines read from stdin, a prompt before each when there is a TTY; ``exit`` or end of input ends it."""
        p = self.p
        try:
            while True:
                if p.tty:
                    await p.out(b"/ # " if p.uid == 0 else b"/ $ ")
                line = await self._read_line()
                if not line:
                    return p.last_status
                await self._run_text(line.decode(errors="replace"))
        except _Exit as e:
            return e.status

    async def _read_line(self) -> bytes:
        if not self.p.tty:
            return await self.p.stdin.readline()
        # A terminal in canonical mode: echo what is typed, a carriage return ends the line.
        line = b""
        while True:
            chunk = await self.p.stdin.read()
            if not chunk:
                return line
            for index, byte in enumerate(chunk):
                ch = bytes([byte])
                if ch in (b"\r", b"\n"):
                    self.p.stdin.unread(chunk[index + 1:])
                    await self.p.out(b"\r\n")
                    return line + b"\n"
                if ch == b"\x04" and not line:  # ^D on an empty line: end of input
                    return b""
                if ch in (b"\x7f", b"\x08"):
                    if line:
                        line = line[:-1]
                        await self.p.out(b"\x08 \x08")
                    continue
                line += ch
                await self.p.out(ch)

    async def _pipeline(self, commands: list[_Simple]) -> int:
        if len(commands) == 1:
            return await self._simple(commands[0], self.p.stdin, self.p.out)
        data: bytes | None = None
        status = 0
        for index, command in enumerate(commands):
            chunks: list[bytes] = []

            async def collect(b: bytes, into: list[bytes] = chunks) -> None:
                into.append(b)

            stdin = self.p.stdin if index == 0 else Input(data or b"")
            out = self.p.out if index == len(commands) - 1 else collect
            status = await self._simple(command, stdin, out)
            data = b"".join(chunks)
        return status

    async def _simple(self, command: _Simple, stdin: Input, out: Writer) -> int:
        p = self.p
        assignments: list[tuple[str, str]] = []
        words = list(command.words)
        while words and words[0] and words[0][0][0] == "lit" and "=" in words[0][0][1] and \
                words[0][0][1].split("=", 1)[0].isidentifier():
            name, _, first = words[0][0][1].partition("=")
            value = "".join(self.expand([("lit", first), *words[0][1:]])) if (first or words[0][1:]) else ""
            assignments.append((name, value))
            words.pop(0)
        argv = [field for w in words for field in self.expand(w)]
        err = p.err
        buffers: list[tuple[str, bool, list[bytes]]] = []
        for op, target in command.redirects:
            if op in ("2>&1", ">&2"):
                if op == "2>&1":
                    err = out
                else:
                    out = err
                continue
            assert target is not None
            name = "".join(self.expand(target))
            if op == "<":
                try:
                    stdin = Input(p.tree.read(p.path(name)))
                except FsError as e:
                    await p.err(f"sh: can't open '{name}': {e.reason}\n".encode())
                    return 1
                continue
            chunks: list[bytes] = []
            buffers.append((name, op.endswith(">>"), chunks))

            async def sink(b: bytes, into: list[bytes] = chunks) -> None:
                into.append(b)

            if op.startswith("2"):
                err = sink
            else:
                out = sink
        for name, append, _ in buffers:  # the shell opens (and truncates) each file before the command runs
            try:
                p.tree.write(p.path(name), b"", append=append)
            except FsError as e:
                await p.err(f"sh: can't create {name}: {e.reason}\n".encode())
                return 1
        if not argv:
            p.env.update(assignments)
            return 0
        try:
            status = await self._command(argv, assignments, stdin, out, err)
        finally:
            for name, _append, chunks in buffers:
                p.tree.write(p.path(name), b"".join(chunks), append=True)
        return status

    async def _command(self, argv: list[str], assignments: list[tuple[str, str]], stdin: Input, out: Writer,
                       err: Writer) -> int:
        p = self.p
        name = argv[0]
        if name == "exit":
            raise _Exit(int(argv[1]) & 0xFF if len(argv) > 1 and argv[1].lstrip("-").isdigit() else p.last_status)
        if name == "cd":
            target = argv[1] if len(argv) > 1 else p.env.get("HOME", "/")
            path = p.path(target)
            if not p.tree.exists(path) or not isinstance(p.tree.lookup(path), Directory):
                await err(f"sh: cd: can't cd to {target}: No such file or directory\n".encode())
                return 2
            p.cwd = path
            return 0
        if name == "export":
            for arg in argv[1:]:
                key, sep, value = arg.partition("=")
                if sep:
                    p.env[key] = value
            return 0
        child = p.child(stdin=stdin, out=out, err=err)
        if assignments:
            child.env = {**p.env, **dict(assignments)}
        found = _resolve(child, name)
        if found is None:
            await err(f"sh: {name}: not found\n".encode())
            return 127
        node = p.tree.lookup(found)
        program = _program(child, found)
        if program is None:
            reason = "Permission denied" if isinstance(node, File) or "/" in name else "not found"
            await err(f"sh: {name}: {reason}\n".encode())
            return 126
        return await _start(child, program, argv)


def _describe(token: Word | str | None) -> str:
    if token is None:
        return "end of file"
    if token == "\n":
        return "newline"
    return f'"{token}"' if isinstance(token, str) else "word"
