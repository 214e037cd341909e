"""An in-memory file tree for one simulated container: directories, regular files and mounts.

A container's tree is made on its first exec and lives as long as the container does (its containerID);
a restarted container starts from a fresh tree, as a real one starts from its image again. Mounted volumes
are :class:`Directory` nodes shared by every container of the pod that mounts them, so what one container
writes into an ``emptyDir`` the others read. Volumes the kubelet projects (ConfigMap, Secret, downwardAPI,
projected) are read-only, as the kubelet mounts them.

Not simulated: symlinks (the kubelet's ``..data`` indirection of projected volumes is flattened), owners
other than root, hard links, device files, sizes limits.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Directory", "File", "FsError", "Node", "Tree"]


@dataclass
class File:
    data: bytes = b""
    mode: int = 0o644
    mtime: float = 0.0


@dataclass
class Directory:
    children: dict[str, Node] = field(default_factory=dict)
    mode: int = 0o755
    mtime: float = 0.0
    read_only: bool = False  # a read-only mount: nothing below it may change


Node = File | Directory


class FsError(Exception):
    """A failed file operation, worded as the C library's strerror: ``No such file or directory``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


NOT_FOUND = "No such file or directory"
NOT_DIR = "Not a directory"
IS_DIR = "Is a directory"
READ_ONLY = "Read-only file system"
EXISTS = "File exists"
NOT_EMPTY = "Directory not empty"


class Tree:
    """The container's root directory and the operations the simulated commands need."""

    def __init__(self, root: Directory | None = None, *, now: float = 0.0) -> None:
        self.root = root if root is not None else Directory(mtime=now)
        self.now = now

    @staticmethod
    def absolute(path: str, cwd: str = "/") -> str:
        return posixpath.normpath(posixpath.join(cwd, path)).replace("//", "/") or "/"

    def _walk(self, path: str) -> tuple[list[Directory], Node | None]:
        """The directories from the root down to ``path``'s parent, and the node at ``path`` (None: absent)."""
        parts = [p for p in path.split("/") if p]
        chain = [self.root]
        node: Node | None = self.root
        for i, part in enumerate(parts):
            if not isinstance(node, Directory):
                raise FsError(path, NOT_DIR)
            if i:
                chain.append(node)
            node = node.children.get(part)
            if node is None and i < len(parts) - 1:
                raise FsError(path, NOT_FOUND)
        return chain, node

    def lookup(self, path: str) -> Node:
        _, node = self._walk(path)
        if node is None:
            raise FsError(path, NOT_FOUND)
        return node

    def exists(self, path: str) -> bool:
        try:
            self.lookup(path)
        except FsError:
            return False
        return True

    def _writable_parent(self, path: str) -> Directory:
        chain, _ = self._walk(path)
        parent_path = posixpath.dirname(path.rstrip("/")) or "/"
        parent = self.lookup(parent_path)
        if not isinstance(parent, Directory):
            raise FsError(path, NOT_DIR)
        if any(d.read_only for d in (*chain, parent)):
            raise FsError(path, READ_ONLY)
        return parent

    def read(self, path: str) -> bytes:
        node = self.lookup(path)
        if isinstance(node, Directory):
            raise FsError(path, IS_DIR)
        return node.data

    def write(self, path: str, data: bytes, *, append: bool = False, mode: int = 0o644) -> None:
        parent = self._writable_parent(path)
        name = posixpath.basename(path.rstrip("/"))
        node = parent.children.get(name)
        if isinstance(node, Directory):
            raise FsError(path, IS_DIR)
        if node is None:
            parent.children[name] = File(data, mode, self.now)
            parent.mtime = self.now
        else:
            node.data = node.data + data if append else data
            node.mtime = self.now

    def mkdir(self, path: str, *, parents: bool = False, mode: int = 0o755) -> None:
        if parents:
            current = ""
            for part in [p for p in path.split("/") if p]:
                current += "/" + part
                node = self._walk(current)[1]
                if node is None:
                    self.mkdir(current, mode=mode)
                elif not isinstance(node, Directory):
                    raise FsError(current, NOT_DIR)
            return
        parent = self._writable_parent(path)
        name = posixpath.basename(path.rstrip("/"))
        if name in parent.children:
            raise FsError(path, EXISTS)
        parent.children[name] = Directory(mode=mode, mtime=self.now)
        parent.mtime = self.now

    def remove(self, path: str, *, recursive: bool = False) -> None:
        parent = self._writable_parent(path)
        name = posixpath.basename(path.rstrip("/"))
        node = parent.children.get(name)
        if node is None:
            raise FsError(path, NOT_FOUND)
        if isinstance(node, Directory) and node.children and not recursive:
            raise FsError(path, NOT_EMPTY)
        if isinstance(node, Directory) and node.read_only:
            raise FsError(path, READ_ONLY)
        del parent.children[name]
        parent.mtime = self.now

    def mount(self, path: str, volume: Directory) -> None:
        """Put ``volume`` at ``path`` (its parents made as needed), replacing what the image had there."""
        parent_path = posixpath.dirname(path.rstrip("/")) or "/"
        self.mkdir(parent_path, parents=True)
        parent = self.lookup(parent_path)
        assert isinstance(parent, Directory)
        parent.children[posixpath.basename(path.rstrip("/"))] = volume

    def walk(self, path: str) -> Iterator[tuple[str, Node]]:
        """``path`` and everything below it, parents before children, names in sorted order."""
        node = self.lookup(path)
        yield path, node
        if isinstance(node, Directory):
            for name in sorted(node.children):
                yield from self.walk(posixpath.join(path, name))
