"""Stored objects: each version of an object is encoded to JSON once, and those bytes are shared.

Guarantees:
- A :class:`Stored` holds the object (a dict nobody mutates), its JSON bytes, its resourceVersion and
  storage key. Lists and watch events are assembled from these bytes; no reader re-encodes.
- Alternate views (PartialObjectMetadata, the events.k8s.io form of an Event) are encoded at most once
  per stored version, on first demand, and cached beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from controller_manager.api.jsonbytes import encode_kept

Obj = dict[str, Any]


def encode(obj: Any) -> bytes:
    return orjson.dumps(obj)


def decode(raw: bytes | str) -> Any:
    return orjson.loads(raw)


def partial_metadata(obj: Obj) -> Obj:
    """The PartialObjectMetadata view of an object: only its metadata."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {})}


class Stored:
    __slots__ = ("_views", "key", "obj", "raw", "rv")

    def __init__(self, key: str, obj: Obj, rv: int, raw: bytes | None = None) -> None:
        self.key = key
        self.obj = obj
        self.rv = rv
        self.raw = raw if raw is not None else encode_kept(obj)
        self._views: dict[str, tuple[Obj, bytes]] | None = None

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace") or "")

    @property
    def labels(self) -> dict[str, str]:
        labels = self.obj["metadata"].get("labels")
        return labels if isinstance(labels, dict) else {}

    def view(self, name: str, make: Callable[[Obj], Obj]) -> tuple[Obj, bytes]:
        """An alternate form of this version (``make`` is applied once), as a dict and its bytes."""
        if self._views is None:
            self._views = {}
        cached = self._views.get(name)
        if cached is None:
            converted = make(self.obj)
            cached = (converted, encode_kept(converted))
            self._views[name] = cached
        return cached

    def copy(self) -> Obj:
        """A private deep copy for a caller that may mutate it."""
        result: Obj = orjson.loads(self.raw)
        return result
