"""Transforms run on every object before it is cached: strip what no controller reads, share what repeats.

Guarantees:
- A transform never mutates its input; it returns a new object (or the input itself when nothing changes).
- ``strip_managed_fields`` drops ``metadata.managedFields`` (server-side-apply bookkeeping that no controller
  reads and that is often the largest part of an object). ``kubectl.kubernetes.io/last-applied-configuration``
  is kept on purpose: a controller that writes an object back from its cached copy (an update, not a patch)
  would otherwise erase the annotation on the server. Omitting ``managedFields`` in an update is harmless: the
  API server keeps the existing entries.
- ``Sharer.share`` returns a structurally equal copy in which dict keys and short string values are interned and
  identical sub-trees (a pod's tolerations, the projected service-account volume, containers' ``resources``,
  ownerReferences of pods of one ReplicaSet, ...) are one object shared by every cached object holding them.
  This is safe only because cached objects are never mutated (the project's rule). Values under "volatile" keys
  (``resourceVersion``, container IDs, heartbeat times; ``name`` and ``uid`` directly in ``metadata``) are unique
  per object: they are not interned and the sub-tree holding them is not pooled. The root and its direct
  children (``metadata``, ``spec``, ``status``) are never pooled, and a sub-tree is pooled only the second time
  it is seen, so the pool does not fill with things that never repeat.
- The pool forgets sub-trees no cached object holds any more (swept when it has doubled since the last sweep),
  so churn does not grow memory.
- ``default_transform`` = strip ``managedFields`` then share. Per-kind projections (dropping fields no controller
  reads for a given kind) compose in front of it with ``compose`` without touching any controller.
"""

from __future__ import annotations

import random
import sys
from array import array
from collections.abc import Callable, Iterable
from typing import Any

Obj = dict[str, Any]
Transform = Callable[[Obj], Obj]

# Keys whose scalar values are (nearly) unique per object: interning or pooling them would only cost memory.
VOLATILE_KEYS: frozenset[str] = frozenset({"resourceVersion", "containerID", "renewTime", "lastHeartbeatTime"})

# Fields of metadata unique to each object: interning them would only add an entry to the intern table.
# (Deeper down, "name" and "uid" repeat: container names, ownerReferences.)
METADATA_UNIQUE_KEYS: frozenset[str] = frozenset({"name", "uid", "selfLink"})

# Longer strings are rarely repeated (certificates, scripts, last-applied JSON); interning them costs a slot.
MAX_INTERNED_LENGTH = 256
_MIN_SWEEP = 4096
_DOOR_SLOTS = 1 << 16  # 512 KiB per Sharer, whatever the cluster size


def strip_managed_fields(obj: Obj) -> Obj:
    m = obj.get("metadata")
    if not isinstance(m, dict) or "managedFields" not in m:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in m.items() if k != "managedFields"}
    return out


def compose(*transforms: Transform) -> Transform:
    """Apply ``transforms`` left to right."""

    def run(obj: Obj) -> Obj:
        for t in transforms:
            obj = t(obj)
        return obj

    return run


