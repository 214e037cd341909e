"""The executables of kube-sim's simulated container image, busybox-like in their options and messages.

``echo``, ``cat``, ``ls``, ``env``, ``printenv``, ``hostname``, ``true``, ``false``, ``sleep``, ``pwd``,
``whoami``, ``id``, ``test``/``[``, ``mkdir``, ``rm``, ``touch``, ``grep``, ``head``, ``tail``, ``uname`` and
``tar`` (``cf``/``xf``, ``-C``, ``-m``: what ``kubectl cp`` runs). Each takes its arguments and a
:class:`~controller_manager.sim.containers.process.Process` and returns an exit status.
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
from collections.abc import Awaitable, Callable

from controller_manager.sim.containers.filesystem import Directory, File, FsError, Tree
from controller_manager.sim.containers.process import Process

__all__ = ["COMMANDS", "Command"]

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
    "[": _test, "cat": _cat, "echo": _echo, "env": _env, "false": _false, "grep": _grep, "head": _head,
    "hostname": _hostname,
    "id": _id, "ls": _ls, "mkdir": _mkdir, "printenv": _printenv, "pwd": _pwd, "rm": _rm, "sleep": _sleep,
    "tail": _tail, "tar": _tar, "test": _test, "touch": _touch, "true": _true, "uname": _uname, "whoami": _whoami,
}
