"""The absent-owner cache: owners the API server said do not exist, most recently used kept.

Guarantees (upstream ``uid_cache.go``'s ``ReferenceCache``): at most ``max_size`` references; ``has`` counts as
a use (it promotes, as groupcache's LRU ``Get`` does); adding past the limit evicts the least recently used.
A reference is an owner's coordinates plus the namespace it was looked up in, so the same uid named with
other coordinates is a separate entry.
"""

from __future__ import annotations

from collections import OrderedDict

from .graph import ObjectReference


class ReferenceCache:
    def __init__(self, max_size: int = 500) -> None:
        self.max_size = max_size
        self._entries: OrderedDict[ObjectReference, None] = OrderedDict()

    def add(self, ref: ObjectReference) -> None:
        self._entries[ref] = None
        self._entries.move_to_end(ref)
        while len(self._entries) > self.max_size:
            self._entries.popitem(last=False)

    def has(self, ref: ObjectReference) -> bool:
        if ref in self._entries:
            self._entries.move_to_end(ref)
            return True
        return False

    def __len__(self) -> int:
        return len(self._entries)

    def references(self) -> list[ObjectReference]:
        """Least recently used first."""
        return list(self._entries)
