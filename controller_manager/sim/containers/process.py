"""A simulated container process: its file tree, environment, working directory and standard streams."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from controller_manager.sim.containers.filesystem import Tree

__all__ = ["Input", "Process", "StartError", "Writer"]

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

    def unread(self, data: bytes) -> None:
        """Give back what a reader took beyond what it needed; the next read returns it first."""
        self._buffer = data + self._buffer

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
