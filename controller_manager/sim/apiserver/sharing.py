"""Equal parts of stored objects held once, so memory grows with what objects have of their own.

Stored objects are never mutated (:mod:`objects`), so stored versions, of one object or of many, may share an
equal sub-tree. Objects made from one template (a ReplicaSet's pods, a kubelet's Events) repeat most of
themselves: the containers, tolerations and volume sources of a pod spec, the condition entries of pods that
started in the same second, and above all ``metadata.managedFields[*].fieldsV1``, whose ``{"f:x": {}}`` form costs
about seven times its JSON size as Python dicts. Measured at 10,000 Running pods (``bench/simmemory.py``).

Guarantees:
- :meth:`SharedParts.object` returns ``obj`` (or a shallow copy of it along the replaced paths: ``obj`` and its
  parts are never mutated) in which the parts of each body value (every top-level value but metadata), down to
  ``DEPTH`` levels below the object, and each managedFields entry's ``fieldsV1`` are replaced by earlier stored
  values with the same JSON encoding (same keys in the same order, same values and types), where one is
  remembered. The result encodes to the same bytes as ``obj``.
- Values identical to the previous version's are left alone (already shared), so a status write does not look at
  the spec again.
- At most ``capacity`` values are remembered (first in, first out: a template's parts come back with its next
  object); the cost per write is one orjson encoding of each changed part and, where it is new, of its own parts
  down to ``DEPTH``.
"""

from __future__ import annotations

from typing import Any

import orjson

from controller_manager.api.jsonbytes import kept

Obj = dict[str, Any]

DEPTH = 3  # down to a pod's spec.volumes[i].projected (a token volume's name is its own, its source is not)
_NOT_BODY = frozenset({"apiVersion", "kind", "metadata"})


class SharedParts:
    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._canonical: dict[bytes, Any] = {}

    def __len__(self) -> int:
        return len(self._canonical)

    def object(self, obj: Obj, prev: Obj | None) -> Obj:
        out: Obj | None = None
        for key, value in obj.items():
            if key in _NOT_BODY or not value or not isinstance(value, dict | list):
                continue
            if prev is not None and prev.get(key) is value:
                continue
            # A whole spec or status is rarely another object's (a node name, a time, a generated name differs):
            # its parts are looked up, not it, which saves encoding it once more on every write.
            shared = self._share_children(value, DEPTH - 1, None if prev is None else prev.get(key))
            if shared is not value:
                if out is None:
                    out = dict(obj)
                out[key] = shared
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return obj if out is None else out
        entries = meta.get("managedFields")
        before = None if prev is None else prev.get("metadata", {}).get("managedFields")
        if entries and isinstance(entries, list) and before is not entries:
            shared_entries = self._entries(entries, before if isinstance(before, list) else [])
            if shared_entries is not entries:
                if out is None:
                    out = dict(obj)
                out["metadata"] = {**meta, "managedFields": shared_entries}
        return obj if out is None else out

    def _entries(self, entries: list[Any], before: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        # The fieldsV1 of managers whose entries the write kept are the previous version's (already shared)
        kept = {id(e.get("fieldsV1")) for e in before if isinstance(e, dict)}
        for i, entry in enumerate(entries):
            fields = entry.get("fieldsV1") if isinstance(entry, dict) else None
            if not fields or not isinstance(fields, dict) or id(fields) in kept:
                continue
            shared = self._share(fields, DEPTH)
            if shared is not fields:
                if out is None:
                    out = list(entries)
                out[i] = {**entry, "fieldsV1": shared}
        return entries if out is None else out

    def _share(self, value: Any, depth: int) -> Any:
        key = orjson.dumps(value)
        canonical = self._canonical.get(key)
        if canonical is not None:
            return canonical
        if depth > 0:
            value = self._share_children(value, depth - 1)
        if len(self._canonical) >= self.capacity:
            del self._canonical[next(iter(self._canonical))]
        # A key of its own size: orjson's result holds its worst-case buffer (api.jsonbytes)
        self._canonical[kept(key)] = value
        return value

    def _share_children(self, value: Any, depth: int, prev: Any = None) -> Any:
        """``value`` with its parts shared; parts identical to ``prev``'s (the previous version's) are left."""
        if isinstance(value, dict):
            before = prev if isinstance(prev, dict) else {}
            out: Any = None
            for k, v in value.items():
                if v and isinstance(v, dict | list) and before.get(k) is not v:
                    shared = self._share(v, depth)
                    if shared is not v:
                        if out is None:
                            out = dict(value)
                        out[k] = shared
            return value if out is None else out
        if isinstance(value, list):
            earlier = prev if isinstance(prev, list) else []
            items: list[Any] | None = None
            for i, v in enumerate(value):
                if v and isinstance(v, dict | list) and not (i < len(earlier) and earlier[i] is v):
                    shared = self._share(v, depth)
                    if shared is not v:
                        if items is None:
                            items = list(value)
                        items[i] = shared
            return value if items is None else items
        return value