class Sharer:
    """Interns strings and hash-conses identical sub-trees across every object it has seen."""

    def __init__(
        self,
        volatile_keys: Iterable[str] = VOLATILE_KEYS,
        max_interned: int = MAX_INTERNED_LENGTH,
        rng: random.Random | None = None,
    ) -> None:
        self._volatile = frozenset(volatile_keys)
        self._metadata_volatile = self._volatile | METADATA_UNIQUE_KEYS
        self._rng = rng or random.Random()
        self._max = max_interned
        # structural hash -> the one shared sub-tree with that content
        self._pool: dict[int, Any] = {}
        self._sweep_at = _MIN_SWEEP
        self._door = array("q", bytes(8 * _DOOR_SLOTS))
        self._door_mask = _DOOR_SLOTS - 1

    def __len__(self) -> int:
        return len(self._pool)

    def share(self, obj: Obj) -> Obj:
        out, _ = self._canon(obj, 0)
        result: Obj = out
        return self._maybe_sweep(result)

    def _maybe_sweep(self, obj: Obj) -> Obj:
        if len(self._pool) >= self._sweep_at:
            self.sweep()
        return obj

    def sweep(self) -> int:
        """Forget pooled sub-trees nothing else holds; returns how many were dropped (CPython refcounts).

        Besides sub-trees whose objects left the cache, this drops the rare entry pooled as a child of a
        candidate that then matched an older pooled parent (whose own child is an equal, earlier copy).
        """
        pool = self._pool
        dropped = 0
        # A pooled parent keeps its pooled children alive, so dropping parents can free children: repeat.
        while True:
            # Two references mean unused: the pool's own and getrefcount's argument.
            dead = [h for h in pool if sys.getrefcount(pool[h]) <= 2]
            for h in dead:
                del pool[h]
            dropped += len(dead)
            if not dead:
                break
        self._sweep_at = max(_MIN_SWEEP, 2 * len(pool))
        return dropped

    def _canon(self, value: Any, depth: int, metadata: bool = False) -> tuple[Any, int | None]:
        """A canonical equal copy of ``value`` and its structural hash (None: unique, not worth pooling)."""
        kind = type(value)
        if kind is str:
            if len(value) <= self._max:
                value = sys.intern(value)
            return value, hash(value)
        if kind is dict:
            return self._canon_dict(value, depth, self._metadata_volatile if metadata else self._volatile)
        if kind is list:
            return self._canon_list(value, depth)
        # Tag scalars with their type: True == 1 == 1.0 must never be pooled as each other.
        return value, hash((kind, value))

    def _canon_dict(self, value: dict[Any, Any], depth: int, volatile: frozenset[str]) -> tuple[Any, int | None]:
        out: dict[Any, Any] = {}
        parts: list[Any] | None = [] if depth >= 2 else None
        for k, v in value.items():
            if type(k) is str:
                k = sys.intern(k)
            if k in volatile and v is not None and not isinstance(v, dict | list):
                out[k] = v
                parts = None
                continue
            cv, hv = self._canon(v, depth + 1, depth == 0 and k == "metadata")
            out[k] = cv
            if parts is not None:
                if hv is None:
                    parts = None
                else:
                    parts.append(k)
                    parts.append(hv)
        if parts is None:
            return out, None
        return self._pooled(out, hash((dict, *parts)))

    def _canon_list(self, value: list[Any], depth: int) -> tuple[Any, int | None]:
        out: list[Any] = []
        parts: list[int] | None = [] if depth >= 2 else None
        for v in value:
            cv, hv = self._canon(v, depth + 1)
            out.append(cv)
            if parts is not None:
                if hv is None:
                    parts = None
                else:
                    parts.append(hv)
        if parts is None:
            return out, None
        return self._pooled(out, hash((list, *parts)))

    def _pooled(self, candidate: Any, h: int) -> tuple[Any, int]:
        pool = self._pool
        existing = pool.get(h)
        if existing is None:
            # Pool a sub-tree only the second time its hash is seen: most sub-trees never repeat, and a pool entry
            # for each would cost more than sharing saves. The doorkeeper is a fixed table, so unique sub-trees
            # cost nothing per object; a slot overwritten before the repeat only delays pooling.
            # Two candidate slots per hash, overwritten at random: two hot sub-trees whose slots collide cannot
            # keep evicting each other forever.
            door = self._door
            first = h & self._door_mask
            second = (h >> 24) & self._door_mask
            if door[first] == h or door[second] == h:
                pool[h] = candidate
            else:
                door[first if self._rng.getrandbits(1) else second] = h
            return candidate, h
        # Children are already canonical, so this comparison is mostly identity checks. A hash collision between
        # different contents just means no sharing for this candidate.
        if type(existing) is type(candidate) and existing == candidate:
            return existing, h
        return candidate, h


_DEFAULT_SHARER = Sharer()


def share(obj: Obj) -> Obj:
    """Share ``obj``'s repeated strings and sub-trees with everything cached so far (process-wide pool)."""
    return _DEFAULT_SHARER.share(obj)


def default_transform(obj: Obj) -> Obj:
    return share(strip_managed_fields(obj))

