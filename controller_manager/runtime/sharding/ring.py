"""A consistent-hash ring with virtual nodes: which member owns a key.

Guarantees:
- Deterministic across processes and runs: tokens come from BLAKE2b (Python's ``hash()`` is salted per
  process, so two replicas would disagree).
- Each member places ``virtual_nodes`` tokens (``hash("<member>#<i>")``); a key belongs to the member of the
  first token at or after ``hash(key)``, wrapping round. Only the members' names matter, not the order they
  are given in.
- Stability: a key's owner changes only if the member that owned it left, or a joining member's token
  now comes first for it; so a join moves about ``1/n`` of the keys (all of them to the newcomer) and a
  leave moves only the leaver's keys. With 100 virtual nodes the largest share stays within a small factor
  of the fair ``1/n`` (the tests bound it).
- An empty ring owns nothing: :meth:`HashRing.owner` returns None.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable

VIRTUAL_NODES = 100


def token(text: str) -> int:
    """A 64-bit position on the ring for ``text``."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class HashRing:
    def __init__(self, members: Iterable[str], virtual_nodes: int = VIRTUAL_NODES) -> None:
        if virtual_nodes < 1:
            raise ValueError(f"virtual_nodes must be at least 1, got {virtual_nodes}")
        self.members: frozenset[str] = frozenset(members)
        self.virtual_nodes = virtual_nodes
        # Ties between tokens (astronomically rare) are broken by member name, so every process agrees.
        points = sorted((token(f"{m}#{i}"), m) for m in self.members for i in range(virtual_nodes))
        self._tokens = [t for t, _ in points]
        self._owners = [m for _, m in points]

    def owner(self, key: str) -> str | None:
        """The member ``key`` belongs to, or None when the ring is empty."""
        if not self._tokens:
            return None
        i = bisect.bisect_left(self._tokens, token(key))
        return self._owners[i % len(self._owners)]

    def __len__(self) -> int:
        return len(self.members)

    def __repr__(self) -> str:
        return f"HashRing({sorted(self.members)!r}, virtual_nodes={self.virtual_nodes})"
