"""A label-selected view of a wider informer's cache: the events a label-selected watch would have given.

Why: with ``--sharding=true`` the leader runs cluster-wide informers (every pod, for the garbage collector, pod
GC, node lifecycle, ...) beside its shard's label-selected ones. A :class:`SelectionView` lets the shard's informer
be served from the cluster-wide cache instead of a second list+watch, holding references to the same objects, so
each object is decoded and kept once.

Guarantees (what kube-apiserver's watch cache sends a watcher with a label selector, ``cacheWatcher``):
- The view's store holds exactly the source's objects whose labels match the selector, the same instances (no
  copy), indexed by the view's own indexers.
- A source event is translated by whether the object was in the view before and matches after: in -> in is
  ``Updated(old, new)``; out -> in (created matching, or relabelled into the selection) is ``Added(new)``;
  in -> out (relabelled out of it) is ``Deleted`` of the object as the view last had it, stamped with the
  update's resourceVersion (the server's DELETED for an object leaving a selection); a deletion of a viewed
  object is ``Deleted`` with the source's final state and its ``final_state_unknown`` flag; out -> out is
  nothing. Membership before is the view's own store, so a view is never told of an object it never had.
- The source's periodic resyncs (``Updated(o, o)``) are not passed on: the view's informer resyncs on its own
  period.
- :meth:`reconcile` brings the view to the source's current contents in one step, with the events a re-list
  gives (``Added`` for new keys, ``Updated`` where the resourceVersion differs, ``Deleted(final_state_unknown)``
  for keys gone from the selection); an object whose resourceVersion is unchanged is swapped for the source's
  instance without an event, so the copy the view held before can be freed.
- Everything is synchronous: the view is consistent with the source whenever the event loop runs anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import structlog

from controller_manager.api.meta import key_of
from controller_manager.api.selectors import EVERYTHING, Selector, parse

from .events import Added, Deleted, Event, Updated
from .store import Store

Obj = dict[str, Any]

_log = structlog.get_logger("controller_manager.informers")


def _labels(obj: Obj) -> Any:
    m = obj.get("metadata")
    return m.get("labels") if type(m) is dict else None


def _resource_version(obj: Obj) -> object:
    m = obj.get("metadata")
    return m.get("resourceVersion") if type(m) is dict else None


def left_at(last: Obj, change: Obj) -> Obj:
    """``last`` (the object as it was while selected) stamped with ``change``'s resourceVersion: what the API
    server sends a selected watch as DELETED when an update takes the object out of the selection. A shallow
    copy: cached objects are shared and never mutated."""
    rv = _resource_version(change)
    if rv is None or rv == _resource_version(last):
        return last
    return {**last, "metadata": {**last.get("metadata", {}), "resourceVersion": rv}}


class SelectionView:
    """Keeps ``store`` to the objects of a source informer that ``label_selector`` selects, calling ``dispatch``
    with each resulting event after ``store`` shows it. Register the view itself as a handler of the source
    (without the replay of cached objects: :meth:`reconcile` does that part)."""

    def __init__(self, store: Store, label_selector: str | None, dispatch: Callable[[Event], None]) -> None:
        self.store = store
        self.selector: Selector = parse(label_selector) if label_selector else EVERYTHING
        self._dispatch = dispatch

    def selects(self, obj: Obj) -> bool:
        return self.selector.matches(_labels(obj))

    def reconcile(self, source: Iterable[Obj]) -> tuple[int, int, int]:
        """Make the view the selection of ``source`` (the source store's objects); returns (added, updated,
        deleted) counts."""
        store = self.store
        selected: set[str] = set()
        added = updated = 0
        for obj in source:
            if not self.selects(obj):
                continue
            key = key_of(obj)
            selected.add(key)
            old = store.get(key)
            if old is obj:
                continue
            if not self._put(key, obj):
                continue
            if old is None:
                added += 1
                self._dispatch(Added(obj))
            elif _resource_version(old) != _resource_version(obj):
                updated += 1
                self._dispatch(Updated(old, obj))
        deleted = 0
        for key in store:  # a snapshot
            if key in selected:
                continue
            old = store._remove(key)
            if old is not None:
                deleted += 1
                self._dispatch(Deleted(old, final_state_unknown=True))
        return added, updated, deleted

    def __call__(self, event: Event) -> None:
        """A source event, translated (see the module's guarantees)."""
        store = self.store
        if type(event) is Deleted:
            key = key_of(event.obj)
            old = store._remove(key)
            if old is not None:
                self._dispatch(event)
            return
        if type(event) is Updated:
            new = event.new
            if event.old is new:
                return  # the source's resync
        else:
            assert type(event) is Added
            new = event.obj
        key = key_of(new)
        old = store.get(key)
        if self.selector.matches(_labels(new)):
            if not self._put(key, new):
                return
            self._dispatch(Added(new) if old is None else Updated(old, new))
        elif old is not None:
            store._remove(key)
            self._dispatch(Deleted(left_at(old, new)))

    def _put(self, key: str, obj: Obj) -> bool:
        try:
            self.store._put(key, obj)
        except Exception:
            # An index function of the view choked on the object; the store is unchanged (it indexes first).
            _log.exception("indexing failed; object not in the view", key=key)
            return False
        return True
