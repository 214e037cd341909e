"""Watchers: one client's filtered view of a resource's changes, buffered so no watcher blocks another.

Guarantees:
- A watcher first yields its initial events (synthetic ADDED for the state at start, when asked for),
  then every later change of its resource in resourceVersion order, filtered by namespace and
  label/field selectors the way the watch cache filters: an object entering the selection arrives as
  ADDED, one leaving it as DELETED (its previous state, stamped with the change's resourceVersion).
- Live changes wait in a per-watcher buffer of at most ``buffer_limit`` events; a watcher that falls
  further behind is closed (its consumer sees the end of the stream), as the apiserver drops a watcher
  that stops reading. Other watchers are never slowed by it.
- With bookmarks on, a BOOKMARK carrying the current resourceVersion (and only that) is queued every
  ``bookmark_interval`` seconds of the injected clock. ``timeout`` ends the watch after that long.
- Objects handed out are shared and must not be mutated; bytes are the stored encodings, never re-encoded.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from controller_manager.api.selectors import Selector
from controller_manager.clock import Clock, TimerHandle
from controller_manager.sim.apiserver.objects import Obj, Stored, encode
from controller_manager.sim.apiserver.storage import Change, ResourceStore

# A view turns a stored version into what this watcher's client asked for (dict, bytes).
View = Callable[[Stored], tuple[Obj, bytes]]

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def full_view(stored: Stored) -> tuple[Obj, bytes]:
    return stored.obj, stored.raw


class Watcher:
    def __init__(self, store: ResourceStore, *, namespace: str | None, labels: Selector | None,
                 fields: Callable[[Obj], bool] | None, view: View,
                 bookmark_kind: tuple[str, str], current_rv: Callable[[], int], clock: Clock,
                 buffer_limit: int, bookmarks: bool, bookmark_interval: float, timeout: float | None,
                 after_rv: int = 0) -> None:
        self._store = store
        self._namespace = namespace if store.resource.namespaced else None
        self._labels = None if labels is None or labels.is_empty() else labels
        self._fields = fields
        self._initial: list[Stored] = []
        self._initial_pos = 0
        self._view = view
        self._bookmark_kind = bookmark_kind
        self._current_rv = current_rv
        self._clock = clock
        self._buffer_limit = buffer_limit
        # Items: (type, Stored) for object events; ("BOOKMARK", rv) for bookmarks.
        self._pending: deque[tuple[str, Any]] = deque()
        self._wakeup = asyncio.Event()
        self._closed = False
        self.close_reason = ""
        self._timers: list[TimerHandle] = []
        self._ready: deque[tuple[str, Obj]] = deque()
        self._bookmark_interval = bookmark_interval
        self._bookmarks = bookmarks
        self._timeout = timeout
        self._after_rv = after_rv  # changes at or before it are not sent (a watch from a future version)

    def start(self, initial: list[Stored], replay: list[Change], *, initial_events_end: bool = False) -> None:
        """Begin: ``initial`` objects go out as ADDED, then the ``replay`` changes (history after the
        requested version), then live changes. Neither counts against the buffer limit."""
        self._initial = [s for s in initial if self.matches(s)]
        for change in replay:
            item = self._convert(change)
            if item is not None:
                self._pending.append(item)
        if initial_events_end:
            self._pending.append(("BOOKMARK_END", self._current_rv()))
        if self._bookmarks and self._bookmark_interval > 0:
            self._timers.append(self._clock.call_later(self._bookmark_interval, self._bookmark_due))
        if self._timeout is not None:
            self._timers.append(self._clock.call_later(max(0.0, self._timeout), lambda: self.close("timeout")))
        self._store.watchers.add(self)
        if self._initial or self._pending:
            self._wakeup.set()

    # --- producer side (called synchronously by the store) ------------------------------------

    def matches(self, stored: Stored) -> bool:
        if self._namespace and stored.namespace != self._namespace:
            return False
        if self._labels is not None and not self._labels.matches(stored.labels):
            return False
        return self._fields is None or self._fields(stored.obj)

    def _convert(self, change: Change) -> tuple[str, Stored] | None:
        cur = change.type != "DELETED" and self.matches(change.new)
        old = change.prev is not None and self.matches(change.prev)
        if cur and old:
            return ("MODIFIED", change.new)
        if cur:
            return ("ADDED", change.new)
        if old:
            return ("DELETED", change.prev_at_rv())
        return None

    def offer(self, change: Change) -> None:
        if self._closed or change.rv <= self._after_rv:
            return
        item = self._convert(change)
        if item is None:
            return
        if len(self._pending) >= self._buffer_limit:
            self.close("too slow")
            return
        self._pending.append(item)
        self._wakeup.set()

    def _bookmark_due(self) -> None:
        if self._closed:
            return
        self._pending.append(("BOOKMARK", self._current_rv()))
        self._wakeup.set()
        self._timers.append(self._clock.call_later(self._bookmark_interval, self._bookmark_due))

    def close(self, reason: str = "closed") -> None:
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        self._pending.clear()
        self._initial = []
        self._store.watchers.discard(self)
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    # --- consumer side ------------------------------------------------------------------------------

    def _bookmark(self, rv: int, end: bool) -> Obj:
        api_version, kind = self._bookmark_kind
        meta: Obj = {"resourceVersion": str(rv)}
        if end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": kind, "apiVersion": api_version, "metadata": meta}

    def _take(self, max_items: int) -> list[tuple[str, Obj | None, bytes]]:
        out: list[tuple[str, Obj | None, bytes]] = []
        while len(out) < max_items and self._initial_pos < len(self._initial):
            obj, raw = self._view(self._initial[self._initial_pos])
            self._initial_pos += 1
            out.append(("ADDED", obj, raw))
        if self._initial_pos >= len(self._initial) and self._initial:
            self._initial = []
            self._initial_pos = 0
        while len(out) < max_items and self._pending:
            kind, item = self._pending.popleft()
            if kind.startswith("BOOKMARK"):
                bookmark = self._bookmark(item, kind == "BOOKMARK_END")
                out.append(("BOOKMARK", bookmark, encode(bookmark)))
            else:
                obj, raw = self._view(item)
                out.append((kind, obj, raw))
        if not self._pending and not self._initial:
            self._wakeup.clear()
        return out

    async def wait_ready(self) -> None:
        """Return once an event is waiting or the watcher is closed."""
        while not self._closed and not (self._pending or self._initial):
            self._wakeup.clear()
            await self._wakeup.wait()

    async def next_batch(self, max_items: int = 500) -> list[tuple[str, Obj | None, bytes]] | None:
        """The next events (type, object, object bytes), at least one; None once closed."""
        while True:
            if self._closed:
                return None
            batch = self._take(max_items)
            if batch:
                return batch
            await self._wakeup.wait()

    async def next_lines(self, max_items: int = 500) -> bytes | None:
        """The next events as watch-stream lines (``{"type":...,"object":...}\\n`` each); None once closed."""
        batch = await self.next_batch(max_items)
        if batch is None:
            return None
        return b"".join(b'{"type":"' + t.encode() + b'","object":' + raw + b"}\n" for t, _, raw in batch)

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> tuple[str, Obj]:
        while not self._ready:
            batch = await self.next_batch()
            if batch is None:
                raise StopAsyncIteration
            self._ready.extend((t, o if o is not None else {}) for t, o, _ in batch)
        return self._ready.popleft()

    async def __aenter__(self) -> Watcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
