"""The objects of one resource, their change history, and the watchers fed from it.

Guarantees:
- Objects are kept by key (``namespace/name`` or ``name``) as :class:`Stored` versions; keys can be
  walked in etcd's order (sorted), from any start key, within one namespace or across all.
- Every change becomes one :class:`Change` appended to a bounded history (like the watch cache) and
  is offered, synchronously and in order, to every watcher; a watcher never blocks the store.
- ``floor`` is the resourceVersion after which the history is complete: a watch (or a consistent
  list) from an older version cannot be served and gets 410.
- :meth:`state_at` rebuilds the objects as they were at an older resourceVersion from the history,
  so paged lists stay consistent snapshots, as etcd's MVCC reads are.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from controller_manager.api.resources import Resource
from controller_manager.sim.apiserver.objects import Stored

if TYPE_CHECKING:
    from controller_manager.sim.apiserver.watch import Watcher

Obj = dict[str, Any]


class Change:
    """One write: ``new`` is the stored version (for DELETED, the last state carrying the deletion's RV);
    ``prev`` the version it replaced (None for ADDED)."""

    __slots__ = ("_left", "new", "prev", "rv", "type")

    def __init__(self, type_: str, new: Stored, prev: Stored | None) -> None:
        self.type = type_
        self.new = new
        self.prev = prev
        self.rv = new.rv
        self._left: Stored | None = None

    def prev_at_rv(self) -> Stored:
        """The previous state stamped with this change's resourceVersion: what a watcher whose selector the
        object just left receives as DELETED (the watch cache does the same)."""
        assert self.prev is not None
        if self.type == "DELETED":
            return self.new
        if self._left is None:
            self._left = with_resource_version(self.prev, self.rv)
        return self._left


def with_resource_version(stored: Stored, rv: int) -> Stored:
    obj = stored.obj
    meta = {**obj.get("metadata", {}), "resourceVersion": str(rv)}
    return Stored(stored.key, {**obj, "metadata": meta}, rv)


class ResourceStore:
    def __init__(self, resource: Resource, history_size: int, floor: int) -> None:
        self.resource = resource
        self.objects: dict[str, Stored] = {}
        self.history: deque[Change] = deque()
        self.history_size = history_size
        self.floor = floor
        self.watchers: set[Watcher] = set()
        self._sorted: list[str] | None = None

    def __len__(self) -> int:
        return len(self.objects)

    def get(self, key: str) -> Stored | None:
        return self.objects.get(key)

    def sorted_keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def iter_from(self, namespace: str | None, start: str = "") -> Iterator[Stored]:
        """Objects in key order, from ``start`` (inclusive), within ``namespace`` if given."""
        keys = self.sorted_keys()
        prefix = f"{namespace}/" if namespace and self.resource.namespaced else ""
        lo = max(start, prefix)
        i = bisect.bisect_left(keys, lo)
        objects = self.objects
        while i < len(keys):
            key = keys[i]
            if prefix and not key.startswith(prefix):
                break
            yield objects[key]
            i += 1

    # --- writes ---------------------------------------------------------------------------------

    def put(self, stored: Stored) -> Change:
        prev = self.objects.get(stored.key)
        if prev is None:
            self._sorted = None
        self.objects[stored.key] = stored
        return self._record(Change("MODIFIED" if prev else "ADDED", stored, prev))

    def remove(self, key: str, rv: int) -> Change:
        prev = self.objects.pop(key)
        self._sorted = None
        return self._record(Change("DELETED", with_resource_version(prev, rv), prev))

    def _record(self, change: Change) -> Change:
        if self.history_size > 0:
            if len(self.history) >= self.history_size:
                self.floor = self.history.popleft().rv
            self.history.append(change)
        else:
            self.floor = change.rv
        for watcher in list(self.watchers):
            watcher.offer(change)
        return change

    def forget_history(self, rv: int) -> None:
        self.history.clear()
        self.floor = rv

    def changes_after(self, rv: int) -> list[Change]:
        """Changes with resourceVersion > rv (the caller has checked rv >= floor)."""
        history = self.history
        if not history or history[-1].rv <= rv:
            return []
        # The history is ordered by rv; walk back from the end (recent watches are the common case).
        i = len(history)
        while i > 0 and history[i - 1].rv > rv:
            i -= 1
        return [history[j] for j in range(i, len(history))]

    def state_at(self, rv: int, namespace: str | None, start: str) -> list[Stored] | None:
        """The objects (key order, keys >= start, within namespace) as of resourceVersion ``rv``; None
        when the history no longer reaches back that far."""
        if rv < self.floor:
            return None
        later = self.changes_after(rv)
        if not later:
            return list(self.iter_from(namespace, start))
        prefix = f"{namespace}/" if namespace and self.resource.namespaced else ""
        state = {s.key: s for s in self.iter_from(namespace, start)}
        for change in reversed(later):
            key = change.new.key
            if key < start or (prefix and not key.startswith(prefix)):
                continue
            if change.type == "ADDED":
                state.pop(key, None)
            elif change.prev is not None:
                state[key] = change.prev
        return [state[k] for k in sorted(state)]
