"""The informer cache: objects by key plus incrementally maintained indexes.

Guarantees (client-go ``cache.Indexer`` over a ``threadSafeMap``):
- Keys are ``namespace/name`` (``name`` for cluster-scoped objects), as ``api.meta.key_of`` makes them.
- Every index is kept current on each write: an update that changes an indexed value moves the key from the old
  value's bucket to the new one, a delete removes it, and empty buckets are dropped (no growth from churn).
- An index added while objects are cached is built from the current contents before it is used.
- Reads return the cached objects themselves: shared, never to be mutated. ``list()``, ``keys()`` and
  ``by_index()`` return fresh lists, so a caller may iterate while the cache changes.
- Only the informer writes (``_put``/``_remove``); controllers use the read API.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from controller_manager.api.meta import controller_ref, meta

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], list[str]]
# (index name, values for the old object, values for the new one)
_IndexChange = tuple[str, list[str], list[str]]

NAMESPACE_INDEX = "namespace"
CONTROLLER_UID_INDEX = "controller-uid"
NODE_NAME_INDEX = "node-name"


# The built-in index functions run on every cached write: each reads the plain-dict case first (what the API
# sends) and goes the general way (any Mapping) only when it is not one.

def namespace_index(obj: Obj) -> list[str]:
    m = obj.get("metadata")
    ns = m.get("namespace") if type(m) is dict else meta(obj).get("namespace")
    return [ns] if isinstance(ns, str) and ns else []


def controller_uid_index(obj: Obj) -> list[str]:
    m = obj.get("metadata")
    if type(m) is not dict:
        ref = controller_ref(obj)
        uid = ref.get("uid") if ref is not None else None
        return [uid] if isinstance(uid, str) and uid else []
    for ref in m.get("ownerReferences") or ():  # controller_ref's walk, on a plain dict
        if (type(ref) is dict or isinstance(ref, Mapping)) and ref.get("controller") is True:
            uid = ref.get("uid")
            return [uid] if isinstance(uid, str) and uid else []
    return []


def node_name_index(obj: Obj) -> list[str]:
    spec = obj.get("spec")
    node = spec.get("nodeName") if type(spec) is dict or isinstance(spec, Mapping) else None
    return [node] if isinstance(node, str) and node else []


class UnknownIndex(KeyError):
    """Asked for an index that was never registered (client-go: "Index with name %s does not exist")."""


class Store:
    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> indexed value -> keys of the objects with that value
        self._indices: dict[str, dict[str, set[str]]] = {}
        # (index function, its index) for each index: what a write walks, without a lookup by name
        self._writes: builtins.list[tuple[IndexFunc, dict[str, set[str]]]] = []
        if indexers:
            self.add_indexers(indexers)

    # -- read API (controllers) -------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def list(self) -> builtins.list[Obj]:
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        return list(self._items)

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        """Cached objects whose index ``name`` yields ``value`` (e.g. ``by_index("namespace", "default")``)."""
        items = self._items
        return [items[k] for k in self._bucket(name, value)]

    def index_count(self, name: str, value: str) -> int:
        """How many cached objects index ``name`` files under ``value`` (no list is built)."""
        return len(self._bucket(name, value))

    def index_keys(self, name: str, value: str) -> builtins.list[str]:
        return list(self._bucket(name, value))

    def index_values(self, name: str) -> builtins.list[str]:
        """Every value index ``name`` currently holds (client-go ``ListIndexFuncValues``)."""
        return list(self._index(name))

    @property
    def indexers(self) -> dict[str, IndexFunc]:
        """The registered index functions by name (a copy)."""
        return dict(self._indexers)

    def has_index(self, name: str) -> bool:
        return name in self._indexers

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    # -- configuration ----------------------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Register more indexes; each is built at once from what is cached. Re-registering a name is an error."""
        for name in indexers:
            if name in self._indexers:
                raise ValueError(f"indexer conflict: {name!r} is already registered")
        for name, fn in indexers.items():
            self._indexers[name] = fn
            index: dict[str, set[str]] = {}
            for key, obj in self._items.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)
            self._indices[name] = index
            self._writes.append((fn, index))

    # -- writes (informer only) -------------------------------------------------------------------

    def _put(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` under ``key``; returns the object it replaced, if any.

        Index functions run before anything changes, so one that raises leaves the store as it was.
        """
        items = self._items
        old = items.get(key)
        if old is None:
            # The common case on a watch: a new key, so nothing to take out of any bucket.
            values = [fn(obj) for fn, _ in self._writes]
            items[key] = obj
            for (_, index), new_values in zip(self._writes, values, strict=True):
                for value in new_values:
                    bucket = index.get(value)
                    if bucket is None:
                        index[value] = {key}
                    else:
                        bucket.add(key)
            return None
        changes = self._index_changes(old, obj)
        self._items[key] = obj
        self._apply_index_changes(key, changes)
        return old

    def _remove(self, key: str) -> Obj | None:
        old = self._items.get(key)
        if old is None:
            return None
        changes = self._index_changes(old, None)
        del self._items[key]
        self._apply_index_changes(key, changes)
        return old

    # -- internals --------------------------------------------------------------------------------

    def _index(self, name: str) -> dict[str, set[str]]:
        try:
            return self._indices[name]
        except KeyError:
            raise UnknownIndex(f"Index with name {name} does not exist") from None

    def _bucket(self, name: str, value: str) -> set[str]:
        return self._index(name).get(value) or set()

    def _index_changes(self, old: Obj | None, new: Obj | None) -> builtins.list[_IndexChange]:
        changes: builtins.list[_IndexChange] = []
        for name, fn in self._indexers.items():
            old_values = fn(old) if old is not None else []
            new_values = fn(new) if new is not None else []
            if old_values != new_values:
                changes.append((name, old_values, new_values))
        return changes

    def _apply_index_changes(self, key: str, changes: builtins.list[_IndexChange]) -> None:
        for name, old_values, new_values in changes:
            index = self._indices[name]
            for value in old_values:
                if value in new_values:
                    continue
                bucket = index.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del index[value]
            for value in new_values:
                index.setdefault(value, set()).add(key)
