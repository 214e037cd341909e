"""The commands a simulated container can run, with a busybox-like ``sh`` and the runtime's exec rules.

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

import asyncio
import io
import posixpath
import tarfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from controller_manager.sim.containers.filesystem import Directory, File, FsError, Tree

__all__ = ["COMMANDS", "INSTALLED", "Input", "Process", "StartError", "run"]

Writer = Callable[[bytes], Awaitable[None]]


class StartError(Exception):
    """The runtime could not start the process (runc's ``exec: "foo": ...`` text)."""


class Input:
    """A process's stdin: bytes pushed by the stream, ``b""`` once the client closed it."""

    def __init__(self, data: bytes | None = None) -> None:
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffer = b""
        self._eof = False
        if data is not None:
            self._buffer = data
            self._eof = True

    def feed(self, data: bytes) -> None:
        if data:
            self._queue.put_nowait(data)

    def close(self) -> None:
        self._queue.put_nowait(b"")

    async def read(self) -> bytes:
        """The next chunk, or b"" at end of input."""
        if self._buffer:
            data, self._buffer = self._buffer, b""
            return data
        if self._eof:
            return b""
        data = await self._queue.get()
        if not data:
            self._eof = True
        return data

    async def readline(self) -> bytes:
        while b"\n" not in self._buffer and not self._eof:
            data = await self._queue.get()
            if not data:
                self._eof = True
            self._buffer += data
        line, sep, rest = self._buffer.partition(b"\n")
        self._buffer = rest
        return line + sep

    async def read_all(self) -> bytes:
        chunks = []
        while chunk := await self.read():
            chunks.append(chunk)
        return b"".join(chunks)


@dataclass
class Process:
    """One running command: the container's tree, its environment and working directory, its streams."""

    tree: Tree
    env: dict[str, str]
    stdin: Input
    out: Writer
    err: Writer
    cwd: str = "/"
    tty: bool = False
    uid: int = 0
    gid: int = 0
    last_status: int = 0
    positional: list[str] = field(default_factory=list)

    def path(self, name: str) -> str:
        return Tree.absolute(name, self.cwd)

    def child(self, *, stdin: Input | None = None, out: Writer | None = None, err: Writer | None = None) -> Process:
        return Process(self.tree, self.env, stdin or self.stdin, out or self.out, err or self.err, self.cwd,
                       self.tty, self.uid, self.gid, self.last_status, self.positional)


class _Exit(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


Command = Callable[[Process, list[str]], Awaitable[int]]


async def _echo(p: Process, args: list[str]) -> int:
    newline = True
    while args and args[0] in ("-n", "-e", "-ne", "-en"):
        newline = newline and "n" not in args[0]
        args = args[1:]
    await p.out((" ".join(args) + ("\n" if newline else "")).encode())
    return 0


async def _true(p: Process, args: list[str]) -> int:
    return 0


async def _false(p: Process, args: list[str]) -> int:
    return 1


async def _env(p: Process, args: list[str]) -> int:
    await p.out("".join(f"{k}={v}\n" for k, v in p.env.items()).encode())
    return 0


async def _printenv(p: Process, args: list[str]) -> int:
    if not args:
        return await _env(p, args)
    status = 0
    for name in args:
        if name in p.env:
            await p.out(f"{p.env[name]}\n".encode())
        else:
            status = 1
    return status


async def _cat(p: Process, args: list[str]) -> int:
    if not args or args == ["-"]:
        while chunk := await p.stdin.read():
            await p.out(chunk)
        return 0
    status = 0
    for name in args:
        try:
            await p.out(p.tree.read(p.path(name)))
        except FsError as e:
            await p.err(f"cat: can't open '{name}': {e.reason}\n".encode() if e.reason != "Is a directory"
                        else f"cat: read error: {e.reason}\n".encode())
            status = 1
    return status


def _mode_text(node: File | Directory) -> str:
    bits = "".join(c if node.mode & (1 << (8 - i)) else "-" for i, c in enumerate("rwxrwxrwx"))
    if node.mode & 0o1000:
        bits = bits[:8] + ("t" if bits[8] == "x" else "T")
    return ("d" if isinstance(node, Directory) else "-") + bits


def _long_line(name: str, node: File | Directory) -> str:
    import time
    size = len(node.data) if isinstance(node, File) else 4096
    links = 2 + sum(isinstance(c, Directory) for c in node.children.values()) if isinstance(node, Directory) else 1
    when = time.strftime("%b %e %H:%M", time.gmtime(node.mtime))
    return f"{_mode_text(node)} {links:>4} root     root     {size:>9} {when} {name}"


async def _ls(p: Process, args: list[str]) -> int:
    flags = "".join(a[1:] for a in args if a.startswith("-") and a != "-")
    names = [a for a in args if not a.startswith("-") or a == "-"] or ["."]
    long, every = "l" in flags, "a" in flags
    status = 0
    listings: list[tuple[str, list[str]]] = []
    files: list[str] = []
    for name in names:
        try:
            node = p.tree.lookup(p.path(name))
        except FsError as e:
            await p.err(f"ls: {name}: {e.reason}\n".encode())
            status = 1
            continue
        if isinstance(node, Directory) and "d" not in flags:
            entries = sorted(node.children)
            if every:
                entries = [".", "..", *entries]
            lines = []
            for entry in entries:
                child = node if entry in (".", "..") else node.children[entry]
                lines.append(_long_line(entry, child) if long else entry)
            listings.append((name, lines))
        else:
            files.append(_long_line(name, node) if long else name)
    chunks: list[str] = []
    if files:
        chunks.append("\n".join(files) + "\n")
    for name, lines in listings:
        head = f"{name}:\n" if len(names) > 1 else ""
        body = ("total 0\n" if long else "") + "".join(line + "\n" for line in lines)
        chunks.append(head + body)
    await p.out("\n".join(chunks).encode())
    return status


async def _hostname(p: Process, args: list[str]) -> int:
    name = p.tree.read("/etc/hostname").decode().strip() if p.tree.exists("/etc/hostname") else ""
    await p.out(f"{name}\n".encode())
    return 0


async def _sleep(p: Process, args: list[str]) -> int:
    if not args:
        await p.err(b"sleep: missing operand\n")
        return 1
    try:
        seconds = float(args[0].rstrip("s"))
    except ValueError:
        await p.err(f"sleep: invalid number '{args[0]}'\n".encode())
        return 1
    await asyncio.sleep(seconds)
    return 0


async def _pwd(p: Process, args: list[str]) -> int:
    await p.out(f"{p.cwd}\n".encode())
    return 0


def _user_name(p: Process, uid: int) -> str | None:
    passwd = p.tree.read("/etc/passwd").decode() if p.tree.exists("/etc/passwd") else ""
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[2] == str(uid):
            return fields[0]
    return None


async def _whoami(p: Process, args: list[str]) -> int:
    name = _user_name(p, p.uid)
    if name is None:
        await p.err(f"whoami: unknown uid {p.uid}\n".encode())
        return 1
    await p.out(f"{name}\n".encode())
    return 0


async def _id(p: Process, args: list[str]) -> int:
    user, group = _user_name(p, p.uid), _user_name(p, p.gid)
    u = f"uid={p.uid}" + (f"({user})" if user else "")
    g = f"gid={p.gid}" + (f"({group})" if group else "")
    await p.out(f"{u} {g} groups={p.gid}" .encode() + (f"({group})".encode() if group else b"") + b"\n")
    return 0


async def _test(p: Process, args: list[str]) -> int:
    if args and args[-1] == "]":
        args = args[:-1]
    negate = bool(args) and args[0] == "!"
    if negate:
        args = args[1:]
    result = False
    if len(args) == 1:
        result = bool(args[0])
    elif len(args) == 2:
        op, operand = args
        path = p.path(operand)
        node = p.tree.lookup(path) if p.tree.exists(path) else None
        result = {"-d": isinstance(node, Directory), "-f": isinstance(node, File), "-e": node is not None,
                  "-s": isinstance(node, File) and bool(node.data), "-z": not operand, "-n": bool(operand),
                  "-r": node is not None, "-w": node is not None, "-x": node is not None and bool(node.mode & 0o111),
                  }.get(op, False)
    elif len(args) == 3:
        a, op, b = args
        if op in ("=", "=="):
            result = a == b
        elif op == "!=":
            result = a != b
        elif op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
            try:
                x, y = int(a), int(b)
            except ValueError:
                await p.err(f"sh: invalid number '{a if not a.lstrip('-').isdigit() else b}'\n".encode())
                return 2
            result = {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
    return 0 if result != negate else 1


async def _mkdir(p: Process, args: list[str]) -> int:
    parents = "-p" in args
    status = 0
    for name in (a for a in args if not a.startswith("-")):
        try:
            p.tree.mkdir(p.path(name), parents=parents)
        except FsError as e:
            await p.err(f"mkdir: can't create directory '{name}': {e.reason}\n".encode())
            status = 1
    return status


async def _rm(p: Process, args: list[str]) -> int:
    flags = "".join(a[1:] for a in args if a.startswith("-"))
    status = 0
    for name in (a for a in args if not a.startswith("-")):
        try:
            node = p.tree.lookup(p.path(name))
            if isinstance(node, Directory) and "r" not in flags and "R" not in flags:
                await p.err(f"rm: '{name}' is a directory\n".encode())
                status = 1
                continue
            p.tree.remove(p.path(name), recursive=True)
        except FsError as e:
            if "f" in flags and e.reason == "No such file or directory":
                continue
            await p.err(f"rm: can't remove '{name}': {e.reason}\n".encode())
            status = 1
    return status


async def _touch(p: Process, args: list[str]) -> int:
    status = 0
    for name in (a for a in args if not a.startswith("-")):
        try:
            if not p.tree.exists(p.path(name)):
                p.tree.write(p.path(name), b"")
        except FsError as e:
            await p.err(f"touch: {name}: {e.reason}\n".encode())
            status = 1
    return status


async def _grep(p: Process, args: list[str]) -> int:
    import re
    flags = "".join(a[1:] for a in args if a.startswith("-") and len(a) > 1)
    rest = [a for a in args if not (a.startswith("-") and len(a) > 1)]
    if not rest:
        await p.err(b"Usage: grep [-ivc] PATTERN [FILE]...\n")
        return 2
    pattern = re.compile(rest[0], re.IGNORECASE if "i" in flags else 0)
    sources = rest[1:]
    texts: list[tuple[str, bytes]] = []
    status = 0
    if not sources:
        texts.append(("", await p.stdin.read_all()))
    for name in sources:
        try:
            texts.append((name, p.tree.read(p.path(name))))
        except FsError as e:
            await p.err(f"grep: {name}: {e.reason}\n".encode())
            status = 2
    matched = 0
    for name, text in texts:
        for line in text.decode(errors="replace").splitlines():
            if bool(pattern.search(line)) != ("v" in flags):
                matched += 1
                if "c" not in flags:
                    await p.out(((f"{name}:" if len(sources) > 1 else "") + line + "\n").encode())
    if "c" in flags:
        await p.out(f"{matched}\n".encode())
    return status or (0 if matched else 1)


def _count_option(args: list[str], default: int = 10) -> tuple[str, str, list[str]]:
    """head/tail's ``-n N``/``-c N``/``-N`` (with tail's ``+N``): (unit "n" or "c", count text, files)."""
    unit, count, files = "n", str(default), []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-n", "-c") and i + 1 < len(args):
            unit, count = arg[1], args[i + 1]
            i += 1
        elif arg[:2] in ("-n", "-c") and len(arg) > 2:
            unit, count = arg[1], arg[2:]
        elif arg.startswith("-") and arg[1:].isdigit():
            count = arg[1:]
        else:
            files.append(arg)
        i += 1
    return unit, count, files


async def _input_of(p: Process, files: list[str], command: str) -> bytes | None:
    if not files:
        return await p.stdin.read_all()
    try:
        return b"".join(p.tree.read(p.path(f)) for f in files)
    except FsError as e:
        await p.err(f"{command}: can't open '{e.path}': {e.reason}\n".encode())
        return None


async def _head(p: Process, args: list[str]) -> int:
    unit, count, files = _count_option(args)
    data = await _input_of(p, files, "head")
    if data is None or not count.lstrip("+").isdigit():
        return 1
    n = int(count.lstrip("+"))
    await p.out(data[:n] if unit == "c" else b"".join(data.splitlines(keepends=True)[:n]))
    return 0


async def _tail(p: Process, args: list[str]) -> int:
    unit, count, files = _count_option(args)
    data = await _input_of(p, files, "tail")
    if data is None or not count.lstrip("+").isdigit():
        return 1
    n = int(count.lstrip("+"))
    from_start = count.startswith("+")  # +N: from the N-th byte or line on
    pieces: list[bytes] | bytes = data if unit == "c" else data.splitlines(keepends=True)
    chosen = pieces[max(n - 1, 0):] if from_start else (pieces[-n:] if n else pieces[:0])
    await p.out(chosen if isinstance(chosen, bytes) else b"".join(chosen))
    return 0


async def _uname(p: Process, args: list[str]) -> int:
    await p.out(b"Linux\n")
    return 0


def _tar_options(args: list[str]) -> tuple[str, str | None, str | None, list[str]]:
    """(mode letters, archive file, -C directory, operands) from tar's old-style and dashed arguments."""
    letters = ""
    archive: str | None = None
    directory: str | None = None
    operands: list[str] = []
    i = 0
    first = True
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            i += 1
            continue
        if arg == "-C" and i + 1 < len(args):
            directory = args[i + 1]
            i += 2
            continue
        if (first and not arg.startswith("-")) or (arg.startswith("-") and len(arg) > 1):
            cluster = arg.lstrip("-")
            letters += cluster
            if "f" in cluster and i + 1 < len(args):
                archive = args[i + 1]
                i += 1
            first = False
        else:
            operands.append(arg)
        first = False
        i += 1
    return letters, archive, directory, operands


async def _tar(p: Process, args: list[str]) -> int:
    letters, archive, directory, operands = _tar_options(args)
    base = p.path(directory) if directory else p.cwd
    if "c" in letters:
        return await _tar_create(p, base, archive, operands)
    if "x" in letters:
        return await _tar_extract(p, base, archive)
    await p.err(b"tar: need at least one option\n")
    return 1


async def _tar_create(p: Process, base: str, archive: str | None, operands: list[str]) -> int:
    buffer = io.BytesIO()
    status = 0
    warned = False
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for operand in operands:
            path = Tree.absolute(operand, base)
            try:
                entries = list(p.tree.walk(path))
            except FsError as e:
                await p.err(f"tar: {operand}: {e.reason}\n".encode())
                status = 1
                continue
            if operand.startswith("/") and not warned:
                await p.err(b"tar: removing leading '/' from member names\n")
                warned = True
            prefix = operand.lstrip("/").rstrip("/") or "."
            for entry_path, node in entries:
                rel = posixpath.relpath(entry_path, path)
                info = tarfile.TarInfo(prefix if rel == "." else posixpath.join(prefix, rel))
                info.mtime = int(node.mtime)
                info.uname = info.gname = "root"
                if isinstance(node, Directory):
                    info.type = tarfile.DIRTYPE
                    info.mode = node.mode & 0o7777
                    tar.addfile(info)
                else:
                    info.size = len(node.data)
                    info.mode = node.mode & 0o7777
                    tar.addfile(info, io.BytesIO(node.data))
    data = buffer.getvalue()
    if archive in (None, "-"):
        await p.out(data)
    else:
        try:
            p.tree.write(p.path(archive), data)
        except FsError as e:
            await p.err(f"tar: can't open '{archive}': {e.reason}\n".encode())
            return 1
    return status


async def _tar_extract(p: Process, base: str, archive: str | None) -> int:
    if archive in (None, "-"):
        data = await p.stdin.read_all()
    else:
        try:
            data = p.tree.read(p.path(archive))
        except FsError as e:
            await p.err(f"tar: can't open '{archive}': {e.reason}\n".encode())
            return 1
    if not p.tree.exists(base):
        await p.err(f"tar: can't change directory to '{base}': No such file or directory\n".encode())
        return 1
    status = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            for member in tar:
                target = Tree.absolute(member.name, base)
                try:
                    parent = posixpath.dirname(target)
                    if not p.tree.exists(parent):
                        p.tree.mkdir(parent, parents=True)
                    if member.isdir():
                        if not p.tree.exists(target):
                            p.tree.mkdir(target, mode=member.mode & 0o7777 or 0o755)
                    elif member.isfile():
                        handle = tar.extractfile(member)
                        p.tree.write(target, handle.read() if handle else b"", mode=member.mode & 0o7777 or 0o644)
                except FsError as e:
                    await p.err(f"tar: can't open '{member.name}': {e.reason}\n".encode())
                    status = 1
    except tarfile.TarError:
        await p.err(b"tar: invalid tar magic\n")
        return 1
    return status


COMMANDS: dict[str, Command] = {
    "[": _test, "cat": _cat, "echo": _echo, "env": _env, "false": _false, "grep": _grep, "head": _head, "hostname": _hostname,
    "id": _id, "ls": _ls, "mkdir": _mkdir, "printenv": _printenv, "pwd": _pwd, "rm": _rm, "sleep": _sleep,
    "tail": _tail, "tar": _tar, "test": _test, "touch": _touch, "true": _true, "uname": _uname, "whoami": _whoami,
}
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
            for byte in chunk:
                ch = bytes([byte])
                if ch in (b"\r", b"\n"):
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
        path = _resolve(child, name)
        if path is None:
            await err(f"sh: {name}: not found\n".encode())
            return 127
        node = p.tree.lookup(path)
        program = _program(child, path)
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
